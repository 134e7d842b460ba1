// Blob bytes in an S3-compatible bucket:
//   <prefix>blobs/<alg>/<hex>                     content-addressed, immutable once in place
//   <prefix>uploads/<uuid>/<start offset, 16 digits>   one object per appended chunk
// S3 objects cannot be appended to, so each append is its own object, keyed by where it starts
// (zero-padded so that key order is byte order). A PUT (or a multipart completion) is atomic: a
// chunk cut short by a crash never exists, and readers see a whole blob or none.
// The credentials need s3:ListBucket as well as Get/Put/DeleteObject: without it S3 answers 403
// instead of 404 for absent keys.
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  S3Client,
  type _Object,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { Readable } from "node:stream";
import {
  UPLOAD_ID_PATTERN,
  checkDigest,
  checkSize,
  checkUploadId,
  type BlobStore,
  type ByteRange,
} from "./blob-store.js";
import type { ObjectStorageSettings } from "../../storage/object-storage.js";

/** The bucket the store keeps blobs in. */
export type S3Settings = ObjectStorageSettings;

const CHUNK_NAME = /^[0-9]{16}$/;
// CopyObject's limit; larger blobs are streamed through instead.
const MAX_COPY_SIZE = 5 * 1024 ** 3;
// Deletes are one request per key (DeleteObjects is missing from some S3-compatible servers).
const DELETE_CONCURRENCY = 8;

interface Chunk {
  key: string;
  start: number;
  size: number;
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | undefined;
  // A missing bucket is a misconfiguration to report, not an absent blob. (HeadObject has no error
  // body to tell the two apart: its 404 arrives as "NotFound" either way.)
  if (e?.name === "NoSuchBucket") return false;
  return e?.name === "NoSuchKey" || e?.name === "NotFound" || e?.$metadata?.httpStatusCode === 404;
}

function asReadable(body: unknown): Readable {
  if (body instanceof Readable) return body;
  throw new Error("S3 answered a body that is not a Node stream");
}

