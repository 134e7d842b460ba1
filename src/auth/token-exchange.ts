// The token exchange's rules (sts.ts serves them as SecurityTokenService.Exchange).
//
// A workload presents its platform's OIDC token and names an identity; when the token may assume
// that identity (by the identity's claim match or static keys), it gets one of our tokens for it
// (1 hour at most). Or a caller presents one of our API tokens without an identity and gets
// another token for the same subject (e.g. for the registry), narrowed further if asked.
//
// Whatever does not match is PERMISSION_DENIED with one generic message, whether the identity
// does not exist, cannot be exchanged, or the token fails any check; the precise reason goes to
// the debug log (never the token), so an answer reveals nothing of an identity's configuration.
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
} from "jose";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import type { Identity_ClaimMatch, Identity_StaticKeys } from "../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import type { ExchangeRequest } from "../gen/platform/oidc/v1/oidc.platform_pb.js";
import { invalidArgument, permissionDenied, unauthenticated, type FieldViolation } from "../core/errors.js";
import { matchesAnchored } from "../core/patterns.js";
import { isAncestorOrSelf, isValidUidp, parentOf } from "../core/uidp.js";
import type { IdentityDirectory } from "../iam/api.js";
import { MAX_TOKEN_LIFETIME_MS } from "./keys.js";
import { OPERATOR_SUBJECT, actClaimOf, type IssuedToken, type TokenIssuer, type VerifiedToken } from "./tokens.js";
import type { UpstreamIssuers } from "./upstream.js";
import { quote } from "../core/strings.js";

/** Asymmetric signatures only: no `none`, no HMAC (whose "key" could be a public key). */
export const UPSTREAM_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
];
/** Tolerated clock skew for upstream tokens' exp/nbf/iat. */
export const UPSTREAM_CLOCK_SKEW_SECONDS = 60;

/** The one answer to every failed exchange. */
export const EXCHANGE_DENIED = "the presented token cannot assume this identity";

export interface TokenExchangeDeps {
  tokens: TokenIssuer;
  identities: IdentityDirectory;
  upstream: UpstreamIssuers;
  logger?: { debug(obj: object, msg: string): void };
  now?: () => Date;
}

/** What the caller asked the new token to be: its audiences, and optionally narrower powers. */
interface Requested {
  audience: string[];
  caps?: string[];
  scopes?: string[];
}

/** Who the new token is for and what it may do; `notAfter` (epoch ms) caps its lifetime. */
interface Grant {
  subject: string;
  caps?: string[];
  scopes?: string[];
  notAfter?: number;
  /** the presented token's iss, sub, aud, email: the new token's `act` claim */
  act?: Readonly<Record<string, string>>;
  /** the assumed identity's group, when its row was read */
  group?: string;
}

/** An exchange's token, and what the events record of it (never the tokens themselves). */
export interface Exchanged extends IssuedToken {
  subject: string;
  audience: string[];
  act?: Readonly<Record<string, string>>;
  group?: string;
}

/** What a presented token proved: its verified claims, the identity's group, a lifetime cap (epoch ms). */
interface Assumed {
  payload: JWTPayload;
  group?: string;
  notAfter?: number;
}

/** A failed check; its reason is logged, never answered. */
class Denied extends Error {}

function deny(reason: string): never {
  throw new Denied(reason);
}

/** A claim as the string `claims` and `claimPatterns` compare with: strings, numbers and booleans. */
function claimString(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return undefined;
}

function audiencesOf(payload: JWTPayload): string[] {
  if (typeof payload.aud === "string") return [payload.aud];
  return Array.isArray(payload.aud) ? payload.aud.filter((a) => typeof a === "string") : [];
}

/** An exact value, or an anchored pattern; an empty rule matches nothing. */
function matches(expected: string | undefined, isPattern: boolean, value: unknown): boolean {
  if (typeof value !== "string" || expected === undefined || expected === "") return false;
  try {
    return isPattern ? matchesAnchored(expected, value) : value === expected;
  } catch {
    return false;
  }
}

const isCapabilityName = (name: string) =>
  name !== "UNKNOWN" && typeof Capability[name as keyof typeof Capability] === "number";

export class TokenExchange {
  private readonly now: () => Date;

  constructor(private readonly deps: TokenExchangeDeps) {
    this.now = deps.now ?? (() => new Date());
  }

  /** One of our tokens for `token`, as the request asks; throws the RPC error to answer. */
  async exchange(req: ExchangeRequest, token: string): Promise<Exchanged> {
    const want = this.requested(req);
    const grant =
      req.identity === "" ? await this.reissue(token, want) : await this.assumeIdentity(req.identity, token, want);
    const { notAfter } = grant;
    const lifetimeMs = Math.min(
      MAX_TOKEN_LIFETIME_MS,
      notAfter === undefined ? MAX_TOKEN_LIFETIME_MS : notAfter - this.now().getTime(),
    );
    if (lifetimeMs < 1000) throw unauthenticated("the presented token expires too soon to be exchanged");
    const { subject, caps, scopes, act, group } = grant;
    const issued = await this.deps.tokens.mint({ subject, audience: want.audience, lifetimeMs, caps, scopes, act });
    return { ...issued, subject, audience: want.audience, act, group };
  }

