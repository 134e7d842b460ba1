// Blob bytes on a local filesystem, under one root:
//   <root>/blobs/<alg>/<first 2 hex>/<hex>   content-addressed, immutable once in place
//   <root>/uploads/<uuid>                    staged bytes of an upload in progress
// Both trees share the root (one filesystem), so committing is a rename: a reader opens the whole
// blob or nothing. Everything is private to the owner (directories 0700, files 0600), and every
// acknowledged write is fsynced so it outlives a crash of the process or of the machine.
import { constants, createReadStream } from "node:fs";
import { mkdir, open, readdir, rename, stat, unlink, writeFile, type FileHandle } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import {
  UPLOAD_ID_PATTERN,
  checkDigest,
  checkSize,
  checkUploadId,
  type AppendOptions,
  type BlobStore,
  type ByteRange,
} from "./blob-store.js";
import { BlobFileStream } from "./blob-file-stream.js";

const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
/** Appended bytes are written this many at a time (or what is left): fewer, larger writes. */
const WRITE_BATCH_BYTES = 1024 * 1024;
/** ... and at most this many buffers (a body of tiny chunks is not held as a million objects). */
const WRITE_BATCH_BUFFERS = 256;

const errno = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code;

function checkRange(range: ByteRange): void {
  checkSize("range start", range.start);
  checkSize("range end", range.end);
  if (range.end < range.start) throw new Error(`invalid range: ${range.start}-${range.end}`);
}

