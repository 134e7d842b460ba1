// Digests: "<algorithm>:<hex>", sha256 and sha512, verified while bytes stream past.
import { createHash, type Hash } from "node:crypto";
import { Transform, type TransformCallback } from "node:stream";
import { DIGEST_PATTERN } from "../storage/blob-store.js";

export type Algorithm = "sha256" | "sha512";

/** The grammar of any digest (the spec's), to tell "malformed" from "unsupported algorithm". */
const ANY_DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;

export function isDigest(value: string): boolean {
  return DIGEST_PATTERN.test(value);
}

export function looksLikeDigest(value: string): boolean {
  return ANY_DIGEST.test(value);
}

export function algorithmOf(digest: string): Algorithm {
  return digest.startsWith("sha512:") ? "sha512" : "sha256";
}

export function digestOf(bytes: Uint8Array, algorithm: Algorithm = "sha256"): string {
  return `${algorithm}:${createHash(algorithm).update(bytes).digest("hex")}`;
}

/** Passes bytes through unchanged while hashing and counting them. */
export class HashingStream extends Transform {
  bytes = 0;
  constructor(readonly hash: Hash) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    callback(null, chunk);
  }
}
