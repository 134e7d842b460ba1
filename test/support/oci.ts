// A small OCI distribution v1.1 client for black-box tests: raw requests with the distribution
// token flow (Bearer challenge -> token for the named scope -> one retry), plus digest and
// descriptor helpers. It asserts nothing; suites judge the responses.
import { createHash } from "node:crypto";

export const MEDIA_TYPES = {
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  ociIndex: "application/vnd.oci.image.index.v1+json",
  ociConfig: "application/vnd.oci.image.config.v1+json",
  ociLayer: "application/vnd.oci.image.layer.v1.tar+gzip",
  ociEmpty: "application/vnd.oci.empty.v1+json",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  dockerConfig: "application/vnd.docker.container.image.v1+json",
  dockerLayer: "application/vnd.docker.image.rootfs.diff.tar.gzip",
} as const;

export type DigestAlgorithm = "sha256" | "sha512";

export function digestOf(bytes: Uint8Array | string, algorithm: DigestAlgorithm = "sha256"): string {
  return `${algorithm}:${createHash(algorithm).update(bytes).digest("hex")}`;
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  artifactType?: string;
  annotations?: Record<string, string>;
  platform?: { architecture: string; os: string };
}

export function descriptorOf(
  mediaType: string,
  bytes: Uint8Array | string,
  extra: Partial<Descriptor> = {},
): Descriptor {
  return { mediaType, digest: digestOf(bytes), size: Buffer.byteLength(bytes), ...extra };
}

