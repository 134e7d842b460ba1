// `bulwark restore`: a backup archive (archive.ts) back into a new data directory. Everything is
// written to a temporary directory beside the target and verified (the manifest, the database
// snapshot's sha256, every blob's digest while it is written) before one rename makes it the data
// directory: a corrupt or cut-short archive is a clear error and leaves nothing half made.
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { createReadStream, existsSync } from "node:fs";
import { mkdir, readdir, rename, rm, rmdir, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { extract as tarExtract } from "tar-stream";
import { openBlobStore } from "../registry/api.js";
import { KEY_ENCRYPTION_KEY_FILE, makePrivate, parseKeyEncryptionKey } from "../storage/data-dir.js";
import { restoreDataDir } from "../storage/db.js";
import {
  ARCHIVE_FORMAT,
  ARCHIVE_VERSION,
  DATABASE_ENTRY,
  KEY_ENTRY,
  MANIFEST_ENTRY,
  blobEntry,
  type BackupManifest,
} from "./archive.js";

export interface RestoreOptions {
  /** the archive `bulwark backup` wrote */
  file: string;
  /** the new data directory: absent or empty */
  dataDir: string;
  /** where the blobs go (default: <data dir>/registry, the server's default) */
  blobDir?: string;
}

export interface RestoreReport {
  manifest: BackupManifest;
  blobs: number;
  bytes: number;
}

/** What an archive may hold at most before its manifest says more: the manifest itself. */
const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

class CorruptArchive extends Error {}

function corrupt(what: string): CorruptArchive {
  return new CorruptArchive(`not a whole Bulwark backup: ${what}`);
}

async function readAll(stream: AsyncIterable<unknown>, limit: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > limit) throw corrupt(`${what} is larger than expected`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function parseManifest(bytes: Buffer): BackupManifest {
  let m: BackupManifest;
  try {
    m = JSON.parse(bytes.toString("utf8")) as BackupManifest;
  } catch {
    throw corrupt("its manifest is not JSON");
  }
  if (m?.format !== ARCHIVE_FORMAT) throw corrupt("its manifest is not a Bulwark backup's");
  if (m.formatVersion !== ARCHIVE_VERSION)
    throw new Error(`the backup's format version is ${m.formatVersion}; this Bulwark reads version ${ARCHIVE_VERSION}`);
  const validBlob = (b: unknown) =>
    typeof (b as { digest?: unknown })?.digest === "string" &&
    /^sha(256:[0-9a-f]{64}|512:[0-9a-f]{128})$/.test((b as { digest: string }).digest) &&
    Number.isSafeInteger((b as { size?: unknown }).size) &&
    (b as { size: number }).size >= 0;
  if (!Array.isArray(m.blobs) || !m.blobs.every(validBlob)) throw corrupt("its manifest's blob list is malformed");
  if (
    m.database?.entry !== DATABASE_ENTRY ||
    !Number.isSafeInteger(m.database.size) ||
    !/^[0-9a-f]{64}$/.test(m.database.sha256)
  )
    throw corrupt("its manifest does not describe the database");
  return m;
}

/** Refuses a target that holds anything. */
async function checkTarget(dir: string): Promise<void> {
  if (!existsSync(dir)) return;
  const entries = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
    throw new Error(`${dir} is not a directory (${err.code})`);
  });
  if (entries.length > 0) throw new Error(`${dir} is not empty: restore into a new or empty directory`);
}

