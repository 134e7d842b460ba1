// Human sign-in for `bulwark auth login`: the rules, without HTTP (routes.ts serves them, views.ts
// renders their pages and answers).
//
// CLI ↔ issuer is OAuth 2.0 for native apps (RFC 8252): authorization code + PKCE (S256) with a
// loopback redirect on any port and a `state` check; the API token is only ever returned from
// the token endpoint (POST), never in a URL. Machines without a browser use the device flow
// (RFC 8628): a user code approved in a browser elsewhere.
//
// The issuer signs people in through an upstream OIDC provider (providers.ts) — the platform's
// default one or an organization's IdentityProvider — with authorization code + PKCE, `state` and
// `nonce` (openid-client). A person's identity is root-level, its uid derived from the upstream
// (issuer, subject), so LookupIdentity finds it; later sign-ins reuse it. Signing in through an
// organization's IdP binds the IdP's default role in that organization; an invite code binds the
// invite's role at its group (iam/invites.ts).
import type { AuthEvents, Origin } from "../events.js";
import { createHash, randomBytes, randomInt, timingSafeEqual } from "node:crypto";
import * as oidc from "openid-client";
import { CLI_CLIENT_ID, CONSOLE_CALLBACK_PATH, CONSOLE_CLIENT_ID } from "../../core/cli-client.js";
import { isValidUidp, newChildUidp } from "../../core/uidp.js";
import {
  InviteRefused,
  type IdentityDirectory,
  type InviteRedemption,
  type RoleBindingDirectory,
  type SignInIdentityProviders,
  type VouchedEmails,
} from "../../iam/api.js";
import type { UpstreamProvider } from "../../platform/config.js";
import type { LoginSession, LoginSessionsRepository } from "../storage/login-sessions.js";
import { actClaimOf, type TokenIssuer } from "../tokens.js";
import type { UpstreamIssuers, UpstreamOptions } from "../upstream.js";
import { LoginError } from "./errors.js";
import { SignInProviders } from "./providers.js";

const DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const SIGN_IN_WINDOW_MS = 10 * 60 * 1000;
const CODE_LIFETIME_MS = 60 * 1000;
const DEVICE_POLL_INTERVAL_S = 5;
const USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"; // no vowels: no words; no look-alikes
const USER_CODE_LENGTH = 8;
const PKCE_S256_CHALLENGE = /^[A-Za-z0-9_-]{43,128}$/;

export interface LoginDeps {
  issuer: TokenIssuer;
  upstream: UpstreamIssuers;
  upstreamOptions: UpstreamOptions;
  /** the platform's default upstream (operator configuration) */
  defaultUpstream?: UpstreamProvider;
  sessions: LoginSessionsRepository;
  identities: IdentityDirectory;
  roleBindings: RoleBindingDirectory;
  identityProviders: SignInIdentityProviders;
  invites: InviteRedemption;
  /** where completed sign-ins are recorded */
  events?: AuthEvents;
  logger: { info(obj: object, msg: string): void; debug(obj: object, msg: string): void };
  now?: () => Date;
}

/** The issuer's sign-in pages the service sends browsers to (routes.ts serves them). */
export interface SignInEndpoints {
  /** the upstream's redirect_uri */
  callback(): string;
  /** where a person enters a device's user code (RFC 8628 verification_uri) */
  device(): string;
}

/**
 * The answer to an authorization request: refused on a page while the client or its redirect is
 * unknown, else a redirect (to the upstream, or back to the client with an error).
 */
export type Authorization = { kind: "refused"; reason: string } | { kind: "redirect"; url: string };

/** Where the upstream's redirect back leads. */
export type UpstreamReturn =
  | { kind: "unknown_session" }
  /** a browser sign-in: to the client, with its code or its error */
  | { kind: "redirect"; url: string }
  | { kind: "device_signed_in" }
  | { kind: "device_failed"; reason: string };

/** Where a user code confirmed in a browser leads. */
export type DeviceConfirmation =
  | { kind: "unknown_code" }
  /** to the upstream's sign-in */
  | { kind: "redirect"; url: string }
  | { kind: "failed"; reason: string };

