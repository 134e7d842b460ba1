// Read-only feeds over the advisories, generated from the database for what the caller may see:
// - an OSV-compatible API (the osv.dev shapes): GET /v1/vulns/{id}, POST /v1/query,
//   POST /v1/querybatch;
// - an Alpine-style secdb at GET /vulnerabilities/secdb.json (what apk scanners read), streamed.
// Advisory YAML advisories are published in ecosystem "Wolfi" as pkg:apk/wolfi/<name> (as osv.dev
// has them; "Chainguard" queries read them too), the CGA id as the record id and the vulnerability
// ids under `related`; OSV imports come back as they were imported, with their status brought up
// to date. Every timestamp of a record is RFC 3339 in UTC with milliseconds ("…T12:34:56.789Z").
//
// Without credentials the feeds answer from the public advisory groups (`--public-advisories`)
// alone; with a token, from what the token's identity may read (its own groups and the public
// ones). With no public group, credentials are required.
import { Readable } from "node:stream";
import type { FastifyRequest } from "fastify";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { invalidArgument, notFound } from "../core/errors.js";
import type { Visibility } from "../core/access.js";
import type { CallContext } from "../core/service.js";
import { checkString } from "../core/strings.js";
import { isAncestorOrSelf } from "../core/uidp.js";
import type { PlainRouter } from "../platform/routes.js";
import { restrictToVisible } from "../storage/list-query.js";
import type { EventKind } from "./documents.js";
import { APK_FEED_ECOSYSTEMS, canonicalEcosystem, ecosystemMatches, purlsMatching } from "./ecosystems.js";
import { parseTimestamp } from "./parse.js";
import type { AdvisoriesRepository, FeedRow } from "./storage/advisories.js";
import type { Freshness } from "../core/service.js";
import { isAffected } from "./versions.js";

/** Most queries one querybatch request may carry (as osv.dev). */
export const MAX_BATCH_QUERIES = 1000;
/** Most records one /v1/query answer holds; the rest follow with next_page_token. */
export const QUERY_PAGE_SIZE = 1000;
const FEED_PAGE = 1000;
const OSV_SCHEMA_VERSION = "1.6.0";

type Range = { type: string; events: Record<string, string>[] };
type Affected = { package: { ecosystem: string; name: string; purl?: string }; ranges?: Range[]; versions?: string[] };
export type OsvRecord = Record<string, unknown> & { id: string; modified: string; affected: Affected[] };

function restrictFor(visibility: Visibility | undefined) {
  return <QB>(qb: QB): QB => restrictToVisible(qb as never, visibility ?? [], false) as QB;
}

/** Every timestamp a record carries, in one precision (what JSON dates are everywhere here). */
function osvTime(time: Date): string {
  return time.toISOString();
}

/** An imported record's timestamp (validated at import), or undefined when it has none. */
function importedTime(value: unknown): Date | undefined {
  return typeof value === "string" ? parseTimestamp(value) : undefined;
}

const NOT_AFFECTED: ReadonlySet<EventKind> = new Set(["false-positive-determination"]);

