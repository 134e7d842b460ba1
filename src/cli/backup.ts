// `bulwark backup` and `bulwark restore`. A backup of an embedded server that is running is taken
// through the server (its operator-only backup route, with a token `admin token` mints from the
// key the server publishes in the data directory, called at the address the server listens on:
// local-server.ts): the server snapshots its database between two transactions and streams the
// archive, so nothing stops. With no server on the data directory,
// the command takes the directory's lock and writes the same archive itself. The archive holds the
// key-encryption key: it is written 0600, to a temporary name renamed into place once whole.
import { randomBytes } from "node:crypto";
import { existsSync, createWriteStream } from "node:fs";
import { open, rename, rm } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { checkServerUrl, localServer } from "./local-server.js";
import { CliError } from "./errors.js";
import { BACKUP_PATH, backupArchive } from "../operations/api.js";
import { openBlobStore, type RegistrySettings } from "../registry/api.js";
import { DataDirLockedError, KEY_ENCRYPTION_KEY_FILE } from "../storage/data-dir.js";
import { openDatabase } from "../storage/db.js";
import type { AuthUrls } from "../auth/api.js";

export interface BackupOptions {
  file: string;
  dataDir: string;
  /** a server to back up over the network (its operator's token in `token`) */
  server?: string;
  token?: string;
  /** allow `server` to be plain http to another host */
  insecure?: boolean;
  registry: RegistrySettings;
  /** the URLs when the server recorded none (as `admin token`) */
  fallbackUrls: AuthUrls;
  say(line: string): void;
}

export interface BackupReport {
  file: string;
  bytes: number;
  /** "server": through the running server; "offline": the directory opened here */
  how: "server" | "offline";
}

/** Writes `body` to `file` (0600) through a temporary name, synced, renamed once whole; its size. */
async function writeArchive(file: string, body: Readable): Promise<number> {
  const target = resolve(file);
  const partial = join(dirname(target), `.${basename(target)}.partial-${randomBytes(4).toString("hex")}`);
  let bytes = 0;
  try {
    body.on("data", (chunk: Buffer) => (bytes += chunk.length));
    await pipeline(body, createWriteStream(partial, { mode: 0o600, flags: "wx" }));
    const fh = await open(partial, "r");
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(partial, target);
    return bytes;
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
}

async function fromServer(opts: BackupOptions, base: string, token: string): Promise<BackupReport> {
  const url = new URL(base.replace(/\/+$/, "") + BACKUP_PATH);
  opts.say(`backup started: asking the server at ${url.origin} for a snapshot`);
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } }).catch((err: Error) => {
    throw new CliError(`cannot reach the server at ${url.origin}: ${err.message}`);
  });
  if (res.status !== 200 || !res.body) {
    const text = await res.text().catch(() => "");
    let message = text;
    try {
      message = (JSON.parse(text) as { message?: string }).message ?? text;
    } catch {
      // not JSON: the text as it came
    }
    throw new CliError(`the server refused the backup (${res.status}): ${message}`);
  }
  const bytes = await writeArchive(opts.file, Readable.fromWeb(res.body as never)).catch((err: Error) => {
    throw new CliError(`the backup was cut short (${err.message}); nothing was written to ${opts.file}`);
  });
  return { file: opts.file, bytes, how: "server" };
}

export async function backup(opts: BackupOptions): Promise<BackupReport> {
  if (opts.server) {
    checkServerUrl(opts.server, opts.insecure === true);
    if (!opts.token) throw new CliError("--server needs the operator's token in BULWARK_TOKEN");
    return fromServer(opts, opts.server, opts.token);
  }
  if (!existsSync(join(opts.dataDir, "PG_VERSION")))
    throw new CliError(`no embedded database in ${opts.dataDir} (give --data-dir, or --server for a remote server)`);
  let database;
  try {
    database = await openDatabase({ dataDir: opts.dataDir, purpose: "backup", notice: (m) => opts.say(m) });
  } catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    // A server holds the directory: through it, as its operator.
    const server = await localServer({ dataDir: opts.dataDir, fallbackUrls: opts.fallbackUrls, say: opts.say });
    return fromServer(opts, server.url, server.token);
  }
  try {
    opts.say(`backup started: no server holds ${opts.dataDir}, so it is read here`);
    const store = await openBlobStore(opts.registry, join(opts.dataDir, "registry"));
    try {
      const archive = backupArchive({
        database,
        store,
        keyFile: join(opts.dataDir, KEY_ENCRYPTION_KEY_FILE),
        exclusive: (work) => work(),
        now: () => new Date(),
      });
      return { file: opts.file, bytes: await writeArchive(opts.file, archive), how: "offline" };
    } finally {
      await store.close();
    }
  } finally {
    await database.close();
  }
}
