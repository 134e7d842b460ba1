// Upstream OIDC issuers (GitHub Actions, Kubernetes, ...): discovery and JWKS, fetched safely.
// A token names its issuer, so whoever can present a token chooses the URL this server fetches
// from. Every fetch is therefore SSRF-hardened:
// - https only; plain http only to loopback and only with `allowInsecureIssuers` (tests, local);
// - the address is checked when the socket connects (platform/outbound-addresses.ts, shared with
//   the events' deliveries), so a name that resolves to a private, loopback, link-local, CGNAT,
//   multicast, unspecified or reserved address (also IPv4-mapped/NAT64/6to4-embedded) is refused,
//   and DNS rebinding between a check and the connection cannot bypass it; IP literals (which skip
//   `lookup`) are checked before connecting;
// - redirects are followed by hand (at most 3), each hop validated like the first;
// - bodies are capped (256 KiB) and the whole fetch, redirects included, has one deadline (5 s).
// Discovery documents are cached per issuer (10 min); key sets per jwks_uri by jose's remote
// JWKS (10 min max age; an unknown kid refetches at most every 30 s).
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { createRemoteJWKSet, customFetch, type FetchImplementation, type JWTVerifyGetKey } from "jose";
import {
  addressCategory,
  addressKey,
  guardedLookup,
  isLoopbackName,
  systemResolve,
  type Resolve,
} from "../platform/outbound-addresses.js";

export interface UpstreamOptions {
  /** allow plain-http issuers on loopback hosts (tests and local use only) */
  allowInsecureIssuers?: boolean;
  /** allow issuers and jwks_uri hosts on private, loopback, link-local, ... addresses */
  allowPrivateIssuerAddresses?: boolean;
  /** individual non-public addresses allowed even when allowPrivateIssuerAddresses is off */
  allowedPrivateAddresses?: readonly string[];
  /** deadline of one fetch, redirects included (default 5 s) */
  timeoutMs?: number;
  /** largest discovery or JWKS body (default 256 KiB) */
  maxBodyBytes?: number;
  /** redirects followed per fetch (default 3) */
  maxRedirects?: number;
  /** how long a discovery document is trusted (default 10 min) */
  discoveryMaxAgeMs?: number;
  /** how long a key set is trusted (default 10 min) */
  jwksMaxAgeMs?: number;
  /** least time between refetches of a key set for an unknown kid (default 30 s, minimum 30 s) */
  jwksCooldownMs?: number;
  /** name resolution (default: the system resolver); tests substitute their own */
  resolve?: Resolve;
}

export const DEFAULT_TIMEOUT_MS = 5_000;
export const DEFAULT_MAX_BODY_BYTES = 256 * 1024;
export const DEFAULT_MAX_REDIRECTS = 3;
const DEFAULT_MAX_AGE_MS = 10 * 60_000;
const MIN_COOLDOWN_MS = 30_000;
/** Bounds on the caches: issuers come from tokens, so their number is the caller's choice. */
const MAX_CACHED_ISSUERS = 256;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/** Why an upstream fetch failed; the message names URLs and addresses, never tokens. */
export class UpstreamError extends Error {
  override name = "UpstreamError";
}

// ---------------------------------------------------------------------------------------------
// Fetching.

interface RequestInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

export interface UpstreamResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** the URL that answered (after redirects) */
  url: string;
}

interface Discovery {
  jwksUri: string;
}

export class UpstreamIssuers {
  private readonly timeoutMs: number;
  private readonly maxBodyBytes: number;
  private readonly maxRedirects: number;
  private readonly discoveryMaxAgeMs: number;
  private readonly allowedPrivate: Set<string>;
  private readonly resolve: NonNullable<UpstreamOptions["resolve"]>;
  private readonly discoveries = new Map<string, { at: number; value: Promise<Discovery> }>();
  private readonly keySets = new Map<string, JWTVerifyGetKey>();

  constructor(private readonly options: UpstreamOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
    this.discoveryMaxAgeMs = options.discoveryMaxAgeMs ?? DEFAULT_MAX_AGE_MS;
    this.allowedPrivate = new Set((options.allowedPrivateAddresses ?? []).map((a) => addressKey(a) ?? a));
    this.resolve = options.resolve ?? systemResolve;
  }

  /** Why a connection to `address` is refused for a URL of this scheme, or undefined. */
  addressProblem(address: string, protocol: string): string | undefined {
    const category = addressCategory(address);
    if (category === undefined) return `${address} is not an IP address`;
    if (protocol === "http:" && category !== "loopback")
      return `plain http is only allowed to loopback addresses, not ${address}`;
    if (category === "public") return undefined;
    if (this.options.allowPrivateIssuerAddresses || this.allowedPrivate.has(addressKey(address) ?? address))
      return undefined;
    return `${address} is a ${category} address`;
  }

