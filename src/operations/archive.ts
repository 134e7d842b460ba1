// The backup archive: a gzipped tar of a manifest (what the archive holds, so a restore can verify
// it), PostgreSQL's files of the embedded database's snapshot (database/<path>), the data
// directory's key-encryption key (the issuer's keys are sealed with it: the archive is as secret
// as the data directory), and every blob the snapshot records, streamed from the blob store one
// after another. Every file is streamed: nothing is held in memory whole.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { pack as tarPack } from "tar-stream";
import { VERSION } from "../core/version.js";
import type { OpenDatabase } from "../storage/db.js";
import { recordedBlobs, type BlobStore, type RecordedBlob } from "../registry/api.js";

export const ARCHIVE_FORMAT = "bulwark-backup";
/** 2: PostgreSQL's files one by one (1 held PGlite's dump of the whole data directory) */
export const ARCHIVE_VERSION = 2;
export const MANIFEST_ENTRY = "manifest.json";
export const KEY_ENTRY = "key-encryption-key";
/** The prefix of the database's entries: database/<its path in the data directory>. */
export const DATABASE_PREFIX = "database/";

/** One of PostgreSQL's files: its path in the data directory, size and sha256 (hex). */
export interface DatabaseFile {
  name: string;
  size: number;
  sha256: string;
}

/** The first entry of every archive. */
export interface BackupManifest {
  format: typeof ARCHIVE_FORMAT;
  formatVersion: number;
  bulwarkVersion: string;
  /** when the database snapshot was taken (ISO 8601) */
  created: string;
  backend: "pglite";
  /** PostgreSQL's files of the snapshot (each an entry database/<name>), and its directories (none is an entry) */
  database: { directories: string[]; files: DatabaseFile[] };
  blobs: RecordedBlob[];
}

/** The archive entry of a blob: blobs/<algorithm>/<hex>. */
export function blobEntry(digest: string): string {
  return `blobs/${digest.replace(":", "/")}`;
}

export interface BackupSources {
  database: Pick<OpenDatabase, "snapshot">;
  store: BlobStore;
  /** the data directory's key-encryption key file */
  keyFile: string;
  /** runs the whole backup while the blobs it copies cannot be collected (RegistryExports.exclusive) */
  exclusive<T>(work: () => Promise<T>): Promise<T>;
  now(): Date;
  /** told once the snapshot is taken (the moment the backup is as of) */
  onSnapshot?(manifest: BackupManifest): void;
}

/** The archive entry of one of PostgreSQL's files. */
export function databaseEntry(name: string): string {
  return DATABASE_PREFIX + name;
}

/** The total size of a manifest's database files. */
export function databaseBytes(manifest: BackupManifest): number {
  return manifest.database.files.reduce((sum, f) => sum + f.size, 0);
}

/**
 * The archive as a gzip stream. The snapshot is taken when the stream starts (copied to a private
 * directory while the database is held, then released); its files, then the blobs, follow. A
 * failure partway (a blob missing from the store) errors the stream: a truncated archive never
 * passes for a whole one. The copy is removed in every case.
 */
export function backupArchive(sources: BackupSources): Readable {
  const snapshot = sources.database.snapshot;
  if (!snapshot) throw new Error("backups need the embedded database");
  const pack = tarPack();
  const out = new PassThrough();
  const gzip = createGzip();
  pipeline(pack, gzip, out).catch((err: unknown) => out.destroy(err as Error));
  // A reader that goes away (a client disconnecting) ends the writing too: the staged copy is
  // removed and garbage collection may run again, instead of both waiting for a drain that never comes.
  const abort = new AbortController();
  let finished = false;
  out.once("close", () => {
    if (!finished) abort.abort(new Error("the archive's reader went away"));
  });
  const { signal } = abort;
  const write = async () => {
    await sources.exclusive(async () => {
      const staged = await snapshot(recordedBlobs);
      try {
        const files: DatabaseFile[] = [];
        for (const file of staged.files)
          files.push({ ...file, sha256: await sha256Of(join(staged.dir, file.name), file.size) });
        const manifest: BackupManifest = {
          format: ARCHIVE_FORMAT,
          formatVersion: ARCHIVE_VERSION,
          bulwarkVersion: VERSION,
          created: sources.now().toISOString(),
          backend: "pglite",
          database: { directories: staged.directories, files },
          blobs: staged.read,
        };
        sources.onSnapshot?.(manifest);
        await entry(pack, MANIFEST_ENTRY, Buffer.from(JSON.stringify(manifest, null, 2) + "\n"), signal);
        for (const file of files) {
          const body = stagedFile(join(staged.dir, file.name), file.size);
          await streamEntry(pack, databaseEntry(file.name), file.size, body, signal);
        }
        await entry(pack, KEY_ENTRY, await readFile(sources.keyFile), signal);
      } finally {
        await staged.remove();
      }
      for (const blob of staged.read) {
        const body = await sources.store.open(blob.digest);
        if (!body) throw new Error(`blob ${blob.digest} is recorded but not in the blob store`);
        await streamEntry(pack, blobEntry(blob.digest), blob.size, body, signal);
      }
    });
    finished = true;
    pack.finalize();
  };
  write().catch((err: unknown) => {
    pack.destroy(err as Error);
    out.destroy(err as Error);
  });
  return out;
}

type Pack = ReturnType<typeof tarPack>;

/** A staged file's first `size` bytes (its size when staged: nothing changes the copy). */
function stagedFile(path: string, size: number): Readable {
  // `end` is inclusive: an empty file is no read at all
  return size === 0 ? Readable.from([]) : createReadStream(path, { end: size - 1 });
}

async function sha256Of(path: string, size: number): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of stagedFile(path, size)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** `work`, or the abort's reason once `signal` aborts. */
function unlessAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function entry(pack: Pack, name: string, bytes: Uint8Array, signal: AbortSignal): Promise<void> {
  return unlessAborted(
    new Promise((resolve, reject) =>
      pack.entry({ name, size: bytes.length, mode: 0o600 }, Buffer.from(bytes), (err) =>
        err ? reject(err) : resolve(),
      ),
    ),
    signal,
  );
}

/** An entry of `size` bytes from `body`, written as it is read (the pack's backpressure respected). */
async function streamEntry(pack: Pack, name: string, size: number, body: Readable, signal: AbortSignal): Promise<void> {
  let done!: Promise<void>;
  const sink = await new Promise<ReturnType<Pack["entry"]>>((resolveSink) => {
    done = new Promise((resolve, reject) => {
      resolveSink(pack.entry({ name, size, mode: 0o600 }, (err) => (err ? reject(err) : resolve())));
    });
  });
  // Both are settled below; until then a failure (a reader gone, a short blob: "size mismatch")
  // must reach this function, not the process as an unhandled error or rejection.
  done.catch(() => undefined);
  sink.on("error", () => undefined);
  // pipeline ends the entry when the body ends, destroys both on a failure or an abort, and
  // settles however the sink goes away (no wait for a drain that never comes).
  await pipeline(body, sink, { signal });
  await unlessAborted(done, signal);
}
