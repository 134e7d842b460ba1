// Human sign-in through the browser, for `bulwark auth login`.
//
// CLI ↔ issuer is OAuth 2.0 for native apps (RFC 8252): authorization code + PKCE (S256) with a
// loopback redirect on any port and a `state` check; the API token is only ever returned from
// the token endpoint (POST), never in a URL. Machines without a browser use the device flow
// (RFC 8628): a user code approved in a browser elsewhere.
//
// The issuer signs people in through an upstream OIDC provider — the platform's default one
// (operator configuration) or an organization's IdentityProvider — with authorization code +
// PKCE, `state` and `nonce` (openid-client), every upstream request going through the
// SSRF-guarded fetch. A person's identity is root-level, its uid derived from the upstream
// (issuer, subject), so LookupIdentity finds it; later sign-ins reuse it. Signing in through an
// organization's IdP binds the IdP's default role in that organization; an invite code binds the
// invite's role at its group.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import * as oidc from "openid-client";
import type { SecretBox } from "../core/secret-box.js";
import { isAncestorOrSelf, isValidUidp, newChildUidp } from "../core/uidp.js";
import type { GroupInvitesRepository } from "../store/group-invites.js";
import { parseInviteCode } from "../store/group-invites.js";
import type { IdentitiesRepository } from "../store/identities.js";
import type { IdentityProvidersRepository } from "../store/identity-providers.js";
import type { LoginSession, LoginSessionsRepository } from "../store/login-sessions.js";
import type { RoleBindingsRepository } from "../store/role-bindings.js";
import type { TokenIssuer } from "./tokens.js";
import type { UpstreamIssuers, UpstreamOptions } from "./upstream.js";

/** The CLI: a public client (no secret), per RFC 8252. */
export const CLI_CLIENT_ID = "bulwark-cli";
const SIGN_IN_WINDOW_MS = 10 * 60 * 1000;
const CODE_LIFETIME_MS = 60 * 1000;
const DEVICE_POLL_INTERVAL_S = 5;
const USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"; // no vowels: no words; no look-alikes
const DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";

/** An upstream OIDC provider people sign in with. */
export interface UpstreamProvider {
  issuer: string;
  clientId: string;
  /** absent: a public client using PKCE only */
  clientSecret?: string;
  scopes?: string[];
}

export interface LoginDeps {
  issuer: TokenIssuer;
  upstream: UpstreamIssuers;
  upstreamOptions: UpstreamOptions;
  /** the platform's default upstream (operator configuration) */
  defaultUpstream?: UpstreamProvider;
  sessions: LoginSessionsRepository;
  identities: IdentitiesRepository;
  roleBindings: RoleBindingsRepository;
  identityProviders: IdentityProvidersRepository;
  idpSecrets: SecretBox;
  invites: GroupInvitesRepository;
  logger: { info(obj: object, msg: string): void; debug(obj: object, msg: string): void };
  now?: () => Date;
}

class LoginError extends Error {
  constructor(readonly oauthError: string, message: string) {
    super(message);
  }
}

const b64url = (bytes: number) => randomBytes(bytes).toString("base64url");