/** The advisory as an OSV record (from its row alone: the import keeps what the feeds need there). */
export function osvRecordOf(row: FeedRow): OsvRecord {
  const imported = (row.osv ?? {}) as Record<string, unknown>;
  const published = osvTime(importedTime(imported.published) ?? row.first_event_time);
  // the record's own modified, unless an event came later (the status moved since)
  const importedModified = importedTime(imported.modified);
  const modified = osvTime(
    importedModified && importedModified > row.latest_event_time ? importedModified : row.latest_event_time,
  );
  const withdrawn = importedTime(imported.withdrawn);
  const severity = row.severities.map((s) => ({ type: s.type.replace(/^TYPE_/, ""), score: s.score }));
  const database_specific = {
    ...((imported.database_specific as object | undefined) ?? {}),
    status: row.latest_event_type,
    ...(row.legacy_advisory_id ? { legacy_advisory_id: row.legacy_advisory_id } : {}),
  };
  if (row.osv) {
    return {
      ...imported,
      schema_version: OSV_SCHEMA_VERSION,
      id: row.advisory_id,
      modified,
      published,
      ...(withdrawn ? { withdrawn: osvTime(withdrawn) } : {}),
      aliases: row.aliases,
      ...(severity.length ? { severity } : {}),
      affected: (imported.affected as Affected[] | undefined) ?? [],
      database_specific,
    } as OsvRecord;
  }
  const fixed = row.fixed_versions;
  const ranges: Range[] = NOT_AFFECTED.has(row.latest_event_type)
    ? []
    : [{ type: "ECOSYSTEM", events: [{ introduced: "0" }, ...fixed.map((v) => ({ fixed: v }))] }];
  const related = [...new Set([...(row.legacy_advisory_id ? [row.legacy_advisory_id] : []), ...row.aliases])];
  return {
    schema_version: OSV_SCHEMA_VERSION,
    id: row.advisory_id,
    modified,
    published,
    aliases: [],
    related,
    ...(severity.length ? { severity } : {}),
    affected: [
      {
        package: { ecosystem: row.ecosystem, name: row.artifact_name, purl: row.purl },
        ...(ranges.length ? { ranges } : {}),
      },
    ],
    database_specific,
  };
}

/** Whether `record` says its package is affected at `version` (any version when absent). */
export function recordAffects(record: OsvRecord, version: string | undefined): boolean {
  return record.affected.some((a) => {
    const ranges = a.ranges ?? [];
    if (version === undefined) return ranges.length > 0 || (a.versions?.length ?? 0) > 0;
    if (a.versions?.includes(version)) return true;
    return isAffected(ranges, version, a.package.ecosystem);
  });
}

export interface PackageQuery {
  name?: string;
  /** OSV's spelling; absent: a name in any ecosystem */
  ecosystem?: string;
  /** the package URLs (without version) whose records answer the query's purl */
  purls?: string[];
  version?: string;
  pageToken?: string;
}

