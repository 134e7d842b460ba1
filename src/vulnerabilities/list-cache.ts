// ListAdvisories answers kept in this process. Advisories change only by import, and every import
// moves the advisories change counter (migration 017) in its own transaction, so an answer made
// while the counter had some value is the answer for as long as it keeps it — on any replica,
// which reads the counter itself. Each request reads the counter (one statement, which also
// confirms the caller's cached grants) and answers from here when an entry of that value exists
// for the same request and the same visibility: two callers who see different groups never share
// an entry, since their answers (rows and totalCount) differ.
import { createHash } from "node:crypto";
import { toBinary } from "@bufbuild/protobuf";
import {
  ListAdvisoriesRequestSchema,
  ListAdvisoriesResponseSchema,
  type Advisory,
  type ListAdvisoriesRequest,
} from "../gen/chainguard/platform/vulnerabilities/v2beta1/advisories_pb.js";
import { create, toJsonString } from "@bufbuild/protobuf";
import type { Visibility } from "../core/access.js";
import { markShared } from "../core/shared-lists.js";
import type { ListEngineDeps } from "../core/list.js";
import type { PageCursor } from "../core/page-tokens.js";

/**
 * Most answers kept, and most bytes (their encoded size) they may hold together: kept as messages
 * they take about 4× that in the heap (measured over the wolfi corpus), so ~32 MiB at most, plus
 * the JSON text the REST layer keeps with an answer it served (core/shared-lists.ts).
 */
export const LIST_CACHE_ENTRIES = 1000;
export const LIST_CACHE_BYTES = 8 * 1024 * 1024;

export interface ListAnswer {
  advisories: Advisory[];
  nextPageToken: string;
  totalCount: bigint;
  skipped: number;
}

interface Entry {
  epoch: string;
  advisories: Advisory[];
  /** where the next page starts (a token is minted from it for each answer, so none goes out old) */
  next: PageCursor | undefined;
  totalCount: bigint;
  skipped: number;
  bytes: number;
}

/** How the cache has been used since the server started (for measurement). */
export interface ListCacheStats {
  hits: number;
  misses: number;
  /** answers made while another request was already making the same one, and shared */
  joined: number;
  entries: number;
  bytes: number;
}

export class ListAdvisoriesCache {
  /** Map order is recency order (the first is forgotten first). */
  readonly #entries = new Map<string, Entry>();
  readonly #making = new Map<string, Promise<Entry>>();
  #bytes = 0;
  readonly #stats = { hits: 0, misses: 0, joined: 0 };

  constructor(
    private readonly lists: ListEngineDeps,
    private readonly limits = { entries: LIST_CACHE_ENTRIES, bytes: LIST_CACHE_BYTES },
  ) {}

  get stats(): ListCacheStats {
    return { ...this.#stats, entries: this.#entries.size, bytes: this.#bytes };
  }

  /**
   * The answer to `req` for a caller with `visibility`, while the counter is `epoch` (read by the
   * request before anything else): kept, or made by `make` and kept. A request whose page token
   * is not a valid, current one is made every time (and refused or restarted by the list engine).
   */
  async answer(
    req: ListAdvisoriesRequest,
    visibility: Visibility,
    epoch: string,
    make: () => Promise<ListAnswer>,
  ): Promise<ListAnswer> {
    const key = await this.#keyOf(req, visibility);
    if (key === undefined) return make();
    const kept = this.#entries.get(key);
    let entry: Entry;
    if (kept?.epoch === epoch) {
      this.#stats.hits++;
      // most recently used last
      this.#entries.delete(key);
      this.#entries.set(key, kept);
      entry = kept;
    } else {
      const making = `${epoch}\n${key}`;
      let pending = this.#making.get(making);
      if (pending) this.#stats.joined++;
      else {
        this.#stats.misses++;
        pending = this.#make(make, epoch);
        this.#making.set(making, pending);
        pending
          .finally(() => this.#making.delete(making))
          .then(async (made) => {
            // The list engine decodes the token again: one that expired in between restarted the
            // walk, and page 1 must not be kept as the page this cursor stands for.
            if (req.pageToken !== "" && (await this.lists.tokens.decode(req.pageToken)).kind !== "ok") return;
            this.#keep(key, made);
          })
          .catch(() => {});
      }
      entry = await pending;
    }
    return {
      advisories: entry.advisories,
      nextPageToken: entry.next ? await this.lists.tokens.encode(entry.next) : "",
      totalCount: entry.totalCount,
      skipped: entry.skipped,
    };
  }

  async #make(make: () => Promise<ListAnswer>, epoch: string): Promise<Entry> {
    const answer = await make();
    let next: PageCursor | undefined;
    if (answer.nextPageToken !== "") {
      const decoded = await this.lists.tokens.decode(answer.nextPageToken);
      if (decoded.kind !== "ok") throw new Error("a page token just minted does not decode");
      next = decoded.cursor;
    }
    const bytes = toBinary(ListAdvisoriesResponseSchema, create(ListAdvisoriesResponseSchema, answer)).length;
    return {
      epoch,
      // served to every caller with this request until the counter moves: never changed again
      advisories: markShared(answer.advisories),
      next,
      totalCount: answer.totalCount,
      skipped: answer.skipped,
      bytes,
    };
  }

  #keep(key: string, entry: Entry): void {
    if (entry.bytes > this.limits.bytes / 8) return; // one answer never takes much of the cache
    const old = this.#entries.get(key);
    // an answer made at an older value must not replace one made at a newer
    if (old && BigInt(old.epoch) > BigInt(entry.epoch)) return;
    if (old) {
      this.#entries.delete(key);
      this.#bytes -= old.bytes;
    }
    this.#entries.set(key, entry);
    this.#bytes += entry.bytes;
    for (const [k, e] of this.#entries) {
      if (this.#entries.size <= this.limits.entries && this.#bytes <= this.limits.bytes) break;
      this.#entries.delete(k);
      this.#bytes -= e.bytes;
    }
  }

  /**
   * The request with its page token as the cursor it stands for (tokens are encrypted afresh, so
   * the same page has many), and the caller's visibility, as a digest: a request's filters may be
   * up to a megabyte, and the byte bound counts answers only. Undefined for a token that does not
   * decode to a current cursor.
   */
  async #keyOf(req: ListAdvisoriesRequest, visibility: Visibility): Promise<string | undefined> {
    let cursor = "";
    if (req.pageToken !== "") {
      const decoded = await this.lists.tokens.decode(req.pageToken);
      if (decoded.kind !== "ok") return undefined;
      cursor = JSON.stringify(decoded.cursor);
    }
    const seen = visibility === "all" ? "all" : JSON.stringify([...visibility].sort());
    const request = toJsonString(ListAdvisoriesRequestSchema, { ...req, pageToken: "" });
    return createHash("sha256").update(`${seen}\n${cursor}\n${request}`).digest("base64");
  }
}