/** RFC 8628 §3.2 */
export interface DeviceAuthorizationResponse {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

/** RFC 6749 §5.1 */
export interface TokenResponse {
  access_token: string;
  token_type: "Bearer";
  expires_in: number;
}

/** A request's query or form fields. */
type Fields = Record<string, unknown>;

interface SessionOptions {
  identityProviderUid?: string;
  inviteUid?: string;
}

/** The fields of a session its upstream sign-in uses. */
type UpstreamSession = Pick<LoginSession, "id" | "identity_provider_uid" | "upstream_nonce" | "upstream_verifier">;

export function randomToken(bytes: number): string {
  return randomBytes(bytes).toString("base64url");
}

/** Compares secrets in constant time. */
export function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function s256(verifier: string): string {
  return createHash("sha256").update(verifier, "ascii").digest("base64url");
}

/** Exactly one of `callbacks` (no query, fragment or credentials: the parsed URL must equal it). */
function consoleRedirect(value: unknown, callbacks: ReadonlySet<string>): URL | undefined {
  if (typeof value !== "string") return undefined;
  try {
    const url = new URL(value);
    return callbacks.has(url.href) ? url : undefined;
  } catch {
    return undefined;
  }
}

/** RFC 8252 §7.3: an http loopback IP redirect, any port. */
function loopbackRedirect(value: unknown): URL | undefined {
  if (typeof value !== "string") return undefined;
  try {
    const url = new URL(value);
    const loopback = url.hostname === "127.0.0.1" || url.hostname === "[::1]";
    const bare = !url.hash && !url.username && !url.password;
    return url.protocol === "http:" && loopback && url.port !== "" && bare ? url : undefined;
  } catch {
    return undefined;
  }
}

/** The uid of a person's identity: the same on every sign-in and every install. */
export function humanUid(issuer: string, subject: string): string {
  return createHash("sha1").update(`bulwark/human\0${issuer}\0${subject}`).digest("hex");
}

/** An identity name that fits ^[a-z0-9 ._-]{1,}$ from the upstream's claims. */
function displayName(claims: Record<string, unknown>): string {
  const candidates = [claims.preferred_username, claims.email, claims.name];
  const source = candidates.find((v): v is string => typeof v === "string" && v !== "") ?? "user";
  const local = source.split("@")[0]!.toLowerCase();
  const name = local
    .replace(/[^a-z0-9 ._-]+/g, "-")
    .slice(0, 64)
    .replace(/^-+|-+$/g, "");
  return name || "user";
}

/** A user code of letters drawn uniformly (randomInt, so no modulo bias). */
export function mintUserCode(): string {
  const letters = Array.from({ length: USER_CODE_LENGTH }, () =>
    USER_CODE_ALPHABET.charAt(randomInt(USER_CODE_ALPHABET.length)),
  );
  return letters.join("");
}

/** A user code as typed (any case, dashes, spaces) in its stored form. */
export function normalizeUserCode(text: string): string {
  return text
    .toUpperCase()
    .replace(/[^A-Z]/g, "")
    .slice(0, USER_CODE_LENGTH);
}

/** A user code as people are shown it: "BCDF-GHJK". */
export function formatUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/** A new session's upstream secrets: its id (the upstream `state`), nonce and PKCE verifier. */
function newUpstreamSecrets() {
  return { id: oidc.randomState(), nonce: oidc.randomNonce(), verifier: oidc.randomPKCECodeVerifier() };
}

export class SignInService {
  private readonly providers: SignInProviders;
  private readonly now: () => Date;

  constructor(
    private readonly deps: LoginDeps,
    private readonly endpoints: SignInEndpoints,
  ) {
    this.providers = new SignInProviders(deps);
    this.now = deps.now ?? (() => new Date());
  }

