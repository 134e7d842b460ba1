// Upstream OIDC providers people sign in with, on loopback, for the human sign-in tests:
//
// - UpstreamProvider: a REAL OpenID Provider (oidc-provider, devInteractions login and consent
//   pages) with a confidential client (client_secret_post) and a public one (auth method none),
//   both requiring PKCE. Its listener starts first (the issuer URL is needed to configure the
//   bulwark server), the provider itself once the bulwark callback URL is known.
// - RogueUpstream: a tiny hand-written provider (discovery, /authorize, /token, JWKS) that
//   records what the relying party sent and mints whatever ID token a test asks for (a wrong
//   nonce, issuer, audience, key, ...), to check that such answers are refused.
import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { SignJWT, UnsecuredJWT, exportJWK, type JWK } from "jose";
import { jwks, makeKey, nowSeconds, type IssuerKey } from "./oidc-issuer.js";

/**
 * A person at the upstream: the claims it releases besides `sub`, which is the login name
 * (oidc-provider makes the account id the subject, and devInteractions the login name the account id).
 */
export interface Account {
  email?: string;
  email_verified?: boolean;
  preferred_username?: string;
  name?: string;
}

/** The account of a login name nobody configured: a verified <login>@example.test email. */
export function defaultAccount(login: string): Account {
  return { email: `${login}@example.test`, email_verified: true, preferred_username: login, name: login };
}

export interface UpstreamProviderOptions {
  /** accounts by login name (others get defaultAccount) */
  accounts?: Record<string, Account>;
  /**
   * oidc-provider's conformIdTokenClaims (default here: false). True is OIDC Core §5.4 to the
   * letter and oidc-provider's own default: with response_type=code, scope-requested claims
   * (email, profile) are released only at the userinfo endpoint, never in the ID token.
   */
  conformIdTokenClaims?: boolean;
}

type Listener = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** A constructor for oidc-provider's Provider (the package ships no types). */
type ProviderClass = new (
  issuer: string,
  configuration: Record<string, unknown>,
) => {
  callback(): Listener;
  on(event: string, listener: (...args: any[]) => void): unknown;
};

let providerClass: Promise<ProviderClass> | undefined;

/** oidc-provider, imported once; its start-up warnings (dev keys, devInteractions, Node 20) are expected here and kept out of the test output. */
function loadProvider(): Promise<ProviderClass> {
  providerClass ??= quietly(
    async () => ((await import("oidc-provider" as string)) as { Provider: ProviderClass }).Provider,
  );
  return providerClass;
}

async function quietly<T>(fn: () => Promise<T> | T): Promise<T> {
  const warn = console.warn;
  const info = console.info;
  const filter =
    (original: (...args: unknown[]) => void) =>
    (...args: unknown[]) => {
      if (typeof args[0] === "string" && /^(\x1b\[[\d;]*m)?oidc-provider (WARNING|NOTICE)/.test(args[0])) return;
      original(...args);
    };
  console.warn = filter(warn);
  console.info = filter(info);
  try {
    return await fn();
  } finally {
    console.warn = warn;
    console.info = info;
  }
}

async function listen(handler: Listener): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

export class UpstreamProvider {
  /** registered with token_endpoint_auth_method client_secret_post */
  readonly confidentialClient = {
    clientId: "bulwark-confidential",
    clientSecret: randomBytes(24).toString("base64url"),
  };
  /** registered with token_endpoint_auth_method none (PKCE only) */
  readonly publicClient = { clientId: "bulwark-public" };
  /** oidc-provider's error events (name and message), for diagnosing a failing test */
  readonly errors: string[] = [];
  /** names of the provider's grant.success events: one per code (or other grant) redeemed */
  readonly grants: string[] = [];
  private handler?: Listener;
  private readonly accounts: Map<string, Account>;

  private constructor(
    private readonly server: http.Server,
    /** the issuer identifier: http://127.0.0.1:<port> */
    readonly issuer: string,
    private readonly options: UpstreamProviderOptions,
  ) {
    this.accounts = new Map(Object.entries(options.accounts ?? {}));
  }

  /** Listens on 127.0.0.1:0 (answering 503 until start). */
  static async listen(options: UpstreamProviderOptions = {}): Promise<UpstreamProvider> {
    let self!: UpstreamProvider;
    const { server, url } = await listen((req, res) => {
      if (self.handler) return self.handler(req, res);
      res.writeHead(503, { "content-type": "text/plain" }).end("not started");
    });
    self = new UpstreamProvider(server, url, options);
    return self;
  }

  /** The claims a login name signs in with. */
  account(login: string): Account {
    return this.accounts.get(login) ?? defaultAccount(login);
  }

  /** Changes what the upstream says about a person from their next sign-in on. */
  setAccount(login: string, account: Account): void {
    this.accounts.set(login, account);
  }

  /** Starts the provider with both clients allowed to redirect to `redirectUris`. */
  async start(redirectUris: string[]): Promise<void> {
    const Provider = await loadProvider();
    const { privateKey } = await makeKey("RS256");
    const signingKey: JWK = { ...(await exportJWK(privateKey)), kid: "upstream-1", alg: "RS256", use: "sig" };
    const client = { redirect_uris: redirectUris, grant_types: ["authorization_code"], response_types: ["code"] };
    const provider = await quietly(
      () =>
        new Provider(this.issuer, {
          clients: [
            {
              ...client,
              client_id: this.confidentialClient.clientId,
              client_secret: this.confidentialClient.clientSecret,
              token_endpoint_auth_method: "client_secret_post",
            },
            { ...client, client_id: this.publicClient.clientId, token_endpoint_auth_method: "none" },
          ],
          pkce: { required: () => true },
          findAccount: async (_ctx: unknown, id: string) => {
            const account = this.account(id);
            return { accountId: id, claims: async () => ({ ...account, sub: id }) };
          },
          claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["preferred_username", "name"] },
          conformIdTokenClaims: this.options.conformIdTokenClaims ?? false,
          features: { devInteractions: { enabled: true } },
          cookies: { keys: [randomBytes(32).toString("base64url")] },
          jwks: { keys: [signingKey] },
          ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 3600, Grant: 3600 },
        }),
    );
    for (const event of ["server_error", "authorization.error", "grant.error", "userinfo.error", "interaction.error"]) {
      provider.on(event, (_ctx: unknown, err: Error) => this.errors.push(`${event}: ${err?.message ?? String(err)}`));
    }
    provider.on("grant.success", () => this.grants.push("grant.success"));
    this.handler = provider.callback();
  }

  close(): Promise<void> {
    return closeServer(this.server);
  }
}

