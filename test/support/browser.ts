// A small browser for the sign-in tests: fetch with redirect "manual", a cookie jar (per host,
// honouring Path, Max-Age and Expires, as browsers do: cookies ignore the port; SameSite is not
// modelled: every request here is same-site), one hop at a time. It fills oidc-provider's
// devInteractions login form and consent form (and any form a test asks for), and stops before
// requesting a URL the test wants to see first (the CLI's loopback redirect), so a test can
// look at, tamper with or deliver it. Every request and Location it saw is kept.
import { HANG_MS } from "./wait.js";

export interface Hop {
  method: string;
  url: string;
  status: number;
  /** the absolute Location of a redirect */
  location?: string;
  contentType: string;
  /** the Content-Security-Policy header, if any */
  csp?: string;
  body: string;
}

export interface Form {
  /** absolute */
  action: string;
  method: string;
  /** every named input's value (hidden ones included) */
  fields: Record<string, string>;
}

export interface NavigateOptions {
  /** a URL for which this is true is not requested: navigation stops there */
  until?: (url: URL) => boolean;
  /** the login name typed into the upstream's login form (no form expected when absent) */
  login?: string;
  password?: string;
  /** cancel at the upstream's login page instead of signing in */
  abortLogin?: boolean;
  /** other forms to submit as they are (e.g. a confirmation page) */
  submit?: (form: Form, page: Hop) => boolean;
  /** default 30 */
  maxHops?: number;
}

export type Outcome =
  /** navigation reached a URL `until` matched, unrequested */
  | { kind: "stopped"; url: URL; hops: Hop[] }
  /** a page that is neither a redirect nor a form this browser fills */
  | { kind: "page"; page: Hop; hops: Hop[] }
  /** a form submission (or a redirect after it) the submitting page's CSP form-action refuses */
  | { kind: "blocked"; url: URL; formAction: string; hops: Hop[] };

export interface BrowserOptions {
  /**
   * Apply the submitting page's CSP form-action to every redirect after a form submission, as
   * Chrome does (default true). False: only to the form's own action, as Firefox did for years
   * (MDN: "browser implementations of this aspect are inconsistent").
   */
  formActionOnRedirects?: boolean;
}

interface Cookie {
  host: string;
  name: string;
  value: string;
  path: string;
  expires?: number;
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, e: string) => {
    if (e[0] === "#")
      return String.fromCodePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
    return ENTITIES[e.toLowerCase()] ?? whole;
  });
}

function attribute(tag: string, name: string): string | undefined {
  const m = new RegExp(`\\s${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)'|([^\\s>]+))`, "i").exec(tag);
  return m ? decodeEntities(m[1] ?? m[2] ?? m[3] ?? "") : undefined;
}

/** The first form of an HTML page, or undefined. */
export function parseForm(html: string, pageUrl: string): Form | undefined {
  const open = /<form\b[^>]*>/i.exec(html);
  if (!open) return undefined;
  const end = html.indexOf("</form>", open.index);
  const inner = html.slice(open.index, end < 0 ? undefined : end);
  const fields: Record<string, string> = {};
  for (const m of inner.matchAll(/<(input|button|textarea)\b[^>]*>/gi)) {
    const name = attribute(m[0], "name");
    if (name !== undefined) fields[name] = attribute(m[0], "value") ?? "";
  }
  return {
    action: new URL(attribute(open[0], "action") ?? pageUrl, pageUrl).href,
    method: (attribute(open[0], "method") ?? "get").toUpperCase(),
    fields,
  };
}

/** The sources of a CSP's form-action directive, or undefined when it has none. */
export function formActionSources(csp: string | undefined): string[] | undefined {
  for (const directive of (csp ?? "").split(";")) {
    const [name, ...sources] = directive.trim().split(/\s+/);
    if (name?.toLowerCase() === "form-action") return sources;
  }
  return undefined;
}

