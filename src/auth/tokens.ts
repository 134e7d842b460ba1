// API and registry tokens: ES256 JWTs signed with the issuer's current key (auth/keys.ts).
// iss = {auth_url}, aud = the requested audience ({base_url} or {registry_host}), sub = the
// caller's identity uid, at most one hour. Optional `caps`/`scopes` claims only ever narrow
// what the identity's role bindings grant at request time; they never add to it.
import { createHash, randomUUID } from "node:crypto";
import { SignJWT, createLocalJWKSet, decodeJwt, errors as joseErrors, jwtVerify, type JWTPayload } from "jose";
import type { RegistryGrant, VerifiedToken } from "../core/access.js";
import type { PublicUrls } from "../platform/config.js";
import { ConnectError, unauthenticated } from "../core/errors.js";
import { DEFAULT_MAX_STRING_LENGTH, stringProblem } from "../core/strings.js";
import { LruCache } from "../core/lru.js";

export type { VerifiedToken };
import { ALGORITHM, MAX_TOKEN_LIFETIME_MS, type KeyManager, type PublishedKey } from "./keys.js";

/** Signs with `signingKey`; verifies with `publishedKeys` (absent for a sign-only issuer). */
export type KeySource = Pick<KeyManager, "signingKey"> & Partial<Pick<KeyManager, "publishedKeys">>;

/** Where tokens come from and whom they are for; filled from the server's URL when not configured. */
export type AuthUrls = PublicUrls;

/** The `sub` of the platform operator's tokens (not a UIDP, so never an identity's uid). */
export const OPERATOR_SUBJECT = "bulwark:operator";

/**
 * The `sub` of registry tokens handed to anonymous callers (public repositories need none, but
 * docker-style clients always fetch one); it never authenticates anyone.
 */
export const ANONYMOUS_SUBJECT = "bulwark:anonymous";

/** Verification tolerance for our own tokens' time claims. */
const CLOCK_TOLERANCE_SECONDS = 30;

/** How many verified tokens a verifier remembers (each is checked once, not on every request). */
export const VERIFIED_TOKEN_CACHE_SIZE = 10_000;

export interface MintRequest {
  subject: string;
  audience: string[];
  lifetimeMs?: number;
  /** capability names the token is narrowed to */
  caps?: string[];
  /** group uids the token is narrowed to */
  scopes?: string[];
  /** a registry token's repositories and actions (the distribution token spec's `access` claim) */
  registryAccess?: RegistryGrant[];
  /**
   * who the caller was before an exchange or a sign-in: the original token's `iss`, `sub`, `aud`
   * and `email` (the `act` claim, after RFC 8693's actor claim), recorded as events' actor
   */
  act?: Readonly<Record<string, string>>;
  /** an events delivery's token: the `webhook.digest` claim binds it to the body it comes with */
  webhookDigest?: string;
}

/** The members an `act` claim may hold (each a string). */
const ACT_MEMBERS = ["iss", "sub", "aud", "email"] as const;

/** An `act` claim from what an original token said: its string members only, empty ones left out. */
export function actClaimOf(original: Readonly<Record<string, unknown>>): Record<string, string> | undefined {
  const act: Record<string, string> = {};
  for (const name of ACT_MEMBERS) {
    const value = original[name];
    const text = Array.isArray(value) ? value.filter((v) => typeof v === "string").join(" ") : value;
    if (typeof text === "string" && text) act[name] = text;
  }
  return Object.keys(act).length ? act : undefined;
}

export interface IssuedToken {
  token: string;
  expiry: Date;
}

function stringList(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.every((v) => typeof v === "string") ? (value as string[]) : undefined;
}