/** A parsed `WWW-Authenticate` challenge: lower-cased scheme and its auth-params. */
export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/** Parses the first challenge of a `WWW-Authenticate` value (quoted strings with backslash escapes). */
export function parseChallenge(header: string | null): Challenge | undefined {
  const m = header?.match(/^\s*([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*(.*)$/s);
  if (!m) return undefined;
  const params: Record<string, string> = {};
  const re = /\s*([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*(?:,|$)/gy;
  const rest = m[2] ?? "";
  let p: RegExpExecArray | null;
  while (re.lastIndex < rest.length && (p = re.exec(rest))) {
    params[p[1]!.toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, "$1") : (p[3] ?? "");
  }
  return { scheme: m[1]!.toLowerCase(), params };
}

/** The target of the `rel="next"` entry of a `Link` header, if any. */
export function nextLink(header: string | null): string | undefined {
  for (const part of header?.split(/,(?=\s*<)/) ?? []) {
    const m = part.match(/^\s*<([^>]*)>\s*;(.*)$/);
    if (m && /(^|;)\s*rel\s*=\s*"?next"?\s*(;|$)/i.test(m[2]!)) return m[1];
  }
  return undefined;
}

export interface OciResponse {
  method: string;
  url: string;
  status: number;
  headers: Headers;
  body: Buffer;
  /** the body as JSON, or undefined when it is not JSON */
  json<T = any>(): T | undefined;
  /** the codes of an error body `{"errors":[{code}]}` (empty when there is none) */
  errorCodes(): string[];
}

export interface RequestOptions {
  headers?: Record<string, string>;
  body?: Uint8Array | string;
  /** send the body as a stream (chunked transfer encoding, so no Content-Length) */
  stream?: boolean;
  /** scopes requested besides the challenge's own (e.g. pull on a mount's source repository) */
  extraScopes?: string[];
}

export interface OciClientOptions {
  /** the token service credential (Basic); absent: anonymous token requests */
  credential?: { username: string; password: string };
  /** a fixed Bearer token sent on every request, bypassing the challenge flow */
  bearer?: string;
  /** sees every response (for cross-cutting header checks) */
  onResponse?: (res: OciResponse, redirected: boolean) => void;
}

interface CachedToken {
  token: string;
  expiresAt: number;
}

function toResponse(method: string, url: string, res: Response, body: Buffer): OciResponse {
  return {
    method,
    url,
    status: res.status,
    headers: res.headers,
    body,
    json<T>() {
      try {
        return body.length ? (JSON.parse(body.toString("utf8")) as T) : undefined;
      } catch {
        return undefined;
      }
    },
    errorCodes() {
      const errors = this.json<{ errors?: { code?: unknown }[] }>()?.errors;
      return Array.isArray(errors) ? errors.map((e) => String(e?.code)) : [];
    },
  };
}

/** The repository a /v2/ path is about (used only to reuse a token across requests). */
function repositoryOf(path: string): string | undefined {
  return path.match(/^\/v2\/(.+?)\/(?:blobs|manifests|tags|referrers|_chainguard)\//)?.[1];
}

export class OciClient {
  readonly #tokens = new Map<string, CachedToken>();
  /** the scope key last granted per repository, to send a token up front */
  readonly #scopeHint = new Map<string, string>();

  constructor(
    readonly baseUrl: string,
    readonly options: OciClientOptions = {},
  ) {}

  /** An absolute URL for a path or a (possibly relative) Location. */
  resolve(pathOrUrl: string): URL {
    return new URL(pathOrUrl, this.baseUrl);
  }

  async request(method: string, pathOrUrl: string, opts: RequestOptions = {}): Promise<OciResponse> {
    const url = this.resolve(pathOrUrl);
    if (this.options.bearer) return this.#send(method, url, opts, this.options.bearer);
    const repo = repositoryOf(url.pathname) ?? url.pathname;
    const hinted = this.#scopeHint.get(repo);
    const first = hinted ? this.#cached(hinted) : undefined;
    const res = await this.#send(method, url, opts, first);
    if (res.status !== 401) return res;
    const challenge = parseChallenge(res.headers.get("www-authenticate"));
    if (challenge?.scheme !== "bearer" || !challenge.params.realm) return res;
    const scopes = [...(challenge.params.scope?.split(" ").filter(Boolean) ?? []), ...(opts.extraScopes ?? [])];
    const key = scopes.join(" ");
    let token = this.#cached(key);
    if (!token || token === first) {
      const got = await this.fetchToken(challenge, scopes);
      if (got.status !== 200 || !got.token) return res;
      token = got.token;
    }
    this.#scopeHint.set(repo, key);
    return this.#send(method, url, opts, token);
  }

  /** Asks the challenge's realm for a token covering `scopes` (default: the challenge's scope). */
  async fetchToken(
    challenge: Challenge,
    scopes = challenge.params.scope?.split(" ").filter(Boolean) ?? [],
  ): Promise<{ status: number; token?: string; body: any }> {
    const url = new URL(challenge.params.realm!, this.baseUrl);
    if (challenge.params.service) url.searchParams.set("service", challenge.params.service);
    for (const scope of scopes) url.searchParams.append("scope", scope);
    const headers: Record<string, string> = {};
    const cred = this.options.credential;
    if (cred) headers.authorization = `Basic ${Buffer.from(`${cred.username}:${cred.password}`).toString("base64")}`;
    const res = await fetch(url, { headers });
    const text = await res.text();
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    const token: unknown = body?.token ?? body?.access_token;
    if (res.status !== 200 || typeof token !== "string") return { status: res.status, body };
    // the token spec's default lifetime is 60 s when expires_in is absent
    const lifetime = typeof body.expires_in === "number" ? body.expires_in : 60;
    this.#tokens.set(scopes.join(" "), { token, expiresAt: Date.now() + (lifetime - 5) * 1000 });
    return { status: res.status, token, body };
  }

  #cached(key: string): string | undefined {
    const hit = this.#tokens.get(key);
    return hit && hit.expiresAt > Date.now() ? hit.token : undefined;
  }

  async #send(method: string, url: URL, opts: RequestOptions, token: string | undefined): Promise<OciResponse> {
    const headers: Record<string, string> = { ...opts.headers };
    if (token) headers.authorization = `Bearer ${token}`;
    const bytes = typeof opts.body === "string" ? Buffer.from(opts.body) : opts.body;
    let body: RequestInit["body"];
    if (bytes && opts.stream) {
      const copy = Uint8Array.from(bytes);
      body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(copy);
          controller.close();
        },
      });
    } else if (bytes) body = Uint8Array.from(bytes);
    const init: RequestInit & { duplex?: "half" } = { method, headers, body };
    if (opts.stream && body) init.duplex = "half";
    const res = await fetch(url, init);
    const out = toResponse(method, url.toString(), res, Buffer.from(await res.arrayBuffer()));
    this.options.onResponse?.(out, res.redirected);
    return out;
  }

  // Conveniences over request(); each returns the raw response.

  get(path: string, headers?: Record<string, string>) {
    return this.request("GET", path, { headers });
  }

  head(path: string, headers?: Record<string, string>) {
    return this.request("HEAD", path, { headers });
  }

  delete(path: string) {
    return this.request("DELETE", path);
  }

  /** Starts an upload session (POST .../blobs/uploads/). */
  startUpload(name: string) {
    return this.request("POST", `/v2/${name}/blobs/uploads/`);
  }

  /** Pushes a blob in one request (POST .../blobs/uploads/?digest=). */
  postBlob(name: string, bytes: Uint8Array | string, digest = digestOf(bytes)) {
    return this.request("POST", `/v2/${name}/blobs/uploads/?digest=${encodeURIComponent(digest)}`, {
      body: bytes,
      headers: { "content-type": "application/octet-stream" },
    });
  }

  /** Pushes a blob as POST then a monolithic PUT to the session's Location; answers the PUT. */
  async pushBlob(name: string, bytes: Uint8Array | string, digest = digestOf(bytes)): Promise<OciResponse> {
    const started = await this.startUpload(name);
    const location = started.headers.get("location");
    if (started.status !== 202 || !location) return started;
    return this.request("PUT", withQuery(location, { digest }), {
      body: bytes,
      headers: { "content-type": "application/octet-stream" },
    });
  }

  putManifest(name: string, reference: string, bytes: Uint8Array | string, mediaType: string) {
    return this.request("PUT", `/v2/${name}/manifests/${reference}`, {
      body: bytes,
      headers: { "content-type": mediaType },
    });
  }

  getManifest(name: string, reference: string, method: "GET" | "HEAD" = "GET") {
    return this.request(method, `/v2/${name}/manifests/${reference}`, {
      headers: { accept: Object.values(MEDIA_TYPES).join(", ") },
    });
  }
}

/** A Location (relative or absolute, maybe already with a query) with query parameters added. */
export function withQuery(location: string, params: Record<string, string>): string {
  const u = new URL(location, "http://placeholder");
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return /^[a-z][a-z0-9+.-]*:/i.test(location) ? u.toString() : u.pathname + u.search;
}