  /** The request's audiences, caps and scopes, checked (INVALID_ARGUMENT) and deduplicated. */
  private requested(req: ExchangeRequest): Requested {
    const violations: FieldViolation[] = [];
    const { apiAudience, registryAudience } = this.deps.tokens.urls;
    for (const aud of req.aud) {
      if (aud !== apiAudience && aud !== registryAudience) {
        const ours = `the API, ${apiAudience}, or the registry, ${registryAudience}`;
        violations.push({ field: "aud", description: `${quote(aud)} is not an audience of this server (${ours})` });
      }
    }
    for (const cap of req.cap) {
      if (!isCapabilityName(cap)) {
        violations.push({
          field: "cap",
          description: `${quote(cap)} is not a capability name (e.g. CAP_IAM_GROUPS_LIST)`,
        });
      }
    }
    for (const scope of req.scopes) {
      if (!isValidUidp(scope)) violations.push({ field: "scopes", description: `${quote(scope)} is not a valid UIDP` });
    }
    if (req.scope !== "")
      violations.push({ field: "scope", description: "is deprecated and not supported: use scopes" });
    if (req.identity !== "" && !isValidUidp(req.identity)) {
      violations.push({ field: "identity", description: `${quote(req.identity)} is not a valid UIDP` });
    }
    if (violations.length) throw invalidArgument(violations);
    const dedupe = (xs: string[]) => [...new Set(xs)];
    return {
      audience: req.aud.length ? dedupe(req.aud) : [apiAudience],
      caps: req.cap.length ? dedupe(req.cap) : undefined,
      scopes: req.scopes.length ? dedupe(req.scopes) : undefined,
    };
  }

  /** A workload's token for the identity `uid`: any failed check is the one generic denial. */
  private async assumeIdentity(uid: string, token: string, want: Requested): Promise<Grant> {
    try {
      decodeProtectedHeader(token);
      decodeJwt(token);
    } catch {
      throw unauthenticated("the bearer token is not a JWT");
    }
    let assumed: Assumed;
    try {
      assumed = await this.assume(uid, token);
    } catch (err) {
      if (!(err instanceof Denied)) throw err;
      this.deps.logger?.debug({ identity: uid, reason: err.message }, "token exchange denied");
      throw permissionDenied(EXCHANGE_DENIED);
    }
    await this.deps.identities.touch(uid, this.now());
    const { notAfter, payload, group } = assumed;
    return { subject: uid, caps: want.caps, scopes: want.scopes, notAfter, act: actClaimOf(payload), group };
  }

  /** Checks that the token may assume the identity (else Denied): its verified claims and the lifetime cap, if any. */
  private async assume(uid: string, token: string): Promise<Assumed> {
    const row = await this.deps.identities.get(uid);
    if (!row) deny("no such identity");
    const group = parentOf(uid);
    const relationship = this.deps.identities.relationshipOf(row);
    switch (relationship.case) {
      case "claimMatch":
        return { payload: await this.assumeClaimMatch(token, relationship.value), group };
      case "staticKeys":
        return { ...(await this.assumeStaticKeys(token, relationship.value)), group };
      case "awsIdentity":
        return deny("AWS identities are not exchanged here");
      case "servicePrincipal":
        return deny("service principals are internal");
      default:
        return deny("the identity has no relationship");
    }
  }

  private async assumeClaimMatch(token: string, cm: Identity_ClaimMatch): Promise<JWTPayload> {
    // Checked on the unverified claims first, so only an issuer the identity names is ever fetched.
    const unverified = decodeJwt(token);
    const early = this.claimMatchProblem(cm, unverified);
    if (early) deny(early);
    let keys: JWTVerifyGetKey;
    try {
      keys = await this.deps.upstream.keySet(unverified.iss!);
    } catch (err) {
      deny(`issuer discovery failed: ${(err as Error).message}`);
    }
    const payload = await this.verify(token, keys, { issuer: unverified.iss! });
    const problem = this.claimMatchProblem(cm, payload);
    if (problem) deny(problem);
    return payload;
  }