export class TokenIssuer {
  /** the imported key set, rebuilt only when the published keys change */
  #jwks: { source: readonly PublishedKey[]; verify: ReturnType<typeof createLocalJWKSet> } | undefined;
  /**
   * Tokens already verified, by text, with the audience they were verified for and the key that
   * signed them. An entry is used only for that audience, before the token's `exp` and while its
   * key is still published, so a cached answer is one a fresh verification would give (signature,
   * issuer, audience and claims cannot change). Keyed by the text alone: a key joined from audience
   * and token is a new string to hash on every request.
   */
  readonly #verified = new LruCache<string, { audience: string; token: VerifiedToken; kid: string | undefined }>(
    VERIFIED_TOKEN_CACHE_SIZE,
  );

  constructor(
    private readonly keys: KeySource,
    readonly urls: AuthUrls,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async mint(req: MintRequest): Promise<IssuedToken> {
    const key = await this.keys.signingKey();
    const issuedAt = Math.floor(this.now().getTime() / 1000);
    const lifetime = Math.min(req.lifetimeMs ?? MAX_TOKEN_LIFETIME_MS, MAX_TOKEN_LIFETIME_MS);
    const exp = issuedAt + Math.floor(lifetime / 1000);
    const claims: JWTPayload = {};
    if (req.caps) claims.caps = req.caps;
    if (req.scopes) claims.scopes = req.scopes;
    if (req.registryAccess) claims.access = req.registryAccess;
    if (req.act && Object.keys(req.act).length) claims.act = { ...req.act };
    if (req.webhookDigest) claims.webhook = { digest: req.webhookDigest };
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: ALGORITHM, kid: key.kid, typ: "JWT" })
      .setIssuer(this.urls.issuer)
      .setSubject(req.subject)
      .setAudience(req.audience)
      .setIssuedAt(issuedAt)
      .setNotBefore(issuedAt)
      .setExpirationTime(exp)
      .setJti(randomUUID())
      .sign(key.privateKey);
    return { token, expiry: new Date(exp * 1000) };
  }

  /** Verifies one of our tokens for `audience`; anything wrong is UNAUTHENTICATED. */
  async verify(token: string, audience: string): Promise<VerifiedToken> {
    const cached = this.#verified.get(token);
    if (cached?.audience === audience) {
      if (this.now().getTime() < cached.token.expiry.getTime() && (await this.isPublished(cached.kid)))
        return cached.token;
      this.#verified.delete(token);
    }
    const verified = await this.verifyNow(token, audience);
    this.#verified.set(token, { audience, ...verified });
    return verified.token;
  }

  /** Whether the key `kid` may still verify tokens (the published set is itself cached briefly). */
  private async isPublished(kid: string | undefined): Promise<boolean> {
    const published = (await this.keys.publishedKeys?.()) ?? [];
    return published.some((k) => k.kid === kid);
  }

  private async verifyNow(token: string, audience: string): Promise<{ token: VerifiedToken; kid: string | undefined }> {
    try {
      const { payload, protectedHeader } = await jwtVerify(
        token,
        async (header, jws) => {
          const published = (await this.keys.publishedKeys?.({ unknownKid: header.kid })) ?? [];
          if (this.#jwks?.source !== published)
            this.#jwks = { source: published, verify: createLocalJWKSet({ keys: published.map((k) => k.jwk) }) };
          return this.#jwks.verify(header, jws);
        },
        {
          issuer: this.urls.issuer,
          audience,
          algorithms: [ALGORITHM],
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
          currentDate: this.now(),
          requiredClaims: ["sub", "exp", "iat"],
          maxTokenAge: `${MAX_TOKEN_LIFETIME_MS / 1000 + CLOCK_TOLERANCE_SECONDS}s`,
        },
      );
      // Signed by us, yet checked like any input: a subject or scope the database cannot hold
      // (NUL, ...) or a lifetime longer than we ever issue means the token is not ours to honour.
      const registryAccess = payload.access === undefined ? undefined : registryGrants(payload.access);
      const act = payload.act === undefined ? undefined : actClaim(payload.act);
      const texts = [
        ...Object.values(act ?? {}),
        payload.sub!,
        ...(stringList(payload.scopes) ?? []),
        ...(stringList(payload.caps) ?? []),
        ...(registryAccess ?? []).flatMap((g) => [g.type, g.name, ...g.actions]),
      ];
      if (texts.some((t) => stringProblem(t, DEFAULT_MAX_STRING_LENGTH)))
        throw unauthenticated("token claims are malformed");
      if (payload.exp! - payload.iat! > MAX_TOKEN_LIFETIME_MS / 1000 + CLOCK_TOLERANCE_SECONDS)
        throw unauthenticated("token lifetime is longer than this issuer grants");
      // Shared by every request that presents this token: frozen, so none can change it for the others.
      const verified: VerifiedToken = Object.freeze({
        subject: payload.sub!,
        audience: Object.freeze(typeof payload.aud === "string" ? [payload.aud] : [...(payload.aud ?? [])]) as string[],
        issuedAt: new Date(payload.iat! * 1000),
        expiry: new Date(payload.exp! * 1000),
        caps: freezeList(stringList(payload.caps)),
        scopes: freezeList(stringList(payload.scopes)),
        registryAccess:
          registryAccess && (Object.freeze(registryAccess.map((g) => Object.freeze(g))) as RegistryGrant[]),
        ...(act ? { act: Object.freeze(act) } : {}),
      });
      return { token: verified, kid: protectedHeader.kid };
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      throw unauthenticated(describeJoseError(err, this.urls.issuer, audience));
    }
  }
}

