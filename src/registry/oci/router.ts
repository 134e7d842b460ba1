// The /v2/ route table: a request's method and path name an endpoint, the action it needs
// (pull, push, delete) and, under a repository, the name and the path's reference. A request is
// parsed and its name resolved once (`route`); the access rule the server's Authorizer applies is
// computed from that, and `dispatch` hands the request to its resource's handler for the method
// (manifests.ts, blobs.ts, uploads.ts, tags.ts, referrers.ts, history.ts).
import type { FastifyReply, FastifyRequest } from "fastify";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { unauthenticated } from "../../core/errors.js";
import type { CallContext, RouteRule } from "../../core/service.js";
import { isRepositoryName, type RepositoryNames, type ResolvedName } from "../names.js";
import type { RepoRef, ReposRepository } from "../storage/repos.js";
import { OciError, nameUnknown, type OciCode } from "./errors.js";
import { API_VERSION, unsupported, type RepoRequest } from "./http.js";

export type Action = "pull" | "push" | "delete";

/** What each action needs on the repo (the reference's registry.pull / registry.push capability sets). */
export const ACTION_CAPABILITIES: Record<Action, readonly Capability[]> = {
  pull: [Capability.CAP_REPO_BLOBS_GET, Capability.CAP_MANIFEST_LIST, Capability.CAP_TAG_LIST],
  push: [Capability.CAP_MANIFEST_CREATE, Capability.CAP_TAG_CREATE, Capability.CAP_TAG_UPDATE],
  delete: [Capability.CAP_MANIFEST_DELETE, Capability.CAP_TAG_DELETE],
};

type Method = "GET" | "HEAD" | "PUT" | "POST" | "PATCH" | "DELETE";

/** The endpoints under a repository name. */
export type RepoEndpoint = "manifest" | "uploads" | "upload" | "blob" | "tags" | "referrers" | "history";

interface RepoRoute {
  endpoint: RepoEndpoint;
  /** the path after `/v2/<name>/`; `*` is one segment, the reference */
  path: string;
  /** the reference is percent-decoded, malformed encoding answered with this code (absent: taken as sent) */
  decode?: OciCode;
  /** each method's action; "*" for the others (default: pull) */
  actions?: Partial<Record<Method | "*", Action>>;
}

/** Tried in this order (the longest repository name that leaves a match wins). */
const REPO_ROUTES: readonly RepoRoute[] = [
  { endpoint: "manifest", path: "manifests/*", decode: "MANIFEST_INVALID", actions: { PUT: "push", DELETE: "delete" } },
  { endpoint: "uploads", path: "blobs/uploads/", actions: { "*": "push" } },
  { endpoint: "upload", path: "blobs/uploads/*", actions: { "*": "push" } },
  { endpoint: "blob", path: "blobs/*", decode: "DIGEST_INVALID", actions: { DELETE: "delete" } },
  { endpoint: "tags", path: "tags/list" },
  { endpoint: "referrers", path: "referrers/*", decode: "DIGEST_INVALID" },
  { endpoint: "history", path: "_chainguard/history/*", decode: "MANIFEST_INVALID" },
];

/** Each endpoint's path as logs name it: the repository name and the reference as placeholders. */
const TEMPLATES: Record<Target["endpoint"], string> = {
  base: "/v2/",
  catalog: "/v2/_catalog",
  manifest: "/v2/{name}/manifests/{reference}",
  uploads: "/v2/{name}/blobs/uploads/",
  upload: "/v2/{name}/blobs/uploads/{uuid}",
  blob: "/v2/{name}/blobs/{digest}",
  tags: "/v2/{name}/tags/list",
  referrers: "/v2/{name}/referrers/{digest}",
  history: "/v2/{name}/_chainguard/history/{reference}",
};

/** `/v2/<name>/<one of the routes>`: the route i matched is group e<i>, its reference r<i>. */
const REPO_PATH = new RegExp(
  `^/v2/(?<name>.+)/(?:${REPO_ROUTES.map((r, i) => `(?<e${i}>${pattern(r.path, i)})`).join("|")})$`,
);

function pattern(path: string, i: number): string {
  return path
    .split("*")
    .map((literal) => literal.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join(`(?<r${i}>[^/]+)`);
}

/** What a request is about. */
export interface Target {
  endpoint: "base" | "catalog" | RepoEndpoint;
  action: Action;
  /** the repository name, for endpoints under one */
  name?: string;
  /** the path's reference (a manifest reference, a digest, an upload id, a tag); "" for none */
  reference: string;
}

/** Parses a request's method and path (its query aside). */
export function parseTarget(method: string, path: string): Target {
  if (path === "/v2/" || path === "/v2") return { endpoint: "base", action: "pull", reference: "" };
  if (path === "/v2/_catalog") return { endpoint: "catalog", action: "pull", reference: "" };
  const m = REPO_PATH.exec(path);
  if (!m) throw new OciError(404, "NAME_UNKNOWN", "no such registry endpoint");
  const name = m.groups!.name!;
  if (!isRepositoryName(name))
    throw new OciError(400, "NAME_INVALID", "invalid repository name", { name: name.slice(0, 300) });
  const i = REPO_ROUTES.findIndex((_, i) => m.groups![`e${i}`] !== undefined);
  const route = REPO_ROUTES[i]!;
  const raw = m.groups![`r${i}`] ?? "";
  const action = route.actions?.[method as Method] ?? route.actions?.["*"] ?? "pull";
  return { endpoint: route.endpoint, action, name, reference: route.decode ? decoded(raw, route.decode) : raw };
}

/** A path segment decoded; malformed percent-encoding is the client's error, not ours. */
function decoded(segment: string, what: OciCode): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new OciError(400, what, "malformed percent-encoding in the path");
  }
}

