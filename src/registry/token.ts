// The registry's token endpoint (distribution token spec): `GET /token?service=&scope=...`
// answers a short registry token limited to the repositories and actions the caller may use
// now. Credentials are optional (anonymous callers get pull on public repos only); HTTP Basic
// and Bearer are authenticated by the server's Authorizer like every route.
import type { FastifyRequest } from "fastify";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { invalidArgument } from "../core/errors.js";
import type { RegistryGrant } from "../core/access.js";
import type { CallContext } from "../core/service.js";
import type { PublicUrls } from "../platform/config.js";
import type { PlainRouter } from "../platform/routes.js";
import { parentOf } from "../core/uidp.js";
import { REGISTRY_LOGIN_EVENT, type AuthEvents } from "../auth/api.js";
import { isRepositoryName, type RepositoryNames } from "./names.js";
import { ACTION_CAPABILITIES, type Action } from "./oci/router.js";
import { bearerChallenge, ociAnswerOf, sendOciError } from "./oci/errors.js";

/** Registry tokens are short: a pull or push gets a fresh one per repository anyway. */
export const REGISTRY_TOKEN_LIFETIME_SECONDS = 300;

export interface TokenMinter {
  mint(req: {
    subject: string;
    audience: string[];
    lifetimeMs: number;
    caps?: string[];
    scopes?: string[];
    registryAccess: RegistryGrant[];
    act?: Readonly<Record<string, string>>;
  }): Promise<{ token: string; expiry: Date }>;
}

export interface TokenRouteDeps {
  names: RepositoryNames;
  urls: PublicUrls;
  issuer: TokenMinter;
  /** the subject of tokens for callers without credentials */
  anonymousSubject: string;
  /** where a login (a token for credentials presented) is recorded */
  events: Pick<AuthEvents, "tokenExchanged">;
}

const SCOPE = /^repository:([^:]+):([a-z*,]+)$/;
const MAX_SCOPES = 20;

function scopesOf(request: FastifyRequest): string[] {
  const raw = (request.query as Record<string, string | string[] | undefined>).scope;
  const list = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  // Clients send several scopes as repeated parameters or space-separated in one.
  return list.flatMap((s) => s.split(" ")).filter((s) => s !== "");
}

/** The actions of `wanted` the caller may perform on `name` now. */
async function grantedActions(
  names: RepositoryNames,
  call: CallContext,
  name: string,
  wanted: Action[],
): Promise<Action[]> {
  if (!isRepositoryName(name)) return [];
  const resolved = await names.resolve(name);
  if (!resolved) return [];
  const { repo, group } = resolved;
  const access = call.access;
  return wanted.filter((action) => {
    if (repo) {
      if (action === "pull" && repo.public) return true;
      return access?.can(ACTION_CAPABILITIES[action], repo.uid) ?? false;
    }
    // No repo yet: what the caller could do once it exists; a first push also creates it.
    if (!access || action === "delete") return false;
    const create = action === "push" ? [Capability.CAP_REPO_CREATE] : [];
    return access.can([...ACTION_CAPABILITIES[action], ...create], group.uid);
  });
}

export function registerTokenRoute(router: PlainRouter, deps: TokenRouteDeps): void {
  router.route({
    method: "GET",
    url: "/token",
    access: () => ({ audience: "registry", capabilities: [], anonymous: true }),
    async handler(request, reply, call) {
      const service = (request.query as Record<string, unknown>).service;
      if (service !== undefined && service !== deps.urls.registryAudience)
        throw invalidArgument({ field: "service", description: `this registry is ${deps.urls.registryAudience}` });
      const scopes = scopesOf(request);
      if (scopes.length > MAX_SCOPES)
        throw invalidArgument({ field: "scope", description: `at most ${MAX_SCOPES} scopes per token` });
      const grants: RegistryGrant[] = [];
      for (const scope of scopes) {
        const m = SCOPE.exec(scope);
        if (!m) continue; // other resource types (registry:catalog:*) are granted nothing
        const wanted = m[2]!
          .split(",")
          .flatMap((a): Action[] =>
            a === "*" ? ["pull", "push", "delete"] : a === "pull" || a === "push" || a === "delete" ? [a] : [],
          );
        // A registry token presented here cannot widen itself.
        const held = call.token?.registryAccess;
        const allowed = [...new Set(wanted)].filter(
          (a) => !held || held.some((g) => g.type === "repository" && g.name === m[1] && g.actions.includes(a)),
        );
        const actions = await grantedActions(deps.names, call, m[1]!, allowed);
        grants.push({ type: "repository", name: m[1]!, actions });
      }
      const issued = await deps.issuer.mint({
        subject: call.principal?.uid ?? deps.anonymousSubject,
        audience: [deps.urls.registryAudience],
        lifetimeMs: REGISTRY_TOKEN_LIFETIME_SECONDS * 1000,
        // A narrowed credential stays narrowed.
        caps: call.token?.caps,
        scopes: call.token?.scopes,
        registryAccess: grants,
        // Who was behind the credentials stays the actor of what the registry token does.
        act: call.token?.act,
      });
      if (call.principal)
        await deps.events.tokenExchanged(call, {
          type: REGISTRY_LOGIN_EVENT,
          identity: call.principal.uid,
          audience: [deps.urls.registryAudience],
          act: call.token?.act,
          group: parentOf(call.principal.uid),
        });
      const issuedAt = new Date(issued.expiry.getTime() - REGISTRY_TOKEN_LIFETIME_SECONDS * 1000);
      return reply.header("content-type", "application/json").send(
        JSON.stringify({
          token: issued.token,
          access_token: issued.token,
          expires_in: REGISTRY_TOKEN_LIFETIME_SECONDS,
          issued_at: issuedAt.toISOString(),
        }),
      );
    },
    renderError: (wire, reply, thrown) => sendOciError(reply, ociAnswerOf(wire, thrown), bearerChallenge(deps.urls)),
  });
}