/** What the rogue's ID token says: claims over the honest defaults (undefined removes one), and the key it is signed with. */
export interface RogueBehaviour {
  idToken?: Record<string, unknown>;
  /** sign with this key instead of the published one */
  key?: IssuerKey;
  /** an unsecured JWT (alg none) */
  unsigned?: boolean;
  /** the `sub` of the person who signs in (default "mallory") */
  subject?: string;
}

interface RogueCode {
  clientId: string;
  nonce?: string;
  codeChallenge?: string;
  redirectUri: string;
}

/**
 * An OpenID Provider in ~80 lines that does what it is told. Honest by default (the ID token
 * carries the request's nonce), so a test can first show that a sign-in through it works and
 * then change one thing. Every authorization and token request is recorded.
 */
export class RogueUpstream {
  readonly authorizeRequests: URLSearchParams[] = [];
  readonly tokenRequests: URLSearchParams[] = [];
  behaviour: RogueBehaviour = {};
  private readonly codes = new Map<string, RogueCode>();

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    readonly key: IssuerKey,
  ) {}

  static async start(): Promise<RogueUpstream> {
    const key = await makeKey("RS256");
    let self!: RogueUpstream;
    const { server, url } = await listen((req, res) => void self.handle(req, res));
    self = new RogueUpstream(server, url, key);
    return self;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", this.url);
    const json = (status: number, body: unknown) =>
      void res
        .writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
        .end(JSON.stringify(body));
    if (url.pathname === "/.well-known/openid-configuration") {
      return json(200, {
        issuer: this.url,
        authorization_endpoint: `${this.url}/authorize`,
        token_endpoint: `${this.url}/token`,
        jwks_uri: `${this.url}/keys`,
        response_types_supported: ["code"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: ["RS256"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["client_secret_post", "none"],
      });
    }
    if (url.pathname === "/keys") return json(200, jwks([this.key]));
    if (url.pathname === "/authorize") {
      const q = url.searchParams;
      this.authorizeRequests.push(q);
      const redirectUri = q.get("redirect_uri") ?? "";
      const code = randomBytes(16).toString("base64url");
      this.codes.set(code, {
        clientId: q.get("client_id") ?? "",
        nonce: q.get("nonce") ?? undefined,
        codeChallenge: q.get("code_challenge") ?? undefined,
        redirectUri,
      });
      const back = new URL(redirectUri);
      back.searchParams.set("code", code);
      if (q.has("state")) back.searchParams.set("state", q.get("state")!);
      return void res.writeHead(302, { location: back.href }).end();
    }
    if (url.pathname === "/token" && req.method === "POST") {
      let body = "";
      for await (const chunk of req) body += chunk;
      const form = new URLSearchParams(body);
      this.tokenRequests.push(form);
      const issued = this.codes.get(form.get("code") ?? "");
      if (!issued) return json(400, { error: "invalid_grant" });
      this.codes.delete(form.get("code")!);
      const now = nowSeconds();
      const claims: Record<string, unknown> = {
        iss: this.url,
        sub: this.behaviour.subject ?? "mallory",
        aud: issued.clientId,
        iat: now,
        exp: now + 300,
        email: "mallory@example.test",
        email_verified: true,
        preferred_username: "mallory",
        ...(issued.nonce ? { nonce: issued.nonce } : {}),
      };
      for (const [name, value] of Object.entries(this.behaviour.idToken ?? {})) {
        if (value === undefined) delete claims[name];
        else claims[name] = value;
      }
      const key = this.behaviour.key ?? this.key;
      const idToken = this.behaviour.unsigned
        ? new UnsecuredJWT(claims).encode()
        : await new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JWT" }).sign(key.privateKey);
      return json(200, {
        access_token: randomBytes(16).toString("base64url"),
        token_type: "Bearer",
        expires_in: 300,
        id_token: idToken,
      });
    }
    json(404, { error: "not found" });
  }

  /** Whether a recorded token request's code_verifier matches its authorization request's S256 challenge. */
  static pkceMatches(authorize: URLSearchParams, token: URLSearchParams): boolean {
    const verifier = token.get("code_verifier");
    return (
      authorize.get("code_challenge_method") === "S256" &&
      !!verifier &&
      createHash("sha256").update(verifier).digest("base64url") === authorize.get("code_challenge")
    );
  }

  close(): Promise<void> {
    return closeServer(this.server);
  }
}
