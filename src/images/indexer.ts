// The indexer: reads each queued image's inventory in the background, never in a push's path.
// A push queues its image inside its own transaction (see `queueOnPush`) and wakes the indexer
// once committed; other replicas' pushes are found by polling. Each read holds a lease on the
// image's row, renewed while it runs: a replica that dies mid-read leaves the lease to run out,
// and the image is read again elsewhere (or after a restart), the death counted as an attempt.
// A read ends in a saved inventory — then every repo holding the image is queued for its report
// and the `onInventory` listeners (SBOM attachment, the report worker) are told — or in an error
// recorded on the image.
import type { Readable } from "node:stream";
import type { Logger } from "pino";
import type { ImageAccess, StoredManifest } from "../registry/api.js";
import { isImageManifest } from "../registry/api.js";
import { withinTransaction } from "../storage/ambient-transaction.js";
import type { Db } from "../storage/db.js";
import type { SbomBudget } from "./inventory/reader.js";
import { InventoryError, type Inventory } from "./inventory/types.js";
import type { InventoriesRepository } from "./storage/inventories.js";
import type { ReportsRepository } from "./storage/reports.js";

export const SPDX_JSON = "application/spdx+json";
export const CYCLONEDX_JSON = "application/vnd.cyclonedx+json";
/** Marks an SBOM this server generated and attached: reading it back would tell nothing new. */
export const GENERATED_SBOM_ANNOTATION = "dev.bulwark.sbom.generated";
/** The images_state row that says the images pushed before this module existed were queued. */
const BACKFILL_STATE = "inventory-backfill";

/** What the reader needs of an image (contract with inventory/reader.ts ImageSource). */
export interface ImageSourceLike {
  manifest: Uint8Array;
  openBlob(digest: string): Promise<Readable | undefined>;
  sboms(budget: SbomBudget): AsyncIterable<{ artifactType: string; content: Uint8Array }>;
  signal?: AbortSignal;
}

export type ReadInventory = (source: ImageSourceLike) => Promise<Inventory>;

/** Told of every inventory saved; a failure is logged, never undoes the save. */
export type InventoryListener = (digest: string, inventory: Inventory) => Promise<void> | void;

export interface IndexerDeps {
  db: Db;
  inventories: InventoriesRepository;
  reports: Pick<ReportsRepository, "enqueue" | "lockState" | "setState">;
  registry: ImageAccess & { store: { open(digest: string): Promise<Readable | undefined> } };
  read: ReadInventory;
  /** images read at once (0: none) */
  concurrency: number;
  pollIntervalMs: number;
  /** how long a read's claim holds without renewal */
  leaseMs: number;
  /** an attached SBOM larger than this is not read */
  maxSbomBytes: number;
  logger: Logger;
  now(): Date;
}

export class Indexer {
  readonly #listeners: InventoryListener[] = [];
  readonly #workers: Promise<void>[] = [];
  /** the waits of idle workers, ended by `wake` */
  #sleepers = new Set<() => void>();
  /** a wake that came while no worker slept: the next idle worker looks again at once */
  #pendingWake = false;
  #stopping = false;
  /** the reads in progress, to cut short on stop */
  readonly #reads = new Set<AbortController>();

  constructor(private readonly deps: IndexerDeps) {}

  onInventory(listener: InventoryListener): void {
    this.#listeners.push(listener);
  }

