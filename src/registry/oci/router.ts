// What a /v2/ request is about, from its method and path: the endpoint, the action it needs
// (pull, push, delete) and the repository name; and the access rule that follows from it.
import type { FastifyRequest } from "fastify";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { unauthenticated } from "../../core/errors.js";
import type { CallContext, RouteRule } from "../../core/service.js";
import { isRepositoryName, type ResolvedName } from "../names.js";
import { OciError, type OciCode } from "./errors.js";

export type Action = "pull" | "push" | "delete";

/** What each action needs on the repo (the reference's registry.pull / registry.push capability sets). */
export const ACTION_CAPABILITIES: Record<Action, readonly Capability[]> = {
  pull: [Capability.CAP_REPO_BLOBS_GET, Capability.CAP_MANIFEST_LIST, Capability.CAP_TAG_LIST],
  push: [Capability.CAP_MANIFEST_CREATE, Capability.CAP_TAG_CREATE, Capability.CAP_TAG_UPDATE],
  delete: [Capability.CAP_MANIFEST_DELETE, Capability.CAP_TAG_DELETE],
};

export type Endpoint =
  | { kind: "base" }
  | { kind: "catalog" }
  | { kind: "manifest"; reference: string }
  | { kind: "blob"; digest: string }
  | { kind: "uploads" }
  | { kind: "upload"; id: string }
  | { kind: "tags" }
  | { kind: "referrers"; digest: string }
  | { kind: "history"; tag: string };

export interface Target {
  endpoint: Endpoint;
  action: Action;
  /** the repository name, for endpoints under one */
  name?: string;
  resolved?: ResolvedName;
}

const ROUTE =
  /^\/v2\/(.+)\/(?:manifests\/([^/]+)|blobs\/uploads\/([^/]*)|blobs\/([^/]+)|tags\/list|referrers\/([^/]+)|_chainguard\/history\/([^/]+))$/;

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

export function parseTarget(request: FastifyRequest): Omit<Target, "resolved"> {
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

/** The rule the server's Authorizer applies to a target (registry audience). */
export function accessRule(target: Target): RouteRule | "public" {
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
}

/** The scope a 401's challenge names ("repository:acme/app:pull"), for targets under a repository. */
export function challengeScope(target: Target | undefined): string | undefined {
  if (!target?.name) return undefined;
  const actions = target.action === "pull" ? "pull" : target.action === "push" ? "pull,push" : "delete";
  return `repository:${target.name}:${actions}`;
}

/** Whether a registry token (if that is what authenticated the call) grants `action` on `name`. */
export function granted(call: CallContext, name: string, action: Action): boolean {
  const grants = call.token?.registryAccess;
  if (!grants) return true;
  return grants.some(
    (g) => g.type === "repository" && g.name === name && (g.actions.includes(action) || g.actions.includes("*")),
  );
}

export function requireGranted(call: CallContext, name: string, action: Action): void {
  if (!granted(call, name, action))
    throw unauthenticated(`the registry token does not grant ${action} on ${name.slice(0, 200)}`);
}