  /**
   * An authorization request of the CLI or the console (RFC 6749 §4.1.1, RFC 7636): starts a
   * browser sign-in. The CLI redirects to a loopback port; the console only to its callback on an
   * origin of this server's own public URLs, so a code is never sent anywhere else.
   */
  async authorize(query: Fields): Promise<Authorization> {
    // Until the client and its redirect are known good, errors are shown, never redirected.
    let redirect: URL | undefined;
    if (query.client_id === CLI_CLIENT_ID) {
      redirect = loopbackRedirect(query.redirect_uri);
      if (!redirect) {
        const reason = "The redirect must be an http loopback address (127.0.0.1 or [::1]) with a port.";
        return { kind: "refused", reason };
      }
    } else if (query.client_id === CONSOLE_CLIENT_ID) {
      redirect = consoleRedirect(query.redirect_uri, this.consoleCallbacks());
      if (!redirect) return { kind: "refused", reason: "The redirect must be this server's console callback." };
    } else {
      return { kind: "refused", reason: "Unknown client." };
    }
    const back = (error: string, description: string): Authorization => {
      const url = new URL(redirect);
      url.searchParams.set("error", error);
      url.searchParams.set("error_description", description);
      if (typeof query.state === "string") url.searchParams.set("state", query.state);
      return { kind: "redirect", url: url.href };
    };
    const { state, code_challenge: challenge } = query;
    if (query.response_type !== "code") return back("unsupported_response_type", "response_type must be code");
    if (typeof state !== "string" || state === "" || state.length > 512) {
      return back("invalid_request", "state is required");
    }
    if (
      query.code_challenge_method !== "S256" ||
      typeof challenge !== "string" ||
      !PKCE_S256_CHALLENGE.test(challenge)
    ) {
      return back("invalid_request", "PKCE with code_challenge_method S256 is required");
    }
    try {
      const options = await this.sessionOptions(query);
      const secrets = newUpstreamSecrets();
      await this.deps.sessions.create({
        ...this.newSession(options, secrets),
        kind: "browser",
        // Kept exactly as sent: the token request must repeat it byte for byte (RFC 6749 §4.1.3).
        clientRedirectUri: query.redirect_uri as string,
        clientState: state,
        codeChallenge: challenge,
      });
      const url = await this.upstreamSignInUrl({
        id: secrets.id,
        identity_provider_uid: options.identityProviderUid ?? null,
        upstream_nonce: secrets.nonce,
        upstream_verifier: secrets.verifier,
      });
      return { kind: "redirect", url };
    } catch (err) {
      if (err instanceof LoginError) return back(err.oauthError, err.message);
      this.deps.logger.info({ err: String(err) }, "sign-in could not start");
      return back("temporarily_unavailable", "the sign-in provider cannot be reached");
    }
  }

  /** The device flow's start: a device code for the CLI, a user code for the person (RFC 8628 §3.1). */
  async startDevice(form: Fields): Promise<DeviceAuthorizationResponse> {
    if (form.client_id !== CLI_CLIENT_ID) throw new LoginError("invalid_client", "unknown client");
    const options = await this.sessionOptions(form);
    const deviceCode = randomToken(32);
    const userCode = mintUserCode();
    const secrets = newUpstreamSecrets();
    await this.deps.sessions.create({ ...this.newSession(options, secrets), kind: "device", deviceCode, userCode });
    const shown = formatUserCode(userCode);
    const verificationUri = this.endpoints.device();
    return {
      device_code: deviceCode,
      user_code: shown,
      verification_uri: verificationUri,
      verification_uri_complete: `${verificationUri}?user_code=${shown}`,
      expires_in: SIGN_IN_WINDOW_MS / 1000,
      interval: DEVICE_POLL_INTERVAL_S,
    };
  }

  /** A person confirmed a user code in a browser: its one upstream sign-in starts. */
  async confirmDevice(typedUserCode: string): Promise<DeviceConfirmation> {
    const session = await this.deps.sessions.claimUserCode(normalizeUserCode(typedUserCode), this.now());
    if (!session) return { kind: "unknown_code" };
    try {
      return { kind: "redirect", url: await this.upstreamSignInUrl(session) };
    } catch (err) {
      const reason = err instanceof LoginError ? err.message : "the sign-in provider cannot be reached";
      await this.deps.sessions.fail(session.id, reason);
      return { kind: "failed", reason };
    }
  }