/** Makes a directory entry durable (a new or renamed file's name, not only its bytes). */
async function fsyncDir(path: string): Promise<void> {
  const fh = await open(path, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

export class FilesystemBlobStore implements BlobStore {
  readonly kind = "filesystem";
  /** absolute, so paths compare equal to what mkdir reports */
  readonly root: string;
  private readonly blobsDir: string;
  private readonly uploadsDir: string;
  /** blob directories known to exist, their names durable (at most one per digest prefix) */
  private readonly knownDirs = new Set<string>();
  /** whether the uploads directory is known to exist */
  private uploadsDirMade = false;

  /** Directories are made when first needed; `open` makes them up front. */
  constructor(root: string) {
    this.root = resolve(root);
    this.blobsDir = join(this.root, "blobs");
    this.uploadsDir = join(this.root, "uploads");
  }

  /** A store whose directories exist (so a root that cannot be written fails at startup). */
  static async open(root: string): Promise<FilesystemBlobStore> {
    const store = new FilesystemBlobStore(root);
    await mkdir(store.blobsDir, { recursive: true, mode: DIR_MODE });
    await mkdir(store.uploadsDir, { recursive: true, mode: DIR_MODE });
    return store;
  }

  private async ensureUploadsDir(): Promise<void> {
    if (this.uploadsDirMade) return;
    await mkdir(this.uploadsDir, { recursive: true, mode: DIR_MODE });
    this.uploadsDirMade = true;
  }

  private blobPath(digest: string): string {
    const { alg, hex } = checkDigest(digest);
    return join(this.blobsDir, alg, hex.slice(0, 2), hex);
  }

  private uploadPath(uploadId: string): string {
    checkUploadId(uploadId);
    return join(this.uploadsDir, uploadId);
  }

  /**
   * Appends and the commit of one upload, one at a time in this process: a commit must not
   * rename a staging file another request still writes through its handle (its writes would land
   * in the committed blob).
   */
  readonly #uploadLocks = new Map<string, Promise<unknown>>();

  #exclusive<T>(uploadId: string, fn: () => Promise<T>): Promise<T> {
    const before = this.#uploadLocks.get(uploadId) ?? Promise.resolve();
    const mine = before.then(fn, fn);
    const settled = mine.then(
      () => undefined,
      () => undefined,
    );
    this.#uploadLocks.set(uploadId, settled);
    void settled.then(() => {
      if (this.#uploadLocks.get(uploadId) === settled) this.#uploadLocks.delete(uploadId);
    });
    return mine;
  }

  /**
   * The fdatasync of bytes a completing append staged, still running: the caller hashes them and
   * records the blob meanwhile, and the commit waits for it before it places them (so the bytes
   * are durable before their name is). Taken by the upload's next commit, delete or append.
   */
  readonly #syncing = new Map<string, Promise<void>>();

  #takeSync(uploadId: string): Promise<void> | undefined {
    const pending = this.#syncing.get(uploadId);
    this.#syncing.delete(uploadId);
    return pending;
  }

  appendUpload(uploadId: string, offset: number, body: Readable, options: AppendOptions = {}): Promise<number> {
    return this.#exclusive(uploadId, () => this.#append(uploadId, offset, body, options));
  }

  async #append(
    uploadId: string,
    offset: number,
    body: Readable,
    { completing = false }: AppendOptions,
  ): Promise<number> {
    const path = this.uploadPath(uploadId);
    checkSize("offset", offset);
    // A completing append's bytes that were neither committed nor dropped: never acknowledged,
    // whatever their sync did (this append truncates them away).
    await this.#takeSync(uploadId)?.catch(() => undefined);
    let fh: FileHandle;
    if (offset === 0) {
      await this.ensureUploadsDir();
      // Anything staged already is a first chunk the database never recorded: dropped.
      const create = () => open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, FILE_MODE);
      fh = await create().catch(async (err) => {
        // The uploads directory removed behind this process's back: made again.
        if (errno(err) !== "ENOENT") throw err;
        this.uploadsDirMade = false;
        await this.ensureUploadsDir();
        return create();
      });
    } else {
      // Not O_CREAT: staged bytes that vanished must not come back as zeros.
      fh = await open(path, constants.O_WRONLY).catch((err) => {
        throw errno(err) === "ENOENT" ? new Error(`upload ${uploadId} has no staged bytes (expected ${offset})`) : err;
      });
    }
    let written: number;
    try {
      if (offset > 0) {
        const staged = (await fh.stat()).size;
        if (staged < offset) throw new Error(`upload ${uploadId} has ${staged} staged bytes, expected ${offset}`);
        // Bytes past `offset` are a chunk the database never recorded (a crash mid-append).
        if (staged > offset) await fh.truncate(offset);
      }
      written = await writeBody(fh, body, offset);
    } catch (err) {
      await fh.close();
      throw err;
    }
    // The bytes and the file's size (fdatasync); the name, when it is new, below. Bytes the same
    // request commits are synced while it verifies and records them: the commit waits for it.
    const durable = fh.datasync().finally(() => fh.close());
    if (completing) {
      durable.catch(() => undefined); // awaited by the commit (or dropped with the staging)
      this.#syncing.set(uploadId, durable);
      return offset + written;
    }
    await durable;
    // A new staging's name is made durable before the bytes are acknowledged as a chunk; bytes
    // the same request commits need not be (the blob's own name is made durable then).
    if (offset === 0 && !completing) await fsyncDir(this.uploadsDir);
    return offset + written;
  }

  readUpload(uploadId: string, size: number): Readable {
    const path = this.uploadPath(uploadId);
    checkSize("size", size);
    return Readable.from(readExactly(path, size), { objectMode: false });
  }

  commitUpload(uploadId: string, digest: string, size: number): Promise<void> {
    return this.#exclusive(uploadId, () => this.#commit(uploadId, digest, size));
  }

  async #commit(uploadId: string, digest: string, size: number): Promise<void> {
    const staging = this.uploadPath(uploadId);
    const target = this.blobPath(digest);
    checkSize("size", size);
    const syncing = this.#takeSync(uploadId);
    syncing?.catch(() => undefined); // awaited below, before anything is placed
    if (await this.has(digest)) {
      // Content-addressed: the bytes in place are the same bytes.
      await syncing?.catch(() => undefined);
      await unlinkIfPresent(staging);
      return;
    }
    // The staged bytes are durable before they get the blob's name.
    await syncing;
    const dir = dirname(target);
    // Directories are never removed: one known to exist is not made again.
    const made = this.knownDirs.has(dir) ? undefined : await mkdir(dir, { recursive: true, mode: DIR_MODE });
    let staged: number | undefined;
    try {
      staged = (await stat(staging)).size;
    } catch (err) {
      if (errno(err) !== "ENOENT" || size !== 0) throw err;
    }
    if (staged === undefined) {
      // An empty blob needs no staged bytes; an empty file is whole the moment it exists.
      await writeFile(target, "", { mode: FILE_MODE, flag: "wx" }).catch((err) => {
        if (errno(err) !== "EEXIST") throw err;
      });
    } else {
      if (staged < size) throw new Error(`upload ${uploadId} has ${staged} staged bytes, expected ${size}`);
      // The first `size` bytes are durable already (every append syncs its bytes before it
      // answers); bytes past them are an unrecorded chunk, cut off here, durably.
      if (staged > size) {
        const fh = await open(staging, constants.O_RDWR);
        try {
          await fh.truncate(size);
          await fh.datasync();
        } finally {
          await fh.close();
        }
      }
      // Atomic on one filesystem; a concurrent commit of the same digest renames identical bytes.
      // The staging's name is not synced away: should a crash bring it back, it has no session and
      // the collector prunes it.
      await rename(staging, target).catch(async (err) => {
        // A blob directory removed behind this process's back: made again.
        if (errno(err) !== "ENOENT" || !this.knownDirs.delete(dir)) throw err;
        await mkdir(dir, { recursive: true, mode: DIR_MODE });
        await rename(staging, target);
      });
    }
    await fsyncDir(dir);
    // New prefix directories need their own names made durable, up to the existing ancestor.
    if (made !== undefined) {
      const top = dirname(made);
      for (let d = dir; d !== top && d !== dirname(d); d = dirname(d)) await fsyncDir(dirname(d));
    }
    this.knownDirs.add(dir);
  }

  /** Not one at a time: a cancel does not wait for a slow client's append (unlinked under it, its bytes go nowhere). */
  async deleteUpload(uploadId: string): Promise<void> {
    const path = this.uploadPath(uploadId);
    await this.#takeSync(uploadId)?.catch(() => undefined);
    await unlinkIfPresent(path);
  }

  async *listUploads(): AsyncIterable<{ uploadId: string; modified: Date }> {
    let names: string[];
    try {
      names = await readdir(this.uploadsDir);
    } catch (err) {
      if (errno(err) === "ENOENT") return;
      throw err;
    }
    for (const name of names) {
      if (!UPLOAD_ID_PATTERN.test(name)) continue;
      try {
        const st = await stat(join(this.uploadsDir, name));
        if (st.isFile()) yield { uploadId: name, modified: st.mtime };
      } catch (err) {
        // committed or deleted since readdir
        if (errno(err) !== "ENOENT") throw err;
      }
    }
  }

  async has(digest: string): Promise<boolean> {
    try {
      return (await stat(this.blobPath(digest))).isFile();
    } catch (err) {
      if (errno(err) === "ENOENT") return false;
      throw err;
    }
  }

  async open(digest: string, range?: ByteRange): Promise<Readable | undefined> {
    const path = this.blobPath(digest);
    if (range) checkRange(range);
    let fh: FileHandle;
    try {
      // Opened here, not lazily by the stream, so absence answers undefined rather than a stream
      // error, and a delete after this point cannot cut the read short.
      fh = await open(path, constants.O_RDONLY);
    } catch (err) {
      if (errno(err) === "ENOENT") return undefined;
      throw err;
    }
    return new BlobFileStream(fh, range?.start ?? 0, range?.end ?? Number.MAX_SAFE_INTEGER);
  }

  async delete(digest: string): Promise<void> {
    await unlinkIfPresent(this.blobPath(digest));
  }

  async close(): Promise<void> {}
}