async function forEachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export class S3BlobStore implements BlobStore {
  readonly kind = "s3";
  readonly bucket: string;
  readonly prefix: string;
  private readonly client: S3Client;

  constructor(settings: S3Settings) {
    const { endpoint, region, bucket, prefix = "", accessKeyId, secretAccessKey, forcePathStyle } = settings;
    if (!bucket) throw new Error("S3 settings: bucket is required");
    if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
      throw new Error("S3 settings: accessKeyId and secretAccessKey go together");
    }
    this.bucket = bucket;
    this.prefix = prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`;
    this.client = new S3Client({
      endpoint,
      region,
      forcePathStyle,
      credentials: accessKeyId !== undefined ? { accessKeyId, secretAccessKey: secretAccessKey! } : undefined,
      // Only the checksums S3 requires: S3-compatible servers that predate the flexible checksums
      // reject (or mangle) the aws-chunked bodies and trailers the SDK sends by default.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
  }

  private blobKey(digest: string): string {
    const { alg, hex } = checkDigest(digest);
    return `${this.prefix}blobs/${alg}/${hex}`;
  }

  private uploadPrefix(uploadId: string): string {
    checkUploadId(uploadId);
    return `${this.prefix}uploads/${uploadId}/`;
  }

  private chunkKey(uploadId: string, start: number): string {
    return `${this.uploadPrefix(uploadId)}${String(start).padStart(16, "0")}`;
  }

  private async *list(prefix: string): AsyncGenerator<_Object> {
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      yield* page.Contents ?? [];
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /** An upload's chunk objects, in byte order. */
  private async chunks(uploadId: string): Promise<Chunk[]> {
    const prefix = this.uploadPrefix(uploadId);
    const chunks: Chunk[] = [];
    for await (const obj of this.list(prefix)) {
      const name = obj.Key?.slice(prefix.length) ?? "";
      if (CHUNK_NAME.test(name)) chunks.push({ key: obj.Key!, start: Number(name), size: obj.Size ?? 0 });
    }
    return chunks.sort((a, b) => a.start - b.start);
  }

  private async deleteKeys(keys: string[]): Promise<void> {
    await forEachLimited(keys, DELETE_CONCURRENCY, async (key) => {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    });
  }

  async appendUpload(uploadId: string, offset: number, body: Readable): Promise<number> {
    checkSize("offset", offset);
    const key = this.chunkKey(uploadId, offset);
    const chunks = await this.chunks(uploadId);
    checkContiguous(
      uploadId,
      chunks.filter((c) => c.start < offset),
      offset,
    );
    // Chunks at or past `offset` were stored but never recorded (a crash before the database
    // caught up): the new chunk replaces them.
    await this.deleteKeys(chunks.filter((c) => c.start >= offset && c.key !== key).map((c) => c.key));
    let received = 0;
    const counted = Readable.from(
      (async function* () {
        for await (const b of body) {
          received += (b as Buffer).length;
          yield b as Buffer;
        }
      })(),
      { objectMode: false },
    );
    try {
      // Streams in parts (buffering at most queueSize × partSize), a plain PUT when small.
      await new Upload({ client: this.client, params: { Bucket: this.bucket, Key: key, Body: counted } }).done();
    } catch (err) {
      // As stream.pipeline does: a body read partway is of no use to anyone else.
      body.destroy();
      throw err;
    }
    return offset + received;
  }

  readUpload(uploadId: string, size: number): Readable {
    checkUploadId(uploadId);
    checkSize("size", size);
    return Readable.from(this.readChunks(uploadId, size), { objectMode: false });
  }

  private async *readChunks(uploadId: string, size: number): AsyncGenerator<Buffer> {
    if (size === 0) return;
    let pos = 0;
    for (const chunk of await this.chunks(uploadId)) {
      if (pos >= size) break;
      if (chunk.size === 0) continue;
      if (chunk.start !== pos) throw new Error(`upload ${uploadId}: chunk at ${chunk.start}, expected one at ${pos}`);
      const want = Math.min(chunk.size, size - pos);
      const res = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: chunk.key,
          Range: want < chunk.size ? `bytes=0-${want - 1}` : undefined,
        }),
      );
      // slice() too: a server ignoring Range must not leak bytes past `size`
      for await (const part of slice(asReadable(res.Body), 0, want)) {
        pos += part.length;
        yield part;
      }
    }
    if (pos < size) throw new Error(`upload ${uploadId} has ${pos} staged bytes, expected ${size}`);
  }

  async commitUpload(uploadId: string, digest: string, size: number): Promise<void> {
    const key = this.blobKey(digest);
    checkUploadId(uploadId);
    checkSize("size", size);
    if (!(await this.has(digest))) {
      const chunks = await this.chunks(uploadId);
      const first = chunks[0];
      if (first && first.start === 0 && first.size === size && size <= MAX_COPY_SIZE) {
        // Server-side copy: the bytes do not travel through this process.
        const source = `${this.bucket}/${first.key}`.split("/").map(encodeURIComponent).join("/");
        await this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: key, CopySource: source }));
      } else {
        const body = this.readUpload(uploadId, size);
        await new Upload({ client: this.client, params: { Bucket: this.bucket, Key: key, Body: body } }).done();
      }
    }
    await this.deleteUpload(uploadId);
  }

  async deleteUpload(uploadId: string): Promise<void> {
    await this.deleteKeys((await this.chunks(uploadId)).map((c) => c.key));
  }

  async *listUploads(): AsyncIterable<{ uploadId: string; modified: Date }> {
    const prefix = `${this.prefix}uploads/`;
    // Keys arrive sorted, so one upload's chunks are adjacent: answer each as its run ends.
    let current: { uploadId: string; modified: Date } | undefined;
    for await (const obj of this.list(prefix)) {
      const [uploadId, name, ...rest] = (obj.Key ?? "").slice(prefix.length).split("/");
      if (!uploadId || !UPLOAD_ID_PATTERN.test(uploadId) || !name || !CHUNK_NAME.test(name) || rest.length > 0)
        continue;
      const modified = obj.LastModified ?? new Date(0);
      if (current?.uploadId === uploadId) {
        if (modified > current.modified) current.modified = modified;
      } else {
        if (current) yield current;
        current = { uploadId, modified };
      }
    }
    if (current) yield current;
  }

  async has(digest: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.blobKey(digest) }));
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  async open(digest: string, range?: ByteRange): Promise<Readable | undefined> {
    const key = this.blobKey(digest);
    if (range) {
      checkSize("range start", range.start);
      checkSize("range end", range.end);
      if (range.end < range.start) throw new Error(`invalid range: ${range.start}-${range.end}`);
    }
    try {
      const res = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      const body = asReadable(res.Body);
      if (!range) return body;
      const { start, end } = range;
      const served = /^bytes (\d+)-(\d+)\//.exec(res.ContentRange ?? "");
      if (served && Number(served[1]) === start && Number(served[2]) === end) return body;
      // Not the range asked for: s3rver, for one, reads `bytes=0-0` as "from 0 to the end", and
      // some servers ignore Range and answer 200 with everything. Cut the bytes asked for out of
      // what came (a range starting past the object is a 416, thrown above).
      let from: number;
      if (served) from = Number(served[1]);
      else if (res.$metadata.httpStatusCode === 200) from = 0;
      else return body; // a 206 without Content-Range: take it at its word
      return Readable.from(slice(body, start - from, end - start + 1), { objectMode: false });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async delete(digest: string): Promise<void> {
    // S3 answers 204 whether or not the key existed
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.blobKey(digest) }));
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}

/** `length` bytes of `body` after skipping `skip`; fails if the body ends first. */
async function* slice(body: Readable, skip: number, length: number): AsyncGenerator<Buffer> {
  if (skip < 0) throw new Error("S3 answered a range starting after the one asked for");
  let pos = 0;
  const end = skip + length;
  for await (const b of body) {
    const buf = b as Buffer;
    const from = Math.max(skip - pos, 0);
    const to = Math.min(end - pos, buf.length);
    pos += buf.length;
    if (to > from) yield buf.subarray(from, to);
    if (pos >= end) return;
  }
  throw new Error(`S3 answered ${Math.max(pos - skip, 0)} bytes of a ${length}-byte range`);
}

/** The kept chunks must cover [0, offset) end to end, or bytes the caller counts on are gone. */
function checkContiguous(uploadId: string, kept: Chunk[], offset: number): void {
  let pos = 0;
  for (const c of kept) {
    if (c.start !== pos) throw new Error(`upload ${uploadId}: chunk at ${c.start}, expected one at ${pos}`);
    pos += c.size;
  }
  if (pos !== offset) {
    // pos > offset: a chunk straddles offset, which only a caller with a wrong offset can ask for
    throw new Error(`upload ${uploadId} has ${pos} staged bytes before ${offset}, expected exactly ${offset}`);
  }
}