function freezeList(list: string[] | undefined): string[] | undefined {
  return list && (Object.freeze(list) as string[]);
}

/** The `act` claim: an object of strings we put there; anything else is a malformed token. */
function actClaim(value: unknown): Record<string, string> {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw unauthenticated("token claims are malformed");
  const act: Record<string, string> = {};
  for (const name of ACT_MEMBERS) {
    const member = (value as Record<string, unknown>)[name];
    if (member === undefined) continue;
    if (typeof member !== "string") throw unauthenticated("token claims are malformed");
    act[name] = member;
  }
  return act;
}

/** The `access` claim's grants; a malformed claim is a malformed token (never "no limit"). */
function registryGrants(value: unknown): RegistryGrant[] {
  const grants = Array.isArray(value) ? value : undefined;
  const valid = grants?.every(
    (g) =>
      typeof g === "object" &&
      g !== null &&
      typeof g.type === "string" &&
      typeof g.name === "string" &&
      stringList(g.actions) !== undefined,
  );
  if (!grants || !valid) throw unauthenticated("token claims are malformed");
  return grants.map((g) => ({ type: g.type, name: g.name, actions: [...g.actions] }));
}

/**
 * A short reason that helps a client fix its token. The expected issuer and audience are public
 * (OIDC discovery names the issuer; the audience is the URL the client called), so they are named.
 */
function describeJoseError(err: unknown, issuer: string, audience: string): string {
  if (err instanceof joseErrors.JWTExpired) return "token has expired";
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    if (err.claim === "iss")
      return `token issuer is not accepted: this server issues tokens as ${JSON.stringify(issuer)}`;
    if (err.claim === "aud") return `token audience is not accepted: expected ${JSON.stringify(audience)}`;
    return `token claim "${err.claim}" is not accepted`;
  }
  if (err instanceof joseErrors.JWKSNoMatchingKey) return "token is not signed by a current key";
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return "token algorithm is not accepted";
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return "token signature is invalid";
  return "token is malformed";
}

/** The bearer token of an Authorization header, or undefined. */
export function bearerToken(headers: Headers): string | undefined {
  const value = headers.get("authorization");
  const m = value ? /^Bearer\s+([A-Za-z0-9\-_.~+/]+=*)\s*$/i.exec(value) : null;
  return m?.[1];
}

/** A JWT's unverified subject and audiences (what unverifiedClaims answers). */
export type UnverifiedClaims = Readonly<{ sub?: string; aud: readonly string[] }>;

/**
 * The last tokens' decoded claims: a registry request decodes its token before verifying it
 * (decoding was 5% of a manifest GET's CPU). A decode depends on the token's text alone, so a
 * remembered answer is exactly what decoding again would give; tokens are kept only up to a
 * length, so the memory stays bounded whatever callers send.
 */
const decoded = new LruCache<string, UnverifiedClaims | null>(256);
const MAX_REMEMBERED_TOKEN = 4096;

/** A JWT's subject and audiences, unverified (undefined: not a JWT). */
export function unverifiedClaims(token: string): UnverifiedClaims | undefined {
  const remembered = decoded.get(token);
  if (remembered !== undefined) return remembered ?? undefined;
  let claims: UnverifiedClaims | null = null;
  try {
    const payload: JWTPayload = decodeJwt(token);
    const aud = typeof payload.aud === "string" ? [payload.aud] : Array.isArray(payload.aud) ? payload.aud : [];
    claims = Object.freeze({
      sub: typeof payload.sub === "string" ? payload.sub : undefined,
      aud: Object.freeze(aud.filter((a): a is string => typeof a === "string")),
    });
  } catch {
    claims = null;
  }
  if (token.length <= MAX_REMEMBERED_TOKEN) decoded.set(token, claims);
  return claims ?? undefined;
}

/** Longest claimed principal counted under its own name; a longer one is counted under its digest. */
const MAX_PRINCIPAL_KEY = 200;

/** The key a claimed principal's failed authentications are counted under (bounded in size). */
export function principalKey(name: string | undefined): string | undefined {
  if (name === undefined || name.length <= MAX_PRINCIPAL_KEY) return name;
  return `sha256:${createHash("sha256").update(name).digest("hex")}`;
}