  /**
   * Where the console may receive codes: its callback on the issuer's and the API's public URLs.
   * Only on a URL at the root of its host: the console's paths are absolute, so under a path
   * prefix (https://host/bulwark) it does not run, and `/console/callback` of that host belongs
   * to someone else.
   */
  private consoleCallbacks(): Set<string> {
    const { urls } = this.deps.issuer;
    return new Set(
      [urls.issuer, urls.apiAudience].flatMap((u) => {
        const url = URL.canParse(u) ? new URL(u) : undefined;
        return url && url.pathname === "/" ? [`${url.origin}${CONSOLE_CALLBACK_PATH}`] : [];
      }),
    );
  }

  /** The upstream provider's redirect back (its query): the sign-in completes or fails. */
  async returnFromUpstream(query: Fields, origin: Origin): Promise<UpstreamReturn> {
    const session =
      typeof query.state === "string" ? await this.deps.sessions.pending(query.state, this.now()) : undefined;
    if (!session) return { kind: "unknown_session" };
    const toClient = (params: Record<string, string>): UpstreamReturn => {
      const url = new URL(session.client_redirect_uri!);
      for (const [k, v] of Object.entries({ ...params, state: session.client_state! })) url.searchParams.set(k, v);
      return { kind: "redirect", url: url.href };
    };
    try {
      if (typeof query.error === "string") {
        throw new LoginError("access_denied", `the sign-in provider said: ${query.error}`);
      }
      const identityUid = await this.signIn(session, query, origin);
      if (session.kind === "device") {
        if (!(await this.deps.sessions.complete(session.id, identityUid, this.now()))) throw alreadyFinished();
        return { kind: "device_signed_in" };
      }
      const code = { value: randomToken(32), expiresAt: this.fromNow(CODE_LIFETIME_MS) };
      if (!(await this.deps.sessions.complete(session.id, identityUid, this.now(), code))) throw alreadyFinished();
      return toClient({ code: code.value });
    } catch (err) {
      const e = err instanceof LoginError ? err : new LoginError("server_error", "sign-in failed");
      if (!(err instanceof LoginError)) this.deps.logger.info({ err: String(err) }, "sign-in failed");
      await this.deps.sessions.fail(session.id, e.message);
      if (session.kind === "device") return { kind: "device_failed", reason: e.message };
      return toClient({ error: e.oauthError, error_description: e.message });
    }
  }

  /**
   * The token endpoint: a code or a device code for an API token (RFC 6749 §4.1.3, RFC 8628 §3.4).
   * The console redeems codes only; the device flow is the CLI's.
   */
  async token(form: Fields): Promise<TokenResponse> {
    const fromConsole = form.client_id === CONSOLE_CLIENT_ID;
    if (form.client_id !== CLI_CLIENT_ID && !fromConsole) throw new LoginError("invalid_client", "unknown client");
    let identityUid: string;
    if (form.grant_type === "authorization_code") identityUid = await this.redeemCode(form);
    else if (form.grant_type === DEVICE_CODE_GRANT && !fromConsole) identityUid = await this.pollDevice(form);
    else if (fromConsole) throw new LoginError("unsupported_grant_type", "grant_type must be authorization_code");
    else throw new LoginError("unsupported_grant_type", "grant_type must be authorization_code or device_code");
    const { issuer } = this.deps;
    // The token carries who the upstream said the person is (the `act` claim events record).
    const identity = await this.deps.identities.get(identityUid);
    const act = identity
      ? actClaimOf({ iss: identity.issuer, sub: identity.subject, email: identity.email })
      : undefined;
    const minted = await issuer.mint({ subject: identityUid, audience: [issuer.urls.apiAudience], act });
    const expiresIn = Math.floor((minted.expiry.getTime() - this.now().getTime()) / 1000);
    return { access_token: minted.token, token_type: "Bearer", expires_in: expiresIn };
  }