/** CSP source-list matching, enough for these tests: 'self', 'none', *, scheme:, [scheme://]host[:port] (with *. wildcards). */
export function matchesSourceList(url: URL, sources: string[], self: string): boolean {
  const defaultPort = (protocol: string) => (protocol === "https:" ? "443" : protocol === "http:" ? "80" : "");
  return sources.some((source) => {
    const s = source.toLowerCase();
    if (s === "'none'") return false;
    if (s === "'self'") return url.origin === new URL(self).origin;
    if (s === "*") return url.protocol === "http:" || url.protocol === "https:";
    if (/^[a-z][a-z0-9+.-]*:$/.test(s)) return url.protocol === s;
    const m = /^(?:([a-z][a-z0-9+.-]*):\/\/)?(\*\.)?([^:/]+)(?::(\d+|\*))?/.exec(s);
    if (!m) return false;
    const [, scheme, wildcard, host, port] = m;
    if (scheme && `${scheme}:` !== url.protocol) return false;
    if (!scheme && url.protocol !== new URL(self).protocol) return false;
    const hostOk = wildcard ? url.hostname.endsWith(`.${host}`) : url.hostname === host;
    const portOk = port === "*" || (port ?? defaultPort(url.protocol)) === (url.port || defaultPort(url.protocol));
    return hostOk && portOk;
  });
}

export class Browser {
  /** every response, in order */
  readonly hops: Hop[] = [];
  private cookies: Cookie[] = [];
  private readonly formActionOnRedirects: boolean;

  constructor(options: BrowserOptions = {}) {
    this.formActionOnRedirects = options.formActionOnRedirects ?? true;
  }

  /** Every URL requested or redirected to: what would show in an address bar or a proxy log. */
  get urls(): string[] {
    return this.hops.flatMap((h) => (h.location ? [h.url, h.location] : [h.url]));
  }

  /** The cookies this browser would send to `url` (name → value). */
  cookiesFor(url: string | URL): Record<string, string> {
    const u = new URL(url);
    const now = Date.now();
    this.cookies = this.cookies.filter((c) => c.expires === undefined || c.expires > now);
    const matching = this.cookies
      .filter(
        (c) =>
          c.host === u.hostname &&
          (u.pathname === c.path || u.pathname.startsWith(c.path.endsWith("/") ? c.path : c.path + "/")),
      )
      .sort((a, b) => b.path.length - a.path.length);
    const out: Record<string, string> = {};
    for (const c of matching) out[c.name] ??= c.value;
    return out;
  }

  private store(url: URL, header: string): void {
    const [pair, ...attrs] = header.split(";");
    const eq = pair!.indexOf("=");
    if (eq <= 0) return;
    const cookie: Cookie = {
      host: url.hostname,
      name: pair!.slice(0, eq).trim(),
      value: pair!.slice(eq + 1).trim(),
      path: "/",
    };
    const defaultPath = url.pathname.lastIndexOf("/") > 0 ? url.pathname.slice(0, url.pathname.lastIndexOf("/")) : "/";
    let path: string | undefined;
    for (const attr of attrs) {
      const i = attr.indexOf("=");
      const key = (i < 0 ? attr : attr.slice(0, i)).trim().toLowerCase();
      const value = i < 0 ? "" : attr.slice(i + 1).trim();
      if (key === "path" && value.startsWith("/")) path = value;
      else if (key === "max-age" && /^-?\d+$/.test(value)) cookie.expires = Date.now() + Number(value) * 1000;
      else if (key === "expires" && cookie.expires === undefined && !Number.isNaN(Date.parse(value)))
        cookie.expires = Date.parse(value);
    }
    cookie.path = path ?? defaultPath;
    this.cookies = this.cookies.filter(
      (c) => !(c.host === cookie.host && c.name === cookie.name && c.path === cookie.path),
    );
    if (cookie.expires === undefined || cookie.expires > Date.now()) this.cookies.push(cookie);
  }

