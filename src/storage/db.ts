// Opens the database: embedded PGlite persisted to a data directory (the default), or
// PostgreSQL through a connection pool when a URL is given; and runs the modules' migrations.
import { mkdir } from "node:fs/promises";
import { Kysely, Migrator, PostgresDialect, type Migration, type MigrationProvider } from "kysely";
import pg from "pg";
import { PGlite } from "@electric-sql/pglite";
import type { StorageTables } from "./schema.js";
import { SerializedPGliteDialect } from "./pglite-dialect.js";

/**
 * The database as the platform sees it. Each feature module views it through its own tables
 * (e.g. iam/storage/schema.ts), so nothing below the modules knows a feature's schema.
 */
export type Db = Kysely<StorageTables>;

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
    const db = new Kysely<StorageTables>({ dialect: new PostgresDialect({ pool }) });
    return { db, backend: "postgres", close: () => db.destroy() };
  }
  let pglite = opts.pglite;
  if (!pglite) {
    const dataDir = opts.dataDir ?? "./data";
    if (!dataDir.startsWith("memory://")) await mkdir(dataDir, { recursive: true });
    pglite = await PGlite.create(dataDir);
  }
  const db = new Kysely<StorageTables>({ dialect: new SerializedPGliteDialect(pglite) });
  return { db, backend: "pglite", close: () => db.destroy() };
}

/** A module's numbered migrations, by name ("001_groups"). */
export interface MigrationSet {
  name: string;
  migrations: Readonly<Record<string, Migration>>;
}

const MIGRATION_NAME = /^(\d{3})_[a-z0-9_]+$/;

/**
 * All modules' migrations as one list. Numbering is global (001, 002, ... across modules) so the
 * order of application never depends on the order modules are listed in; a clash is a bug.
 */
export function collectMigrations(sets: readonly MigrationSet[]): Record<string, Migration> {
  const all: Record<string, Migration> = {};
  const owners = new Map<string, string>();
  for (const set of sets) {
    for (const [name, migration] of Object.entries(set.migrations)) {
      const number = MIGRATION_NAME.exec(name)?.[1];
      if (!number) throw new Error(`migration "${name}" of module ${set.name} is not named NNN_words`);
      const owner = owners.get(number);
      if (owner) throw new Error(`migration number ${number} is used by modules ${owner} and ${set.name}`);
      owners.set(number, set.name);
      all[name] = migration;
    }
  }
  return all;
}

/** Applies every pending migration of the given modules, in number order. */
export async function migrate(db: Kysely<any>, sets: readonly MigrationSet[]): Promise<void> {
  const migrations = collectMigrations(sets);
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  const migrator = new Migrator({ db, provider });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === "Error");
  if (error || failed) {
    throw new Error(`migration ${failed?.migrationName ?? ""} failed: ${String(error)}`);
  }
}
