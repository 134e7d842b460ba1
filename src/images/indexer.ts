// The indexer: reads each queued image's inventory in the background, never in a push's path.
// A push queues its image inside its own transaction (see `queueOnPush`) and wakes the indexer
// once committed; other replicas' pushes are found by polling. Each read holds a lease on the
// image's row (with a token: only the latest claim's read is recorded), renewed while it runs: a
// replica that dies mid-read leaves the lease to run out, and the image is read again elsewhere
// (or after a restart), the death counted as an attempt. A read ends in a saved inventory — then
// every repo holding the image is queued for its report and the `onInventory` listeners (SBOM
// attachment, the report worker) are told — or in an error recorded on the image: the image's
// own fault (stays failed) or a transient one (retried, and read again when pushed again).
import type { Readable } from "node:stream";
import type { Logger } from "pino";
import type { ImageAccess, StoredManifest } from "../registry/api.js";
import { isImageManifest } from "../registry/api.js";
import { withinTransaction } from "../storage/ambient-transaction.js";
import type { Db } from "../storage/db.js";
import type { SbomBudget } from "./inventory/reader.js";
import { InventoryError, type Inventory } from "./inventory/types.js";
import type { InventoriesRepository, InventoryLease } from "./storage/inventories.js";
import type { ReportsRepository } from "./storage/reports.js";

export const SPDX_JSON = "application/spdx+json";
export const CYCLONEDX_JSON = "application/vnd.cyclonedx+json";
/** Marks an SBOM this server generated and attached: reading it back would tell nothing new. */
export const GENERATED_SBOM_ANNOTATION = "dev.bulwark.sbom.generated";
/** The images_state row that says the images pushed before this module existed were queued. */
const BACKFILL_STATE = "inventory-backfill";
/** What callers are shown of a failure that is not the image's fault (its detail is logged: it may name files or hosts). */
export const INTERNAL_READ_ERROR = "the image could not be read: storage error; see the server log";