  /** Looks for queued images now (after a local push committed). */
  wake(): void {
    this.#pendingWake = true;
    for (const sleeper of this.#sleepers) sleeper();
    this.#sleepers.clear();
  }

  /**
   * Queues a pushed manifest, inside its push's transaction: an image manifest is queued for
   * reading (once per digest; already read, only its report in the new repo is queued), and a
   * pushed SBOM (not one of ours) has its subject read again. Wakes the indexer after the commit.
   */
  async queueOnPush(m: StoredManifest): Promise<void> {
    const { inventories, reports, registry, now } = this.deps;
    if (isImageManifest(m.mediaType, m.artifactType, m.layerMediaTypes)) {
      const state = await inventories.enqueue(m.digest, now());
      if (state === "done") await reports.enqueue([{ repoUid: m.repoUid, digest: m.digest }], now());
      if (state === "pending") registry.afterPushCommits(() => this.wake());
      return;
    }
    const isSbom = m.artifactType === SPDX_JSON || m.artifactType === CYCLONEDX_JSON;
    if (isSbom && m.subjectDigest && m.annotations?.[GENERATED_SBOM_ANNOTATION] === undefined)
      if (await inventories.requeue(m.subjectDigest, now())) registry.afterPushCommits(() => this.wake());
  }

  /** Queues, once per database, every image pushed before the images module ran. */
  async backfill(): Promise<void> {
    const { db, inventories, reports, registry, now } = this.deps;
    const queued = await withinTransaction(db, async () => {
      if ((await reports.lockState(BACKFILL_STATE)) !== "") return 0;
      const digests = await registry.imageManifests();
      await inventories.enqueueMany(digests, now());
      await reports.setState(BACKFILL_STATE, now().toISOString());
      return digests.length;
    });
    if (queued > 0) this.deps.logger.info({ images: queued }, "images stored before inventories existed are queued");
  }

  /** Starts the workers (none at concurrency 0). */
  start(): void {
    for (let i = 0; i < this.deps.concurrency; i++) this.#workers.push(this.#work());
  }

  /** Stops the workers; reads in progress are cut short and given back to the queue. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const read of this.#reads) read.abort();
    this.wake();
    await Promise.all(this.#workers);
  }

  /** Claims and reads one queued image; whether there was one. */
  async readOne(): Promise<boolean> {
    const digest = await this.deps.inventories.claim(this.deps.now(), this.deps.leaseMs);
    if (digest === undefined) return false;
    await this.#read(digest);
    return true;
  }

  async #work(): Promise<void> {
    while (!this.#stopping) {
      let found = false;
      this.#pendingWake = false;
      try {
        found = await this.readOne();
      } catch (err) {
        // The database unreachable for a moment: tried again at the next poll.
        this.deps.logger.error({ err }, "the image indexer could not claim work");
      }
      if (!found && !this.#stopping && !this.#pendingWake) await this.#sleep();
    }
  }

  #sleep(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#sleepers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, this.deps.pollIntervalMs);
      this.#sleepers.add(done);
    });
  }

  async #read(digest: string): Promise<void> {
    const { inventories, logger } = this.deps;
    logger.debug({ digest }, "reading an image's inventory");
    const abort = new AbortController();
    this.#reads.add(abort);
    const renewal = this.#renewWhileReading(digest, abort);
    let outcome: { inventory: Inventory } | { error: unknown };
    try {
      outcome = { inventory: await this.#readImage(digest, abort.signal) };
    } catch (error) {
      outcome = { error };
    } finally {
      this.#reads.delete(abort);
      clearInterval(renewal);
    }
    if (abort.signal.aborted) {
      // Stopped, or requeued meanwhile: nothing of this read is recorded.
      if (this.#stopping) await inventories.release(digest).catch(() => {});
      return;
    }
    if ("error" in outcome) {
      const hostile = outcome.error instanceof InventoryError;
      const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
      // A malformed image fails at once; anything else (a blob unreadable now) is tried again.
      const state = await inventories.fail(digest, message, this.deps.now(), { retry: !hostile });
      logger[hostile ? "warn" : "error"]({ digest, state, err: outcome.error }, "an image's inventory was not read");
      return;
    }
    await this.#saved(digest, outcome.inventory);
  }

  /** Renews the read's lease every third of it; a lost lease (requeued) cuts the read short. */
  #renewWhileReading(digest: string, abort: AbortController): NodeJS.Timeout {
    const timer = setInterval(
      () => {
        this.deps.inventories
          .renew(digest, this.deps.now(), this.deps.leaseMs)
          .then((held) => {
            if (!held) abort.abort();
          })
          .catch((err: unknown) => this.deps.logger.warn({ err, digest }, "an inventory lease was not renewed"));
      },
      Math.max(1, Math.floor(this.deps.leaseMs / 3)),
    );
    timer.unref();
    return timer;
  }

  async #readImage(digest: string, signal: AbortSignal): Promise<Inventory> {
    const { registry } = this.deps;
    const manifest = await registry.manifestOf(digest);
    if (!manifest) throw new InventoryError("the image's manifest is no longer stored");
    const opened = new Set<Readable>();
    signal.addEventListener("abort", () => {
      for (const stream of opened) stream.destroy(new Error("the read was stopped"));
    });
    return this.deps.read({
      manifest: manifest.content,
      signal,
      openBlob: async (blob) => {
        if (signal.aborted) throw new Error("the read was stopped");
        const stream = await registry.store.open(blob);
        if (stream) {
          opened.add(stream);
          stream.once("close", () => opened.delete(stream));
        }
        return stream;
      },
      sboms: (budget) => this.#sbomsOf(digest, budget),
    });
  }

  /**
   * The SBOM documents attached to the image (not ours), newest first, each loaded only when the
   * reader asks for the next; within `budget` (one larger than its share is skipped unread, the
   * list ends before the total would pass). One that cannot be read is skipped.
   */
  async *#sbomsOf(digest: string, budget: SbomBudget): AsyncGenerator<{ artifactType: string; content: Uint8Array }> {
    const { registry, logger } = this.deps;
    const referrers = await registry.referrersOf(digest, [SPDX_JSON, CYCLONEDX_JSON]);
    let count = 0;
    let total = 0;
    for (const referrer of referrers) {
      if (count >= budget.maxCount) return;
      if (referrer.annotations?.[GENERATED_SBOM_ANNOTATION] !== undefined) continue;
      let content: Uint8Array | "over budget" | undefined;
      try {
        content = await this.#sbomDocument(referrer.repoUid, referrer.digest, budget, budget.maxTotalBytes - total);
      } catch (err) {
        logger.warn({ err, digest, sbom: referrer.digest }, "an attached SBOM was not read");
        continue;
      }
      if (content === "over budget") return;
      if (!content) continue;
      count += 1;
      total += content.byteLength;
      yield { artifactType: referrer.artifactType ?? "", content };
    }
  }

  /** An SBOM referrer's document: its manifest's first layer, when small enough. */
  async #sbomDocument(
    repoUid: string,
    digest: string,
    budget: SbomBudget,
    bytesLeft: number,
  ): Promise<Uint8Array | "over budget" | undefined> {
    const manifest = await this.deps.registry.manifestIn(repoUid, digest);
    if (!manifest) return undefined;
    const doc = JSON.parse(Buffer.from(manifest.content).toString("utf8")) as {
      layers?: { digest?: unknown; size?: unknown }[];
    };
    const layer = doc.layers?.[0];
    if (typeof layer?.digest !== "string" || typeof layer.size !== "number") return undefined;
    const maxBytes = Math.min(this.deps.maxSbomBytes, budget.maxEachBytes);
    if (layer.size > maxBytes) return undefined;
    if (layer.size > bytesLeft) return "over budget";
    const stream = await this.deps.registry.store.open(layer.digest);
    if (!stream) return undefined;
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      total += chunk.length;
      // The stored blob is the size its descriptor says; more is not read.
      if (total > Math.min(maxBytes, bytesLeft)) {
        stream.destroy();
        return undefined;
      }
      chunks.push(chunk);
    }
    return Buffer.concat(chunks, total);
  }

  /** Saves the inventory and queues every holding repo's report, together; then tells the listeners. */
  async #saved(digest: string, inventory: Inventory): Promise<void> {
    const { db, inventories, reports, registry, now, logger } = this.deps;
    const saved = await withinTransaction(db, async () => {
      if (!(await inventories.save(digest, inventory, now()))) return false;
      // A push of this image to another repo that is committing now holds the image's row (see
      // InventoriesRepository.enqueue): the save waited for it, so its repo is seen here.
      const repos = await registry.reposHolding(digest);
      await reports.enqueue(
        repos.map((repoUid) => ({ repoUid, digest })),
        now(),
      );
      return true;
    });
    if (!saved) return;
    logger.debug({ digest, packages: inventory.packages.length }, "an image's inventory was read");
    for (const listener of this.#listeners) {
      try {
        await listener(digest, inventory);
      } catch (err) {
        logger.error({ err, digest }, "an inventory listener failed");
      }
    }
  }
}

/** How long a read's claim holds unrenewed: how long a dead replica's image waits to be read elsewhere. */
export const INVENTORY_LEASE_MS = 30_000;
