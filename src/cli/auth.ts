// `bulwark auth login | token | status | logout`: obtaining API tokens through the token
// exchange ({auth_url}/sts/exchange) and keeping them for later commands.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { decodeJwt } from "jose";
import {
  loadCredentials,
  saveCredentials,
  forgetCredentials,
  type Credentials,
  type StoredToken,
} from "./credentials.js";

/** Refresh a stored token when less than this much of its life is left. */
const REFRESH_MARGIN_MS = 5 * 60 * 1000;

export class CliError extends Error {}

/** The identity token argument: a JWT, or the path of a file holding one. */
export async function readIdentityToken(arg: string): Promise<{ token: string; file?: string }> {
  const looksLikeJwt = /^[\w-]+\.[\w-]+\.[\w-]*$/.test(arg.trim());
  if (!looksLikeJwt && existsSync(arg)) return { token: (await readFile(arg, "utf8")).trim(), file: arg };
  if (!looksLikeJwt) throw new CliError(`--identity-token is neither a JWT nor a readable file: ${arg}`);
  return { token: arg.trim() };
}

async function errorText(res: Response): Promise<string> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as { message?: string };
    return body.message ?? text;
  } catch {
    return text || `HTTP ${res.status}`;
  }
}

/** One call of the token exchange. */
export async function exchange(
  issuerUrl: string,
  bearer: string,
  params: { identity?: string; audience: string },
): Promise<StoredToken> {
  const url = new URL("/sts/exchange", issuerUrl);
  url.searchParams.append("aud", params.audience);
  if (params.identity) url.searchParams.set("identity", params.identity);
  const res = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${bearer}` } });
  if (!res.ok) throw new CliError(`token exchange failed: ${await errorText(res)}`);
  const body = (await res.json()) as { token?: string; expiry?: string };
  if (!body.token) throw new CliError("token exchange returned no token");
  return { token: body.token, expiry: body.expiry ?? new Date((decodeJwt(body.token).exp ?? 0) * 1000).toISOString() };
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
  apiUrl: string,
  issuerUrl: string,
  token: { token: string; expiry: Date },
): Promise<Credentials> {
  const creds: Credentials = {
    apiUrl,
    issuerUrl,
    tokens: { [apiUrl]: { token: token.token, expiry: token.expiry.toISOString() } },
  };
  await saveCredentials(creds);
  return creds;
}

export async function login(opts: LoginOptions): Promise<Credentials> {
  const { token: upstream, file } = await readIdentityToken(opts.identityToken);
  const apiToken = await exchange(opts.issuerUrl, upstream, { identity: opts.identity, audience: opts.apiUrl });
  const creds: Credentials = {
    apiUrl: opts.apiUrl,
    issuerUrl: opts.issuerUrl,
    identity: opts.identity,
    ...(file ? { identityTokenFile: file } : { identityToken: upstream }),
    tokens: { [opts.apiUrl]: apiToken },
  };
  await saveCredentials(creds);
  return creds;
}

/** A valid token for `audience` (default: the API), refreshed through the exchange when needed. */
export async function token(audience?: string): Promise<string> {
  const creds = await loadCredentials();
  if (!creds) throw new CliError("not logged in: run `bulwark auth login`");
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
  if (!minted)
    throw new CliError("the stored token has expired and cannot be refreshed: run `bulwark auth login` again");
  creds.tokens[aud] = minted;
  await saveCredentials(creds);
  return minted.token;
}

export interface Status {
  subject: string;
  email: string;
  expiry: string;
  issuer: string;
  audience: string[];
  capabilities: { group?: { id: string; name: string }; role?: { name: string } }[];
}

/** Who the stored API token belongs to and when it expires (the API's Auth.Validate answer). */
export async function status(): Promise<Status> {
  const creds = await loadCredentials();
  if (!creds) throw new CliError("not logged in: run `bulwark auth login`");
  const apiToken = await token();
  const res = await fetch(new URL("/auth/v1/ok", creds.apiUrl), { headers: { authorization: `Bearer ${apiToken}` } });
  if (!res.ok) throw new CliError(`status failed: ${await errorText(res)}`);
  return (await res.json()) as Status;
}

export async function logout(): Promise<boolean> {
  return forgetCredentials();
}