async function unlinkIfPresent(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if (errno(err) !== "ENOENT") throw err;
  }
}

/**
 * Writes a body at `start` (and on), in batches of up to WRITE_BATCH_BYTES, the next batch read
 * while the last is written (so at most two are held); how many bytes. A failed write destroys
 * the body; a failed body fails the write.
 */
async function writeBody(fh: FileHandle, body: Readable, start: number): Promise<number> {
  let position = start;
  let batch: Buffer[] = [];
  let batched = 0;
  let writing: Promise<void> = Promise.resolve();
  const flush = () => {
    const buffers = batch;
    const at = position;
    position += batched;
    batch = [];
    batched = 0;
    writing = writeFully(fh, buffers, at);
    writing.catch(() => undefined); // awaited before the next batch or at the end
  };
  // Leaving the loop by an exception destroys the body.
  for await (const chunk of body as AsyncIterable<Buffer>) {
    batch.push(chunk);
    batched += chunk.length;
    if (batched >= WRITE_BATCH_BYTES || batch.length >= WRITE_BATCH_BUFFERS) {
      await writing;
      flush();
    }
  }
  await writing;
  if (batched > 0) {
    flush();
    await writing;
  }
  return position - start;
}

/** Every byte of `buffers` written at `position` (a short write continues where it stopped). */
async function writeFully(fh: FileHandle, buffers: Buffer[], position: number): Promise<void> {
  let left = buffers;
  while (left.length > 0) {
    const { bytesWritten } = await fh.writev(left, position);
    position += bytesWritten;
    let skip = bytesWritten;
    while (left.length > 0 && skip >= left[0]!.length) {
      skip -= left[0]!.length;
      left = left.slice(1);
    }
    if (left.length > 0 && skip > 0) left = [left[0]!.subarray(skip), ...left.slice(1)];
  }
}

/** The first `size` bytes of a file; fails rather than end early when the file is shorter. */
async function* readExactly(path: string, size: number): AsyncGenerator<Buffer> {
  if (size === 0) return;
  let seen = 0;
  for await (const chunk of createReadStream(path, { start: 0, end: size - 1 })) {
    seen += (chunk as Buffer).length;
    yield chunk as Buffer;
  }
  if (seen < size) throw new Error(`${path} has ${seen} bytes, expected ${size}`);
}
