// The backup archive: a gzipped tar of a manifest (what the archive holds, so a restore can verify
// it), the embedded database's snapshot, the data directory's key-encryption key (the issuer's
// keys are sealed with it: the archive is as secret as the data directory), and every blob the
// snapshot records, streamed from the blob store one after another (never a whole blob in memory).
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { once } from "node:events";
import { PassThrough, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { pack as tarPack } from "tar-stream";
import { VERSION } from "../core/version.js";
import type { OpenDatabase } from "../storage/db.js";
import { recordedBlobs, type BlobStore, type RecordedBlob } from "../registry/api.js";

export const ARCHIVE_FORMAT = "bulwark-backup";
export const ARCHIVE_VERSION = 1;
export const MANIFEST_ENTRY = "manifest.json";
export const DATABASE_ENTRY = "database.tar";
export const KEY_ENTRY = "key-encryption-key";

/** The first entry of every archive. */
export interface BackupManifest {
  format: typeof ARCHIVE_FORMAT;
  formatVersion: number;
  bulwarkVersion: string;
  /** when the database snapshot was taken (ISO 8601) */
  created: string;
  backend: "pglite";
  database: { entry: string; size: number; sha256: string };
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

/**
 * The archive as a gzip stream. The snapshot is taken when the stream starts; blobs follow it.
 * A failure partway (a blob missing from the store) errors the stream: a truncated archive never
 * passes for a whole one.
 */
export function backupArchive(sources: BackupSources): Readable {
  const snapshot = sources.database.snapshot;
  if (!snapshot) throw new Error("backups need the embedded database");
  const pack = tarPack();
  const out = new PassThrough();
  const gzip = createGzip();
  pipeline(pack, gzip, out).catch((err: unknown) => out.destroy(err as Error));
  const write = async () => {
    await sources.exclusive(async () => {
      const { data, read: blobs } = await snapshot(recordedBlobs);
      const bytes = new Uint8Array(await data.arrayBuffer());
      const manifest: BackupManifest = {
        format: ARCHIVE_FORMAT,
        formatVersion: ARCHIVE_VERSION,
        bulwarkVersion: VERSION,
        created: sources.now().toISOString(),
        backend: "pglite",
        database: {
          entry: DATABASE_ENTRY,
          size: bytes.length,
          sha256: createHash("sha256").update(bytes).digest("hex"),
        },
        blobs,
      };
      sources.onSnapshot?.(manifest);
      await entry(pack, MANIFEST_ENTRY, Buffer.from(JSON.stringify(manifest, null, 2) + "\n"));
      await entry(pack, DATABASE_ENTRY, bytes);
      await entry(pack, KEY_ENTRY, await readFile(sources.keyFile), 0o600);
      for (const blob of blobs) {
        const body = await sources.store.open(blob.digest);
        if (!body) throw new Error(`blob ${blob.digest} is recorded but not in the blob store`);
        await streamEntry(pack, blobEntry(blob.digest), blob.size, body);
      }
    });
    pack.finalize();
  };
  write().catch((err: unknown) => {
    pack.destroy(err as Error);
    out.destroy(err as Error);
  });
  return out;
}

type Pack = ReturnType<typeof tarPack>;

function entry(pack: Pack, name: string, bytes: Uint8Array, mode = 0o600): Promise<void> {
  return new Promise((resolve, reject) =>
    pack.entry({ name, size: bytes.length, mode }, Buffer.from(bytes), (err) => (err ? reject(err) : resolve())),
  );
}

/** An entry of `size` bytes from `body`, written as it is read (the pack's backpressure respected). */
async function streamEntry(pack: Pack, name: string, size: number, body: Readable): Promise<void> {
  let done!: Promise<void>;
  const sink = await new Promise<ReturnType<Pack["entry"]>>((resolveSink) => {
    done = new Promise((resolve, reject) => {
      resolveSink(pack.entry({ name, size, mode: 0o600 }, (err) => (err ? reject(err) : resolve())));
    });
  });
  try {
    for await (const chunk of body) if (!sink.write(chunk as Buffer)) await once(sink, "drain");
  } catch (err) {
    sink.destroy(err as Error);
    throw err;
  }
  sink.end(() => undefined);
  await done;
}
