// The OCI distribution API (v1.1) at /v2/: pull, push, content discovery and management, plus
// the hosted registry's tag history. Every route is authorized by the server's Authorizer
// (registry audience) before its handler runs: the rule names the repo (or, for a first push,
// its group) and the action's capabilities; public repos are pulled without credentials. A
// registry token's `access` claim further limits it to the repositories and actions granted.
import { randomUUID, createHash, type Hash } from "node:crypto";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { unauthenticated } from "../../core/errors.js";
import type { CallContext, RouteRule } from "../../core/service.js";
import type { PublicUrls } from "../../platform/config.js";
import type { PlainRouter } from "../../platform/routes.js";
import type { BlobStore, ByteRange } from "../storage/blob-store.js";
import type { BlobsRepository } from "../storage/blobs.js";
import type { ManifestsRepository } from "../storage/manifests.js";
import type { RepoRef, ReposRepository } from "../storage/repos.js";
import type { TagsRepository } from "../storage/tags.js";
import type { UploadsRepository } from "../storage/uploads.js";
import { TAG_PATTERN as TAG, isRepositoryName, type RepositoryNames, type ResolvedName } from "../names.js";
import { HashingStream, algorithmOf, digestOf, isDigest, looksLikeDigest, type Algorithm } from "./digest.js";
import {
  OciError,
  type OciCode,
  blobUnknown,
  digestInvalid,
  manifestInvalid,
  manifestUnknown,
  nameUnknown,
  bearerChallenge,
  sendOciError,
  uploadUnknown,
} from "./errors.js";
import { MAX_MANIFEST_BYTES, OCI_INDEX, parseManifest } from "./manifest.js";

export type Action = "pull" | "push" | "delete";

/** What each action needs on the repo (the reference's registry.pull / registry.push capability sets). */
export const ACTION_CAPABILITIES: Record<Action, readonly Capability[]> = {
  pull: [Capability.CAP_REPO_BLOBS_GET, Capability.CAP_MANIFEST_LIST, Capability.CAP_TAG_LIST],
  push: [Capability.CAP_MANIFEST_CREATE, Capability.CAP_TAG_CREATE, Capability.CAP_TAG_UPDATE],
  delete: [Capability.CAP_MANIFEST_DELETE, Capability.CAP_TAG_DELETE],
};

const API_VERSION = { "docker-distribution-api-version": "registry/2.0" };
/** The most tags or catalog entries one answer carries (clients follow Link for the rest). */
export const MAX_PAGE = 10_000;
/** At most this many records per tag-history answer (here and in the v1 ListTagHistory). */
export const MAX_HISTORY = 1_000;

type Endpoint =
  | { kind: "base" }
  | { kind: "catalog" }
  | { kind: "manifest"; reference: string }
  | { kind: "blob"; digest: string }
  | { kind: "uploads" }
  | { kind: "upload"; id: string }
  | { kind: "tags" }
  | { kind: "referrers"; digest: string }
  | { kind: "history"; tag: string };

interface Target {
  endpoint: Endpoint;
  action: Action;
  /** the repository name, for endpoints under one */
  name?: string;
  resolved?: ResolvedName;
}

const ROUTE =
  /^\/v2\/(.+)\/(?:manifests\/([^/]+)|blobs\/uploads\/([^/]*)|blobs\/([^/]+)|tags\/list|referrers\/([^/]+)|_chainguard\/history\/([^/]+))$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A path segment decoded; malformed percent-encoding is the client's error, not ours. */
function decoded(segment: string, what: OciCode): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new OciError(400, what, "malformed percent-encoding in the path");
  }
}

function pathOf(request: FastifyRequest): string {
  const url = request.url;
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}

