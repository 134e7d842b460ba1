// Blob uploads (/v2/<name>/blobs/uploads/[<id>]): a session is started (or a blob mounted from
// another repo, or pushed whole in one request), fed in chunks, and completed with the digest
// the bytes must have. The bytes stream into the blob store as they arrive; the acknowledged size
// is recorded after each chunk; completion verifies the digest, records the blob, moves the
// bytes into place and links it into the repo.
import { randomUUID, createHash, type Hash } from "node:crypto";
import { Writable, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { FastifyReply, FastifyRequest } from "fastify";
import { isRepositoryName, type RepositoryNames } from "../names.js";
import type { BlobStore } from "../storage/blob-store.js";
import { UploadMovedError, type BlobsRepository } from "../storage/blobs.js";
import type { UploadRow, UploadsRepository } from "../storage/uploads.js";
import { HashingStream, algorithmOf, isDigest, looksLikeDigest, type Algorithm } from "./digest.js";
import { OciError, digestInvalid, nameUnknown, uploadUnknown } from "./errors.js";
import type { RegistryEvents } from "./events.js";
import type { RegistryMetrics } from "../metrics.js";
import { queryOf, unsupported, type RepoRequest } from "./http.js";
import { ACTION_CAPABILITIES, granted, type MethodHandlers, type RepoHandler } from "./router.js";

export interface UploadRouteDeps {
  uploads: UploadsRepository;
  blobs: BlobsRepository;
  names: RepositoryNames;
  store: BlobStore;
  events: RegistryEvents;
  metrics: RegistryMetrics;
  now(): Date;
}

/** The upload routes' dependencies and the running hashes of the uploads this process feeds. */
interface Uploading extends UploadRouteDeps {
  hashes: UploadHashes;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Running hashes of uploads fed in order by this process: sha256 unless the client named the
 * digest up front. Finishing without one (after a restart, on another replica, another
 * algorithm) re-reads the staged bytes.
 */
class UploadHashes {
  private readonly hashes = new Map<string, { hash: Hash; size: number; algorithm: Algorithm }>();
  take(id: string, offset: number, algorithm: Algorithm): Hash | undefined {
    const entry = this.hashes.get(id);
    this.hashes.delete(id);
    if (entry && entry.size === offset && entry.algorithm === algorithm) return entry.hash;
    return offset === 0 ? createHash(algorithm) : undefined;
  }
  keep(id: string, hash: Hash, size: number, algorithm: Algorithm) {
    // Bounded: beyond it, finishing an upload re-reads its bytes (correct, just slower).
    if (this.hashes.size >= 10_000) this.hashes.delete(this.hashes.keys().next().value!);
    this.hashes.set(id, { hash, size, algorithm });
  }
  drop(id: string) {
    this.hashes.delete(id);
  }
}

/**
 * `uploads` (.../blobs/uploads/): POST starts one (any other method is unsupported); `upload`
 * (.../blobs/uploads/<id>): GET its progress, PATCH a chunk, PUT the end, DELETE a cancel, each
 * on a session of this repo (any other method is unsupported, once the session is found).
 */
export function uploadHandlers(deps: UploadRouteDeps): { uploads: MethodHandlers; upload: MethodHandlers } {
  const u: Uploading = { ...deps, hashes: new UploadHashes() };
  const session =
    (handle: (r: RepoRequest, upload: UploadRow) => Promise<unknown>): RepoHandler =>
    async (r) =>
      handle(r, await openSession(u, r));
  return {
    uploads: { POST: (r) => startUpload(u, r) },
    upload: {
      GET: session(async (r, upload) => progress(r, upload, 204).send()),
      PATCH: session((r, upload) => appendChunk(u, r, upload)),
      PUT: session((r, upload) => completeUpload(u, r, upload)),
      DELETE: session((r, upload) => cancelUpload(u, r, upload)),
      "*": session(async () => {
        throw unsupported();
      }),
    },
  };
}

const uploadLocation = (name: string, id: string) => `/v2/${name}/blobs/uploads/${id}`;
const rangeHeader = (size: number) => `0-${Math.max(size - 1, 0)}`;

/** POST .../blobs/uploads/: a mount, a monolithic push (`digest`), or a new session. */
async function startUpload(u: Uploading, r: RepoRequest) {
  const { request, reply, name, repo } = r;
  const query = queryOf(request);
  if (query.mount !== undefined && query.from !== undefined && isDigest(query.mount)) {
    if (await mount(u, r, query.from, query.mount)) {
      return reply
        .code(201)
        .header("location", `/v2/${name}/blobs/${query.mount}`)
        .header("docker-content-digest", query.mount)
        .send();
    }
  }
  const id = randomUUID();
  if (query.digest !== undefined) {
    // Monolithic: the whole blob in this request, hashed as it streams with the named algorithm.
    // No session is recorded: nothing is acknowledged before the blob is (staged bytes a crash
    // leaves behind have no session, and the collector prunes them).
    const size = await append(u, request, id, 0, algorithmOfParameter(query.digest), { completing: true }).catch(
      async (err: unknown) => {
        // No session can continue it: its staged bytes go now.
        u.hashes.drop(id);
        await u.store.deleteUpload(id).catch(() => undefined);
        throw err;
      },
    );
    return finish(u, r, { id, size: undefined }, query.digest, size);
  }
  await u.uploads.create(id, repo.uid, u.now());
  return reply
    .code(202)
    .header("location", uploadLocation(name, id))
    .header("docker-upload-uuid", id)
    .header("range", "0-0")
    .send();
}

/** Links a blob from another repo the caller may pull (else the client gets a plain upload); a push's event. */
async function mount(u: Uploading, r: RepoRequest, from: string, digest: string): Promise<boolean> {
  const { call, repo } = r;
  if (!isRepositoryName(from)) return false;
  const source = await u.names.resolve(from);
  if (!source?.repo) return false;
  const pullable = source.repo.public || (call.access?.can(ACTION_CAPABILITIES.pull, source.repo.uid) ?? false);
  if (!pullable || !granted(call, from, "pull")) return false;
  return u.events.inPush(async () => {
    const mounted = await u.blobs.mount(repo.uid, source.repo!.uid, digest, u.now());
    if (mounted) await u.events.pushed(r, { type: "blob", digest });
    return mounted;
  });
}

/** The session a request names in this repo (a malformed or unknown id is BLOB_UPLOAD_UNKNOWN). */
async function openSession(u: Uploading, { repo, reference: id }: RepoRequest): Promise<UploadRow> {
  if (!UUID.test(id)) throw uploadUnknown();
  const upload = await u.uploads.get(id, repo.uid);
  if (!upload) throw uploadUnknown();
  return upload;
}

/** The session's state: where to continue, and what is acknowledged so far. */
function progress({ reply, name }: RepoRequest, upload: UploadRow, code: number): FastifyReply {
  return reply
    .code(code)
    .header("location", uploadLocation(name, upload.id))
    .header("docker-upload-uuid", upload.id)
    .header("range", rangeHeader(upload.size));
}

/** DELETE: the session and its staged bytes go. */
async function cancelUpload(u: Uploading, { reply }: RepoRequest, upload: UploadRow) {
  if (!(await u.uploads.delete(upload.id))) throw uploadUnknown();
  u.hashes.drop(upload.id);
  await u.store.deleteUpload(upload.id);
  return reply.code(204).send();
}

/** PATCH: a chunk, which must start where the upload ends and be as long as its range says (when it says). */
async function appendChunk(u: Uploading, r: RepoRequest, upload: UploadRow) {
  const range = r.request.headers["content-range"];
  const refuse = (message: string, detail: unknown) =>
    new OciError(416, "BLOB_UPLOAD_INVALID", message, detail, {
      location: uploadLocation(r.name, upload.id),
      range: rangeHeader(upload.size),
    });
  let length: number | undefined;
  if (range !== undefined) {
    const m = /^(?:bytes )?(\d+)-(\d+)$/.exec(range);
    if (!m || Number(m[1]) !== upload.size || Number(m[2]) < Number(m[1]))
      throw refuse("the chunk does not start where the upload ends", { expectedStart: upload.size });
    length = Number(m[2]) - Number(m[1]) + 1;
    const declared = r.request.headers["content-length"];
    if (declared !== undefined && Number(declared) !== length)
      throw refuse("Content-Range and Content-Length disagree", { range, contentLength: declared });
  }
  const size = await append(u, r.request, upload.id, upload.size, "sha256", { rangeLength: length });
  return progress(r, { ...upload, size }, 202).send();
}

/** PUT: the last chunk (if any) and the digest the whole must have. */
async function completeUpload(u: Uploading, r: RepoRequest, upload: UploadRow) {
  const { request } = r;
  const digest = queryOf(request).digest;
  if (digest === undefined) throw digestInvalid("the digest query parameter is required");
  const algorithm = algorithmOfParameter(digest);
  // The last chunk is not recorded on its own: the session ends in the blob's transaction, if it
  // still holds the size read above.
  const size = request.body
    ? await append(u, request, upload.id, upload.size, algorithm, { completing: true })
    : upload.size;
  return finish(u, r, { id: upload.id, size: upload.size }, digest, size);
}

/**
 * Streams the request body onto the upload after `offset` bytes; the new staged size, recorded as
 * the session's acknowledged size unless the same request completes the upload (`completing`).
 */
async function append(
  u: Uploading,
  request: FastifyRequest,
  id: string,
  offset: number,
  algorithm: Algorithm,
  {
    rangeLength,
    completing = false,
  }: {
    /** the chunk's length by its Content-Range, if it has one */
    rangeLength?: number;
    /** the blob is made of these bytes before this request is answered: no size is recorded */
    completing?: boolean;
  } = {},
): Promise<number> {
  const body = request.body as Readable | undefined;
  // An empty body adds nothing: the store is not asked (its staged bytes may already be in place).
  if (!body || request.headers["content-length"] === "0") return offset;
  const hash = u.hashes.take(id, offset, algorithm);
  const counted = new HashingStream(hash ?? createHash("sha256"));
  let size: number;
  const feeding = pipeline(body, counted);
  feeding.catch(() => undefined); // awaited below; a store failure must not leave it unobserved
  try {
    size = await u.store.appendUpload(id, offset, counted, { completing });
    await feeding;
  } catch (err) {
    counted.destroy();
    // A body cut short: nothing beyond `offset` counts (the store drops it on the next append).
    throw new OciError(400, "BLOB_UPLOAD_INVALID", "the upload's body could not be read in full", {
      reason: (err as Error).message?.slice(0, 200),
    });
  } finally {
    u.metrics.received(counted.bytes);
  }
  const declared = request.headers["content-length"];
  if (declared !== undefined && Number(declared) !== counted.bytes)
    throw new OciError(400, "BLOB_UPLOAD_INVALID", "the body's length differs from Content-Length");
  // A chunked body has no Content-Length to check up front; its range is checked once it is staged
  // (unrecorded, so the next append drops it).
  if (rangeLength !== undefined && counted.bytes !== rangeLength)
    throw new OciError(416, "BLOB_UPLOAD_INVALID", "the body's length differs from Content-Range", {
      range: `${offset}-${offset + rangeLength - 1}`,
      received: counted.bytes,
    });
  if (!completing && !(await u.uploads.advance(id, offset, size, u.now()))) throw movedUpload();
  if (hash) u.hashes.keep(id, hash, size, algorithm);
  return size;
}

const movedUpload = () => new OciError(416, "BLOB_UPLOAD_INVALID", "the upload was moved by a concurrent request");

/**
 * Verifies the upload's bytes against `digest` and makes them the blob, ending its session (which
 * must still hold `session.size` acknowledged bytes; a monolithic push has none).
 */
async function finish(
  u: Uploading,
  r: RepoRequest,
  { id, size: acknowledged }: { id: string; size: number | undefined },
  digest: string,
  size: number,
) {
  const { reply, name, repo } = r;
  if (!isDigest(digest)) {
    await discardUpload(u, id);
    throw digestInvalid(looksLikeDigest(digest) ? "unsupported digest algorithm" : "malformed digest", {
      digest: digest.slice(0, 200),
    });
  }
  const computed = await digestOfUpload(u, id, size, digest);
  if (computed !== digest) {
    await discardUpload(u, id);
    throw digestInvalid("the uploaded content does not match the digest", { digest, computed });
  }
  const now = u.now();
  // The blob's record, its link into the repo, the session's end and the push's event: one statement.
  const session = acknowledged === undefined ? undefined : { id, size: acknowledged };
  let stored: boolean;
  try {
    stored = await u.events.inPush(() =>
      u.blobs.store(
        repo.uid,
        digest,
        size,
        now,
        session,
        () => u.store.commitUpload(id, digest, size),
        (recorded) => u.events.pushedWithin(r, { type: "blob", digest }, recorded),
      ),
    );
  } catch (err) {
    // Cancelled or fed by another request meanwhile: the session is theirs now (nothing recorded).
    if (err instanceof UploadMovedError) throw movedUpload();
    throw err;
  }
  if (!stored) {
    await discardUpload(u, id);
    throw nameUnknown(name);
  }
  return reply
    .code(201)
    .header("location", `/v2/${name}/blobs/${digest}`)
    .header("docker-content-digest", digest)
    .send();
}

async function digestOfUpload(u: Uploading, id: string, size: number, digest: string): Promise<string> {
  const algorithm = algorithmOf(digest);
  const running = u.hashes.take(id, size, algorithm);
  if (running) return `${algorithm}:${running.digest("hex")}`;
  // After a restart, on another replica, or another algorithm than the running hash: read the bytes again.
  if (size === 0) return `${algorithm}:${createHash(algorithm).digest("hex")}`;
  try {
    return (await hashOf(u.store.readUpload(id, size), algorithm)).digest;
  } catch {
    // A crash after the bytes moved into place and before the commit leaves no staged bytes but
    // the blob the digest names, unrecorded: those are the upload's bytes only if they hash to it
    // and have the acknowledged size, so they are read again rather than trusted by name. A
    // recorded blob's bytes are someone's push: naming them is no proof of having them.
    const placed = (await u.blobs.recorded(digest)) ? undefined : await u.store.open(digest);
    if (!placed)
      // The store's error names its paths or keys: not for the client.
      throw new OciError(400, "BLOB_UPLOAD_INVALID", "the upload's staged bytes cannot be read: start it again");
    const hashed = await hashOf(placed, algorithm);
    if (hashed.bytes !== size)
      throw digestInvalid("the uploaded content does not match the digest", { digest, size: hashed.bytes });
    return hashed.digest;
  }
}

/** The digest of a stream's bytes, and how many there were. */
async function hashOf(bytes: Readable, algorithm: Algorithm): Promise<{ digest: string; bytes: number }> {
  const hashing = new HashingStream(createHash(algorithm));
  await pipeline(bytes, hashing, devNull());
  return { digest: `${algorithm}:${hashing.hash.digest("hex")}`, bytes: hashing.bytes };
}

async function discardUpload(u: Uploading, id: string) {
  u.hashes.drop(id);
  await u.uploads.delete(id);
  await u.store.deleteUpload(id);
}

/** The algorithm a `digest` parameter names (sha256 when it names none we know: it is refused later). */
function algorithmOfParameter(digest: string | undefined): Algorithm {
  return digest !== undefined && isDigest(digest) ? algorithmOf(digest) : "sha256";
}

function devNull(): Writable {
  return new Writable({ write: (_chunk, _encoding, callback) => callback() });
}
