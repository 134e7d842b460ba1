// `bulwark registry gc`: one garbage collection of the registry, from the command line. Where it
// runs depends on who holds the database:
// - `--server <url>`: that server collects (RegistryMaintenanceService.CollectGarbage), called with
//   the CLI's token (BULWARK_TOKEN, a token file, or `bulwark auth login`'s), which must be the
//   operator's;
// - an embedded data directory a running server holds: that server collects, called with an
//   operator token minted the way `bulwark admin token` does, at the address it listens on
//   (local-server.ts);
// - otherwise it opens the database itself (an embedded one no server holds; PostgreSQL any time,
//   as collection is safe while replicas serve and one collection runs at a time across them).
import { join } from "node:path";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { RegistryMaintenanceService, type CollectGarbageResponse } from "../gen/bulwark/registry/v1/maintenance_pb.js";
import {
  collectGarbage,
  openBlobStore,
  registryRepositories,
  type GcReport,
  type RegistrySettings,
} from "../registry/api.js";
import { migrateAll } from "../server/start.js";
import { openDatabase } from "../storage/db.js";
import { DataDirLockedError } from "../storage/data-dir.js";
import { checkServerUrl, localServer } from "./local-server.js";
import { explain } from "./errors.js";
import { Session } from "./session.js";

export interface RegistryGcOptions {
  dataDir: string;
  databaseUrl?: string;
  keyEncryptionKey?: Uint8Array;
  registry: RegistrySettings;
  /** undefined: offline 1h, a server its own (serve --registry-gc-grace) */
  graceMs?: number;
  dryRun: boolean;
  /** a server to call instead (its URL), with the CLI's token */
  server?: string;
  /** allow `server` to be plain http to another host */
  insecure?: boolean;
  /** the URL of a server on the data directory when it recorded none (admin token's fallback) */
  fallbackUrl: string;
  env: NodeJS.ProcessEnv;
  /** progress for the operator (which server collects) */
  say?: (line: string) => void;
}

/** The grace window offline when none is given. */
const OFFLINE_GRACE_MS = 3_600_000;

export async function registryGc(opts: RegistryGcOptions): Promise<GcReport> {
  if (opts.server) {
    checkServerUrl(opts.server, opts.insecure === true);
    const session = await Session.open({ apiUrl: opts.server }, opts.env);
    const client = session.client(RegistryMaintenanceService);
    return session.call(() => collectThrough(client, opts));
  }
  if (opts.databaseUrl) return collectOffline(opts);
  try {
    return await collectOffline(opts);
  } catch (err) {
    // Only a running server holds the directory for long: another `registry gc` is refused as before.
    if (!(err instanceof DataDirLockedError) || err.holder.purpose !== "serve") throw err;
    return collectThroughServer(opts);
  }
}

/** The server holding the embedded data directory collects, asked with a freshly minted operator token. */
async function collectThroughServer(opts: RegistryGcOptions): Promise<GcReport> {
  const own = new URL(opts.fallbackUrl);
  const { url, token } = await localServer({
    dataDir: opts.dataDir,
    say: opts.say,
    fallbackUrls: { issuer: own.origin, apiAudience: own.origin, registryAudience: own.host },
  });
  opts.say?.(`the server holding ${opts.dataDir} collects: calling ${url}`);
  const bearer: Interceptor = (next) => async (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    useBinaryFormat: true,
    interceptors: [bearer],
  });
  try {
    return await collectThrough(createClient(RegistryMaintenanceService, transport), opts);
  } catch (err) {
    throw explain(err, url, {
      unauthenticated: "The server did not accept the operator token minted from its data directory.",
    });
  }
}

async function collectThrough(client: Client<typeof RegistryMaintenanceService>, opts: RegistryGcOptions) {
  const answer = await client.collectGarbage({
    dryRun: opts.dryRun,
    grace: opts.graceMs === undefined ? undefined : durationFromMs(opts.graceMs),
  });
  return reportOf(answer);
}

function reportOf(answer: CollectGarbageResponse): GcReport {
  return {
    manifests: Number(answer.manifests),
    blobLinks: Number(answer.blobLinks),
    blobs: Number(answer.blobs),
    bytes: Number(answer.bytes),
    uploads: Number(answer.uploads),
  };
}

async function collectOffline(opts: RegistryGcOptions): Promise<GcReport> {
  const database = await openDatabase({
    dataDir: opts.dataDir,
    databaseUrl: opts.databaseUrl,
    keyEncryptionKey: opts.keyEncryptionKey,
    // one connection holds the collection's lock (PostgreSQL), the other runs its statements
    poolSize: 2,
    purpose: "registry gc",
  });
  try {
    await migrateAll(database.db);
    const store = await openBlobStore(opts.registry, join(opts.dataDir, "registry"));
    try {
      return await collectGarbage(database.db, registryRepositories(database.db), store, {
        graceMs: opts.graceMs ?? OFFLINE_GRACE_MS,
        dryRun: opts.dryRun,
      });
    } finally {
      await store.close();
    }
  } finally {
    await database.close();
  }
}