  /** Why this URL may not be fetched, or undefined (the resolved address is checked at connect time). */
  urlProblem(url: URL): string | undefined {
    if (url.username || url.password) return "URLs with credentials are not fetched";
    if (url.protocol === "http:") {
      if (!this.options.allowInsecureIssuers) return `only https issuers are allowed (${url.origin})`;
      if (!isLoopbackName(url.hostname)) return `plain http is only allowed to loopback hosts (${url.origin})`;
    } else if (url.protocol !== "https:") {
      return `unsupported scheme ${url.protocol}`;
    }
    const host = url.hostname.replace(/^\[|\]$/g, "");
    return isIP(host) ? this.addressProblem(host, url.protocol) : undefined;
  }

  /** A `lookup` for node:http(s) that refuses names resolving to a disallowed address, at connect time. */
  private lookupFor(protocol: string): LookupFunction {
    return guardedLookup(
      this.resolve,
      (address) => this.addressProblem(address, protocol),
      (message) => new UpstreamError(message),
    );
  }

  /**
   * One request (GET unless `init` says otherwise), no redirects followed; rejects when the
   * deadline passes or the body is too large.
   */
  private request(
    url: URL,
    deadline: number,
    signal?: AbortSignal,
    init: RequestInit = {},
  ): Promise<Omit<UpstreamResponse, "url">> {
    return new Promise((resolve, reject) => {
      const remaining = deadline - Date.now();
      if (remaining <= 0) return reject(new UpstreamError(`timed out after ${this.timeoutMs} ms (${url.origin})`));
      const client = url.protocol === "https:" ? https : http;
      const req = client.request(url, {
        method: init.method ?? "GET",
        agent: false,
        lookup: this.lookupFor(url.protocol),
        headers: { accept: "application/json, application/jwk-set+json", "user-agent": "bulwark-sts", ...init.headers },
      });
      const timer = setTimeout(
        () => req.destroy(new UpstreamError(`timed out after ${this.timeoutMs} ms (${url.origin})`)),
        remaining,
      );
      const onAbort = () => req.destroy(new UpstreamError(`aborted (${url.origin})`));
      signal?.addEventListener("abort", onAbort, { once: true });
      let settled = false;
      const finish = (err: Error | undefined, value?: Omit<UpstreamResponse, "url">) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(value!);
      };
      req.on("error", (err) =>
        finish(err instanceof UpstreamError ? err : new UpstreamError(`${url.origin}: ${err.message}`)),
      );
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        if (REDIRECT_STATUSES.has(status)) {
          res.resume();
          req.destroy();
          return finish(undefined, { status, headers: res.headers, body: Buffer.alloc(0) });
        }
        const tooLarge = () => new UpstreamError(`response body exceeds ${this.maxBodyBytes} bytes (${url.origin})`);
        if (Number(res.headers["content-length"]) > this.maxBodyBytes) {
          req.destroy(tooLarge());
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > this.maxBodyBytes) req.destroy(tooLarge());
          else chunks.push(chunk);
        });
        res.on("error", (err) =>
          finish(err instanceof UpstreamError ? err : new UpstreamError(`${url.origin}: ${err.message}`)),
        );
        res.on("aborted", () => finish(new UpstreamError(`${url.origin}: response aborted`)));
        res.on("end", () => finish(undefined, { status, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.end(init.body);
    });
  }

