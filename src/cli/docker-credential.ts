// docker-credential-bulwark: docker's credential helper protocol over the CLI's own token sources
// (--token-file / BULWARK_TOKEN_FILE, BULWARK_TOKEN, the stored `bulwark auth login`). docker runs
// `docker-credential-bulwark get` with the registry on stdin and gets a fresh registry token each
// time, so nothing long-lived is written to docker's config. store and erase have nothing to keep.
import { text } from "node:stream/consumers";
import { CliError } from "./errors.js";
import { processIo, type CliIo } from "./io.js";
import { Session } from "./session.js";
import { VERSION } from "../core/version.js";

const PROGRAM = "docker-credential-bulwark";
/** The user name docker sends with a token as the password (what the registry expects). */
export const TOKEN_USERNAME = "_token";

/** The registry host of what docker sends: "host[:port]", maybe with a scheme and a path. */
export function registryHostOf(serverUrl: string): string {
  const trimmed = serverUrl.trim();
  if (!trimmed) throw new CliError("expected the registry's address on stdin");
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed)) return new URL(trimmed).host;
  return trimmed.split("/")[0]!;
}

/**
 * Runs one action; returns the exit status. Docker reads only stdout: on failure it shows what the
 * helper printed there, so errors go to stdout (as docker's own helpers do).
 */
export async function credentialHelper(action: string | undefined, io: CliIo): Promise<number> {
  const stdin = () => text(io.stdin);
  const out = (s: string) => void io.stdout.write(s);
  const env = io.env;
  try {
    switch (action) {
      case "get": {
        const serverUrl = (await stdin()).trim();
        const host = registryHostOf(serverUrl);
        const session = await Session.open({}, env);
        const { token } = await session.token(host);
        out(JSON.stringify({ ServerURL: serverUrl, Username: TOKEN_USERNAME, Secret: token }) + "\n");
        return 0;
      }
      case "store":
      case "erase":
        await stdin(); // docker writes what it would have kept; there is nothing to keep
        return 0;
      case "list": {
        const session = await Session.open({}, env);
        out(JSON.stringify({ [session.registryHost]: TOKEN_USERNAME }) + "\n");
        return 0;
      }
      case "version":
        out(`${PROGRAM} ${VERSION}\n`);
        return 0;
      default:
        out(`Usage: ${PROGRAM} <get|store|erase|list|version>\n`);
        return 1;
    }
  } catch (err) {
    out(`${PROGRAM}: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

process.exitCode = await credentialHelper(process.argv[2], processIo());
