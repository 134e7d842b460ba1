// `bulwark admin token`: a one-hour token for the platform operator, who may do everything.
// Trust comes from access to the database, not the network: it signs with the issuer's key,
// read from PostgreSQL, or (embedded database) from the data directory. There is no admin endpoint.
// An embedded data directory is open in one process at a time: while a server holds it, this
// command never opens the database and signs with the key file the server keeps there; otherwise
// it takes the directory's lock itself while it opens the database.
// The token's issuer and audience are the ones the server recorded when it last started listening
// (see auth/recorded-urls.ts), so it is accepted whatever port or URLs the server runs with;
// options override them.
import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import {
  issuerKeyFile,
  KeyManager,
  OPERATOR_SUBJECT,
  readKeyFile,
  recordedPublicUrls,
  recordedListenUrlFile,
  recordedPublicUrlsFile,
  TokenIssuer,
  type AuthUrls,
  type KeySource,
  type SigningKey,
} from "../auth/api.js";
import { KEY_ENCRYPTION_KEY_ENV, openDatabase } from "../storage/db.js";
import { DataDirLockedError, dataDirKeyEncryptionKey, type LockHolder } from "../storage/data-dir.js";
import { migrateAll } from "../server/start.js";

export interface AdminTokenOptions {
  dataDir: string;
  databaseUrl?: string;
  /** PostgreSQL: the key-encryption key the servers use (BULWARK_KEY_ENCRYPTION_KEY) */
  keyEncryptionKey?: Uint8Array;
  /** URLs given on the command line: they win over what the server recorded */
  urls: Partial<AuthUrls>;
  /** the URLs when neither the options nor a server's record say */
  fallbackUrls: AuthUrls;
  /** default: the API audience */
  audience?: string;
  /** how long to wait for a starting server to publish its key (default 30 s) */
  waitMs?: number;
  /** progress for the operator (a stale lock removed, a server waited for) */
  say?: (line: string) => void;
}

/** A key file older than the holder's lock (minus the file system's timestamp granularity) is not the holder's. */
const MTIME_SLACK_MS = 2_000;
const POLL_MS = 250;

/** The signing key the server holding the directory published there, if it has (and it signs for a while yet). */
async function publishedKey(dataDir: string, holder: LockHolder): Promise<SigningKey | undefined> {
  const path = issuerKeyFile(dataDir);
  const since = Date.parse(holder.since);
  const written = await stat(path).then(
    (s) => s.mtimeMs,
    () => undefined,
  );
  if (written === undefined || (Number.isFinite(since) && written < since - MTIME_SLACK_MS)) return undefined;
  const kek = await dataDirKeyEncryptionKey(dataDir, false).catch(() => undefined);
  const key = kek && (await readKeyFile(path, kek));
  return key && key.signUntil.getTime() > Date.now() + 60_000 ? key : undefined;
}

export interface AdminToken {
  token: string;
  expiry: Date;
  urls: AuthUrls;
  /** where the URLs came from */
  urlsFrom: "options" | "server" | "default";
  /** the address the server holding the data directory listens on, when it recorded one */
  listenUrl?: string;
}

export async function adminToken(opts: AdminTokenOptions): Promise<AdminToken> {
  const mint = async (keys: KeySource, recorded: AuthUrls | undefined): Promise<AdminToken> => {
    const explicit = Object.values(opts.urls).some(Boolean);
    const urls: AuthUrls = { ...opts.fallbackUrls, ...recorded };
    for (const [k, v] of Object.entries(opts.urls) as [keyof AuthUrls, string | undefined][]) if (v) urls[k] = v;
    if (!recorded && !explicit)
      opts.say?.(
        `no server has started on this database yet: the token is for ${urls.issuer} (pass --port or --issuer-url otherwise)`,
      );
    const minted = await new TokenIssuer(keys, urls).mint({
      subject: OPERATOR_SUBJECT,
      audience: [opts.audience ?? urls.apiAudience],
    });
    return { ...minted, urls, urlsFrom: explicit ? "options" : recorded ? "server" : "default" };
  };
  if (opts.databaseUrl) {
    if (!opts.keyEncryptionKey)
      throw new Error(
        `${KEY_ENCRYPTION_KEY_ENV} is not set: it must be the key-encryption key the servers on this database use`,
      );
    const database = await openDatabase({
      databaseUrl: opts.databaseUrl,
      poolSize: 1,
      keyEncryptionKey: opts.keyEncryptionKey,
    });
    try {
      await migrateAll(database.db);
      return await mint(new KeyManager(database.db), await recordedPublicUrls(database.db));
    } finally {
      await database.close();
    }
  }
  if (!existsSync(opts.dataDir))
    throw new Error(`no database in ${opts.dataDir}: start the server once (bulwark serve --data-dir ${opts.dataDir})`);
  const deadline = Date.now() + (opts.waitMs ?? 30_000);
  let waiting = false;
  for (;;) {
    let database;
    try {
      database = await openDatabase({
        dataDir: opts.dataDir,
        poolSize: 1,
        purpose: "admin token",
        notice: (message) => opts.say?.(message),
      });
    } catch (err) {
      if (!(err instanceof DataDirLockedError)) throw err;
      // A server holds the directory: sign with the key it keeps there, once it has written it,
      // for the URLs it recorded there once it listened.
      const key = await publishedKey(opts.dataDir, err.holder);
      const since = Date.parse(err.holder.since);
      const recorded = await recordedPublicUrlsFile(
        opts.dataDir,
        Number.isFinite(since) ? since - MTIME_SLACK_MS : undefined,
      );
      if (key && recorded) {
        const listenUrl = await recordedListenUrlFile(
          opts.dataDir,
          Number.isFinite(since) ? since - MTIME_SLACK_MS : undefined,
        );
        return { ...(await mint({ signingKey: async () => key }, recorded)), ...(listenUrl ? { listenUrl } : {}) };
      }
      if (Date.now() >= deadline)
        throw new Error(
          `the server (pid ${err.holder.pid}) holding ${opts.dataDir} has not published its signing key and URLs yet; ` +
            `try again once it is listening`,
        );
      if (!waiting) {
        waiting = true;
        opts.say?.(`waiting for the server (pid ${err.holder.pid}) holding ${opts.dataDir} to publish its signing key`);
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
      continue;
    }
    try {
      await migrateAll(database.db);
      return await mint(
        new KeyManager(database.db, undefined, issuerKeyFile(opts.dataDir)),
        await recordedPublicUrls(database.db),
      );
    } finally {
      await database.close();
    }
  }
}
