// Blobs (/v2/<name>/blobs/<digest>): pulled whole or by a byte range, and unlinked from the
// repo (the bytes go with the garbage collector once no repo links them).
import type { BlobStore, ByteRange } from "../storage/blob-store.js";
import type { BlobsRepository } from "../storage/blobs.js";
import { isDigest } from "./digest.js";
import { OciError, blobUnknown, digestInvalid } from "./errors.js";
import type { RegistryEvents } from "./events.js";
import type { RegistryMetrics } from "../metrics.js";
import { sendHead, type RepoRequest } from "./http.js";
import type { MethodHandlers } from "./router.js";

export interface BlobRouteDeps {
  blobs: BlobsRepository;
  store: BlobStore;
  events: RegistryEvents;
  metrics: RegistryMetrics;
}

/** DELETE unlinks, GET and HEAD pull (as does any other method, as it always has). */
export function blobHandlers(deps: BlobRouteDeps): MethodHandlers {
  return { DELETE: (r) => deleteBlob(deps, r), "*": (r) => getBlob(deps, r) };
}

async function getBlob(deps: BlobRouteDeps, r: RepoRequest) {
  const { request, reply, repo, reference: digest } = r;
  if (!isDigest(digest)) throw digestInvalid("unsupported or malformed digest");
  const blob = await deps.blobs.inRepo(repo.uid, digest);
  if (!blob) throw blobUnknown(digest);
  // HEAD answers what GET would: a store that lacks the bytes (not the one the pushing replica
  // used) is BLOB_UNKNOWN for both, never 200 then 404.
  if (request.method === "HEAD" && !(await deps.store.has(digest))) throw blobUnknown(digest);
  const range = parseRange(request.headers.range, blob.size);
  reply
    .header("content-type", "application/octet-stream")
    .header("docker-content-digest", digest)
    .header("etag", `"${digest}"`)
    .header("accept-ranges", "bytes");
  if (range === "unsatisfiable")
    throw new OciError(416, "RANGE_INVALID", "the requested range is not satisfiable", undefined, {
      "content-range": `bytes */${blob.size}`,
    });
  const length = range ? range.end - range.start + 1 : blob.size;
  reply.header("content-length", String(length));
  if (range) reply.code(206).header("content-range", `bytes ${range.start}-${range.end}/${blob.size}`);
  if (request.method === "HEAD") {
    await deps.events.pulled(r, { type: "blob", digest });
    return sendHead(reply);
  }
  const stream = length === 0 ? undefined : await deps.store.open(digest, range);
  if (length !== 0 && !stream) throw blobUnknown(digest);
  // Recorded once the bytes are known to be there, before the first of them leaves.
  try {
    await deps.events.pulled(r, { type: "blob", digest });
  } catch (err) {
    stream?.destroy();
    throw err;
  }
  deps.metrics.sent("blob", length);
  return reply.send(stream ?? Buffer.alloc(0));
}

async function deleteBlob(deps: BlobRouteDeps, { reply, repo, reference: digest }: RepoRequest) {
  if (!isDigest(digest)) throw digestInvalid("unsupported or malformed digest");
  const result = await deps.blobs.unlink(repo.uid, digest);
  if (result.kind === "not_found") throw blobUnknown(digest);
  if (result.kind === "referenced")
    throw new OciError(409, "DENIED", "the blob is referenced by a manifest in this repository", {
      manifest: result.by,
    });
  return reply.code(202).send();
}

/** A byte range of `size` bytes from a Range header; undefined for the whole. */
function parseRange(header: string | undefined, size: number): ByteRange | "unsatisfiable" | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined; // not a single range we serve: the whole blob
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(size - suffix, 0), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return "unsatisfiable";
  return { start, end };
}
