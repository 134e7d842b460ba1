// Online garbage collection. While the registry serves, removes what nothing needs and nobody
// touched within the grace window: untagged manifests (not named by a kept index, not a referrer
// of a kept manifest), blob links no manifest uses, blobs no repo links, abandoned uploads. The
// window protects pushes in progress (a blob uploaded but not yet named by a manifest, a
// manifest pushed by digest before its index or tag). Every delete re-checks its conditions in
// the same statement (the repositories' garbage queries), so a concurrent push wins; foreign
// keys stand behind that. One collection runs at a time per database, across replicas: the others
// are refused (CollectionRunningError) rather than queued, as the running one removes what they would.
import { sql } from "kysely";
import type { Logger } from "pino";
import { backendOf, type Db } from "../storage/db.js";
import type { BlobStore } from "./storage/blob-store.js";
import type { BlobsRepository } from "./storage/blobs.js";
import type { ManifestsRepository } from "./storage/manifests.js";
import type { UploadsRepository } from "./storage/uploads.js";

export interface GcOptions {
  /** how long anything unreferenced is kept after it was last pushed or linked */
  graceMs: number;
  /** report what would go, remove nothing */
  dryRun?: boolean;
  now?: Date;
  logger?: Logger;
}

export interface GcReport {
  manifests: number;
  blobLinks: number;
  blobs: number;
  bytes: number;
  uploads: number;
}

/** The registry's content repositories (what `registryRepositories` makes). */
export interface GcRepositories {
  blobs: BlobsRepository;
  manifests: ManifestsRepository;
  uploads: UploadsRepository;
}

/** Uploads untouched this long are abandoned (at least a day, at least the grace window). */
const UPLOAD_EXPIRY_MS = 24 * 3600 * 1000;
/** Blobs and uploads are taken this many at a time. */
const BATCH = 500;

interface Cutoffs {
  /** anything unreferenced and untouched since before this goes */
  content: Date;
  /** upload sessions untouched since before this go */
  uploads: Date;
}

/** Another collection holds the database's collection lock (this process's, or another replica's). */
export class CollectionRunningError extends Error {
  constructor() {
    super("a registry garbage collection is running already");
  }
}

/** The session-level advisory lock a collection holds on PostgreSQL (any 64-bit key; this one is named). */
const LOCK_KEY = sql`hashtext('bulwark.registry_gc')`;
/** Databases of this process a collection runs on now. */
const collecting = new WeakSet<Db>();

/**
 * Runs `collect` as the database's only collection. PGlite is this process's alone (its
 * directory is locked), so a flag is enough; on PostgreSQL a session-level advisory lock, held
 * on one connection of the pool for the whole collection (whose statements use the others), and
 * released with that session should the process die.
 */
async function exclusively<T>(db: Db, collect: () => Promise<T>): Promise<T> {
  if (collecting.has(db)) throw new CollectionRunningError();
  collecting.add(db);
  try {
    if (backendOf(db) !== "postgres") return await collect();
    return await db.connection().execute(async (session) => {
      const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${LOCK_KEY}) as locked`.execute(
        session,
      );
      if (!rows[0]?.locked) throw new CollectionRunningError();
      try {
        return await collect();
      } finally {
        await sql`select pg_advisory_unlock(${LOCK_KEY})`.execute(session);
      }
    });
  } finally {
    collecting.delete(db);
  }
}

/**
 * One collection (or, with `dryRun`, a survey of what it would remove, which takes no lock): the
 * single entry point the schedule, the admin RPC and `bulwark registry gc` all use.
 */
export async function collectGarbage(
  db: Db,
  repos: GcRepositories,
  store: BlobStore,
  options: GcOptions,
): Promise<GcReport> {
  if (!(options.graceMs >= 0)) throw new RangeError(`the grace window must be at least 0 ms, not ${options.graceMs}`);
  const now = options.now ?? new Date();
  const cutoffs: Cutoffs = {
    content: new Date(now.getTime() - options.graceMs),
    uploads: new Date(now.getTime() - Math.max(options.graceMs, UPLOAD_EXPIRY_MS)),
  };
  if (options.dryRun) return survey(repos, cutoffs);
  return exclusively(db, () => collect(repos, store, options, cutoffs));
}

async function collect(
  repos: GcRepositories,
  store: BlobStore,
  options: GcOptions,
  cutoffs: Cutoffs,
): Promise<GcReport> {
  const manifests = await collectManifests(repos.manifests, cutoffs.content);
  const blobLinks = await repos.blobs.deleteUnusedLinks(cutoffs.content);
  const blobs = await collectBlobs(repos.blobs, store, cutoffs.content);
  const uploads = await collectUploads(repos.uploads, store, cutoffs.uploads);
  await collectStagedBytes(repos.uploads, store, cutoffs.uploads);
  const report: GcReport = { manifests, blobLinks, ...blobs, uploads };
  options.logger?.info({ ...report, graceMs: options.graceMs }, "registry garbage collection");
  return report;
}

/** One pass: what a collection would remove first (it then repeats for what that frees). */
async function survey(repos: GcRepositories, cutoffs: Cutoffs): Promise<GcReport> {
  const manifests = await repos.manifests.countGarbage(cutoffs.content);
  const blobLinks = await repos.blobs.countUnusedLinks(cutoffs.content);
  const blobs = await repos.blobs.countUnused(cutoffs.content);
  const uploads = await repos.uploads.countExpired(cutoffs.uploads);
  return { manifests, blobLinks, blobs: blobs.blobs, bytes: blobs.bytes, uploads };
}

/** Removing an index frees its children: repeats until a pass removes nothing. */
async function collectManifests(manifests: ManifestsRepository, cutoff: Date): Promise<number> {
  let removed = 0;
  for (let pass = 0; pass < 100; pass++) {
    const n = await manifests.deleteGarbage(cutoff);
    removed += n;
    if (n === 0) break;
  }
  return removed;
}

/** Blobs one at a time, each with its bytes while its row is locked (BlobsRepository.removeUnused). */
async function collectBlobs(
  blobs: BlobsRepository,
  store: BlobStore,
  cutoff: Date,
): Promise<{ blobs: number; bytes: number }> {
  const report = { blobs: 0, bytes: 0 };
  for (;;) {
    const candidates = await blobs.unused(cutoff, BATCH);
    if (!candidates.length) break;
    let removed = 0;
    for (const digest of candidates) {
      const size = await blobs.removeUnused(digest, cutoff, () => store.delete(digest));
      if (size === undefined) continue;
      removed++;
      report.blobs++;
      report.bytes += size;
    }
    if (removed === 0) break;
  }
  return report;
}

/** Abandoned upload sessions, and their staged bytes. */
async function collectUploads(uploads: UploadsRepository, store: BlobStore, cutoff: Date): Promise<number> {
  let removed = 0;
  for (;;) {
    const stale = await uploads.deleteExpired(cutoff, BATCH);
    for (const id of stale) await store.deleteUpload(id);
    removed += stale.length;
    if (stale.length < BATCH) break;
  }
  return removed;
}

/** Staged bytes whose session is gone (a crash between the two deletes above, or a cancel). */
async function collectStagedBytes(uploads: UploadsRepository, store: BlobStore, cutoff: Date): Promise<void> {
  for await (const { uploadId, modified } of store.listUploads()) {
    if (modified >= cutoff) continue;
    if (!(await uploads.exists(uploadId))) await store.deleteUpload(uploadId);
  }
}
