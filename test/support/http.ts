// A small JSON-over-HTTP client for the REST tests (HTTP/1.1 via fetch).
export interface JsonResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** REST calls to `baseUrl`, sending `Authorization: Bearer <token>` when a token is given. */
export function restClient(baseUrl: string, token?: string) {
  async function call<T = any>(
    method: string,
    path: string,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<JsonResponse<T>> {
    const headers = token ? { authorization: `Bearer ${token}`, ...extraHeaders } : extraHeaders;
    const res = await fetch(baseUrl + path, {
      method,
      headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // leave as text: the test will say what it got
    }
    return { status: res.status, body: parsed as T, headers: res.headers };
  }
  return {
    get: <T = any>(path: string) => call<T>("GET", path),
    post: <T = any>(path: string, body?: unknown) => call<T>("POST", path, body),
    patch: <T = any>(path: string, body?: unknown) => call<T>("PATCH", path, body),
    delete: <T = any>(path: string) => call<T>("DELETE", path),
    call,
  };
}

/** Query parameters: a list repeats its parameter; undefined leaves it out. */
export type QueryParams = Record<string, string | number | boolean | string[] | undefined>;

/** `?k=v&...` with each key and value URL-encoded ("" when nothing is given). */
export function query(params: QueryParams): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined) continue;
    for (const item of Array.isArray(v) ? v : [v])
      parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(item))}`);
  }
  return parts.length ? `?${parts.join("&")}` : "";
}