  /** One request, no redirect followed; cookies sent and kept. */
  async request(method: string, url: string, form?: Record<string, string>): Promise<Hop> {
    const target = new URL(url);
    const cookie = Object.entries(this.cookiesFor(target))
      .map(([k, v]) => `${k}=${v}`)
      .join("; ");
    const headers: Record<string, string> = {
      accept: "text/html,application/json;q=0.9,*/*;q=0.1",
      ...(cookie ? { cookie } : {}),
    };
    if (form) headers["content-type"] = "application/x-www-form-urlencoded";
    const res = await fetch(target, {
      method,
      headers,
      body: form ? new URLSearchParams(form).toString() : undefined,
      redirect: "manual",
      signal: AbortSignal.timeout(HANG_MS),
    });
    for (const header of res.headers.getSetCookie()) this.store(target, header);
    const location = res.headers.get("location");
    const hop: Hop = {
      method,
      url: target.href,
      status: res.status,
      location: location === null ? undefined : new URL(location, target).href,
      contentType: res.headers.get("content-type") ?? "",
      csp: res.headers.get("content-security-policy") ?? undefined,
      body: await res.text(),
    };
    this.hops.push(hop);
    return hop;
  }

  get(url: string): Promise<Hop> {
    return this.request("GET", url);
  }

  /**
   * Goes to `url` and on: follows redirects, signs in at the upstream's login page (as
   * options.login), approves its consent page, until a URL `until` matches (not requested) or a
   * page it has nothing to do on.
   */
  async navigate(url: string, options: NavigateOptions = {}): Promise<Outcome> {
    const start = this.hops.length;
    let next: { method: string; url: string; form?: Record<string, string> } = { method: "GET", url };
    // the form-action of the page whose form started the current chain of requests
    let guard: { sources: string[]; self: string; policy: string } | undefined;
    const submitFrom = (page: Hop) => {
      const sources = formActionSources(page.csp);
      guard = sources ? { sources, self: page.url, policy: `form-action ${sources.join(" ")}` } : undefined;
    };
    for (let i = 0; i < (options.maxHops ?? 30); i++) {
      const target = new URL(next.url);
      if (guard && !matchesSourceList(target, guard.sources, guard.self))
        return { kind: "blocked", url: target, formAction: guard.policy, hops: this.hops.slice(start) };
      if (next.method === "GET" && options.until?.(target))
        return { kind: "stopped", url: target, hops: this.hops.slice(start) };
      const hop = await this.request(next.method, next.url, next.form);
      if (hop.status >= 300 && hop.status < 400 && hop.location) {
        if (!this.formActionOnRedirects) guard = undefined;
        next = { method: "GET", url: hop.location };
        continue;
      }
      guard = undefined;
      const form = hop.status === 200 && hop.contentType.includes("html") ? parseForm(hop.body, hop.url) : undefined;
      if (form?.fields.prompt === "login" && options.abortLogin) {
        next = { method: "GET", url: `${form.action.replace(/\/$/, "")}/abort` };
        continue;
      }
      if (form?.fields.prompt === "login" && options.login !== undefined) {
        submitFrom(hop);
        next = {
          method: form.method,
          url: form.action,
          form: { ...form.fields, login: options.login, password: options.password ?? "any password" },
        };
        continue;
      }
      if (form && (form.fields.prompt === "consent" || options.submit?.(form, hop))) {
        submitFrom(hop);
        next =
          form.method === "GET"
            ? { method: "GET", url: withQuery(form.action, form.fields) }
            : { method: form.method, url: form.action, form: form.fields };
        continue;
      }
      return { kind: "page", page: hop, hops: this.hops.slice(start) };
    }
    throw new Error(
      `more than ${options.maxHops ?? 30} hops from ${url}: ${this.hops
        .slice(start)
        .map((h) => `${h.status} ${h.url}`)
        .join(" → ")}`,
    );
  }
}

function withQuery(action: string, fields: Record<string, string>): string {
  const url = new URL(action);
  url.search = new URLSearchParams(fields).toString();
  return url.href;
}

/** `until` for a redirect URI: stop at any URL on its origin (the CLI's loopback listener). */
export function atOrigin(redirectUri: string | URL): (url: URL) => boolean {
  const origin = new URL(redirectUri).origin;
  return (url) => url.origin === origin;
}
