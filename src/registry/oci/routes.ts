// The OCI distribution API (v1.1) at /v2/: pull, push, content discovery and management, plus
// the hosted registry's tag history. Every route is authorized by the server's Authorizer
// (registry audience) before its handler runs: the rule names the repo (or, for a first push,
// its group) and the action's capabilities; public repos are pulled without credentials. A
// registry token's `access` claim further limits it to the repositories and actions granted.
import type { FastifyReply, FastifyRequest } from "fastify";
import { unauthenticated } from "../../core/errors.js";
import type { CallContext, RouteRule } from "../../core/service.js";
import type { PublicUrls } from "../../platform/config.js";
import type { PlainRouter } from "../../platform/routes.js";
import type { BlobStore } from "../storage/blob-store.js";
import type { BlobsRepository } from "../storage/blobs.js";
import type { ManifestsRepository } from "../storage/manifests.js";
import type { RepoRef, ReposRepository } from "../storage/repos.js";
import type { TagsRepository } from "../storage/tags.js";
import type { UploadsRepository } from "../storage/uploads.js";
import { isRepositoryName, type RepositoryNames, type ResolvedName } from "../names.js";
import { deleteBlob, getBlob } from "./blobs.js";
import { OciError, bearerChallenge, nameUnknown, sendOciError } from "./errors.js";
import { history } from "./history.js";
import { API_VERSION, sendJson, unsupported, type RepoRequest } from "./http.js";
import { deleteManifest, getManifest, putManifest } from "./manifests.js";
import { referrers } from "./referrers.js";
import { accessRule, challengeScope, parseTarget, requireGranted, type Target } from "./router.js";
import { catalog, listTags } from "./tags.js";
import {
  UploadHashes,
  appendChunk,
  cancelUpload,
  completeUpload,
  openSession,
  progress,
  startUpload,
  type Uploading,
} from "./uploads.js";

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

export function registerOciRoutes(router: PlainRouter, deps: OciDeps): void {
  const { repos } = deps;
  const targets = new WeakMap<FastifyRequest, Target>();
  const uploading: Uploading = { ...deps, hashes: new UploadHashes() };

  const targetOf = async (request: FastifyRequest): Promise<Target> => {
    let target: Target | undefined = targets.get(request);
    if (!target) {
      target = parseTarget(request);
      if (target.name) target.resolved = await deps.names.resolve(target.name);
      targets.set(request, target);
    }
    return target;
  };

  const access = async (request: FastifyRequest): Promise<RouteRule | "public"> => accessRule(await targetOf(request));

  const handler = async (request: FastifyRequest, reply: FastifyReply, call: CallContext) => {
    reply.headers(API_VERSION);
    const target = await targetOf(request);
    const { endpoint } = target;
    if (endpoint.kind === "base") {
      if (!request.headers.authorization) throw unauthenticated("authentication is required");
      return sendJson(reply, {});
    }
    if (endpoint.kind === "catalog") return catalog(deps, request, reply, call);
    requireGranted(call, target.name!, target.action);
    const resolved = target.resolved;
    if (!resolved || (!resolved.repo && target.action !== "push")) throw nameUnknown(target.name!);
    const repo = resolved.repo ?? (await ensureRepo(resolved));
    const r = (reference: string): RepoRequest => ({ request, reply, call, name: target.name!, reference, repo });
    switch (endpoint.kind) {
      case "manifest":
        if (request.method === "PUT") return putManifest(deps, r(endpoint.reference));
        if (request.method === "DELETE") return deleteManifest(deps, r(endpoint.reference));
        return getManifest(deps, r(endpoint.reference));
      case "blob":
        if (request.method === "DELETE") return deleteBlob(deps, r(endpoint.digest));
        return getBlob(deps, r(endpoint.digest));
      case "uploads":
        if (request.method !== "POST") throw unsupported();
        return startUpload(uploading, r(""));
      case "upload": {
        const session = await openSession(uploading, r(endpoint.id));
        switch (request.method) {
          case "GET":
            return progress(r(endpoint.id), session, 204).send();
          case "DELETE":
            return cancelUpload(uploading, r(endpoint.id), session);
          case "PATCH":
            return appendChunk(uploading, r(endpoint.id), session);
          case "PUT":
            return completeUpload(uploading, r(endpoint.id), session);
          default:
            throw unsupported();
        }
      }
      case "tags":
        return listTags(deps, r(""));
      case "referrers":
        return referrers(deps, r(endpoint.digest));
      case "history":
        return history(deps, r(endpoint.tag));
    }
  };

  const ensureRepo = async (resolved: ResolvedName): Promise<RepoRef> => {
    if (!isRepositoryName(resolved.path)) throw new OciError(400, "NAME_INVALID", "invalid repository name");
    const repo = await repos.ensure(resolved.group.uid, resolved.path, deps.now());
    if (!repo) throw nameUnknown(resolved.name);
    return repo;
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
        return sendOciError(reply, wire, thrown, bearerChallenge(deps.urls, challengeScope(targets.get(request))));
      },
    });
  }
}
