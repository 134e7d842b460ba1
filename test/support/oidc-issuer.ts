// A real OIDC provider on loopback for the token exchange tests: a node:http server serving
// discovery (`<url>/.well-known/openid-configuration`) and a JWKS of keys made by jose, minting
// GitHub Actions- and Kubernetes-shaped tokens. Every header and time claim can be set, and the
// server can misbehave on purpose (wrong `issuer`, oversized body, redirect, slowness).
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK, type JWTPayload } from "jose";

export interface IssuerKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  publicJwk: JWK;
}

/** A signing key (not published by any issuer until added to one). */
export async function makeKey(alg = "RS256", kid: string = randomUUID()): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, publicKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
}

/** A JWKS document (public keys only). */
export function jwks(keys: IssuerKey[]): { keys: JWK[] } {
  return { keys: keys.map((k) => k.publicJwk) };
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);

export interface TokenOptions {
  /** default: the issuer's URL */
  iss?: string;
  sub?: string;
  /** default: the issuer's defaultAudience; null leaves it out */
  aud?: string | string[] | null;
  /** epoch seconds; null leaves the claim out. Defaults: exp now+300, nbf now-5, iat now */
  exp?: number | null;
  nbf?: number | null;
  iat?: number | null;
  /** header alg (default: the key's) and kid (default: the key's; null leaves it out) */
  alg?: string;
  kid?: string | null;
  /** the key to sign with (default: the issuer's first key) */
  key?: IssuerKey;
  /** more claims, or replacements (undefined removes one) */
  claims?: Record<string, unknown>;
}

export interface IssuerBehaviour {
  /** `issuer` of the discovery document (default: the issuer's URL) */
  discoveryIssuer?: string;
  /** `jwks_uri` of the discovery document (default: <url>/keys) */
  jwksUri?: string;
  /** the discovery response body, verbatim */
  discoveryBody?: string;
  /** answer discovery with 302 to this location */
  redirectTo?: string;
  /** answer nothing before this settles (a slow issuer, as slow as the test needs) */
  answerAfter?: Promise<unknown>;
}

export class OidcIssuer {
  /** paths requested, in order */
  readonly requests: string[] = [];
  behaviour: IssuerBehaviour;
  /** `aud` of minted tokens unless a token says otherwise */
  defaultAudience: string | string[] = "bulwark";

  private constructor(
    private readonly server: http.Server,
    /** the issuer identifier: http://127.0.0.1:<port><path> */
    readonly url: string,
    readonly keys: IssuerKey[],
    behaviour: IssuerBehaviour,
  ) {
    this.behaviour = behaviour;
  }

  static async start(
    options: { algs?: string[]; path?: string; host?: string; behaviour?: IssuerBehaviour } = {},
  ): Promise<OidcIssuer> {
    const keys = await Promise.all((options.algs ?? ["RS256"]).map((alg) => makeKey(alg)));
    let issuer!: OidcIssuer;
    const server = http.createServer((req, res) => void issuer.handle(req, res));
    const host = options.host ?? "127.0.0.1";
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    const port = (server.address() as AddressInfo).port;
    issuer = new OidcIssuer(server, `http://${host}:${port}${options.path ?? ""}`, keys, options.behaviour ?? {});
    return issuer;
  }

  get origin(): string {
    return new URL(this.url).origin;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0]!;
    this.requests.push(path);
    const b = this.behaviour;
    if (b.answerAfter) await b.answerAfter.catch(() => undefined);
    if (res.destroyed) return;
    const base = new URL(this.url).pathname.replace(/\/$/, "");
    const json = (status: number, body: string): void =>
      void res.writeHead(status, { "content-type": "application/json" }).end(body);
    if (path === `${base}/.well-known/openid-configuration`) {
      if (b.redirectTo) return void res.writeHead(302, { location: b.redirectTo }).end();
      if (b.discoveryBody !== undefined) return json(200, b.discoveryBody);
      return json(
        200,
        JSON.stringify({
          issuer: b.discoveryIssuer ?? this.url,
          jwks_uri: b.jwksUri ?? `${this.url}/keys`,
          response_types_supported: ["id_token"],
          subject_types_supported: ["public"],
          id_token_signing_alg_values_supported: [...new Set(this.keys.map((k) => k.alg))],
        }),
      );
    }
    if (path === `${base}/keys`) return json(200, JSON.stringify(jwks(this.keys)));
    json(404, JSON.stringify({ error: "not found" }));
  }

  /** How often discovery and the JWKS were fetched. */
  count(kind: "discovery" | "keys"): number {
    return this.requests.filter((p) => p.endsWith(kind === "discovery" ? "/.well-known/openid-configuration" : "/keys"))
      .length;
  }

  /** Signs any claims with one of this issuer's keys (or the given one). */
  async sign(claims: JWTPayload, options: TokenOptions = {}): Promise<string> {
    const key = options.key ?? this.keys[0]!;
    const now = nowSeconds();
    const payload: JWTPayload = {
      iss: this.url,
      aud: this.defaultAudience,
      iat: now,
      nbf: now - 5,
      exp: now + 300,
      jti: randomUUID(),
      ...claims,
    };
    const set = (name: string, value: unknown) => {
      if (value === null) delete payload[name];
      else if (value !== undefined) payload[name] = value;
    };
    set("iss", options.iss);
    set("sub", options.sub);
    set("aud", options.aud);
    set("exp", options.exp);
    set("nbf", options.nbf);
    set("iat", options.iat);
    for (const [name, value] of Object.entries(options.claims ?? {})) {
      if (value === undefined) delete payload[name];
      else payload[name] = value;
    }
    const kid = options.kid === undefined ? key.kid : options.kid;
    return new SignJWT(payload)
      .setProtectedHeader({ alg: options.alg ?? key.alg, typ: "JWT", ...(kid === null ? {} : { kid }) })
      .sign(key.privateKey);
  }

  /** A GitHub Actions OIDC token of acme/app on main (override anything with options). */
  githubToken(options: TokenOptions = {}): Promise<string> {
    return this.sign(
      {
        sub: "repo:acme/app:ref:refs/heads/main",
        repository: "acme/app",
        repository_owner: "acme",
        ref: "refs/heads/main",
        ref_type: "branch",
        workflow: "deploy",
        event_name: "push",
        actor: "octocat",
        run_id: "4242",
        run_attempt: "1",
        runner_environment: "github-hosted",
        job_workflow_ref: "acme/app/.github/workflows/deploy.yaml@refs/heads/main",
      },
      options,
    );
  }

  /** A Kubernetes projected service-account token of ns/sa (override anything with options). */
  kubernetesToken(options: TokenOptions = {}): Promise<string> {
    return this.sign(
      {
        sub: "system:serviceaccount:ns:sa",
        "kubernetes.io": {
          namespace: "ns",
          serviceaccount: { name: "sa", uid: randomUUID() },
          pod: { name: "app-7d9f", uid: randomUUID() },
        },
      },
      options,
    );
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
