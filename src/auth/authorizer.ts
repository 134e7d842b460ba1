// Authentication and authorization of every RPC, on both transports, driven by the methods'
// `chainguard.annotations.iam` option (read here as the transcoder reads google.api.http):
// - no option: public (the token exchange itself);
// - `disabled`: the method checks credentials itself;
// - `enabled`: a valid API token is required; all listed capabilities are required on the
//   request's scope (its `iam_scope` field: the resource's uid or its parent). Unscoped methods
//   (List*, CreateGroup, GetRole, ...) get the caller's visibility and decide per item.
import { getOption, hasOption, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { IAM_Rules, iam, iam_scope } from "../gen/annotations/auth_pb.js";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { permissionDenied, unauthenticated } from "../core/errors.js";
import {
  declaredScopeOf,
  type Audience,
  type Authorizer,
  type CallContext,
  type Freshness,
  type RouteRule,
} from "../core/service.js";
import type { RoleBindingDirectory } from "../iam/api.js";
import { Access, type Grant, type Principal, type VerifiedToken } from "../core/access.js";
import { LruCache } from "../core/lru.js";
import { http } from "../gen/google/api/annotations_pb.js";
import { create } from "@bufbuild/protobuf";
import { ExchangeRequestSchema } from "../gen/platform/oidc/v1/oidc.platform_pb.js";
import { resource } from "../gen/google/api/resource_pb.js";
import { isValidUidp } from "../core/uidp.js";
import type { TokenExchange } from "./token-exchange.js";
import { REGISTRY_LOGIN_EVENT, isRefusal, type AuthEvents } from "./events.js";
import {
  ANONYMOUS_SUBJECT,
  OPERATOR_SUBJECT,
  bearerToken,
  principalKey,
  unverifiedClaims,
  type TokenIssuer,
} from "./tokens.js";

export interface IamRule {
  mode: "public" | "self-checked" | "enabled";
  capabilities: number[];
  unscoped: boolean;
  /** field path of the request's scope (e.g. [group, uid]); empty when the method has none */
  scopePath: DescField[];
  /**
   * Reads only (its REST binding is a GET): it may run on cached grants and be confirmed after,
   * since running it again changes nothing.
   */
  readOnly: boolean;
  /** the noun its NOT_FOUND answers use for the scope */
  noun: string;
}

const rules = new WeakMap<DescMethod, IamRule>();

function scopePathOf(desc: DescMessage): DescField[] {
  const field = desc.fields.find((f) => getOption(f, iam_scope));
  if (!field) return [];
  return field.fieldKind === "message" ? [field, ...scopePathOf(field.message)] : [field];
}

export function iamRule(method: DescMethod): IamRule {
  let rule = rules.get(method);
  if (!rule) {
    const common = {
      readOnly: hasOption(method, http) && getOption(method, http).pattern.case === "get",
      noun: nounOf(method),
    };
    if (!hasOption(method, iam)) rule = { mode: "public", capabilities: [], unscoped: true, scopePath: [], ...common };
    else {
      const option = getOption(method, iam);
      if (option.mode.case !== "enabled")
        rule = { mode: "self-checked", capabilities: [], unscoped: true, scopePath: [], ...common };
      else {
        const r: IAM_Rules = option.mode.value;
        // A reference proto without an iam_scope field may have its scope declared by the server.
        const declared = r.unscoped ? undefined : declaredScopeOf(method);
        const declaredField = declared && method.input.fields.find((f) => f.name === declared.field);
        rule = {
          mode: "enabled",
          capabilities: [...r.capabilities],
          unscoped: r.unscoped,
          scopePath: r.unscoped ? [] : declaredField ? [declaredField] : scopePathOf(method.input),
          ...common,
          ...(declared ? { noun: declared.noun } : {}),
        };
      }
    }
    rules.set(method, rule);
  }
  return rule;
}

function scopeOf(request: unknown, path: DescField[]): string | undefined {
  let value: unknown = request;
  for (const field of path) value = (value as Record<string, unknown> | undefined)?.[field.localName];
  return typeof value === "string" ? value : undefined;
}

/** "RoleBindingsService" → "role binding": the noun its NOT_FOUND answers use. */
export function resourceNoun(serviceName: string): string {
  const plural = serviceName.replace(/Service$/, "");
  const singular = plural.endsWith("ies") ? plural.slice(0, -3) + "y" : plural.replace(/s$/, "");
  return singular.replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase();
}

/**
 * The noun a NOT_FOUND answer uses for a method's scope: the resource the method returns, as its
 * `google.api.resource` names it ("repoVisibility" → "repo visibility"), else the service's.
 */
function nounOf(method: DescMethod): string {
  const singular = hasOption(method.output, resource) ? getOption(method.output, resource).singular : "";
  if (singular) return singular.replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase();
  return resourceNoun(method.parent.name);
}

/** How many identities' grants a server keeps (see TokenAuthorizer). */
export const GRANTS_CACHE_SIZE = 10_000;

/** An identity's grants as read at one value of the authorization change counter. */
interface CachedGrants {
  epoch: string;
  principal: Principal;
  grants: Grant[];
  /** the Access of a token that narrows nothing, made once */
  unnarrowed?: Access;
}

/**
 * A call answered from cached grants: confirmed when a read of the call saw the change counter
 * at the value the grants were read with.
 */
class GrantsFreshness implements Freshness {
  /** undefined: no read has reported yet */
  current: boolean | undefined;

  constructor(
    /** the change counter as a read selects it (RoleBindingDirectory.authzEpochProbe) */
    readonly probe: unknown,
    readonly subject: string,
    readonly epoch: string,
  ) {}

  report(value: unknown): void {
    // Several reads may report; one that saw another value is enough to make the call stale.
    this.current = (this.current ?? true) && String(value) === this.epoch;
  }
}

export class TokenAuthorizer implements Authorizer {
  /**
   * Each identity's grants by uid, with the authorization change counter they were read at
   * (migration 009). Every replica keeps its own; none may trust it without seeing the counter
   * unchanged in the database — before the call (writes, plain routes) or in the same statement
   * as the call's data (read-only RPCs) — so a revoked binding stops working on the very next
   * request everywhere.
   */
  readonly #grants = new LruCache<string, CachedGrants>(GRANTS_CACHE_SIZE);

  constructor(
    private readonly tokens: TokenIssuer,
    private readonly roleBindings: RoleBindingDirectory,
    /** turns a workload's own token (a pull token's JWT, an OIDC token) into one of ours */
    private readonly exchange?: TokenExchange,
    /** what every authenticated caller holds beside its bindings (public advisory groups) */
    private readonly sharedGrants: readonly Grant[] = [],
    /** where refused credentials and registry password logins are recorded */
    private readonly events?: AuthEvents,
  ) {}

  /** Who the bearer token of these headers belongs to, and what it may do now. */
  async authenticate(headers: Headers, audience: Audience = "api"): Promise<{ access: Access; token: VerifiedToken }> {
    return this.authenticateCall({ headers }, audience, false);
  }

  private async authenticateCall(
    call: CallContext,
    audience: Audience,
    readOnly: boolean,
  ): Promise<{ access: Access; token: VerifiedToken }> {
    let verified: VerifiedToken;
    try {
      verified = audience === "api" ? await this.apiToken(call) : await this.registryToken(call);
    } catch (err) {
      // Only credentials that were presented and verified (or exchanged) and failed: a missing
      // token or a refusal by the rate limits before any check records nothing.
      if (this.events && isRefusal(err) && presentsCredentials(call.headers, audience))
        throw await this.events.credentialsRefused(call, this.audienceUrl(audience), err);
      throw err;
    }
    if (verified.subject === ANONYMOUS_SUBJECT) throw unauthenticated("authentication is required");
    return { access: await this.accessOf(verified, call, readOnly), token: verified };
  }

  private audienceUrl(audience: Audience): string {
    return audience === "api" ? this.tokens.urls.apiAudience : this.tokens.urls.registryAudience;
  }

  private async apiToken(call: CallContext): Promise<VerifiedToken> {
    const token = bearerToken(call.headers);
    if (!token) throw unauthenticated("a bearer token is required (Authorization: Bearer <token>)");
    // Whom it claims to be matters only to a refusal's accounting: a token that verifies names its
    // subject without a second decode (one per request was 5% of an authenticated GET's CPU).
    try {
      const verified = await this.tokens.verify(token, this.tokens.urls.apiAudience);
      call.claimedPrincipal = principalKey(verified.subject);
      return verified;
    } catch (err) {
      call.claimedPrincipal = principalKey(unverifiedClaims(token)?.sub);
      throw err;
    }
  }

  /**
   * The registry takes what docker-style clients send (distribution token spec): a Bearer token,
   * or HTTP Basic with a token as the password and any user (`_token` by convention, or the
   * identity's uid). As a password, one of our API tokens logs in as its identity too (what
   * `bulwark auth token` prints), so one token serves the API and `docker login`. A password that
   * is not one of our tokens is exchanged for the identity named by the user (a pull token's JWT
   * signed by the identity's static key, a CI system's OIDC token). Any other token is refused
   * (403) with the audience the registry expects.
   */
  private async registryToken(call: CallContext): Promise<VerifiedToken> {
    const { registryAudience, apiAudience } = this.tokens.urls;
    const basic = basicCredentials(call.headers);
    const token = basic?.password ?? bearerToken(call.headers);
    if (!token) throw unauthenticated("credentials are required (a registry token, or user and password)");
    const claims = unverifiedClaims(token);
    const namedIdentity = basic && isValidUidp(basic.user) ? basic.user : undefined;
    call.claimedPrincipal = principalKey(namedIdentity ?? claims?.sub);
    const exchangeable = namedIdentity !== undefined && this.exchange !== undefined;
    // The audience the token names picks the one verification to try (claims read unverified,
    // only to choose; the verification decides). A token of ours verifies without a database read.
    const audience = !claims
      ? registryAudience // not a JWT: verification names the problem
      : claims.aud.includes(registryAudience)
        ? registryAudience
        : basic && claims.aud.includes(apiAudience)
          ? apiAudience
          : undefined;
    if (audience !== undefined) {
      try {
        return await this.tokens.verify(token, audience);
      } catch (err) {
        if (!exchangeable || !claims) throw err;
      }
    } else if (!exchangeable) {
      throw permissionDenied(
        `the token's audience is not accepted here: the registry takes a registry token (audience ` +
          `${JSON.stringify(registryAudience)}) or, as the password with any user name (e.g. _token), ` +
          `an API token of this server (audience ${JSON.stringify(apiAudience)})`,
      );
    }
    // Over its address's request budget, a call is not given a database read or a fetch.
    if (call.addressLimitRefusal) throw call.addressLimitRefusal;
    const request = create(ExchangeRequestSchema, { identity: namedIdentity, aud: [registryAudience] });
    const issued = await this.exchange!.exchange(request, token).catch(() => {
      throw unauthenticated("the user name and password are not accepted");
    });
    await this.events?.tokenExchanged(call, {
      type: REGISTRY_LOGIN_EVENT,
      identity: issued.subject,
      audience: issued.audience,
      act: issued.act,
      group: issued.group,
    });
    return this.tokens.verify(issued.token, registryAudience);
  }

  private async accessOf(verified: VerifiedToken, call: CallContext, readOnly: boolean): Promise<Access> {
    const caps = verified.caps
      ? new Set(verified.caps.map((c) => Capability[c as keyof typeof Capability] as number))
      : undefined;
    const narrowing = { caps, scopes: verified.scopes };
    if (verified.subject === OPERATOR_SUBJECT)
      return Access.operator({ kind: "operator", uid: OPERATOR_SUBJECT }, narrowing);
    const entry = await this.grantsOf(verified.subject, call, readOnly);
    const all = () => (this.sharedGrants.length ? [...entry.grants, ...this.sharedGrants] : entry.grants);
    // Most tokens narrow nothing: their Access is the same for every request while the grants hold.
    if (!caps && !verified.scopes) return (entry.unnarrowed ??= Access.fromGrants(entry.principal, all()));
    return Access.fromGrants(entry.principal, all(), narrowing);
  }

  /**
   * The identity's grants: from the cache when the change counter has not moved since they were
   * read (a read-only call learns that from its own reads, later; anything else asks now), else
   * from the database.
   */
  private async grantsOf(subject: string, call: CallContext, readOnly: boolean): Promise<CachedGrants> {
    const cached = call.requireCurrentGrants ? undefined : this.#grants.get(subject);
    if (cached) {
      const pending = call.freshness;
      if (pending instanceof GrantsFreshness && pending.subject === subject && pending.epoch === cached.epoch)
        return cached;
      // Deferred only for the call's own method: an adapter's nested authorization (authorizeAs)
      // inside a write must not make invoke run that write again.
      if (readOnly && !pending && call.access === undefined) {
        call.freshness = new GrantsFreshness(this.roleBindings.authzEpochProbe, subject, cached.epoch);
        return cached;
      }
      if ((await this.roleBindings.authzEpoch()) === cached.epoch) return cached;
    }
    const snapshot = await this.roleBindings.grantsSnapshot(subject);
    if (!snapshot.identity) throw unauthenticated("the token's identity no longer exists");
    const fresh: CachedGrants = {
      epoch: snapshot.epoch,
      principal: { kind: snapshot.identity.parentUid === null ? "human" : "workload", uid: snapshot.identity.uid },
      grants: snapshot.grants,
    };
    // A slower request that read an older snapshot must not replace a newer entry.
    const current = this.#grants.get(subject);
    if (!current || BigInt(current.epoch) <= BigInt(fresh.epoch)) this.#grants.set(subject, fresh);
    return fresh;
  }

  /**
   * Every capability an identity holds on `uid` now (its bindings and the shared grants; the
   * operator: all), from the same cached grants requests use, confirmed against the change
   * counter; an identity that no longer exists holds none. For work done on an identity's behalf
   * outside a request (the events module's deliveries to a subscription's creator).
   */
  async capabilitiesOf(identityUid: string, uid: string): Promise<Set<number>> {
    if (identityUid === OPERATOR_SUBJECT)
      return Access.operator({ kind: "operator", uid: OPERATOR_SUBJECT }).capabilitiesAt(uid);
    let entry: CachedGrants;
    try {
      entry = await this.grantsOf(identityUid, { headers: new Headers() }, false);
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.Unauthenticated) return new Set();
      throw err;
    }
    const all = this.sharedGrants.length ? [...entry.grants, ...this.sharedGrants] : entry.grants;
    return Access.fromGrants(entry.principal, all).capabilitiesAt(uid);
  }

  async confirm(call: CallContext): Promise<boolean> {
    const freshness = call.freshness;
    if (!(freshness instanceof GrantsFreshness)) return true;
    const current = freshness.current ?? (await this.roleBindings.authzEpoch()) === freshness.epoch;
    if (!current && this.#grants.get(freshness.subject)?.epoch === freshness.epoch)
      this.#grants.delete(freshness.subject);
    return current;
  }

  /** Authenticates the call's bearer token for `audience` and records the caller on the call. */
  private async admit(call: CallContext, audience: Audience, readOnly = false): Promise<Access> {
    const { access, token } = await this.authenticateCall(call, audience, readOnly);
    call.access = access;
    call.principal = access.principal;
    call.token = token;
    return access;
  }

  async authorizeRoute(rule: RouteRule, call: CallContext): Promise<void> {
    if (rule.anonymous) {
      if (!call.headers.has("authorization")) return;
      // An anonymous registry token (what docker-style clients fetch for public pulls) is no
      // credential either. Only a Bearer one is looked at: Basic credentials are exchanged once, below.
      const bearer = rule.audience === "registry" ? bearerToken(call.headers) : undefined;
      if (bearer) {
        const token = await this.tokens.verify(bearer, this.tokens.urls.registryAudience).catch(() => undefined);
        if (token?.subject === ANONYMOUS_SUBJECT) return;
      }
    }
    const access = await this.admit(call, rule.audience);
    if (rule.operatorOnly) {
      if (!access.isOperator) throw permissionDenied("this is for the platform operator");
      return;
    }
    if (rule.scope === undefined) {
      call.visibility = access.visibility(rule.capabilities);
      return;
    }
    access.require(rule.capabilities, rule.scope, rule.resourceType ?? "resource");
  }

  async authorize(method: DescMethod, request: unknown, call: CallContext): Promise<void> {
    const rule = iamRule(method);
    if (rule.mode !== "enabled") return;
    const access = await this.admit(call, "api", rule.readOnly);
    if (rule.unscoped) {
      call.visibility = access.visibility(rule.capabilities);
      return;
    }
    if (rule.scopePath.length === 0) {
      if (rule.capabilities.length > 0 && !access.isOperator)
        throw permissionDenied("this method is for the platform operator");
      return;
    }
    const scope = scopeOf(request, rule.scopePath) ?? "";
    if (scope === "") {
      // Outside any group (e.g. a root-level identity): the operator's business only.
      if (!access.isOperator) throw permissionDenied("only the platform operator may act outside a group");
      return;
    }
    const isParent = rule.scopePath[rule.scopePath.length - 1]!.name === "parent";
    access.require(rule.capabilities, scope, isParent ? "group" : rule.noun);
  }
}

/** Whether the request carries credentials of the kind `audience` takes (a refusal of them is recorded). */
function presentsCredentials(headers: Headers, audience: Audience): boolean {
  if (audience === "api") return bearerToken(headers) !== undefined;
  return (basicCredentials(headers)?.password ?? bearerToken(headers)) !== undefined;
}

/** HTTP Basic credentials of an Authorization header, or undefined. */
function basicCredentials(headers: Headers): { user: string; password: string } | undefined {
  const m = /^Basic\s+([A-Za-z0-9+/]+=*)\s*$/i.exec(headers.get("authorization") ?? "");
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon < 0 ? undefined : { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
