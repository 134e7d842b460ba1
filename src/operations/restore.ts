// `bulwark restore`: a backup archive (archive.ts) back into a new data directory. Everything is
// written to a temporary directory beside the target and verified (the manifest; each database
// file's name, size and sha256 and each blob's size and digest while it is written, never more
// bytes than the manifest gives) before PGlite opens the database once to check it starts, and
// one rename makes it the data directory: a corrupt, cut-short or crafted archive is a clear error
// and leaves nothing half made. Only PostgreSQL's own files are written from the database part
// (storage/db.ts's isDatabasePath), as regular files: no other name, no `..`, no link.
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream, existsSync } from "node:fs";
import { mkdir, readdir, rename, rm, rmdir, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { extract as tarExtract } from "tar-stream";
import { openBlobStore } from "../registry/api.js";
import { KEY_ENCRYPTION_KEY_FILE, makePrivate, parseKeyEncryptionKey } from "../storage/data-dir.js";
import { checkRestoredDataDir, isDatabasePath } from "../storage/db.js";
import { LOCK_FILE } from "../storage/data-dir.js";
import {
  ARCHIVE_FORMAT,
  ARCHIVE_VERSION,
  KEY_ENTRY,
  MANIFEST_ENTRY,
  blobEntry,
  databaseBytes,
  databaseEntry,
  type BackupManifest,
  type DatabaseFile,
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
  /** the blobs' bytes */
  bytes: number;
  databaseBytes: number;
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
  const validFile = (f: unknown) =>
    isDatabasePath((f as { name?: unknown })?.name as string) &&
    Number.isSafeInteger((f as { size?: unknown }).size) &&
    (f as { size: number }).size >= 0 &&
    /^[0-9a-f]{64}$/.test(String((f as { sha256?: unknown }).sha256));
  const { directories, files } = (m.database ?? {}) as Partial<BackupManifest["database"]>;
  if (
    !Array.isArray(directories) ||
    !directories.every((d) => isDatabasePath(d, true)) ||
    !Array.isArray(files) ||
    !files.every(validFile) ||
    new Set(files.map((f) => f.name)).size !== files.length ||
    !files.some((f) => f.name === "PG_VERSION")
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
  let reading: Promise<void> | undefined;
  try {
    const extract = tarExtract();
    reading = pipeline(createReadStream(opts.file), createGunzip(), extract);
    reading.catch(() => undefined); // its error also ends the iteration below
    let manifest: BackupManifest | undefined;
    let key = false;
    const expectedFiles = new Map<string, DatabaseFile>();
    const expectedBlobs = new Map<string, { digest: string; size: number }>();
    const restored = new Set<string>();
    let bytes = 0;
    for await (const entry of extract) {
      const name = entry.header.name;
      // regular files only: a link, a directory or a device is nothing a backup holds
      if (entry.header.type !== "file") throw corrupt(`its entry ${JSON.stringify(name)} is not a regular file`);
      const size = entry.header.size ?? 0;
      if (!manifest) {
        if (name !== MANIFEST_ENTRY) throw corrupt(`it starts with ${JSON.stringify(name)}, not its manifest`);
        if (size > MAX_MANIFEST_BYTES) throw corrupt("its manifest is larger than a manifest can be");
        manifest = parseManifest(await readAll(entry, MAX_MANIFEST_BYTES, "the manifest"));
        for (const directory of manifest.database.directories)
          await mkdir(join(staging, ...directory.split("/")), { recursive: true, mode: 0o700 });
        for (const file of manifest.database.files) expectedFiles.set(databaseEntry(file.name), file);
        for (const blob of manifest.blobs) expectedBlobs.set(blobEntry(blob.digest), blob);
        continue;
      }
      if (restored.has(name)) throw corrupt(`it holds ${JSON.stringify(name)} twice`);
      const file = expectedFiles.get(name);
      const blob = expectedBlobs.get(name);
      if (name === KEY_ENTRY) {
        const text = (await readAll(entry, 4096, "the key")).toString("utf8");
        try {
          parseKeyEncryptionKey(text.trim(), "the backup's key-encryption key");
        } catch {
          throw corrupt("its key-encryption key is malformed");
        }
        await writeFile(join(staging, KEY_ENCRYPTION_KEY_FILE), text, { mode: 0o600, flag: "wx" });
        key = true;
      } else if (file) {
        if (size !== file.size) throw corrupt(`${name} is not the size its manifest gives`);
        await restoreDatabaseFile(join(staging, ...file.name.split("/")), file, entry);
      } else if (blob) {
        if (size !== blob.size) throw corrupt(`${name} is not the size its manifest gives`);
        await restoreBlob(store, blob, entry);
        bytes += blob.size;
      } else {
        throw corrupt(`unexpected entry ${JSON.stringify(name)}`);
      }
      restored.add(name);
    }
    await reading;
    if (!manifest) throw corrupt("it is empty");
    const missingFiles = [...expectedFiles.keys()].filter((name) => !restored.has(name));
    if (missingFiles.length > 0)
      throw corrupt(`${missingFiles.length} of the database's ${expectedFiles.size} files are missing`);
    if (!key) throw corrupt("it holds no key-encryption key");
    const missing = manifest.blobs.filter((b) => !restored.has(blobEntry(b.digest)));
    if (missing.length > 0) throw corrupt(`${missing.length} of its ${manifest.blobs.length} blobs are missing`);
    // Neither is ever in an archive: a server's lock or PostgreSQL's pid file in a new directory
    // would name a process of another host (or this one) and keep every server out.
    for (const stray of [LOCK_FILE, "postmaster.pid"]) await rm(join(staging, stray), { force: true });
    await checkRestoredDataDir(staging);
    makePrivate(staging);
    if (existsSync(target)) await rmdir(target); // empty (checked): the rename takes its place
    await rename(staging, target);
    return { manifest, blobs: manifest.blobs.length, bytes, databaseBytes: databaseBytes(manifest) };
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    if (err instanceof CorruptArchive) throw err;
    // A file cut short fails the reading; what was taking an entry in meanwhile sees only that
    // entry's stream destroyed ("Stream was destroyed"), so the reading's own error is asked too.
    // It settles: leaving the loop above destroyed the extraction.
    const readingError = await reading?.then(
      () => undefined,
      (e: unknown) => e,
    );
    const damage = damageOf(err) ?? damageOf(readingError);
    if (damage) throw corrupt(`it is damaged or cut short (${damage.message})`);
    throw err;
  } finally {
    await store.close();
  }
}

/** The body's bytes, failing once there are more than `size` (whatever the tar header said). */
async function* atMost(body: AsyncIterable<unknown>, size: number, what: string): AsyncGenerator<Buffer> {
  let seen = 0;
  for await (const chunk of body) {
    seen += (chunk as Buffer).length;
    if (seen > size) throw corrupt(`${what} is larger than its manifest gives`);
    yield chunk as Buffer;
  }
}

/** The error, if it says the archive is damaged or cut short (gzip's or tar's complaint). */
function damageOf(err: unknown): Error | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "Z_DATA_ERROR" ||
    code === "Z_BUF_ERROR" ||
    /unexpected end|invalid tar|Invalid tar/i.test(String(err))
    ? (err as Error)
    : undefined;
}

/** Writes one of PostgreSQL's files (a new regular file), verifying its size and sha256. */
async function restoreDatabaseFile(path: string, file: DatabaseFile, body: AsyncIterable<unknown>): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const hash = createHash("sha256");
  let written = 0;
  await pipeline(
    Readable.from(
      (async function* () {
        for await (const chunk of atMost(body, file.size, file.name)) {
          hash.update(chunk);
          written += chunk.length;
          yield chunk;
        }
      })(),
      { objectMode: false },
    ),
    createWriteStream(path, { flags: "wx", mode: 0o600 }),
  );
  if (written !== file.size || hash.digest("hex") !== file.sha256)
    throw corrupt(`the database file ${file.name} does not match its manifest's sha256`);
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
      for await (const chunk of atMost(body, blob.size, `blob ${blob.digest}`)) {
        hash.update(chunk);
        yield chunk;
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