function s256(verifier: string): string {
  return createHash("sha256").update(verifier, "ascii").digest("base64url");
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** RFC 8252 §7.3: an http loopback IP redirect, any port. */
function loopbackRedirect(value: unknown): URL | undefined {
  if (typeof value !== "string") return undefined;
  try {
    const url = new URL(value);
    const loopback = url.hostname === "127.0.0.1" || url.hostname === "[::1]";
    return url.protocol === "http:" && loopback && url.port !== "" && !url.hash && !url.username && !url.password ? url : undefined;
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
  const source = [claims.preferred_username, claims.email, claims.name].find((v): v is string => typeof v === "string" && v !== "") ?? "user";
  const name = source.split("@")[0]!.toLowerCase().replace(/[^a-z0-9 ._-]+/g, "-").slice(0, 64).replace(/^-+|-+$/g, "");
  return name || "user";
}

function html(reply: FastifyReply, status: number, title: string, body: string): FastifyReply {
  const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return reply
    .code(status)
    .header("content-type", "text/html; charset=utf-8")
    .header("cache-control", "no-store")
    // No form-action: the device confirmation's POST continues (by redirect) to the upstream's
    // origin, which browsers would block under form-action 'self'.
    .header("content-security-policy", "default-src 'none'; style-src 'unsafe-inline'")
    .header("x-frame-options", "DENY")
    .send(`<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title></head><body style="font-family:sans-serif;max-width:36em;margin:4em auto"><h1>${esc(title)}</h1>${body.replace(/\{\{(.*?)\}\}/g, (_, t: string) => esc(t))}</body></html>`);
}

function oauthError(reply: FastifyReply, status: number, error: string, description: string): FastifyReply {
  return reply.code(status).header("cache-control", "no-store").header("pragma", "no-cache").send({ error, error_description: description });
}

export function registerLoginRoutes(root: FastifyInstance, deps: LoginDeps): void {
  void root.register(async (app) => loginRoutes(app, deps));
}

async function loginRoutes(app: FastifyInstance, deps: LoginDeps): Promise<void> {
  // OAuth endpoints take forms (RFC 6749 §4.1.3); their own scope keeps the parser here.
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_req, body, done) =>
    done(null, Object.fromEntries(new URLSearchParams(body as string))),
  );
  const now = deps.now ?? (() => new Date());
  const base = () => deps.issuer.urls.issuer.replace(/\/$/, "");
  const callbackUrl = () => `${base()}/oauth/callback`;
  const configs = new Map<string, { at: number; config: Promise<oidc.Configuration> }>();

  /** openid-client's view of an upstream (discovered through the guarded fetch, cached 10 min). */
  function upstreamConfig(p: UpstreamProvider): Promise<oidc.Configuration> {
    const key = `${p.issuer}\0${p.clientId}\0${p.clientSecret ?? ""}`;
    const hit = configs.get(key);
    if (hit && Date.now() - hit.at < SIGN_IN_WINDOW_MS) return hit.config;
    const insecure = deps.upstreamOptions.allowInsecureIssuers && new URL(p.issuer).protocol === "http:";
    const config = oidc.discovery(
      new URL(p.issuer),
      p.clientId,
      p.clientSecret ? { client_secret: p.clientSecret } : undefined,
      p.clientSecret ? oidc.ClientSecretPost(p.clientSecret) : oidc.None(),
      { [oidc.customFetch]: deps.upstream.clientFetch as never, execute: insecure ? [oidc.allowInsecureRequests] : [] },
    );
    config.catch(() => configs.delete(key));
    configs.set(key, { at: Date.now(), config });
    return config;
  }

  /** The provider a session signs in with: an organization's IdP, or the platform's default. */
  async function providerOf(identityProviderUid: string | null): Promise<UpstreamProvider> {
    if (!identityProviderUid) {
      if (!deps.defaultUpstream) throw new LoginError("server_error", "no sign-in provider is configured on this server");
      return deps.defaultUpstream;
    }
    const idp = await deps.identityProviders.get(identityProviderUid);
    const oidcConfig = idp?.oidc as { issuer?: string; clientId?: string; additionalScopes?: string[] } | null | undefined;
    if (!idp || !oidcConfig?.issuer || !oidcConfig.clientId) throw new LoginError("invalid_request", "unknown identity provider");
    const secret = idp.client_secret_encrypted ? await deps.idpSecrets.decrypt(idp.client_secret_encrypted, idp.uid) : undefined;
    return { issuer: oidcConfig.issuer, clientId: oidcConfig.clientId, clientSecret: secret, scopes: oidcConfig.additionalScopes };
  }

  /** Validates the optional identity_provider and invite_code of a new sign-in. */
  async function sessionOptions(q: Record<string, unknown>): Promise<{ identityProviderUid?: string; inviteUid?: string }> {
    const out: { identityProviderUid?: string; inviteUid?: string } = {};
    if (typeof q.identity_provider === "string" && q.identity_provider !== "") {
      if (!isValidUidp(q.identity_provider) || !(await deps.identityProviders.get(q.identity_provider))) {
        throw new LoginError("invalid_request", "unknown identity provider");
      }
      out.identityProviderUid = q.identity_provider;
    } else if (!deps.defaultUpstream) {
      throw new LoginError("server_error", "no sign-in provider is configured on this server; sign in through an organization's identity provider");
    }
    if (typeof q.invite_code === "string" && q.invite_code !== "") {
      const parsed = parseInviteCode(q.invite_code);
      const invite = parsed && (await deps.invites.findUsable(parsed.keyId, parsed.secret, now()));
      if (!invite) throw new LoginError("access_denied", "the invite code is invalid, expired or already used");
      out.inviteUid = invite.uid;
    }
    return out;
  }

  /** Sends the browser to the upstream provider for the session. */
  async function toUpstream(reply: FastifyReply, session: { id: string; identity_provider_uid: string | null; upstream_nonce: string; upstream_verifier: string }) {
    const provider = await providerOf(session.identity_provider_uid);
    const config = await upstreamConfig(provider);
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: callbackUrl(),
      scope: ["openid", "email", "profile", ...(provider.scopes ?? [])].join(" "),
      state: session.id,
      nonce: session.upstream_nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(session.upstream_verifier),
      code_challenge_method: "S256",
    });
    return reply.redirect(url.href, 302);
  }

  // The CLI's authorization request.
  app.get("/oauth/authorize", async (request, reply) => {
    const q = request.query as Record<string, unknown>;
    const redirect = loopbackRedirect(q.redirect_uri);
    // Until the client and its redirect are known good, errors are shown, never redirected.
    if (q.client_id !== CLI_CLIENT_ID) return html(reply, 400, "Sign-in failed", "<p>Unknown client.</p>");
    if (!redirect) return html(reply, 400, "Sign-in failed", "<p>The redirect must be an http loopback address (127.0.0.1 or [::1]) with a port.</p>");
    const back = (error: string, description: string) => {
      const url = new URL(redirect);
      url.searchParams.set("error", error);
      url.searchParams.set("error_description", description);
      if (typeof q.state === "string") url.searchParams.set("state", q.state);
      return reply.redirect(url.href, 302);
    };
    if (q.response_type !== "code") return back("unsupported_response_type", "response_type must be code");
    if (typeof q.state !== "string" || q.state === "" || q.state.length > 512) return back("invalid_request", "state is required");
    if (q.code_challenge_method !== "S256" || typeof q.code_challenge !== "string" || !/^[A-Za-z0-9_-]{43,128}$/.test(q.code_challenge)) {
      return back("invalid_request", "PKCE with code_challenge_method S256 is required");
    }
    try {
      const options = await sessionOptions(q);
      const session = {
        id: oidc.randomState(),
        identity_provider_uid: options.identityProviderUid ?? null,
        upstream_nonce: oidc.randomNonce(),
        upstream_verifier: oidc.randomPKCECodeVerifier(),
      };
      await deps.sessions.create({
        id: session.id,
        kind: "browser",
        // Kept exactly as sent: the token request must repeat it byte for byte (RFC 6749 §4.1.3).
        clientRedirectUri: q.redirect_uri as string,
        clientState: q.state,
        codeChallenge: q.code_challenge,
        identityProviderUid: options.identityProviderUid,
        inviteUid: options.inviteUid,
        nonce: session.upstream_nonce,
        verifier: session.upstream_verifier,
        now: now(),
        expiresAt: new Date(now().getTime() + SIGN_IN_WINDOW_MS),
      });
      return await toUpstream(reply, session);
    } catch (err) {
      if (err instanceof LoginError) return back(err.oauthError, err.message);
      deps.logger.info({ err: String(err) }, "sign-in could not start");
      return back("temporarily_unavailable", "the sign-in provider cannot be reached");
    }
  });

  /** After the upstream sign-in: who it is, what it joins. */
  async function signIn(session: LoginSession, request: FastifyRequest): Promise<string> {
    const provider = await providerOf(session.identity_provider_uid);
    const config = await upstreamConfig(provider);
    const current = new URL(callbackUrl());
    current.search = new URLSearchParams(request.query as Record<string, string>).toString();
    let claims: Record<string, unknown>;
    try {
      const tokens = await oidc.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: session.upstream_verifier,
        expectedState: session.id,
        expectedNonce: session.upstream_nonce,
        idTokenExpected: true,
      });
      claims = { ...((tokens.claims() ?? {}) as Record<string, unknown>) };
      // Conformant providers may release email and profile only at userinfo (OIDC Core §5.4).
      const userinfoEndpoint = config.serverMetadata().userinfo_endpoint;
      if (claims.email === undefined && userinfoEndpoint && typeof claims.sub === "string") {
        const info = (await oidc.fetchUserInfo(config, tokens.access_token, claims.sub)) as Record<string, unknown>;
        for (const [k, v] of Object.entries(info)) if (claims[k] === undefined) claims[k] = v;
      }
    } catch (err) {
      deps.logger.debug({ err: String(err), session: session.id }, "upstream code exchange failed");
      throw new LoginError("access_denied", "the sign-in provider's answer could not be verified");
    }
    const iss = String(claims.iss ?? "");
    const sub = String(claims.sub ?? "");
    if (!iss || !sub) throw new LoginError("access_denied", "the sign-in provider's answer has no subject");
    const email = typeof claims.email === "string" ? claims.email : "";
    const verified = claims.email_verified === true && email !== "";
    // Whose word the email is: the platform's default provider vouches for it everywhere; an
    // organization's IdP (which its owners configure) only within that IdP's group.
    const idp = session.identity_provider_uid ? await deps.identityProviders.get(session.identity_provider_uid) : undefined;
    const platformVerified = verified && !session.identity_provider_uid;
    const at = now();
    const identity = await deps.identities.upsertHuman({
      uid: humanUid(iss, sub),
      name: displayName(claims),
      issuer: iss,
      subject: sub,
      // The platform's provider decides the email each time (an address it no longer vouches for
      // is dropped); an organization's IdP never changes it.
      email: session.identity_provider_uid ? undefined : platformVerified ? email : "",
      emailUnverified: platformVerified ? "" : email,
      now: at,
    });
    if (idp) {
      await deps.roleBindings.ensure({ uid: newChildUidp(idp.parent_uid), parentUid: idp.parent_uid, identityUid: identity.uid, roleUid: idp.default_role_uid }, at);
    }
    if (session.invite_uid) {
      const vouched = { platformEmail: identity.email, idpEmail: verified && idp ? { email, group: idp.parent_uid } : undefined };
      await acceptInvite(session.invite_uid, identity.uid, vouched, at);
    }
    deps.logger.info({ identity: identity.uid, via: session.identity_provider_uid ?? "default upstream" }, "signed in");
    return identity.uid;
  }

  async function acceptInvite(
    inviteUid: string,
    identityUid: string,
    vouched: { platformEmail: string; idpEmail?: { email: string; group: string } },
    at: Date,
  ): Promise<void> {
    const invite = await deps.invites.get(inviteUid);
    if (!invite || invite.expiration_time <= at) throw new LoginError("access_denied", "the invite has expired");
    if (invite.email) {
      const wanted = invite.email.toLowerCase();
      const byPlatform = vouched.platformEmail.toLowerCase() === wanted;
      const byIdp = vouched.idpEmail !== undefined && vouched.idpEmail.email.toLowerCase() === wanted && isAncestorOrSelf(vouched.idpEmail.group, invite.parent_uid);
      if (!byPlatform && !byIdp) throw new LoginError("access_denied", "the invite is for another email address (a verified email is required)");
    }
    if (invite.single_use) {
      if (!(await deps.invites.markUsed(invite.uid, at))) throw new LoginError("access_denied", "the invite code has already been used");
    } else if (!invite.used_time) {
      await deps.invites.markUsed(invite.uid, at);
    }
    await deps.roleBindings.ensure({ uid: newChildUidp(invite.parent_uid), parentUid: invite.parent_uid, identityUid, roleUid: invite.role_uid }, at);
  }

  // The upstream provider's redirect back to us.
  app.get("/oauth/callback", async (request, reply) => {
    const q = request.query as Record<string, unknown>;
    const session = typeof q.state === "string" ? await deps.sessions.pending(q.state, now()) : undefined;
    if (!session) return html(reply, 400, "Sign-in failed", "<p>This sign-in is unknown, expired or already finished. Start again from your terminal.</p>");
    const toClient = (params: Record<string, string>) => {
      const url = new URL(session.client_redirect_uri!);
      for (const [k, v] of Object.entries({ ...params, state: session.client_state! })) url.searchParams.set(k, v);
      return reply.redirect(url.href, 302);
    };
    try {
      if (typeof q.error === "string") throw new LoginError("access_denied", `the sign-in provider said: ${q.error}`);
      const identityUid = await signIn(session, request);
      if (session.kind === "device") {
        if (!(await deps.sessions.complete(session.id, identityUid, now()))) throw new LoginError("access_denied", "this sign-in has already finished");
        return html(reply, 200, "Signed in", "<p>You are signed in. Return to your terminal.</p>");
      }
      const code = b64url(32);
      const done = await deps.sessions.complete(session.id, identityUid, now(), { value: code, expiresAt: new Date(now().getTime() + CODE_LIFETIME_MS) });
      if (!done) throw new LoginError("access_denied", "this sign-in has already finished");
      return toClient({ code });
    } catch (err) {
      const e = err instanceof LoginError ? err : new LoginError("server_error", "sign-in failed");
      if (!(err instanceof LoginError)) deps.logger.info({ err: String(err) }, "sign-in failed");
      await deps.sessions.fail(session.id, e.message);
      if (session.kind === "device") return html(reply, 400, "Sign-in failed", `<p>{{${e.message}}}</p>`);
      return toClient({ error: e.oauthError, error_description: e.message });
    }
  });

  // Device flow: the CLI asks for a user code (RFC 8628 §3.1).
  app.post("/oauth/device_authorization", async (request, reply) => {
    const f = formOf(request);
    if (f.client_id !== CLI_CLIENT_ID) return oauthError(reply, 401, "invalid_client", "unknown client");
    try {
      const options = await sessionOptions(f);
      const deviceCode = b64url(32);
      const userCode = Array.from(randomBytes(8), (b) => USER_CODE_ALPHABET[b % USER_CODE_ALPHABET.length]).join("");
      await deps.sessions.create({
        id: oidc.randomState(),
        kind: "device",
        deviceCode,
        userCode,
        identityProviderUid: options.identityProviderUid,
        inviteUid: options.inviteUid,
        nonce: oidc.randomNonce(),
        verifier: oidc.randomPKCECodeVerifier(),
        now: now(),
        expiresAt: new Date(now().getTime() + SIGN_IN_WINDOW_MS),
      });
      const shown = `${userCode.slice(0, 4)}-${userCode.slice(4)}`;
      return reply.header("cache-control", "no-store").send({
        device_code: deviceCode,
        user_code: shown,
        verification_uri: `${base()}/device`,
        verification_uri_complete: `${base()}/device?user_code=${shown}`,
        expires_in: SIGN_IN_WINDOW_MS / 1000,
        interval: DEVICE_POLL_INTERVAL_S,
      });
    } catch (err) {
      if (err instanceof LoginError) return oauthError(reply, 400, err.oauthError, err.message);
      throw err;
    }
  });

  // Device flow: the person, in a browser, enters the user code, then confirms it (RFC 8628 §5.4:
  // a link carrying someone else's code must not sign that device in with one click). The
  // confirmation is a POST carrying a token that must match a SameSite=Strict cookie, so another
  // site cannot submit it.
  app.get("/device", async (request, reply) => {
    const q = request.query as Record<string, unknown>;
    if (typeof q.user_code !== "string" || q.user_code === "") {
      return html(reply, 200, "Sign in a device", `<form method="get" action="device"><p>Enter the code shown in your terminal:</p><p><input name="user_code" autocomplete="off" autofocus></p><p><button type="submit">Continue</button></p></form>`);
    }
    const code = normalizeUserCode(q.user_code);
    const csrf = b64url(24);
    reply.header("set-cookie", `${DEVICE_CSRF_COOKIE}=${csrf}; Path=/; HttpOnly; SameSite=Strict; Max-Age=600`);
    return html(
      reply,
      200,
      "Sign in a device",
      `<p>A device is asking to sign in as you with the code</p><p style="font-size:2em;letter-spacing:.2em"><b>{{${code.slice(0, 4)}-${code.slice(4)}}}</b></p>` +
        `<p>Continue only if this is the code shown on your own device.</p>` +
        `<form method="post" action="device"><input type="hidden" name="user_code" value="{{${code}}}"><input type="hidden" name="csrf" value="{{${csrf}}}"><button type="submit">Sign in this device</button></form>`,
    );
  });

  app.post("/device", async (request, reply) => {
    const f = formOf(request);
    const cookie = cookieValue(request.headers.cookie, DEVICE_CSRF_COOKIE);
    if (!cookie || typeof f.csrf !== "string" || !sameText(cookie, f.csrf)) {
      return html(reply, 400, "Sign-in failed", "<p>Please start again from the code entry page.</p>");
    }
    const code = normalizeUserCode(f.user_code ?? "");
    const session = await deps.sessions.claimUserCode(code, now());
    if (!session) return html(reply, 400, "Sign-in failed", "<p>That code is unknown, expired or already used.</p>");
    try {
      return await toUpstream(reply, session);
    } catch (err) {
      const message = err instanceof LoginError ? err.message : "the sign-in provider cannot be reached";
      await deps.sessions.fail(session.id, message);
      return html(reply, 502, "Sign-in failed", `<p>{{${message}}}</p>`);
    }
  });

  // The token endpoint: codes and device codes for API tokens (RFC 6749 §4.1.3, RFC 8628 §3.4).
  app.post("/oauth/token", async (request, reply) => {
    const f = formOf(request);
    if (f.client_id !== CLI_CLIENT_ID) return oauthError(reply, 401, "invalid_client", "unknown client");
    let identityUid: string;
    if (f.grant_type === "authorization_code") {
      if (typeof f.code !== "string" || typeof f.code_verifier !== "string") return oauthError(reply, 400, "invalid_request", "code and code_verifier are required");
      // Spent on first presentation, right or wrong: a replayed code finds nothing.
      const session = await deps.sessions.redeemCode(f.code, now());
      if (!session) return oauthError(reply, 400, "invalid_grant", "the code is invalid, expired or already used");
      if (f.redirect_uri !== session.client_redirect_uri || !sameText(s256(f.code_verifier), session.code_challenge ?? "")) {
        return oauthError(reply, 400, "invalid_grant", "the code does not match this client's request");
      }
      identityUid = session.identity_uid!;
    } else if (f.grant_type === DEVICE_CODE_GRANT) {
      if (typeof f.device_code !== "string") return oauthError(reply, 400, "invalid_request", "device_code is required");
      const poll = await deps.sessions.pollDevice(f.device_code, now(), (DEVICE_POLL_INTERVAL_S - 1) * 1000);
      if (poll.kind === "pending") return oauthError(reply, 400, "authorization_pending", "waiting for the sign-in in a browser");
      if (poll.kind === "slow_down") return oauthError(reply, 400, "slow_down", `poll at most every ${DEVICE_POLL_INTERVAL_S} s`);
      if (poll.kind === "expired") return oauthError(reply, 400, "expired_token", "the device code has expired");
      if (poll.kind === "denied") return oauthError(reply, 400, "access_denied", poll.error);
      if (poll.kind === "unknown") return oauthError(reply, 400, "invalid_grant", "the device code is invalid or already used");
      identityUid = poll.identityUid;
    } else {
      return oauthError(reply, 400, "unsupported_grant_type", "grant_type must be authorization_code or device_code");
    }
    const minted = await deps.issuer.mint({ subject: identityUid, audience: [deps.issuer.urls.apiAudience] });
    return reply
      .header("cache-control", "no-store")
      .header("pragma", "no-cache")
      .send({ access_token: minted.token, token_type: "Bearer", expires_in: Math.floor((minted.expiry.getTime() - now().getTime()) / 1000) });
  });
}

const DEVICE_CSRF_COOKIE = "bulwark_device_csrf";

function normalizeUserCode(text: string): string {
  return text.toUpperCase().replace(/[^A-Z]/g, "").slice(0, 8);
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return v.join("=");
  }
  return undefined;
}

/** The form this scope's parser made of the body (empty without one). */
function formOf(request: FastifyRequest): Record<string, string> {
  const body = request.body;
  return body && typeof body === "object" ? (body as Record<string, string>) : {};
}
