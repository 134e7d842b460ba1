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
import { pipeline } from "node:stream/promises";
import {
  UPLOAD_ID_PATTERN,
  checkDigest,
  checkSize,
  checkUploadId,
  type BlobStore,
  type ByteRange,
} from "./blob-store.js";

const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
const READ_CHUNK_BYTES = 1024 * 1024;

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

  private blobPath(digest: string): string {
    const { alg, hex } = checkDigest(digest);
    return join(this.blobsDir, alg, hex.slice(0, 2), hex);
  }

  private uploadPath(uploadId: string): string {
    checkUploadId(uploadId);
    return join(this.uploadsDir, uploadId);
  }

  async appendUpload(uploadId: string, offset: number, body: Readable): Promise<number> {
    const path = this.uploadPath(uploadId);
    checkSize("offset", offset);
    let fh: FileHandle;
    if (offset === 0) {
      await mkdir(this.uploadsDir, { recursive: true, mode: DIR_MODE });
      fh = await open(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, FILE_MODE);
    } else {
      // Not O_CREAT: staged bytes that vanished must not come back as zeros.
      fh = await open(path, constants.O_WRONLY | constants.O_APPEND).catch((err) => {
        throw errno(err) === "ENOENT" ? new Error(`upload ${uploadId} has no staged bytes (expected ${offset})`) : err;
      });
    }
    let streaming = false;
    try {
      const staged = (await fh.stat()).size;
      if (staged < offset) throw new Error(`upload ${uploadId} has ${staged} staged bytes, expected ${offset}`);
      // Bytes past `offset` are a chunk the database never recorded (a crash mid-append).
      if (staged > offset) await fh.truncate(offset);
      // O_APPEND: every write lands at the end, right after `offset`. The stream owns the handle
      // from here (a FileHandle cannot close while a stream holds it) and, with `flush`, fsyncs it
      // before closing, so the bytes are durable once the pipeline resolves.
      streaming = true;
      await pipeline(body, fh.createWriteStream({ flush: true }));
    } finally {
      if (!streaming) await fh.close();
    }
    if (offset === 0) await fsyncDir(this.uploadsDir);
    // The size on disk, not a count of what went by: that is what a later append continues from.
    return (await stat(path)).size;
  }

  readUpload(uploadId: string, size: number): Readable {
    const path = this.uploadPath(uploadId);
    checkSize("size", size);
    return Readable.from(readExactly(path, size), { objectMode: false });
  }

  async commitUpload(uploadId: string, digest: string, size: number): Promise<void> {
    const staging = this.uploadPath(uploadId);
    const target = this.blobPath(digest);
    checkSize("size", size);
    if (await this.has(digest)) {
      // Content-addressed: the bytes in place are the same bytes.
      await this.deleteUpload(uploadId);
      return;
    }
    const dir = dirname(target);
    const made = await mkdir(dir, { recursive: true, mode: DIR_MODE });
    let fh: FileHandle | undefined;
    try {
      fh = await open(staging, constants.O_RDWR);
    } catch (err) {
      if (errno(err) !== "ENOENT" || size !== 0) throw err;
    }
    if (fh === undefined) {
      // An empty blob needs no staged bytes; an empty file is whole the moment it exists.
      await writeFile(target, "", { mode: FILE_MODE, flag: "wx" }).catch((err) => {
        if (errno(err) !== "EEXIST") throw err;
      });
    } else {
      try {
        const staged = (await fh.stat()).size;
        if (staged < size) throw new Error(`upload ${uploadId} has ${staged} staged bytes, expected ${size}`);
        if (staged > size) await fh.truncate(size);
        await fh.sync();
      } finally {
        await fh.close();
      }
      // Atomic on one filesystem; a concurrent commit of the same digest renames identical bytes.
      await rename(staging, target);
      await fsyncDir(this.uploadsDir);
    }
    await fsyncDir(dir);
    // New prefix directories need their own names made durable, up to the existing ancestor.
    if (made !== undefined) {
      const top = dirname(made);
      for (let d = dir; d !== top && d !== dirname(d); d = dirname(d)) await fsyncDir(dirname(d));
    }
  }

  async deleteUpload(uploadId: string): Promise<void> {
    await unlinkIfPresent(this.uploadPath(uploadId));
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
    // 1 MiB reads: a quarter of the system calls and stream chunks of the 64 KiB default.
    const chunk = { highWaterMark: READ_CHUNK_BYTES };
    return fh.createReadStream(range ? { ...chunk, start: range.start, end: range.end } : chunk);
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