function parseTarget(request: FastifyRequest): Omit<Target, "resolved"> {
  const path = pathOf(request);
  const method = request.method;
  if (path === "/v2/" || path === "/v2") return { endpoint: { kind: "base" }, action: "pull" };
  if (path === "/v2/_catalog") return { endpoint: { kind: "catalog" }, action: "pull" };
  const m = ROUTE.exec(path);
  if (!m) throw new OciError(404, "NAME_UNKNOWN", "no such registry endpoint");
  const name = m[1]!;
  if (!isRepositoryName(name))
    throw new OciError(400, "NAME_INVALID", "invalid repository name", { name: name.slice(0, 300) });
  const pick = (endpoint: Endpoint, action: Action) => ({ endpoint, action, name });
  if (m[2] !== undefined)
    return pick(
      { kind: "manifest", reference: decoded(m[2], "MANIFEST_INVALID") },
      method === "PUT" ? "push" : method === "DELETE" ? "delete" : "pull",
    );
  if (m[3] !== undefined) return pick(m[3] === "" ? { kind: "uploads" } : { kind: "upload", id: m[3] }, "push");
  if (m[4] !== undefined)
    return pick({ kind: "blob", digest: decoded(m[4], "DIGEST_INVALID") }, method === "DELETE" ? "delete" : "pull");
  if (m[5] !== undefined) return pick({ kind: "referrers", digest: decoded(m[5], "DIGEST_INVALID") }, "pull");
  if (m[6] !== undefined) return pick({ kind: "history", tag: decoded(m[6], "MANIFEST_INVALID") }, "pull");
  return pick({ kind: "tags" }, "pull");
}

export interface OciDeps {
  repos: ReposRepository;
  tags: TagsRepository;
  blobs: BlobsRepository;
  manifests: ManifestsRepository;
  uploads: UploadsRepository;
  names: RepositoryNames;
  store: BlobStore;
  urls: PublicUrls;
  now(): Date;
}

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