  /** The identity an authorization code was issued for, if this client's PKCE verifier fits it. */
  private async redeemCode(form: Fields): Promise<string> {
    const { code, code_verifier: verifier } = form;
    if (typeof code !== "string" || typeof verifier !== "string") {
      throw new LoginError("invalid_request", "code and code_verifier are required");
    }
    // Spent on first presentation, right or wrong: a replayed code finds nothing.
    const session = await this.deps.sessions.redeemCode(code, this.now());
    if (!session) throw new LoginError("invalid_grant", "the code is invalid, expired or already used");
    // A code belongs to the client it was issued to (RFC 6749 §4.1.3): the kind of redirect it was
    // sent to says which — the console's callback, or a CLI's loopback port.
    const issuedToConsole = consoleRedirect(session.client_redirect_uri, this.consoleCallbacks()) !== undefined;
    if (
      form.redirect_uri !== session.client_redirect_uri ||
      issuedToConsole !== (form.client_id === CONSOLE_CLIENT_ID) ||
      !sameText(s256(verifier), session.code_challenge ?? "")
    ) {
      throw new LoginError("invalid_grant", "the code does not match this client's request");
    }
    return session.identity_uid!;
  }

  /** The identity a device code's sign-in finished with; until then, why not yet (RFC 8628 §3.5). */
  private async pollDevice(form: Fields): Promise<string> {
    if (typeof form.device_code !== "string") throw new LoginError("invalid_request", "device_code is required");
    const poll = await this.deps.sessions.pollDevice(form.device_code, this.now(), (DEVICE_POLL_INTERVAL_S - 1) * 1000);
    switch (poll.kind) {
      case "signed_in":
        return poll.identityUid;
      case "pending":
        throw new LoginError("authorization_pending", "waiting for the sign-in in a browser");
      case "slow_down":
        throw new LoginError("slow_down", `poll at most every ${DEVICE_POLL_INTERVAL_S} s`);
      case "expired":
        throw new LoginError("expired_token", "the device code has expired");
      case "denied":
        throw new LoginError("access_denied", poll.error);
      case "unknown":
        throw new LoginError("invalid_grant", "the device code is invalid or already used");
    }
  }

  /** What every new sign-in session records: its options, upstream secrets and sign-in window. */
  private newSession(options: SessionOptions, secrets: ReturnType<typeof newUpstreamSecrets>) {
    return {
      id: secrets.id,
      identityProviderUid: options.identityProviderUid,
      inviteUid: options.inviteUid,
      nonce: secrets.nonce,
      verifier: secrets.verifier,
      now: this.now(),
      expiresAt: this.fromNow(SIGN_IN_WINDOW_MS),
    };
  }

  /** Validates the optional identity_provider and invite_code of a new sign-in. */
  private async sessionOptions(fields: Fields): Promise<SessionOptions> {
    const options: SessionOptions = {};
    const { identity_provider: idpUid, invite_code: inviteCode } = fields;
    if (typeof idpUid === "string" && idpUid !== "") {
      if (!isValidUidp(idpUid) || !(await this.deps.identityProviders.get(idpUid))) {
        throw new LoginError("invalid_request", "unknown identity provider");
      }
      options.identityProviderUid = idpUid;
    } else if (!this.deps.defaultUpstream) {
      throw new LoginError(
        "server_error",
        "no sign-in provider is configured on this server; sign in through an organization's identity provider",
      );
    }
    if (typeof inviteCode === "string" && inviteCode !== "") {
      const invite = await this.deps.invites.findUsable(inviteCode, this.now());
      if (!invite) throw new LoginError("access_denied", "the invite code is invalid, expired or already used");
      options.inviteUid = invite.uid;
    }
    return options;
  }