export async function restoreArchive(opts: RestoreOptions): Promise<RestoreReport> {
  const target = resolve(opts.dataDir);
  await checkTarget(target);
  await mkdir(dirname(target), { recursive: true });
  const staging = join(dirname(target), `.${basename(target)}.restoring-${randomBytes(4).toString("hex")}`);
  await mkdir(staging, { mode: 0o700 });
  const blobDir = opts.blobDir ? resolve(opts.blobDir) : join(staging, "registry");
  const store = await openBlobStore({ blobDirectory: blobDir }, blobDir);
  try {
    const extract = tarExtract();
    const reading = pipeline(createReadStream(opts.file), createGunzip(), extract);
    reading.catch(() => undefined); // its error also ends the iteration below
    let manifest: BackupManifest | undefined;
    let database: Buffer | undefined;
    let key = false;
    const expected = new Map<string, { digest: string; size: number }>();
    const restored = new Set<string>();
    let bytes = 0;
    for await (const entry of extract) {
      const name = entry.header.name;
      if (!manifest) {
        if (name !== MANIFEST_ENTRY) throw corrupt(`it starts with ${JSON.stringify(name)}, not its manifest`);
        manifest = parseManifest(await readAll(entry, MAX_MANIFEST_BYTES, "the manifest"));
        for (const blob of manifest.blobs) expected.set(blobEntry(blob.digest), blob);
      } else if (name === DATABASE_ENTRY) {
        database = await readAll(entry, manifest.database.size, "the database");
        if (
          database.length !== manifest.database.size ||
          createHash("sha256").update(database).digest("hex") !== manifest.database.sha256
        )
          throw corrupt("the database snapshot does not match its manifest's sha256");
      } else if (name === KEY_ENTRY) {
        const text = (await readAll(entry, 4096, "the key")).toString("utf8");
        try {
          parseKeyEncryptionKey(text.trim(), "the backup's key-encryption key");
        } catch {
          throw corrupt("its key-encryption key is malformed");
        }
        await writeFile(join(staging, KEY_ENCRYPTION_KEY_FILE), text, { mode: 0o600 });
        key = true;
      } else {
        const blob = expected.get(name);
        if (!blob || restored.has(name)) throw corrupt(`unexpected entry ${JSON.stringify(name)}`);
        await restoreBlob(store, blob, entry);
        restored.add(name);
        bytes += blob.size;
      }
    }
    await reading;
    if (!manifest) throw corrupt("it is empty");
    if (!database) throw corrupt("it holds no database snapshot");
    if (!key) throw corrupt("it holds no key-encryption key");
    const missing = manifest.blobs.filter((b) => !restored.has(blobEntry(b.digest)));
    if (missing.length > 0) throw corrupt(`${missing.length} of its ${manifest.blobs.length} blobs are missing`);
    await restoreDataDir(staging, new Blob([database]));
    makePrivate(staging);
    if (existsSync(target)) await rmdir(target); // empty (checked): the rename takes its place
    await rename(staging, target);
    return { manifest, blobs: restored.size, bytes };
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    if (err instanceof CorruptArchive) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (
      code === "Z_DATA_ERROR" ||
      code === "Z_BUF_ERROR" ||
      /unexpected end|invalid tar|Invalid tar/i.test(String(err))
    )
      throw corrupt(`it is damaged or cut short (${(err as Error).message})`);
    throw err;
  } finally {
    await store.close();
  }
}

/** Writes one blob into the store, verifying its digest and size before it is committed. */
async function restoreBlob(
  store: Awaited<ReturnType<typeof openBlobStore>>,
  blob: { digest: string; size: number },
  body: AsyncIterable<unknown>,
): Promise<void> {
  const [algorithm, hex] = blob.digest.split(":") as [string, string];
  const hash = createHash(algorithm);
  const hashed = Readable.from(
    (async function* () {
      for await (const chunk of body) {
        hash.update(chunk as Buffer);
        yield chunk as Buffer;
      }
    })(),
    { objectMode: false },
  );
  const uploadId = randomUUID();
  const size = await store.appendUpload(uploadId, 0, hashed);
  if (size !== blob.size || hash.digest("hex") !== hex) {
    await store.deleteUpload(uploadId);
    throw corrupt(`blob ${blob.digest} does not match its digest`);
  }
  await store.commitUpload(uploadId, blob.digest, blob.size);
}