export function registerOciRoutes(router: PlainRouter, deps: OciDeps): void {
  const { repos, tags, blobs, manifests, uploads, store } = deps;
  const targets = new WeakMap<FastifyRequest, Target>();
  const hashes = new UploadHashes();

  const targetOf = async (request: FastifyRequest): Promise<Target> => {
    let target = targets.get(request);
    if (!target) {
      target = parseTarget(request);
      if (target.name) target.resolved = await deps.names.resolve(target.name);
      targets.set(request, target);
    }
    return target;
  };

  const access = async (request: FastifyRequest): Promise<RouteRule | "public"> => {
    const target = await targetOf(request);
    const { endpoint, action, resolved } = target;
    const audience = "registry" as const;
    if (endpoint.kind === "base") return { audience, capabilities: [], anonymous: true };
    if (endpoint.kind === "catalog") return { audience, capabilities: [Capability.CAP_REPO_LIST] };
    const capabilities = ACTION_CAPABILITIES[action];
    // An unknown organization: authenticate, then answer NAME_UNKNOWN (anonymous callers get 401 first).
    if (!resolved) return { audience, capabilities };
    if (resolved.repo) {
      if (action === "pull" && resolved.repo.public) return "public";
      return { audience, capabilities, scope: resolved.repo.uid, resourceType: "repo" };
    }
    // The first push creates the repo in its group.
    const create = action === "push" ? [Capability.CAP_REPO_CREATE] : [];
    return { audience, capabilities: [...capabilities, ...create], scope: resolved.group.uid, resourceType: "group" };
  };

  const challenge = (target: Target | undefined) => {
    if (!target?.name) return bearerChallenge(deps.urls);
    const actions = target.action === "pull" ? "pull" : target.action === "push" ? "pull,push" : "delete";
    return bearerChallenge(deps.urls, `repository:${target.name}:${actions}`);
  };

  const handler = async (request: FastifyRequest, reply: FastifyReply, call: CallContext) => {
    reply.headers(API_VERSION);
    const target = await targetOf(request);
    const { endpoint } = target;
    if (endpoint.kind === "base") {
      if (!request.headers.authorization) throw unauthenticated("authentication is required");
      return sendJson(reply, {});
    }
    if (endpoint.kind === "catalog") return catalog(request, reply, call);
    requireGranted(call, target.name!, target.action);
    const resolved = target.resolved;
    if (!resolved || (!resolved.repo && target.action !== "push")) throw nameUnknown(target.name!);
    const repo = resolved.repo ?? (await ensureRepo(resolved));
    switch (endpoint.kind) {
      case "manifest":
        if (request.method === "PUT") return putManifest(request, reply, target, repo, endpoint.reference);
        if (request.method === "DELETE") return deleteManifest(reply, repo, endpoint.reference);
        return getManifest(request, reply, repo, endpoint.reference);
      case "blob":
        if (request.method === "DELETE") return deleteBlob(reply, repo, endpoint.digest);
        return getBlob(request, reply, repo, endpoint.digest);
      case "uploads":
        if (request.method !== "POST") throw unsupported();
        return startUpload(request, reply, call, target, repo);
      case "upload":
        return continueUpload(request, reply, target, repo, endpoint.id);
      case "tags":
        return listTags(request, reply, target, repo);
      case "referrers":
        return referrers(request, reply, repo, endpoint.digest);
      case "history":
        return history(request, reply, repo, endpoint.tag);
    }
  };

  const ensureRepo = async (resolved: ResolvedName): Promise<RepoRef> => {
    if (!isRepositoryName(resolved.path)) throw new OciError(400, "NAME_INVALID", "invalid repository name");
    const repo = await repos.ensure(resolved.group.uid, resolved.path, deps.now());
    if (!repo) throw nameUnknown(resolved.name);
    return repo;
  };

  // --- manifests ---

  const getManifest = async (request: FastifyRequest, reply: FastifyReply, repo: RepoRef, reference: string) => {
    const digest = await digestOfReference(repo, reference);
    const head = request.method === "HEAD";
    const manifest = await manifests.get(repo.uid, digest, !head);
    if (!manifest) throw manifestUnknown(reference);
    reply
      .header("content-type", manifest.media_type)
      .header("docker-content-digest", manifest.digest)
      .header("etag", `"${manifest.digest}"`)
      .header("content-length", String(manifest.size));
    return head ? sendHead(reply) : reply.send(Buffer.from(manifest.content ?? []));
  };

  const digestOfReference = async (repo: RepoRef, reference: string): Promise<string> => {
    if (isDigest(reference)) return reference;
    if (looksLikeDigest(reference)) throw digestInvalid("unsupported digest algorithm");
    if (!TAG.test(reference)) throw manifestUnknown(reference.slice(0, 200));
    const digest = await tags.digestOf(repo.uid, reference);
    if (!digest) throw manifestUnknown(reference);
    return digest;
  };

  const putManifest = async (
    request: FastifyRequest,
    reply: FastifyReply,
    target: Target,
    repo: RepoRef,
    reference: string,
  ) => {
    const byDigest = looksLikeDigest(reference);
    if (byDigest && !isDigest(reference)) throw digestInvalid("unsupported or malformed digest", { reference });
    if (!byDigest && !TAG.test(reference)) throw manifestInvalid("invalid tag name");
    const bytes = await readWhole(request, MAX_MANIFEST_BYTES);
    const parsed = parseManifest(bytes, request.headers["content-type"]);
    const digest = digestOf(bytes, byDigest ? algorithmOf(reference) : "sha256");
    if (byDigest && digest !== reference)
      throw digestInvalid("the manifest's digest does not match the reference", { reference, computed: digest });
    const result = await manifests.put({
      repoUid: repo.uid,
      digest,
      mediaType: parsed.mediaType,
      content: bytes,
      artifactType: parsed.artifactType,
      subject: parsed.subject,
      annotations: parsed.annotations,
      blobs: parsed.blobs,
      children: parsed.children,
      tag: byDigest ? undefined : reference,
      now: deps.now(),
    });
    if (result.kind !== "ok") {
      const what = result.kind === "blob_unknown" ? "blob" : "manifest";
      throw new OciError(400, "MANIFEST_BLOB_UNKNOWN", `the manifest references a ${what} unknown to this repository`, {
        digest: result.digest,
      });
    }
    reply
      .code(201)
      .header("location", `/v2/${target.name}/manifests/${digest}`)
      .header("docker-content-digest", digest);
    if (parsed.subject) reply.header("oci-subject", parsed.subject);
    return reply.send();
  };

  const deleteManifest = async (reply: FastifyReply, repo: RepoRef, reference: string) => {
    if (!looksLikeDigest(reference)) {
      if (!TAG.test(reference) || !(await tags.deleteByName(repo.uid, reference))) throw manifestUnknown(reference);
      return reply.code(202).send();
    }
    if (!isDigest(reference)) throw digestInvalid("unsupported or malformed digest");
    const result = await manifests.delete(repo.uid, reference);
    if (result.kind === "not_found") throw manifestUnknown(reference);
    if (result.kind === "referenced")
      throw new OciError(409, "DENIED", "the manifest is referenced by an index in this repository", {
        index: result.by,
      });
    return reply.code(202).send();
  };

  // --- blobs ---

  const getBlob = async (request: FastifyRequest, reply: FastifyReply, repo: RepoRef, digest: string) => {
    if (!isDigest(digest)) throw digestInvalid("unsupported or malformed digest");
    const blob = await blobs.inRepo(repo.uid, digest);
    if (!blob) throw blobUnknown(digest);
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
    if (request.method === "HEAD") return sendHead(reply);
    if (length === 0) return reply.send(Buffer.alloc(0));
    const stream = await store.open(digest, range);
    if (!stream) throw blobUnknown(digest);
    return reply.send(stream);
  };

  const deleteBlob = async (reply: FastifyReply, repo: RepoRef, digest: string) => {
    if (!isDigest(digest)) throw digestInvalid("unsupported or malformed digest");
    const result = await blobs.unlink(repo.uid, digest);
    if (result.kind === "not_found") throw blobUnknown(digest);
    if (result.kind === "referenced")
      throw new OciError(409, "DENIED", "the blob is referenced by a manifest in this repository", {
        manifest: result.by,
      });
    return reply.code(202).send();
  };

  // --- uploads ---

  const uploadLocation = (target: Target, id: string) => `/v2/${target.name}/blobs/uploads/${id}`;
  const rangeHeader = (size: number) => `0-${Math.max(size - 1, 0)}`;

  const startUpload = async (
    request: FastifyRequest,
    reply: FastifyReply,
    call: CallContext,
    target: Target,
    repo: RepoRef,
  ) => {
    const query = request.query as Record<string, string | undefined>;
    if (query.mount !== undefined && query.from !== undefined && isDigest(query.mount)) {
      if (await mount(call, repo, query.from, query.mount)) {
        return reply
          .code(201)
          .header("location", `/v2/${target.name}/blobs/${query.mount}`)
          .header("docker-content-digest", query.mount)
          .send();
      }
    }
    const id = randomUUID();
    await uploads.create(id, repo.uid, deps.now());
    if (query.digest !== undefined) {
      // Monolithic: the whole blob in this request, hashed as it streams with the named algorithm.
      const size = await append(request, id, 0, algorithmOfParameter(query.digest));
      return finish(reply, target, repo, id, query.digest, size);
    }
    return reply
      .code(202)
      .header("location", uploadLocation(target, id))
      .header("docker-upload-uuid", id)
      .header("range", "0-0")
      .send();
  };

  /** Links a blob from another repo the caller may pull (else the client gets a plain upload). */
  const mount = async (call: CallContext, repo: RepoRef, from: string, digest: string): Promise<boolean> => {
    if (!isRepositoryName(from)) return false;
    const source = await deps.names.resolve(from);
    if (!source?.repo) return false;
    const pullable = source.repo.public || (call.access?.can(ACTION_CAPABILITIES.pull, source.repo.uid) ?? false);
    if (!pullable || !granted(call, from, "pull")) return false;
    return blobs.mount(repo.uid, source.repo.uid, digest, deps.now());
  };

  const continueUpload = async (
    request: FastifyRequest,
    reply: FastifyReply,
    target: Target,
    repo: RepoRef,
    id: string,
  ) => {
    if (!UUID.test(id)) throw uploadUnknown();
    const upload = await uploads.get(id, repo.uid);
    if (!upload) throw uploadUnknown();
    const progress = (code: number) =>
      reply
        .code(code)
        .header("location", uploadLocation(target, id))
        .header("docker-upload-uuid", id)
        .header("range", rangeHeader(upload.size));
    switch (request.method) {
      case "GET":
        return progress(204).send();
      case "DELETE":
        if (!(await uploads.delete(id))) throw uploadUnknown();
        hashes.drop(id);
        await store.deleteUpload(id);
        return reply.code(204).send();
      case "PATCH": {
        const range = request.headers["content-range"];
        if (range !== undefined) {
          const m = /^(?:bytes )?(\d+)-(\d+)$/.exec(range);
          if (!m || Number(m[1]) !== upload.size || Number(m[2]) < Number(m[1]))
            throw new OciError(
              416,
              "BLOB_UPLOAD_INVALID",
              "the chunk does not start where the upload ends",
              {
                expectedStart: upload.size,
              },
              { location: uploadLocation(target, id), range: rangeHeader(upload.size) },
            );
        }
        upload.size = await append(request, id, upload.size, "sha256");
        return progress(202).send();
      }
      case "PUT": {
        const digest = (request.query as Record<string, string | undefined>).digest;
        if (digest === undefined) throw digestInvalid("the digest query parameter is required");
        const algorithm = algorithmOfParameter(digest);
        const size = request.body ? await append(request, id, upload.size, algorithm) : upload.size;
        return finish(reply, target, repo, id, digest, size);
      }
      default:
        throw unsupported();
    }
  };

  /** Streams the request body onto the upload after `offset` bytes; the new acknowledged size. */
  const append = async (request: FastifyRequest, id: string, offset: number, algorithm: Algorithm): Promise<number> => {
    const body = request.body as Readable | undefined;
    if (!body) return offset;
    const hash = hashes.take(id, offset, algorithm);
    const counted = new HashingStream(hash ?? createHash("sha256"));
    let size: number;
    const feeding = pipeline(body, counted);
    feeding.catch(() => undefined); // awaited below; a store failure must not leave it unobserved
    try {
      size = await store.appendUpload(id, offset, counted);
      await feeding;
    } catch (err) {
      counted.destroy();
      // A body cut short: nothing beyond `offset` counts (the store drops it on the next append).
      throw new OciError(400, "BLOB_UPLOAD_INVALID", "the upload's body could not be read in full", {
        reason: (err as Error).message?.slice(0, 200),
      });
    }
    const declared = request.headers["content-length"];
    if (declared !== undefined && Number(declared) !== counted.bytes)
      throw new OciError(400, "BLOB_UPLOAD_INVALID", "the body's length differs from Content-Length");
    if (!(await uploads.advance(id, offset, size, deps.now())))
      throw new OciError(416, "BLOB_UPLOAD_INVALID", "the upload was moved by a concurrent request");
    if (hash) hashes.keep(id, hash, size, algorithm);
    return size;
  };

  /** Verifies the upload's bytes against `digest` and makes them the blob. */
  const finish = async (
    reply: FastifyReply,
    target: Target,
    repo: RepoRef,
    id: string,
    digest: string,
    size: number,
  ) => {
    if (!isDigest(digest)) {
      await discardUpload(id);
      throw digestInvalid(looksLikeDigest(digest) ? "unsupported digest algorithm" : "malformed digest", {
        digest: digest.slice(0, 200),
      });
    }
    const computed = await digestOfUpload(id, size, digest);
    if (computed !== digest) {
      await discardUpload(id);
      throw digestInvalid("the uploaded content does not match the digest", { digest, computed });
    }
    const now = deps.now();
    if (!(await blobs.store(repo.uid, digest, size, now, id, () => store.commitUpload(id, digest, size)))) {
      await discardUpload(id);
      throw nameUnknown(target.name!);
    }
    return reply
      .code(201)
      .header("location", `/v2/${target.name}/blobs/${digest}`)
      .header("docker-content-digest", digest)
      .send();
  };

  const digestOfUpload = async (id: string, size: number, digest: string): Promise<string> => {
    const algorithm = algorithmOf(digest);
    const running = hashes.take(id, size, algorithm);
    if (running) return `${algorithm}:${running.digest("hex")}`;
    // After a restart, on another replica, or another algorithm than the running hash: read the bytes again.
    const hash = createHash(algorithm);
    if (size > 0) await pipeline(store.readUpload(id, size), new HashingStream(hash), devNull());
    return `${algorithm}:${hash.digest("hex")}`;
  };

  const discardUpload = async (id: string) => {
    hashes.drop(id);
    await uploads.delete(id);
    await store.deleteUpload(id);
  };

  // --- discovery ---

  const pageSize = (request: FastifyRequest): number => {
    const n = (request.query as Record<string, string | undefined>).n;
    if (n === undefined) return MAX_PAGE;
    if (!/^\d{1,9}$/.test(n)) throw new OciError(400, "UNSUPPORTED", "n must be a non-negative integer");
    return Math.min(Number(n), MAX_PAGE);
  };

  const listTags = async (request: FastifyRequest, reply: FastifyReply, target: Target, repo: RepoRef) => {
    const n = pageSize(request);
    const last = (request.query as Record<string, string | undefined>).last;
    const names = n === 0 ? [] : await tags.names(repo.uid, last, n + 1);
    const page = names.slice(0, n);
    if (names.length > n)
      reply.header(
        "link",
        `</v2/${target.name}/tags/list?n=${n}&last=${encodeURIComponent(page.at(-1)!)}>; rel="next"`,
      );
    return sendJson(reply, { name: target.name, tags: page });
  };

  const catalog = async (request: FastifyRequest, reply: FastifyReply, call: CallContext) => {
    reply.headers(API_VERSION);
    const n = pageSize(request);
    const last = (request.query as Record<string, string | undefined>).last;
    const names = (await deps.names.catalog(call.visibility ?? [])).filter((name) => last === undefined || name > last);
    const page = names.slice(0, n);
    if (names.length > n)
      reply.header("link", `</v2/_catalog?n=${n}&last=${encodeURIComponent(page.at(-1)!)}>; rel="next"`);
    return sendJson(reply, { repositories: page });
  };

  const referrers = async (request: FastifyRequest, reply: FastifyReply, repo: RepoRef, digest: string) => {
    if (!isDigest(digest)) throw digestInvalid("unsupported or malformed digest");
    const artifactType = (request.query as Record<string, string | undefined>).artifactType;
    const rows = await deps.manifests.referrers(repo.uid, digest, artifactType || undefined);
    if (artifactType) reply.header("oci-filters-applied", "artifactType");
    const manifests = rows.map((r) => ({
      mediaType: r.media_type,
      digest: r.digest,
      size: r.size,
      ...(r.artifact_type ? { artifactType: r.artifact_type } : {}),
      ...(r.annotations && Object.keys(r.annotations).length ? { annotations: r.annotations } : {}),
    }));
    return sendJson(reply, { schemaVersion: 2, mediaType: OCI_INDEX, manifests }, OCI_INDEX);
  };

  const history = async (request: FastifyRequest, reply: FastifyReply, repo: RepoRef, tag: string) => {
    if (!TAG.test(tag)) throw manifestUnknown(tag.slice(0, 200));
    const query = request.query as Record<string, string | undefined>;
    const time = (name: string) => {
      const value = query[name];
      if (value === undefined || value === "") return undefined;
      const date = new Date(value);
      if (Number.isNaN(date.getTime()))
        throw new OciError(400, "UNSUPPORTED", `${name} must be an RFC 3339 time`, { [name]: value.slice(0, 100) });
      return date;
    };
    const rows = await tags.history(repo.uid, tag, time("start"), time("end"), MAX_HISTORY);
    const body = { history: rows.map((r) => ({ updateTimestamp: r.update_time.toISOString(), digest: r.digest })) };
    return sendJson(reply, body);
  };

  router.acceptStreams();
  for (const url of ["/v2/", "/v2/*"]) {
    router.route({
      method: url === "/v2/" ? ["GET"] : ["GET", "PUT", "POST", "PATCH", "DELETE"],
      url,
      access,
      handler,
      renderError: (wire, reply, thrown, request) => {
        reply.headers(API_VERSION);
        return sendOciError(reply, wire, thrown, challenge(targets.get(request)));
      },
    });
  }
}

