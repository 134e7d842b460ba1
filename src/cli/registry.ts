// `bulwark registry gc`: one garbage collection of the registry, from the command line. It opens
// the database itself (an embedded one only while no server holds it; PostgreSQL any time, as
// collection is safe while replicas serve).
import { join } from "node:path";
import {
  collectGarbage,
  openBlobStore,
  registryRepositories,
  type GcReport,
  type RegistrySettings,
} from "../registry/api.js";
import { migrateAll } from "../server/start.js";
import { openDatabase } from "../storage/db.js";

export interface RegistryGcOptions {
  dataDir: string;
  databaseUrl?: string;
  keyEncryptionKey?: Uint8Array;
  registry: RegistrySettings;
  graceMs: number;
  dryRun: boolean;
}

export async function registryGc(opts: RegistryGcOptions): Promise<GcReport> {
  const database = await openDatabase({
    dataDir: opts.dataDir,
    databaseUrl: opts.databaseUrl,
    keyEncryptionKey: opts.keyEncryptionKey,
    poolSize: 1,
    purpose: "registry gc",
  });
  try {
    await migrateAll(database.db);
    const store = await openBlobStore(opts.registry, join(opts.dataDir, "registry"));
    try {
      return await collectGarbage(registryRepositories(database.db), store, {
        graceMs: opts.graceMs,
        dryRun: opts.dryRun,
      });
    } finally {
      await store.close();
    }
  } finally {
    await database.close();
  }
}