  /**
   * A WHATWG-style fetch with the same guards (any method, no redirects followed), for OIDC
   * client libraries: openid-client's `customFetch` when signing users in through an upstream.
   */
  readonly clientFetch = async (
    input: string,
    options: {
      method?: string;
      headers?: Record<string, string> | Headers;
      body?: string | URLSearchParams | Uint8Array | null;
      signal?: AbortSignal | null;
    } = {},
  ): Promise<Response> => {
    const url = new URL(input);
    const problem = this.urlProblem(url);
    if (problem) throw new UpstreamError(problem);
    const headers: Record<string, string> = {};
    new Headers(options.headers ?? {}).forEach((value, key) => (headers[key] = value));
    const body =
      options.body == null
        ? undefined
        : typeof options.body === "string" || options.body instanceof Uint8Array
          ? options.body
          : options.body.toString();
    if (body !== undefined && options.body instanceof URLSearchParams && !headers["content-type"])
      headers["content-type"] = "application/x-www-form-urlencoded";
    const res = await this.request(url, Date.now() + this.timeoutMs, options.signal ?? undefined, {
      method: options.method ?? "GET",
      headers,
      body,
    });
    const responseHeaders = new Headers();
    for (const [key, value] of Object.entries(res.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(key, v);
    }
    const nullBody = res.status === 204 || res.status === 304 || (res.status >= 300 && res.status < 400);
    return new Response(nullBody ? null : new Uint8Array(res.body), { status: res.status, headers: responseHeaders });
  };

  /** GET with every hop validated; one deadline for the whole fetch. */
  async fetch(input: string, signal?: AbortSignal): Promise<UpstreamResponse> {
    const deadline = Date.now() + this.timeoutMs;
    let url: URL;
    try {
      url = new URL(input);
    } catch {
      throw new UpstreamError("not an absolute URL");
    }
    for (let hop = 0; ; hop++) {
      const problem = this.urlProblem(url);
      if (problem) throw new UpstreamError(hop === 0 ? problem : `redirect refused: ${problem}`);
      const res = await this.request(url, deadline, signal);
      if (!REDIRECT_STATUSES.has(res.status)) return { ...res, url: url.href };
      const location = res.headers.location;
      if (!location) throw new UpstreamError(`redirect without a location (${url.origin})`);
      if (hop >= this.maxRedirects) throw new UpstreamError(`more than ${this.maxRedirects} redirects (${url.origin})`);
      try {
        url = new URL(location, url);
      } catch {
        throw new UpstreamError(`redirect to an invalid location (${url.origin})`);
      }
    }
  }

  /** A JSON object from a 200 response. */
  async fetchJson(url: string): Promise<Record<string, unknown>> {
    const res = await this.fetch(url);
    if (res.status !== 200) throw new UpstreamError(`HTTP ${res.status} from ${new URL(res.url).origin}`);
    let json: unknown;
    try {
      json = JSON.parse(res.body.toString("utf8"));
    } catch {
      throw new UpstreamError(`response of ${new URL(res.url).origin} is not JSON`);
    }
    if (!json || typeof json !== "object" || Array.isArray(json))
      throw new UpstreamError(`response of ${new URL(res.url).origin} is not a JSON object`);
    return json as Record<string, unknown>;
  }

  /** jose's fetch for remote key sets, through the safe fetch. */
  private readonly joseFetch: FetchImplementation = async (url, options) => {
    const res = await this.fetch(url, options.signal);
    if (res.status !== 200) throw new UpstreamError(`HTTP ${res.status} from ${new URL(res.url).origin}`);
    return new Response(new Uint8Array(res.body), { status: 200, headers: { "content-type": "application/json" } });
  };

  /** OIDC discovery: `<issuer>/.well-known/openid-configuration`, whose `issuer` must be exactly `issuer`. */
  discover(issuer: string): Promise<Discovery> {
    const now = Date.now();
    const cached = this.discoveries.get(issuer);
    if (cached && now - cached.at < this.discoveryMaxAgeMs) return cached.value;
    const value = this.fetchDiscovery(issuer);
    remember(this.discoveries, issuer, { at: now, value });
    // Failures are not cached: the next exchange asks again.
    value.catch(() => {
      if (this.discoveries.get(issuer)?.value === value) this.discoveries.delete(issuer);
    });
    return value;
  }

  private async fetchDiscovery(issuer: string): Promise<Discovery> {
    let base: URL;
    try {
      base = new URL(issuer);
    } catch {
      throw new UpstreamError("the issuer is not an absolute URL");
    }
    if (base.search || base.hash) throw new UpstreamError("an issuer URL has no query or fragment");
    const doc = await this.fetchJson(`${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`);
    if (doc.issuer !== issuer) throw new UpstreamError(`the discovery document of ${base.origin} names another issuer`);
    if (typeof doc.jwks_uri !== "string")
      throw new UpstreamError(`the discovery document of ${base.origin} has no jwks_uri`);
    let jwksUri: URL;
    try {
      jwksUri = new URL(doc.jwks_uri);
    } catch {
      throw new UpstreamError(`the jwks_uri of ${base.origin} is not an absolute URL`);
    }
    const problem = this.urlProblem(jwksUri);
    if (problem) throw new UpstreamError(`jwks_uri refused: ${problem}`);
    return { jwksUri: jwksUri.href };
  }

  /** The issuer's verification keys (discovery, then its JWKS, both cached). */
  async keySet(issuer: string): Promise<JWTVerifyGetKey> {
    const { jwksUri } = await this.discover(issuer);
    let keys = this.keySets.get(jwksUri);
    if (!keys) {
      keys = createRemoteJWKSet(new URL(jwksUri), {
        timeoutDuration: this.timeoutMs,
        cacheMaxAge: this.options.jwksMaxAgeMs ?? DEFAULT_MAX_AGE_MS,
        cooldownDuration: Math.max(this.options.jwksCooldownMs ?? MIN_COOLDOWN_MS, MIN_COOLDOWN_MS),
        [customFetch]: this.joseFetch,
      });
      remember(this.keySets, jwksUri, keys);
    }
    return keys;
  }
}

/** Map insert that drops the oldest entry beyond the bound. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > MAX_CACHED_ISSUERS) map.delete(map.keys().next().value!);
}