/** `pkg:type/namespace/name@version?qualifiers#subpath` → the purl without version, and the version. */
function splitPurl(purl: string): { purl: string; version?: string } {
  const bare = purl.replace(/[?#].*$/, "");
  const at = bare.lastIndexOf("@");
  if (at > bare.lastIndexOf("/")) return { purl: bare.slice(0, at), version: decodeURIComponent(bare.slice(at + 1)) };
  return { purl: bare };
}

function queryOf(body: unknown, field: string): PackageQuery {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidArgument({ field: field.replace(/\.$/, "") || "body", description: "must be a JSON object" });
  const q = body as Record<string, unknown>;
  const str = (name: string, value: unknown): string | undefined => {
    if (value === undefined || value === null || value === "") return undefined;
    if (typeof value !== "string") throw invalidArgument({ field: `${field}${name}`, description: "must be a string" });
    checkString(`${field}${name}`, value);
    return value;
  };
  const pkg = q.package;
  if (pkg !== undefined && (typeof pkg !== "object" || pkg === null || Array.isArray(pkg)))
    throw invalidArgument({ field: `${field}package`, description: "must be a JSON object" });
  const p = (pkg ?? {}) as Record<string, unknown>;
  const ecosystem = str("package.ecosystem", p.ecosystem);
  const purl = str("package.purl", p.purl);
  const query: PackageQuery = {
    name: str("package.name", p.name),
    ecosystem: ecosystem === undefined ? undefined : canonicalEcosystem(`${field}package.ecosystem`, ecosystem),
    version: str("version", q.version),
    pageToken: str("page_token", q.page_token),
  };
  if (str("commit", q.commit) !== undefined) return { ...query, name: undefined }; // no git ranges here: nothing matches a commit
  if (!query.name && !purl)
    throw invalidArgument({ field: `${field}package`, description: "needs a name (with its ecosystem) or a purl" });
  if (query.name && purl)
    throw invalidArgument({ field: `${field}package`, description: "takes a name or a purl, not both" });
  if (purl) {
    if (!purl.startsWith("pkg:"))
      throw invalidArgument({ field: `${field}package.purl`, description: "must be a package URL (pkg:...)" });
    const split = splitPurl(purl);
    if (split.version !== undefined && query.version !== undefined)
      throw invalidArgument({ field: `${field}version`, description: "is given twice (also in the purl)" });
    query.purls = purlsMatching(split.purl);
    query.version = query.version ?? split.version;
  }
  return query;
}

/**
 * An advisory as matching reads it: its uid (visibility), ecosystem, and its OSV record (from its
 * row once a query needs it; or, in a slim entry, only the record's id, modified and affected,
 * made when indexed: what deciding and naming a match reads).
 */
interface Indexed {
  uid: string;
  ecosystem: string;
  row?: FeedRow;
  record?: OsvRecord;
}

/** Advisories that can affect something, by artifact name and by package URL, each list in the rows' order. */
export interface MatchIndex {
  byName: Map<string, Indexed[]>;
  byPurl: Map<string, Indexed[]>;
}

/**
 * Indexes `rows` by name and purl once (withdrawn and false-positive advisories left out); `slim`
 * keeps of each row only what matching reads (see Indexed), for an index kept long.
 */
export function indexRows(rows: readonly FeedRow[], slim = false): MatchIndex {
  const byName = new Map<string, Indexed[]>();
  const byPurl = new Map<string, Indexed[]>();
  for (const row of rows) {
    // withdrawn and false-positive advisories affect nothing (osv.dev leaves withdrawn ones out)
    if (NOT_AFFECTED.has(row.latest_event_type)) continue;
    let entry: Indexed;
    if (slim) {
      const { id, modified, affected } = osvRecordOf(row);
      entry = { uid: row.uid, ecosystem: row.ecosystem, record: { id, modified, affected } };
    } else entry = { uid: row.uid, ecosystem: row.ecosystem, row };
    for (const [index, key] of [
      [byName, row.artifact_name],
      [byPurl, row.purl],
    ] as const) {
      const list = index.get(key);
      if (list) list.push(entry);
      else index.set(key, [entry]);
    }
  }
  return { byName, byPurl };
}

/** Which advisories (by uid) a caller may see: all, or those under one of its visible groups. */
export type VisibleUid = (uid: string) => boolean;

export function visibleUids(visibility: Visibility): VisibleUid {
  if (visibility === "all") return () => true;
  return (uid) => visibility.some((root) => isAncestorOrSelf(root, uid));
}

/** Per query, the records of the index's visible advisories that affect what it asks about. */
export function matchIndexed(index: MatchIndex, queries: PackageQuery[], visible: VisibleUid): OsvRecord[][] {
  const { byName, byPurl } = index;
  const recordOf = (entry: Indexed) => (entry.record ??= osvRecordOf(entry.row!));
  return queries.map((q) => {
    const candidates = q.purls
      ? q.purls.flatMap((purl) => byPurl.get(purl) ?? [])
      : q.name
        ? (byName.get(q.name) ?? []).filter((e) => !q.ecosystem || ecosystemMatches(q.ecosystem, e.ecosystem))
        : [];
    return candidates
      .filter((e) => visible(e.uid))
      .map(recordOf)
      .filter((record) => recordAffects(record, q.version));
  });
}

/** Per query, the records of `rows` (already restricted to the caller) that affect what it asks about. */
function matching(rows: FeedRow[], queries: PackageQuery[]): OsvRecord[][] {
  return matchIndexed(indexRows(rows), queries, () => true);
}

/** The querybatch answer of matched records: each named by id and modified, in id order. */
function batchResults(results: OsvRecord[][]) {
  return {
    results: results.map((records) =>
      records.length
        ? { vulns: records.map((r) => ({ id: r.id, modified: r.modified })).sort((a, b) => (a.id < b.id ? -1 : 1)) }
        : {},
    ),
  };
}

/** Most advisories the package index holds; a larger corpus is matched from the database. */
export const PACKAGE_INDEX_MAX_ADVISORIES = 250_000;

/**
 * Every advisory that can affect something, indexed by name and purl, in this process: querybatch
 * answers from it while the advisories change counter (migration 017) has the value it was built
 * at, so each batch costs one read of the counter instead of reading its candidates (~20,000 rows
 * for 1,000 queries over the wolfi corpus). Rebuilt from one read after any change (on any
 * replica), once however many batches ask at the same time. Visibility is applied per batch.
 */
export class PackageIndex {
  #built: { epoch: string; index: MatchIndex | undefined; advisories: number } | undefined;
  #builds = 0;
  #building: { epoch: string; done: Promise<MatchIndex | undefined> } | undefined;

  constructor(private readonly advisories: AdvisoriesRepository) {}

  /** The index as the advisories are now; undefined when the corpus is too large to keep. */
  async current(freshness?: Freshness): Promise<MatchIndex | undefined> {
    const epoch = await this.advisories.epoch(freshness);
    if (this.#built?.epoch === epoch) return this.#built.index;
    if (this.#building?.epoch !== epoch) {
      // One build at a time: during an import the counter moves with every batch, and each
      // build reads every advisory.
      const previous = this.#building?.done.catch(() => undefined);
      const building = { epoch, done: previous ? previous.then(() => this.#build(epoch)) : this.#build(epoch) };
      this.#building = building;
      building.done
        .finally(() => {
          if (this.#building === building) this.#building = undefined;
        })
        .catch(() => {});
    }
    return this.#building.done;
  }

  /** What the index holds now (for measurement): advisories read, and whether it is kept. */
  get stats(): { epoch: string; advisories: number; kept: boolean; builds: number } | undefined {
    const built = this.#built;
    return (
      built && {
        epoch: built.epoch,
        advisories: built.advisories,
        kept: built.index !== undefined,
        builds: this.#builds,
      }
    );
  }

  async #build(epoch: string): Promise<MatchIndex | undefined> {
    // Read after the counter: the rows are at least as new as `epoch`, so an index kept under it
    // is never older than what it claims (at worst newer, and rebuilt at the next read).
    // One row more than the index keeps says the corpus is too large, without reading all of it.
    const rows = await this.advisories.allLight(PACKAGE_INDEX_MAX_ADVISORIES + 1);
    this.#builds++;
    const index = rows.length <= PACKAGE_INDEX_MAX_ADVISORIES ? indexRows(rows, true) : undefined;
    // A slower build for an older value must not replace a newer one.
    if (!this.#built || BigInt(this.#built.epoch) <= BigInt(epoch))
      this.#built = { epoch, index, advisories: rows.length };
    return index;
  }
}

export interface FeedDeps {
  advisories: AdvisoriesRepository;
  /** querybatch's in-memory index of the advisories */
  packageIndex: PackageIndex;
  /** the public advisory groups (`--public-advisories`): what an anonymous caller reads */
  publicGroups: readonly string[];
}

export function registerFeedRoutes(router: PlainRouter, { advisories, packageIndex, publicGroups }: FeedDeps): void {
  const readers = () => ({
    audience: "api" as const,
    capabilities: [Capability.CAP_ADVISORIES_LIST],
    // Credentials stay optional only where there is something public to read; a token that is
    // presented is still verified (a bad one is refused, never taken as anonymous).
    anonymous: publicGroups.length > 0,
  });
  // An anonymous caller sees the public groups; an authenticated one its visibility, which the
  // authorizer computed with the public groups' shared grants in it.
  const visibleTo = (call: CallContext): Visibility => (call.principal ? (call.visibility ?? []) : publicGroups);
  // osv.dev's documented clients post JSON with `curl -d` (no JSON Content-Type).
  router.acceptJsonOfAnyType();

  router.route({
    method: "GET",
    url: "/v1/vulns/:id",
    access: readers,
    async handler(request: FastifyRequest, _reply, call: CallContext) {
      const id = (request.params as { id: string }).id;
      checkString("id", id);
      const rows = await advisories.findById(restrictFor(visibleTo(call)), id);
      if (rows.length === 0) throw notFound("vulnerability", id);
      const records = rows.map(osvRecordOf);
      const ownIndex = rows.findIndex((r) => r.advisory_id === id || r.legacy_advisory_id === id);
      const own = ownIndex >= 0 ? records[ownIndex] : undefined;
      if (own) return own;
      // An alias (a CVE) several advisories share: one record for it, naming them all.
      return {
        schema_version: OSV_SCHEMA_VERSION,
        id,
        modified: records
          .map((r) => r.modified)
          .sort()
          .pop(),
        aliases: [],
        related: records.map((r) => r.id),
        affected: records.flatMap((r) => r.affected),
      };
    },
  });

  router.route({
    method: "POST",
    url: "/v1/query",
    access: readers,
    async handler(request, _reply, call) {
      const q = queryOf(request.body, "");
      const rows = await advisories.findByPackages(restrictFor(visibleTo(call)), [q]);
      const all = matching(rows, [q])[0]!.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      const after = q.pageToken;
      const rest = after ? all.filter((r) => r.id > after) : all;
      const page = rest.slice(0, QUERY_PAGE_SIZE);
      return {
        ...(page.length ? { vulns: page } : {}),
        ...(rest.length > QUERY_PAGE_SIZE ? { next_page_token: page[page.length - 1]!.id } : {}),
      };
    },
  });

  router.route({
    method: "POST",
    url: "/v1/querybatch",
    access: readers,
    async handler(request, _reply, call) {
      const body = request.body as { queries?: unknown } | undefined;
      const list = body && typeof body === "object" && !Array.isArray(body) ? body.queries : undefined;
      if (!Array.isArray(list)) throw invalidArgument({ field: "queries", description: "must be a list of queries" });
      if (list.length > MAX_BATCH_QUERIES)
        throw invalidArgument({ field: "queries", description: `must hold at most ${MAX_BATCH_QUERIES} queries` });
      const queries = list.map((q, i) => queryOf(q, `queries[${i}].`));
      const visibility = visibleTo(call);
      // From the in-memory index while the advisories have not changed (one read of the counter);
      // with the same matching as a read of the candidates would give.
      const index = await packageIndex.current(call.freshness);
      if (index) return batchResults(matchIndexed(index, queries, visibleUids(visibility)));
      // Light rows: an answer names each match by id and modified, which those decide exactly as
      // the full record would (osvRecordOf of the trimmed row).
      const rows = await advisories.findByPackages(restrictFor(visibility), queries, true);
      return batchResults(matching(rows, queries));
    },
  });

  router.route({
    method: "GET",
    url: "/vulnerabilities/secdb.json",
    access: readers,
    async handler(_request, reply, call) {
      const restrict = restrictFor(visibleTo(call));
      reply.type("application/json");
      return reply.send(Readable.from(secdb(advisories, restrict)));
    },
  });
}

/** The secdb document, a package at a time, reading the advisories a page at a time. */
async function* secdb(advisories: AdvisoriesRepository, restrict: <QB>(qb: QB) => QB): AsyncGenerator<string> {
  yield '{"apkurl":"{{urlprefix}}/{{reponame}}/{{arch}}/{{pkg.name}}-{{pkg.ver}}.apk","archs":[],"reponame":"","urlprefix":"","packages":[';
  let first = true;
  let current: { name: string; secfixes: Map<string, string[]> } | undefined;
  const flush = function* () {
    if (!current) return;
    const secfixes = Object.fromEntries([...current.secfixes].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    yield `${first ? "" : ","}${JSON.stringify({ pkg: { name: current.name, secfixes } })}`;
    first = false;
  };
  let after: [string, string, string] | undefined;
  for (;;) {
    const rows = await advisories.feedPage(restrict, after, FEED_PAGE, {
      kinds: ["fixed", "false-positive-determination"],
      ecosystems: APK_FEED_ECOSYSTEMS,
    });
    if (rows.length === 0) break;
    for (const row of rows) {
      if (current?.name !== row.artifact_name) {
        yield* flush();
        current = { name: row.artifact_name, secfixes: new Map() };
      }
      const version = row.latest_event_type === "fixed" ? (row.fixed_versions[0] ?? "") : "0";
      if (version === "") continue;
      const ids = current.secfixes.get(version) ?? [];
      for (const id of [row.advisory_id, ...row.aliases]) if (!ids.includes(id)) ids.push(id);
      current.secfixes.set(version, ids);
    }
    const last = rows[rows.length - 1]!;
    after = [last.artifact_name, last.advisory_id, last.uid];
  }
  yield* flush();
  yield "]}";
}