/** The algorithm a `digest` parameter names (sha256 when it names none we know: it is refused later). */
function algorithmOfParameter(digest: string | undefined): Algorithm {
  return digest !== undefined && isDigest(digest) ? algorithmOf(digest) : "sha256";
}

/** Whether a registry token (if that is what authenticated the call) grants `action` on `name`. */
function granted(call: CallContext, name: string, action: Action): boolean {
  const grants = call.token?.registryAccess;
  if (!grants) return true;
  return grants.some(
    (g) => g.type === "repository" && g.name === name && (g.actions.includes(action) || g.actions.includes("*")),
  );
}

function requireGranted(call: CallContext, name: string, action: Action): void {
  if (!granted(call, name, action))
    throw unauthenticated(`the registry token does not grant ${action} on ${name.slice(0, 200)}`);
}

/**
 * Answers a HEAD with the headers set (Content-Length included). Fastify's HEAD routes set
 * Content-Length from the payload, and to 0 without one; an empty stream leaves ours alone.
 */
function sendHead(reply: FastifyReply): FastifyReply {
  return reply.send(Readable.from([]));
}

function unsupported(): OciError {
  return new OciError(405, "UNSUPPORTED", "the operation is unsupported");
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

/**
 * A request body read whole, refused past `limit` bytes (413 SIZE_INVALID): by its declared
 * length before reading, else once that much arrived. The rest is not read; the connection
 * closes after the answer.
 */
async function readWhole(request: FastifyRequest, limit: number): Promise<Uint8Array> {
  const body = request.body as Readable | undefined;
  if (!body) return new Uint8Array(0);
  const tooLarge = () =>
    new OciError(413, "SIZE_INVALID", `the manifest is larger than ${limit} bytes`, undefined, { connection: "close" });
  if (Number(request.headers["content-length"] ?? 0) > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > limit) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

/** JSON with exactly this Content-Type (Fastify would add a charset to a string payload). */
function sendJson(reply: FastifyReply, body: unknown, type = "application/json"): FastifyReply {
  return reply.header("content-type", type).send(Buffer.from(JSON.stringify(body)));
}

function devNull(): Writable {
  return new Writable({ write: (_chunk, _encoding, callback) => callback() });
}