/** A request's target with its repository name resolved (undefined: no such organization). */
export interface Routed {
  target: Target;
  resolved?: ResolvedName;
}

/** The rule the server's Authorizer applies to a request (registry audience). */
export function accessRule({ target, resolved }: Routed): RouteRule | "public" {
  const { endpoint, action } = target;
  const audience = "registry" as const;
  if (endpoint === "base") return { audience, capabilities: [], anonymous: true };
  if (endpoint === "catalog") return { audience, capabilities: [Capability.CAP_REPO_LIST] };
  const capabilities = ACTION_CAPABILITIES[action];
  // An unknown organization: authenticate, then answer NAME_UNKNOWN (anonymous callers get 401 first).
  if (!resolved) return { audience, capabilities };
  if (resolved.repo) {
    // Anyone may pull a public repo; credentials presented are still checked (so a caller over
    // its address's budget whose token verifies is served, and a token's own scope applies).
    if (action === "pull" && resolved.repo.public) return { audience, capabilities: [], anonymous: true };
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

function requireGranted(call: CallContext, name: string, action: Action): void {
  if (!granted(call, name, action))
    throw unauthenticated(`the registry token does not grant ${action} on ${name.slice(0, 200)}`);
}

export type RepoHandler = (r: RepoRequest) => Promise<unknown>;

/** A resource's handler for each method; "*" for the others (none: 405 UNSUPPORTED). */
export type MethodHandlers = Partial<Record<Method | "*", RepoHandler>>;

export interface OciHandlers {
  /** /v2/: the API version check */
  base(request: FastifyRequest, reply: FastifyReply): unknown;
  catalog(request: FastifyRequest, reply: FastifyReply, call: CallContext): Promise<unknown>;
  repo: Record<RepoEndpoint, MethodHandlers>;
}

export interface RouteTableDeps {
  names: RepositoryNames;
  repos: ReposRepository;
  now(): Date;
}

export class OciRouteTable {
  private readonly routed = new WeakMap<FastifyRequest, Routed>();

  constructor(
    private readonly deps: RouteTableDeps,
    private readonly handlers: OciHandlers,
  ) {}

  /** The request's target and resolved name: parsed and resolved once, whoever asks first. */
  async route(request: FastifyRequest): Promise<Routed> {
    let routed = this.routed.get(request);
    if (!routed) {
      const q = request.url.indexOf("?");
      const target = parseTarget(request.method, q < 0 ? request.url : request.url.slice(0, q));
      routed = { target, resolved: target.name ? await this.deps.names.resolve(target.name) : undefined };
      this.routed.set(request, routed);
    }
    return routed;
  }

  async access(request: FastifyRequest): Promise<RouteRule | "public"> {
    return accessRule(await this.route(request));
  }

  /** The request's target and resolved name, if it was routed (its path parsed). */
  routedOf(request: FastifyRequest): Routed | undefined {
    return this.routed.get(request);
  }

  /** The repository name the request used, if its path parsed and names one. */
  nameOf(request: FastifyRequest): string | undefined {
    return this.routed.get(request)?.target.name;
  }

  /** The template of the endpoint the request's path named (`/v2/{name}/blobs/{digest}`), if it parsed. */
  templateOf(request: FastifyRequest): string | undefined {
    const target = this.routed.get(request)?.target;
    return target && TEMPLATES[target.endpoint];
  }

  /** The scope of a 401's challenge for this request (none when its path did not parse). */
  challengeScope(request: FastifyRequest): string | undefined {
    return challengeScope(this.routed.get(request)?.target);
  }

  /** Runs the request's handler; authorization (by `access`) has passed. */
  async dispatch(request: FastifyRequest, reply: FastifyReply, call: CallContext): Promise<unknown> {
    reply.headers(API_VERSION);
    const { target, resolved } = await this.route(request);
    const { endpoint, name, action, reference } = target;
    if (endpoint === "base") return this.handlers.base(request, reply);
    if (endpoint === "catalog") return this.handlers.catalog(request, reply, call);
    requireGranted(call, name!, action);
    if (!resolved || (!resolved.repo && action !== "push")) throw nameUnknown(name!);
    const repo = resolved.repo ?? (await this.firstPush(resolved));
    const methods = this.handlers.repo[endpoint];
    const handler = methods[request.method as Method] ?? methods["*"];
    if (!handler) throw unsupported();
    return handler({ request, reply, call, name: name!, reference, repo });
  }

  /** The repo a first push creates. */
  private async firstPush(resolved: ResolvedName): Promise<RepoRef> {
    if (!isRepositoryName(resolved.path)) throw new OciError(400, "NAME_INVALID", "invalid repository name");
    const repo = await this.deps.repos.ensure(resolved.group.uid, resolved.path, this.deps.now());
    if (!repo) throw nameUnknown(resolved.name);
    return repo;
  }
}
