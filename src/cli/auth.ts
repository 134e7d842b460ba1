// `bulwark auth login | token | status | logout`: obtaining API tokens through the token
// exchange ({auth_url}/sts/exchange) and keeping them for later commands.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { decodeJwt } from "jose";
import { SecurityTokenService } from "../gen/platform/oidc/v1/oidc.platform_pb.js";
import { CliError } from "./errors.js";
import {
  loadCredentials,
  saveCredentials,
  forgetCredentials,
  type Credentials,
  type StoredToken,
} from "./credentials.js";

/** Refresh a stored token when less than this much of its life is left. */
const REFRESH_MARGIN_MS = 5 * 60 * 1000;

export { CliError } from "./errors.js";

/** The identity token argument: a JWT, or the path of a file holding one. */
export async function readIdentityToken(arg: string): Promise<{ token: string; file?: string }> {
  const looksLikeJwt = /^[\w-]+\.[\w-]+\.[\w-]*$/.test(arg.trim());
  if (!looksLikeJwt && existsSync(arg)) return { token: (await readFile(arg, "utf8")).trim(), file: arg };
  if (!looksLikeJwt) throw new CliError(`--identity-token is neither a JWT nor a readable file: ${arg}`);
  return { token: arg.trim() };
}

/** One call of the token exchange (the SecurityTokenService, through its generated client). */
export async function exchange(
  issuerUrl: string,
  bearer: string,
  params: { identity?: string; audience: string },
): Promise<StoredToken> {
  const authorization: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${bearer}`);
    return next(req);
  };
  const sts = createClient(
    SecurityTokenService,
    createConnectTransport({
      baseUrl: issuerUrl,
      httpVersion: "1.1",
      useBinaryFormat: true,
      interceptors: [authorization],
    }),
  );
  const res = await sts.exchange({ aud: [params.audience], identity: params.identity ?? "" });
  if (!res.token) throw new CliError("the token exchange returned no token");
  const expiry = res.expiry ? timestampDate(res.expiry) : new Date((decodeJwt(res.token).exp ?? 0) * 1000);
  return { token: res.token, expiry: expiry.toISOString() };
}

function fresh(t: StoredToken | undefined, now = Date.now()): t is StoredToken {
  return t !== undefined && Date.parse(t.expiry) - now > REFRESH_MARGIN_MS;
}

export interface LoginOptions {
  apiUrl: string;
  issuerUrl: string;
  identity: string;
  identityToken: string;
}

/** Keeps a token a person obtained by signing in (no refresh: sign in again when it expires). */
export async function saveHumanLogin(
  env: NodeJS.ProcessEnv,
  apiUrl: string,
  issuerUrl: string,
  token: { token: string; expiry: Date },
): Promise<Credentials> {
  const creds: Credentials = {
    apiUrl,
    issuerUrl,
    tokens: { [apiUrl]: { token: token.token, expiry: token.expiry.toISOString() } },
  };
  await saveCredentials(creds, env);
  return creds;
}

export async function login(env: NodeJS.ProcessEnv, opts: LoginOptions): Promise<Credentials> {
  const { token: upstream, file } = await readIdentityToken(opts.identityToken);
  const apiToken = await exchange(opts.issuerUrl, upstream, { identity: opts.identity, audience: opts.apiUrl });
  const creds: Credentials = {
    apiUrl: opts.apiUrl,
    issuerUrl: opts.issuerUrl,
    identity: opts.identity,
    ...(file ? { identityTokenFile: file } : { identityToken: upstream }),
    tokens: { [opts.apiUrl]: apiToken },
  };
  await saveCredentials(creds, env);
  return creds;
}

/** A valid token for `audience` (default: the API), refreshed through the exchange when needed. */
export async function token(env: NodeJS.ProcessEnv, audience?: string): Promise<string> {
  const creds = await loadCredentials(env);
  if (!creds)
    throw new CliError(
      "not logged in: run `bulwark auth login`, or set BULWARK_TOKEN (an operator: BULWARK_TOKEN=$(bulwark admin token))",
    );
  const aud = audience ?? creds.apiUrl;
  const stored = creds.tokens[aud];
  if (fresh(stored)) return stored.token;

  let minted: StoredToken | undefined;
  const upstream = creds.identityTokenFile
    ? (await readIdentityToken(creds.identityTokenFile)).token
    : creds.identityToken;
  if (
    upstream &&
    creds.identity &&
    fresh(
      { token: upstream, expiry: new Date((decodeJwt(upstream).exp ?? 0) * 1000).toISOString() },
      Date.now() - REFRESH_MARGIN_MS,
    )
  ) {
    minted = await exchange(creds.issuerUrl, upstream, { identity: creds.identity, audience: aud });
  } else if (aud !== creds.apiUrl && fresh(creds.tokens[creds.apiUrl])) {
    // Another audience (the registry) from a still-valid API token; no identity needed.
    minted = await exchange(creds.issuerUrl, creds.tokens[creds.apiUrl]!.token, { audience: aud });
  }
  if (!minted) {
    const expired = creds.tokens[creds.apiUrl]?.expiry;
    throw new CliError(
      `the stored login's token ${expired ? `expired at ${expired}` : "has expired"} and cannot be refreshed: ` +
        "run `bulwark auth login` again",
    );
  }
  creds.tokens[aud] = minted;
  await saveCredentials(creds, env);
  return minted.token;
}

export async function logout(env: NodeJS.ProcessEnv): Promise<boolean> {
  return forgetCredentials(env);
}
