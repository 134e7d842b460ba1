// Opens the database: embedded PGlite persisted to a data directory (the default), or
// PostgreSQL through a connection pool when a URL is given. Migrations run on open.
import { mkdir } from "node:fs/promises";
import { Kysely, Migrator, PostgresDialect, type MigrationProvider } from "kysely";
import pg from "pg";
import { PGlite } from "@electric-sql/pglite";
import type { Database } from "./schema.js";
import { SerializedPGliteDialect } from "./pglite-dialect.js";
import { migrations } from "./migrations/index.js";

export type Db = Kysely<Database>;

export interface DatabaseOptions {
  /** PostgreSQL connection string; when set, PGlite is not used. */
  databaseUrl?: string;
  /** PGlite data directory; "memory://" for an in-memory database. */
  dataDir?: string;
  /** An already-open PGlite instance (tests clone one from a migrated template). */
  pglite?: PGlite;
  poolSize?: number;
}

export interface OpenDatabase {
  db: Db;
  backend: "pglite" | "postgres";
  close(): Promise<void>;
}

export async function openDatabase(opts: DatabaseOptions): Promise<OpenDatabase> {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 10 });
    // An idle client can error (e.g. the server restarts); the pool replaces it.
    pool.on("error", () => {});
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return { db, backend: "postgres", close: () => db.destroy() };
  }
  let pglite = opts.pglite;
  if (!pglite) {
    const dataDir = opts.dataDir ?? "./data";
    if (!dataDir.startsWith("memory://")) await mkdir(dataDir, { recursive: true });
    pglite = await PGlite.create(dataDir);
  }
  const db = new Kysely<Database>({ dialect: new SerializedPGliteDialect(pglite) });
  return { db, backend: "pglite", close: () => db.destroy() };
}

const provider: MigrationProvider = { getMigrations: async () => migrations };

export async function migrate(db: Kysely<any>): Promise<void> {
  const migrator = new Migrator({ db, provider });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === "Error");
  if (error || failed) {
    throw new Error(`migration ${failed?.migrationName ?? ""} failed: ${String(error)}`);
  }
}
