// `bulwark auth login` for people: OAuth 2.0 for native apps (RFC 8252) against our issuer —
// authorization code + PKCE, a loopback redirect on an ephemeral port, and a state check — or,
// with --headless, the device flow (RFC 8628). openid-client does the protocol work; the API
// token only ever arrives in the token endpoint's response, never in a URL.
import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import * as oidc from "openid-client";
import { CLI_CLIENT_ID } from "../core/cli-client.js";
import { CliError } from "./errors.js";

const WAIT_FOR_BROWSER_MS = 5 * 60 * 1000;

export interface BrowserLoginOptions {
  issuerUrl: string;
  identityProvider?: string;
  inviteCode?: string;
  /** show the URL and do not try to open a browser */
  noBrowser?: boolean;
  /** where progress for the person goes (stderr) */
  say: (line: string) => void;
}

export interface LoginResult {
  token: string;
  expiry: Date;
}

async function ourIssuer(issuerUrl: string): Promise<oidc.Configuration> {
  const url = new URL(issuerUrl);
  const insecure = url.protocol === "http:";
  return oidc.discovery(url, CLI_CLIENT_ID, undefined, oidc.None(), {
    execute: insecure ? [oidc.allowInsecureRequests] : [],
  });
}

function extraParameters(opts: BrowserLoginOptions): Record<string, string> {
  return {
    ...(opts.identityProvider ? { identity_provider: opts.identityProvider } : {}),
    ...(opts.inviteCode ? { invite_code: opts.inviteCode } : {}),
  };
}

function openBrowser(url: string): void {
  const command = process.platform === "darwin" ? "open" : process.platform === "win32" ? "cmd" : "xdg-open";
  const args = process.platform === "win32" ? ["/c", "start", "", url] : [url];
  try {
    const child = spawn(command, args, { stdio: "ignore", detached: true });
    child.on("error", () => {}); // no browser here: the printed URL is the fallback
    child.unref();
  } catch {
    // same
  }
}

/** Server-supplied text for a terminal: no control characters or escape sequences. */
function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, " ").slice(0, 300);
}

/**
 * The issuer's own refusal, in its words: openid-client's errors say only "server responded with
 * an error in the response body"; the server's reason is in error_description (RFC 6749 §5.2).
 */
export function issuerRefusal(err: unknown): unknown {
  if (
    err instanceof oidc.ResponseBodyError ||
    err instanceof oidc.AuthorizationResponseError ||
    err instanceof oidc.WWWAuthenticateChallengeError
  ) {
    const code = "error" in err && typeof err.error === "string" ? err.error : undefined;
    const description = "error_description" in err ? err.error_description : undefined;
    const said = description ? printable(description) : code ? printable(code) : err.message;
    return new CliError(`the sign-in service refused: ${said}${code && description ? ` [${printable(code)}]` : ""}`);
  }
  return err;
}

/** Runs one exchange with the issuer, its refusals in its own words. */
async function withIssuer<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    throw issuerRefusal(err);
  }
}

function result(tokens: { access_token: string; expires_in?: number }): LoginResult {
  return { token: tokens.access_token, expiry: new Date(Date.now() + (tokens.expires_in ?? 3600) * 1000) };
}

/** Authorization code + PKCE with a loopback redirect. */
export async function browserLogin(opts: BrowserLoginOptions): Promise<LoginResult> {
  const config = await withIssuer(() => ourIssuer(opts.issuerUrl));
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  let finish!: (url: URL) => void;
  let fail!: (err: Error) => void;
  const callback = new Promise<URL>((resolve, reject) => ((finish = resolve), (fail = reject)));
  let redirectUri = "";
  const server = http.createServer((req, res) => {
    // The callback as the issuer sent it: our redirect URI (with its port) plus the parameters.
    const url = new URL(req.url ?? "/", redirectUri);
    if (url.pathname !== "/callback" || url.searchParams.get("state") !== state) {
      // Not our sign-in (anyone on this machine can reach the port): ignore it, keep waiting.
      res.writeHead(400, { "content-type": "text/plain; charset=utf-8" }).end("Unknown sign-in.\n");
      return;
    }
    const ok = !url.searchParams.has("error");
    res.writeHead(ok ? 200 : 400, { "content-type": "text/plain; charset=utf-8" });
    res.end(
      ok
        ? "Signed in. You can close this window and return to your terminal.\n"
        : "Sign-in failed. See your terminal.\n",
    );
    finish(url);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  redirectUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
  const timer = setTimeout(() => fail(new Error("timed out waiting for the browser sign-in")), WAIT_FOR_BROWSER_MS);
  try {
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
      state,
      ...extraParameters(opts),
    });
    opts.say(`Open this URL in a browser to sign in:\n\n  ${url.href}\n`);
    if (!opts.noBrowser) openBrowser(url.href);
    const returned = await callback;
    const error = returned.searchParams.get("error");
    if (error) throw new Error(`sign-in failed: ${printable(returned.searchParams.get("error_description") ?? error)}`);
    // Checks state, then redeems the code with the PKCE verifier at the token endpoint.
    const tokens = await withIssuer(() =>
      oidc.authorizationCodeGrant(config, returned, { pkceCodeVerifier: verifier, expectedState: state }),
    );
    return result(tokens);
  } finally {
    clearTimeout(timer);
    server.close();
  }
}

/** The device flow: a user code approved in a browser elsewhere. */
export async function headlessLogin(opts: BrowserLoginOptions): Promise<LoginResult> {
  const config = await withIssuer(() => ourIssuer(opts.issuerUrl));
  const device = await withIssuer(() => oidc.initiateDeviceAuthorization(config, extraParameters(opts)));
  opts.say(
    `On any device with a browser, open\n\n  ${device.verification_uri}\n\nand enter the code ${device.user_code}` +
      `${device.verification_uri_complete ? `\n(or open ${device.verification_uri_complete})` : ""}\n` +
      `The code expires in ${Math.round(device.expires_in / 60)} minutes.\n`,
  );
  return result(await withIssuer(() => oidc.pollDeviceAuthorizationGrant(config, device)));
}
