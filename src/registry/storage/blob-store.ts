// Where blob bytes live: content-addressed objects plus the staging area of uploads in progress.
// The database holds what exists (blobs, links, upload sessions); a store only holds bytes, so
// two implementations (filesystem, S3-compatible) answer to one contract. Nothing here hashes
// or checks content: callers verify digests while streaming (registry/oci).
//
// Names: a digest is "sha256:<64 hex>" or "sha512:<128 hex>", an upload id a UUID, both in
// lowercase; a store refuses anything else with an Error, so no name can reach outside its root.
// Callers serialize the calls that touch one upload (one append or commit at a time).
import type { Readable } from "node:stream";

/** Inclusive byte range, as HTTP Range speaks it. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface AppendOptions {
  completing?: boolean;
}

export interface BlobStore {
  /** "filesystem" or "s3", for logs and the bench */
  readonly kind: string;
  /**
   * Appends `body` to upload `uploadId`'s staged bytes. `offset` is the number of bytes the
   * caller knows are staged (from the database); anything beyond it (a chunk cut short by a crash)
   * is discarded first. Streams, never buffers the whole body. Answers the staged size after,
   * once the bytes are durable. Fails, changing nothing and leaving `body` unread, when fewer than
   * `offset` bytes are staged (staging lost); a body that fails partway is destroyed.
   * `completing`: the caller commits these bytes (or drops them) before it acknowledges anything,
   * so only their content needs to be durable by then, not the staging's own name; a store may
   * answer before their content is durable, and then makes it so in `commitUpload` before it
   * places them.
   */
  appendUpload(uploadId: string, offset: number, body: Readable, options?: AppendOptions): Promise<number>;
  /**
   * The first `size` staged bytes of an upload, from the start (to hash them after a restart). The
   * stream errors if fewer are staged.
   */
  readUpload(uploadId: string, size: number): Readable;
  /**
   * Makes the first `size` staged bytes the blob `digest` ("sha256:<hex>"), atomically: a reader
   * sees the whole blob or none. Committing a digest that already exists is not an error (the
   * staged bytes are then dropped). Staged bytes past `size` are dropped; fewer than `size` is an
   * error. An empty blob (`size` 0) needs no staged bytes. The upload's staging is gone afterwards.
   */
  commitUpload(uploadId: string, digest: string, size: number): Promise<void>;
  /** Drops an upload's staged bytes (cancel, expiry); absent already is fine. */
  deleteUpload(uploadId: string): Promise<void>;
  /** Upload ids with staged bytes and when they last changed (for pruning abandoned ones). */
  listUploads(): AsyncIterable<{ uploadId: string; modified: Date }>;
  /** Whether the blob's bytes exist. */
  has(digest: string): Promise<boolean>;
  /**
   * The blob's bytes (a range of them); undefined when absent. The caller keeps the range within
   * the blob's size (which it knows); past the end, what happens is up to the backend.
   */
  open(digest: string, range?: ByteRange): Promise<Readable | undefined>;
  /** Removes a blob's bytes; absent already is fine. */
  delete(digest: string): Promise<void>;
  /** Releases clients and handles. */
  close(): Promise<void>;
}

/** The digests this registry stores: sha256 and sha512, lowercase hex. */
export const DIGEST_PATTERN = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;
/** Upload ids: lowercase UUIDs (an id names a file or key: two spellings must not name two uploads). */
export const UPLOAD_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// Callers validate digests and ids already; the stores check again so a bad one can never name a
// path or key outside the store's root.

/** The digest's algorithm and hex, or an Error. */
export function checkDigest(digest: string): { alg: string; hex: string } {
  if (typeof digest !== "string" || !DIGEST_PATTERN.test(digest)) {
    throw new Error(`invalid blob digest: ${JSON.stringify(digest)}`);
  }
  const [alg, hex] = digest.split(":") as [string, string];
  return { alg, hex };
}

export function checkUploadId(uploadId: string): void {
  if (typeof uploadId !== "string" || !UPLOAD_ID_PATTERN.test(uploadId)) {
    throw new Error(`invalid upload id: ${JSON.stringify(uploadId)}`);
  }
}

export function checkSize(what: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`invalid ${what}: ${n}`);
}
