// Manifests (/v2/<name>/manifests/<reference>): pulled by tag or digest, pushed (moving the tag
// when the reference is one), deleted by digest (with the tags on it) or untagged by tag.
import type { FastifyRequest } from "fastify";
import type { Readable } from "node:stream";
import type { ManifestsRepository } from "../storage/manifests.js";
import type { RepoRef } from "../storage/repos.js";
import type { TagsRepository } from "../storage/tags.js";
import { TAG_PATTERN as TAG } from "../names.js";
import { algorithmOf, digestOf, isDigest, looksLikeDigest } from "./digest.js";
import { OciError, digestInvalid, manifestInvalid, manifestUnknown } from "./errors.js";
import type { RegistryEvents } from "./events.js";
import type { RegistryMetrics } from "../metrics.js";
import type { ManifestHooks } from "../image-access.js";
import { sendHead, type RepoRequest } from "./http.js";
import type { MethodHandlers } from "./router.js";
import { MAX_MANIFEST_BYTES, parseManifest } from "./manifest.js";

export interface ManifestRouteDeps {
  manifests: ManifestsRepository;
  tags: TagsRepository;
  events: RegistryEvents;
  /**
   * told of every stored manifest inside its push's transaction (the images module queues it);
   * of one the repo held already (created false), once its push committed
   */
  manifestHooks: ManifestHooks;
  metrics: RegistryMetrics;
  now(): Date;
}

/** PUT pushes, DELETE deletes, GET and HEAD pull (as does any other method, as it always has). */
export function manifestHandlers(deps: ManifestRouteDeps): MethodHandlers {
  return {
    PUT: (r) => putManifest(deps, r),
    DELETE: (r) => deleteManifest(deps, r),
    "*": (r) => getManifest(deps, r),
  };
}

async function getManifest(deps: ManifestRouteDeps, r: RepoRequest) {
  const { request, reply, repo, reference } = r;
  const digest = await digestOfReference(deps.tags, repo, reference);
  const head = request.method === "HEAD";
  const manifest = await deps.manifests.get(repo.uid, digest, !head);
  if (!manifest) throw manifestUnknown(reference);
  await deps.events.pulled(r, { type: "manifest", digest, tag: tagOf(reference) });
  reply
    .header("content-type", manifest.media_type)
    .header("docker-content-digest", manifest.digest)
    .header("etag", `"${manifest.digest}"`)
    .header("content-length", String(manifest.size));
  if (head) return sendHead(reply);
  if (request.method === "GET") {
    deps.metrics.pulled("ok");
    deps.metrics.sent("manifest", manifest.size);
  }
  return reply.send(Buffer.from(manifest.content ?? []));
}

/** The tag a manifest reference names (undefined for a digest). */
export function tagOf(reference: string): string | undefined {
  return looksLikeDigest(reference) ? undefined : reference;
}

async function digestOfReference(tags: TagsRepository, repo: RepoRef, reference: string): Promise<string> {
  if (isDigest(reference)) return reference;
  if (looksLikeDigest(reference)) throw digestInvalid("unsupported digest algorithm");
  if (!TAG.test(reference)) throw manifestUnknown(reference.slice(0, 200));
  const digest = await tags.digestOf(repo.uid, reference);
  if (!digest) throw manifestUnknown(reference);
  return digest;
}

async function putManifest(deps: ManifestRouteDeps, r: RepoRequest) {
  const { request, repo, reference } = r;
  const byDigest = looksLikeDigest(reference);
  if (byDigest && !isDigest(reference)) throw digestInvalid("unsupported or malformed digest", { reference });
  if (!byDigest && !TAG.test(reference)) throw manifestInvalid("invalid tag name");
  const bytes = await readWhole(request, MAX_MANIFEST_BYTES);
  const parsed = parseManifest(bytes, request.headers["content-type"]);
  const digest = digestOf(bytes, byDigest ? algorithmOf(reference) : "sha256");
  if (byDigest && digest !== reference)
    throw digestInvalid("the manifest's digest does not match the reference", { reference, computed: digest });
  const tag = byDigest ? undefined : reference;
  const stored = {
    repoUid: repo.uid,
    digest,
    mediaType: parsed.mediaType,
    artifactType: parsed.artifactType,
    subjectDigest: parsed.subject,
    annotations: parsed.annotations,
    layerMediaTypes: parsed.layerMediaTypes,
  };
  // A manifest the repo holds (a new tag on an image; on the embedded database this read is
  // usually answered from memory): the tag's move and the push's event in one statement, and the
  // hooks told once it committed (the image was queued when the manifest was first pushed).
  if (
    (await deps.manifests.get(repo.uid, digest, false)) &&
    (await deps.manifests.pushHeld({ repoUid: repo.uid, digest, tag, now: deps.now() }, (held) =>
      deps.events.pushedWithin(r, { type: "manifest", digest, tag }, held),
    ))
  ) {
    await deps.manifestHooks.stored({ ...stored, created: false });
    return pushed(deps, r, digest, parsed.subject);
  }
  // The manifest, its tag's move and the push's event commit together (the body is read already).
  const result = await deps.events.inPush(async () => {
    const put = await deps.manifests.put({
      repoUid: repo.uid,
      digest,
      mediaType: parsed.mediaType,
      content: bytes,
      artifactType: parsed.artifactType,
      subject: parsed.subject,
      annotations: parsed.annotations,
      blobs: parsed.blobs,
      children: parsed.children,
      tag,
      now: deps.now(),
    });
    if (put.kind !== "ok") return put;
    await deps.events.pushed(r, { type: "manifest", digest, tag });
    await deps.manifestHooks.stored({ ...stored, created: put.created });
    return put;
  });
  if (result.kind !== "ok") {
    const what = result.kind === "blob_unknown" ? "blob" : "manifest";
    throw new OciError(400, "MANIFEST_BLOB_UNKNOWN", `the manifest references a ${what} unknown to this repository`, {
      digest: result.digest,
    });
  }
  return pushed(deps, r, digest, parsed.subject);
}

function pushed(deps: ManifestRouteDeps, { reply, name }: RepoRequest, digest: string, subject: string | undefined) {
  deps.metrics.pushed("ok");
  reply.code(201).header("location", `/v2/${name}/manifests/${digest}`).header("docker-content-digest", digest);
  if (subject) reply.header("oci-subject", subject);
  return reply.send();
}

async function deleteManifest(deps: ManifestRouteDeps, { reply, repo, reference }: RepoRequest) {
  if (!looksLikeDigest(reference)) {
    if (!TAG.test(reference) || !(await deps.tags.deleteByName(repo.uid, reference))) throw manifestUnknown(reference);
    return reply.code(202).send();
  }
  if (!isDigest(reference)) throw digestInvalid("unsupported or malformed digest");
  const result = await deps.manifests.delete(repo.uid, reference);
  if (result.kind === "not_found") throw manifestUnknown(reference);
  if (result.kind === "referenced")
    throw new OciError(409, "DENIED", "the manifest is referenced by an index in this repository", {
      index: result.by,
    });
  return reply.code(202).send();
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