  /** Where the browser signs in upstream for the session. */
  private async upstreamSignInUrl(session: UpstreamSession): Promise<string> {
    const provider = await this.providers.providerOf(session.identity_provider_uid);
    const config = await this.providers.configOf(provider);
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: this.endpoints.callback(),
      scope: ["openid", "email", "profile", ...(provider.scopes ?? [])].join(" "),
      state: session.id,
      nonce: session.upstream_nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(session.upstream_verifier),
      code_challenge_method: "S256",
    });
    return url.href;
  }

  /** After the upstream sign-in: who it is, what it joins; the identity's uid. */
  private async signIn(session: LoginSession, query: Fields, origin: Origin): Promise<string> {
    const claims = await this.upstreamClaims(session, query);
    const iss = String(claims.iss ?? "");
    const sub = String(claims.sub ?? "");
    if (!iss || !sub) throw new LoginError("access_denied", "the sign-in provider's answer has no subject");
    const email = typeof claims.email === "string" ? claims.email : "";
    const verified = claims.email_verified === true && email !== "";
    // Whose word the email is: the platform's default provider vouches for it everywhere; an
    // organization's IdP (which its owners configure) only within that IdP's group.
    const idpUid = session.identity_provider_uid;
    const idp = idpUid ? await this.deps.identityProviders.get(idpUid) : undefined;
    const platformVerified = verified && !idpUid;
    const at = this.now();
    const identity = await this.deps.identities.upsertHuman({
      uid: humanUid(iss, sub),
      name: displayName(claims),
      issuer: iss,
      subject: sub,
      // The platform's provider decides the email each time (an address it no longer vouches for
      // is dropped); an organization's IdP never changes it.
      email: idpUid ? undefined : platformVerified ? email : "",
      emailUnverified: platformVerified ? "" : email,
      now: at,
    });
    if (idp) {
      const { parent_uid: group, default_role_uid: roleUid } = idp;
      await this.deps.roleBindings.ensure(
        { uid: newChildUidp(group), parentUid: group, identityUid: identity.uid, roleUid },
        at,
      );
    }
    if (session.invite_uid) {
      const idpEmail = verified && idp ? { email, group: idp.parent_uid } : undefined;
      await this.acceptInvite(session.invite_uid, identity.uid, { platformEmail: identity.email, idpEmail }, at);
    }
    this.deps.logger.info({ identity: identity.uid, via: idpUid ?? "default upstream" }, "signed in");
    await this.deps.events?.signedIn(origin, {
      identity: identity.uid,
      issuer: iss,
      subject: sub,
      email: identity.email || email,
      identityProvider: idpUid ?? undefined,
      group: idp?.parent_uid,
    });
    return identity.uid;
  }

  /** The upstream's answer, verified (code + PKCE, state, nonce), as claims. */
  private async upstreamClaims(session: LoginSession, query: Fields): Promise<Record<string, unknown>> {
    const provider = await this.providers.providerOf(session.identity_provider_uid);
    const config = await this.providers.configOf(provider);
    const current = new URL(this.endpoints.callback());
    current.search = new URLSearchParams(query as Record<string, string>).toString();
    try {
      const tokens = await oidc.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: session.upstream_verifier,
        expectedState: session.id,
        expectedNonce: session.upstream_nonce,
        idTokenExpected: true,
      });
      const claims = { ...((tokens.claims() ?? {}) as Record<string, unknown>) };
      // Conformant providers may release email and profile only at userinfo (OIDC Core §5.4).
      const userinfoEndpoint = config.serverMetadata().userinfo_endpoint;
      if (claims.email === undefined && userinfoEndpoint && typeof claims.sub === "string") {
        const info = (await oidc.fetchUserInfo(config, tokens.access_token, claims.sub)) as Record<string, unknown>;
        for (const [k, v] of Object.entries(info)) if (claims[k] === undefined) claims[k] = v;
      }
      return claims;
    } catch (err) {
      this.deps.logger.debug({ err: String(err), session: session.id }, "upstream code exchange failed");
      throw new LoginError("access_denied", "the sign-in provider's answer could not be verified");
    }
  }

  /** The invite's rules (iam/invites.ts), their refusals in OAuth's terms. */
  private async acceptInvite(inviteUid: string, identityUid: string, vouched: VouchedEmails, at: Date) {
    try {
      await this.deps.invites.accept(inviteUid, identityUid, vouched, at);
    } catch (err) {
      if (err instanceof InviteRefused) throw new LoginError("access_denied", err.message);
      throw err;
    }
  }

  private fromNow(ms: number): Date {
    return new Date(this.now().getTime() + ms);
  }
}

function alreadyFinished(): LoginError {
  return new LoginError("access_denied", "this sign-in has already finished");
}