  /** Checks the token against the identity's own keys; the keys' expiry (epoch ms), if any. */
  private async assumeStaticKeys(
    token: string,
    sk: Identity_StaticKeys,
  ): Promise<{ payload: JWTPayload; notAfter?: number }> {
    const expiresAt = sk.expirationTime ? timestampDate(sk.expirationTime).getTime() : undefined;
    // A token it mints must not outlive it either (see the lifetime cap in exchange).
    if (expiresAt !== undefined && expiresAt - this.now().getTime() < 1000) {
      deny("the identity's static keys have expired");
    }
    let keys: JWTVerifyGetKey;
    try {
      keys = createLocalJWKSet(JSON.parse(sk.issuerKeys) as JSONWebKeySet);
    } catch (err) {
      deny(`the identity's issuer_keys are unusable: ${(err as Error).message}`);
    }
    const payload = await this.verify(token, keys, { issuer: sk.issuer, subject: sk.subject });
    const auds = audiencesOf(payload);
    const audienceOk = sk.audiences.length ? auds.some((a) => sk.audiences.includes(a)) : this.forUs(auds);
    if (!audienceOk) deny("audience does not match");
    return { payload, notAfter: expiresAt };
  }

  /** Why the claims do not satisfy the claim match, or undefined. */
  private claimMatchProblem(cm: Identity_ClaimMatch, payload: JWTPayload): string | undefined {
    if (!matches(cm.iss.value, cm.iss.case === "issuerPattern", payload.iss)) return "issuer does not match";
    if (!matches(cm.sub.value, cm.sub.case === "subjectPattern", payload.sub)) return "subject does not match";
    const auds = audiencesOf(payload);
    if (cm.aud.case === undefined || cm.aud.value === "") {
      if (!this.forUs(auds)) return "audience is not this issuer";
    } else if (!auds.some((a) => matches(cm.aud.value, cm.aud.case === "audiencePattern", a))) {
      return "audience does not match";
    }
    for (const [name, want] of Object.entries(cm.claims)) {
      if (claimString(payload[name]) !== want) return `claim ${quote(name)} does not match`;
    }
    for (const [name, pattern] of Object.entries(cm.claimPatterns)) {
      if (!matches(pattern, true, claimString(payload[name]))) return `claim ${quote(name)} does not match its pattern`;
    }
    return undefined;
  }

  private async verify(
    token: string,
    keys: JWTVerifyGetKey,
    options: { issuer: string; subject?: string },
  ): Promise<JWTPayload> {
    const at = this.now();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: options.issuer,
        subject: options.subject,
        algorithms: UPSTREAM_ALGORITHMS,
        clockTolerance: UPSTREAM_CLOCK_SKEW_SECONDS,
        requiredClaims: ["iss", "sub", "exp", "iat"],
        currentDate: at,
      }));
    } catch (err) {
      // jose's messages name the failed check; its errors also carry the claims, which stay out of the log.
      deny(`verification failed: ${(err as Error).message}`);
    }
    // jose checks iat only against a max age; a token issued in the future is refused here.
    if (payload.iat! > at.getTime() / 1000 + UPSTREAM_CLOCK_SKEW_SECONDS) deny("iat is in the future");
    return payload;
  }

  /** The default audience rule: the token is meant for this issuer (with or without scheme and slash). */
  private forUs(auds: string[]): boolean {
    const issuer = this.deps.tokens.urls.issuer;
    const bare = issuer.replace(/\/+$/, "");
    const schemeless = bare.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
    const ours = new Set([issuer, bare, `${bare}/`, schemeless, `${schemeless}/`]);
    return auds.some((a) => ours.has(a));
  }

  /** Without an identity: one of our API tokens, re-issued for the same subject, only ever narrower. */
  private async reissue(token: string, want: Requested): Promise<Grant> {
    const { tokens, identities, logger } = this.deps;
    let presented: VerifiedToken;
    try {
      presented = await tokens.verify(token, tokens.urls.apiAudience);
    } catch (err) {
      logger?.debug({ reason: (err as Error).message }, "token exchange without identity: not an API token");
      throw unauthenticated(
        "without an identity, the bearer token must be an API token of this server; " +
          "to exchange a workload's OIDC token, name the identity to assume",
      );
    }
    if (presented.subject !== OPERATOR_SUBJECT && !(await identities.get(presented.subject))) {
      throw unauthenticated("the token's identity no longer exists");
    }
    let caps = want.caps ?? presented.caps;
    if (presented.caps && want.caps) {
      const held = new Set(presented.caps);
      if (want.caps.some((c) => !held.has(c))) {
        throw permissionDenied(
          "a re-issued token can only narrow: cap must be a subset of the presented token's capabilities",
        );
      }
      caps = want.caps;
    }
    const scopes = want.scopes ?? presented.scopes;
    if (presented.scopes && want.scopes) {
      const within = presented.scopes;
      if (want.scopes.some((s) => !within.some((p) => isAncestorOrSelf(p, s)))) {
        throw permissionDenied(
          "a re-issued token can only narrow: scopes must lie within the presented token's scopes",
        );
      }
    }
    // Never outlives the presented token, so a token cannot renew itself forever. Who was behind
    // the presented token stays the actor: its own `act`, else the presented token itself.
    const act = presented.act ?? { iss: tokens.urls.issuer, sub: presented.subject, aud: tokens.urls.apiAudience };
    return { subject: presented.subject, caps, scopes, notAfter: presented.expiry.getTime(), act };
  }
}
