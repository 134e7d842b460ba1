// Who is signed in, in this tab: the API token and when it expires, kept in sessionStorage (per
// tab, gone when the tab closes; never in a cookie, so no request carries it unasked). Tokens come
// from the server's own browser sign-in (authorization code + PKCE, client `bulwark-console`, the
// same flow `bulwark auth login` uses) or are pasted by an operator (`bulwark admin token`).
// There is no refresh token: when the 1-hour token nears its end the console says so, and when it
// has ended (or the API answers UNAUTHENTICATED) it asks for a new sign-in and returns to the page.
import { CONSOLE_CALLBACK_PATH, CONSOLE_CLIENT_ID } from "../../src/core/cli-client.js";

const SESSION_KEY = "bulwark.console.session";
const PENDING_KEY = "bulwark.console.sign-in";

export interface Session {
  token: string;
  /** epoch ms */
  expiresAt: number;
}

/** A sign-in under way: what the callback needs to finish it. */
interface PendingSignIn {
  state: string;
  verifier: string;
  redirectUri: string;
  tokenEndpoint: string;
  returnTo: string;
}

export interface SignInOptions {
  /** an organization's identity provider uid (empty: the server's default provider) */
  identityProvider?: string;
  /** an invite code to redeem on sign-in */
  inviteCode?: string;
  /** where to go once signed in (a console path) */
  returnTo?: string;
}

type Listener = () => void;
const listeners = new Set<Listener>();
let current: Session | undefined = read();
/** Why the last session ended, shown on the sign-in page. */
let endedBecause: string | undefined;
let expiryTimer: ReturnType<typeof setTimeout> | undefined;
const ENDED = "Your session has ended. Sign in again to continue.";

/**
 * Ends the session when its token expires (a machine that slept fires late: reading the token
 * checks too). setTimeout fires at once past 2^31 - 1 ms, so a long-lived pasted token waits in steps.
 */
function watchExpiry(): void {
  clearTimeout(expiryTimer);
  if (!current) return;
  const left = current.expiresAt - Date.now();
  if (left <= 0) return session.end(ENDED);
  expiryTimer = setTimeout(watchExpiry, Math.min(left, 2 ** 31 - 1));
}

function read(): Session | undefined {
  try {
    const value = JSON.parse(sessionStorage.getItem(SESSION_KEY) ?? "null") as Session | null;
    return value && typeof value.token === "string" && value.expiresAt > Date.now() ? value : undefined;
  } catch {
    return undefined;
  }
}

function changed(): void {
  for (const listener of listeners) listener();
}

export const session = {
  current: (): Session | undefined => current,
  token(): string | undefined {
    if (current && current.expiresAt <= Date.now()) session.end(ENDED);
    return current?.token;
  },
  endedBecause: (): string | undefined => endedBecause,
  subscribe(listener: Listener): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
  start(token: string, expiresAt: number): void {
    current = { token, expiresAt };
    endedBecause = undefined;
    sessionStorage.setItem(SESSION_KEY, JSON.stringify(current));
    watchExpiry();
    changed();
  },
  /** Ends the session in this tab (the token itself stays valid until it expires: it is a JWT). */
  end(reason?: string): void {
    current = undefined;
    endedBecause = reason;
    clearTimeout(expiryTimer);
    sessionStorage.removeItem(SESSION_KEY);
    changed();
  },
};

function randomText(bytes: number): string {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

function base64url(bytes: Uint8Array): string {
  let text = "";
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

interface Discovery {
  authorization_endpoint: string;
  token_endpoint: string;
}

/** The issuer's endpoints, from the discovery document this server publishes. */
async function discover(): Promise<Discovery> {
  const response = await fetch("/.well-known/openid-configuration", { headers: { accept: "application/json" } });
  if (!response.ok) throw new Error(`The server's sign-in is not available (HTTP ${response.status}).`);
  return (await response.json()) as Discovery;
}

/** PKCE (RFC 7636) needs SHA-256 from WebCrypto, which browsers offer only on HTTPS or loopback. */
export const canSignInHere = (): boolean => typeof crypto !== "undefined" && crypto.subtle !== undefined;

/** Starts the browser sign-in: leaves for the issuer's authorization endpoint. */
export async function beginSignIn(options: SignInOptions): Promise<void> {
  const { authorization_endpoint, token_endpoint } = await discover();
  const verifier = randomText(32);
  const challenge = base64url(
    new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))),
  );
  const pending: PendingSignIn = {
    state: randomText(24),
    verifier,
    redirectUri: `${location.origin}${CONSOLE_CALLBACK_PATH}`,
    tokenEndpoint: token_endpoint,
    returnTo: safeReturn(options.returnTo),
  };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const url = new URL(authorization_endpoint);
  const params = {
    client_id: CONSOLE_CLIENT_ID,
    response_type: "code",
    redirect_uri: pending.redirectUri,
    state: pending.state,
    code_challenge: challenge,
    code_challenge_method: "S256",
    ...(options.identityProvider ? { identity_provider: options.identityProvider } : {}),
    ...(options.inviteCode ? { invite_code: options.inviteCode } : {}),
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  location.assign(url.href);
}

/** Only console paths: a crafted link cannot send a signed-in person elsewhere. */
export function safeReturn(path: string | undefined): string {
  return path && /^\/console(\/|$|\?)/.test(path) && !path.startsWith("//") ? path : "/console";
}

/**
 * Finishes a sign-in on the callback page: checks the state, redeems the code with the verifier.
 * Returns where to go next; throws with the words to show when the sign-in failed.
 */
export async function finishSignIn(query: URLSearchParams): Promise<string> {
  const raw = sessionStorage.getItem(PENDING_KEY);
  sessionStorage.removeItem(PENDING_KEY);
  const pending = raw ? (JSON.parse(raw) as PendingSignIn) : undefined;
  if (!pending || query.get("state") !== pending.state) {
    throw new Error("This sign-in was not started in this tab, or it was already finished. Sign in again.");
  }
  const error = query.get("error");
  if (error) throw new Error(query.get("error_description") || error);
  const code = query.get("code");
  if (!code) throw new Error("The sign-in returned no code. Sign in again.");
  const response = await fetch(pending.tokenEndpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      client_id: CONSOLE_CLIENT_ID,
      code,
      code_verifier: pending.verifier,
      redirect_uri: pending.redirectUri,
    }),
  });
  const body = (await response.json().catch(() => ({}))) as {
    access_token?: string;
    expires_in?: number;
    error?: string;
    error_description?: string;
  };
  if (!response.ok || !body.access_token) {
    throw new Error(body.error_description || body.error || `The token request failed (HTTP ${response.status}).`);
  }
  session.start(body.access_token, Date.now() + (body.expires_in ?? 3600) * 1000);
  return pending.returnTo;
}

watchExpiry();