/** The image's manifest is gone from every repo: nothing to read until it is pushed again. */
class ManifestGoneError extends Error {
  constructor() {
    super("the image's manifest is no longer stored");
  }
}

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
  readonly #reportsQueued: (() => void)[] = [];
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

  /** Told when a push queued a report of an image read before (the report worker). */
  onReportsQueued(listener: () => void): void {
    this.#reportsQueued.push(listener);
  }

  /** Looks for queued images now (after a local push committed). */
  wake(): void {
    this.#pendingWake = true;
    for (const sleeper of this.#sleepers) sleeper();
    this.#sleepers.clear();
  }

  /**
   * Queues a pushed manifest, inside its push's transaction: an image manifest is queued for
   * reading (once per digest; already read, only its report in the new repo is queued, after the
   * commit), and a pushed SBOM (not one of ours) has its subject read again when it speaks for it
   * (see ImageAccess.referrerHonoured). Wakes the indexer after the commit.
   */
  async queueOnPush(m: StoredManifest): Promise<void> {
    const { inventories, registry, now } = this.deps;
    if (isImageManifest(m.mediaType, m.artifactType, m.layerMediaTypes)) {
      // A push of an image the repo has (told after it committed): queued when first pushed, so
      // only an image unknown here or failed by storage is queued (again); no write otherwise.
      if (!m.created) {
        const known = await inventories.stateOf(m.digest);
        if (known === "pending") registry.afterPushCommits(() => this.wake());
        if (known !== "to queue") return;
      }
      let state = await inventories.enqueue(m.digest, now());
      if (!m.created && state === "done") return;
      if (state === "done" && (await this.#sbomNoLongerHonoured(m))) {
        await inventories.requeue(m.digest, now());
        state = "pending";
      }
      // Not inside the push: its queue row may be held by a report batch in progress.
      if (state === "done") registry.afterPushCommits(() => void this.#queueReport(m.repoUid, m.digest));
      if (state === "pending") registry.afterPushCommits(() => this.wake());
      return;
    }
    const isSbom = m.artifactType === SPDX_JSON || m.artifactType === CYCLONEDX_JSON;
    if (!isSbom || !m.subjectDigest || m.annotations?.[GENERATED_SBOM_ANNOTATION] !== undefined) return;
    if (!(await registry.referrerHonoured(m.repoUid, m.subjectDigest))) return;
    if (await inventories.requeue(m.subjectDigest, now())) registry.afterPushCommits(() => this.wake());
  }

  /** Whether the image's inventory came from an attached SBOM that no longer speaks for it (a repo of another organization now holds it). */
  async #sbomNoLongerHonoured(m: StoredManifest): Promise<boolean> {
    const source = await this.deps.inventories.packageSourceOf(m.digest);
    if (!source?.startsWith("sbom:")) return false;
    return !(await this.deps.registry.referrerHonoured(m.repoUid, m.digest));
  }

  /** Queues the report of a read image in the repo it was pushed to (after the push committed). */
  async #queueReport(repoUid: string, digest: string): Promise<void> {
    try {
      await this.deps.reports.enqueue([{ repoUid, digest }], this.deps.now());
    } catch (err) {
      // The next advisory change touching the image queues it again.
      this.deps.logger.error({ err, digest, repo: repoUid }, "an image's report was not queued");
      return;
    }
    for (const listener of this.#reportsQueued) listener();
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
    const lease = await this.deps.inventories.claim(this.deps.now(), this.deps.leaseMs);
    if (lease === undefined) return false;
    await this.#read(lease);
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

  async #read(lease: InventoryLease): Promise<void> {
    const { inventories, logger } = this.deps;
    const { digest } = lease;
    logger.debug({ digest }, "reading an image's inventory");
    const abort = new AbortController();
    this.#reads.add(abort);
    const renewal = this.#renewWhileReading(lease, abort);
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
      if (this.#stopping) await inventories.release(lease).catch(() => {});
      return;
    }
    if ("error" in outcome) {
      await this.#failed(lease, outcome.error);
      return;
    }
    await this.#saved(lease, outcome.inventory);
  }

  /**
   * Records a failed read: a malformed image fails at once with the reader's message; a manifest
   * gone fails until the image is pushed again; anything else (a blob unreadable now, the store
   * down) is tried again, and callers see a generic message — the detail goes to the log.
   */
  async #failed(lease: InventoryLease, error: unknown): Promise<void> {
    const { inventories, logger, now } = this.deps;
    const hostile = error instanceof InventoryError;
    const gone = error instanceof ManifestGoneError;
    const message = hostile || gone ? error.message : INTERNAL_READ_ERROR;
    const state = await inventories.fail(lease, message, now(), {
      kind: hostile ? "image" : "transient",
      retry: !hostile && !gone,
    });
    logger[hostile ? "warn" : "error"](
      { digest: lease.digest, state, err: error },
      "an image's inventory was not read",
    );
  }

  /** Renews the read's lease every third of it; a lost lease (requeued, claimed again) cuts the read short. */
  #renewWhileReading(lease: InventoryLease, abort: AbortController): NodeJS.Timeout {
    const { digest } = lease;
    const timer = setInterval(
      () => {
        this.deps.inventories
          .renew(lease, this.deps.now(), this.deps.leaseMs)
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
    if (!manifest) throw new ManifestGoneError();
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
          // The reader sees a stream's errors through its iterator, but only once it pulled: a
          // stream opened and not yet read, destroyed by a stop, must not crash the process.
          stream.on("error", () => undefined);
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
  async #saved(lease: InventoryLease, inventory: Inventory): Promise<void> {
    const { db, inventories, reports, registry, now, logger } = this.deps;
    const { digest } = lease;
    const saved = await withinTransaction(db, async () => {
      if (!(await inventories.save(lease, inventory, now()))) return false;
      // A push of this image to another repo that is committing now holds the image's row (see
      // InventoriesRepository.enqueue): the save waited for it, so its repo is seen here.
      const repos = await registry.reposHolding(digest);
      // That push made the attached SBOM read here speak for another organization's image: the
      // save is undone and the image read again (from its layers: referrersOf answers none now).
      if (inventory.packageSource.startsWith("sbom:") && !(await registry.referrerHonoured(repos[0] ?? "", digest)))
        throw new SbomNoLongerHonoured();
      await reports.enqueue(
        repos.map((repoUid) => ({ repoUid, digest })),
        now(),
      );
      return true;
    }).catch(async (err: unknown) => {
      if (!(err instanceof SbomNoLongerHonoured)) throw err;
      await inventories.release(lease);
      this.wake();
      return false;
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

/** A read's SBOM stopped speaking for its image while it was read (see `#saved`). */
class SbomNoLongerHonoured extends Error {}

/** How long a read's claim holds unrenewed: how long a dead replica's image waits to be read elsewhere. */
export const INVENTORY_LEASE_MS = 30_000;
