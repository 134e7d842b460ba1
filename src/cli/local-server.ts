// Calling a server from a command on its own host (`bulwark backup`, `bulwark registry gc`): the
// server holding an embedded data directory is called at the address it listens on, as recorded
// there, with an operator token minted the way `bulwark admin token` does. Not at its public API
// URL: that may be a proxy elsewhere, or plain http across a network, and the token is the
// operator's. And a URL given with --server is refused when it is plain http to another host,
// unless the operator says so (--insecure).
import { adminToken } from "./admin.js";
import { CliError } from "./errors.js";
import type { AuthUrls } from "../auth/api.js";

export interface LocalServer {
  /** where to call it */
  url: string;
  /** an operator token it accepts */
  token: string;
}

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host === "::1" || /^127(\.\d{1,3}){3}$/.test(host);
}

/** Whether a request to `url` stays on this host or is encrypted. */
function isSafeToSendToken(url: URL): boolean {
  return url.protocol === "https:" || (url.protocol === "http:" && isLoopbackHost(url.hostname));
}

/**
 * The URL a server listening on `listenUrl` is called at from its own host: a wildcard address
 * (0.0.0.0, ::) is called on loopback; any other address is one of this host's own.
 */
export function callableListenUrl(listenUrl: string): string {
  const url = new URL(listenUrl);
  if (url.hostname === "0.0.0.0") url.hostname = "127.0.0.1";
  else if (url.hostname === "[::]") url.hostname = "[::1]";
  return url.origin;
}

/** Refuses `--server <url>` when a token would go over plain http to another host, unless `insecure`. */
export function checkServerUrl(server: string, insecure: boolean): void {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new CliError(`--server ${JSON.stringify(server)} is not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new CliError(`--server ${url.origin} is neither https nor http`);
  if (!insecure && !isSafeToSendToken(url))
    throw new CliError(
      `--server ${url.origin} is plain http to another host: the operator's token would cross the network unencrypted; ` +
        "use https, or pass --insecure if this network is trusted",
    );
}

/** The server holding the embedded data directory `dataDir`: where to call it from here, and a token for it. */
export async function localServer(opts: {
  dataDir: string;
  /** the URLs when the server recorded none (as `admin token`) */
  fallbackUrls: AuthUrls;
  say?: (line: string) => void;
}): Promise<LocalServer> {
  const { token, urls, listenUrl } = await adminToken({
    dataDir: opts.dataDir,
    urls: {},
    fallbackUrls: opts.fallbackUrls,
    say: opts.say,
  });
  if (listenUrl) return { url: callableListenUrl(listenUrl), token };
  // A server of an earlier version records no listen address: its API URL, if that is safe.
  const api = new URL(urls.apiAudience);
  if (!isSafeToSendToken(api))
    throw new CliError(
      `the server holding ${opts.dataDir} recorded no address it listens on, and its API URL ${api.origin} is plain http ` +
        "to another host: restart it with this version of Bulwark, or give --server <url> (with --insecure for plain http)",
    );
  return { url: urls.apiAudience, token };
}
