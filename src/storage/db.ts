// Opens the database: embedded PGlite persisted to a data directory (the default), or
// PostgreSQL through a connection pool when a URL is given; and runs the modules' migrations.
// An embedded data directory is locked for as long as it is open and kept private to its owner
// (storage/data-dir.ts). Every open database has a key-encryption key (keyEncryptionKeyOf) for
// the secrets it stores sealed: the data directory's own, or the one given (PostgreSQL).
import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { Kysely, Migrator, PostgresDialect, sql, type Dialect, type Migration, type MigrationProvider } from "kysely";
import pg from "pg";
import { PGlite, type PGliteOptions } from "@electric-sql/pglite";
import type { StorageTables } from "./schema.js";
import { SerializedPGliteDialect } from "./pglite-dialect.js";
import { ObservedDialect, registerObservedDialect } from "./observed.js";
import { PreparedStatements } from "./prepared-statements.js";
import { TYPE_PARSERS } from "./timestamps.js";
import { AmbientTransactionDialect, registerAmbientDialect } from "./ambient-transaction.js";
import {
  dataDirKeyEncryptionKey,
  lockDataDir,
  makePrivate,
  parseKeyEncryptionKey,
  privateUmask,
  type LockPurpose,
} from "./data-dir.js";

/**
 * The database as the platform sees it: the platform's own tables (storage/schema.ts). Each
 * feature views it through its own tables (viewOf), so nothing below the modules knows a
 * feature's schema and no feature's typed queries name another's tables.
 */
export type Db = Kysely<StorageTables>;

/**
 * The shared database seen through one feature's own tables: a type-only view of the same
 * instance. Every feature makes its view with this, once, in its storage/schema.ts (the
 * registry's storage/tables.ts): `iamDb`, `authDb`, `registryDb`, `vulnerabilityDb`.
 */
export function viewOf<Tables>(db: Db): Kysely<Tables> {
  return db as unknown as Kysely<Tables>;
}

/** The environment variable holding PostgreSQL's key-encryption key (64 hex digits or 43 base64url characters). */
export const KEY_ENCRYPTION_KEY_ENV = "BULWARK_KEY_ENCRYPTION_KEY";

/** The key-encryption key in the environment, if set (throws on a malformed one). */
export function keyEncryptionKeyFromEnv(env: NodeJS.ProcessEnv = process.env): Uint8Array | undefined {
  const value = env[KEY_ENCRYPTION_KEY_ENV];
  return value ? parseKeyEncryptionKey(value, KEY_ENCRYPTION_KEY_ENV) : undefined;
}

export interface DatabaseOptions {
  /** PostgreSQL connection string; when set, PGlite is not used. */
  databaseUrl?: string;
  /** PGlite data directory; "memory://" for an in-memory database. */
  dataDir?: string;
  /** An already-open PGlite instance (tests clone one from a migrated template). */
  pglite?: PGlite;
  poolSize?: number;
  /**
   * PostgreSQL: run data statements as named, server-side prepared statements (default true).
   * Off for a connection pooler that cannot keep them (PgBouncer's transaction mode before 1.21).
   */
  preparedStatements?: boolean;
  /**
   * The 32-byte key that seals stored secrets: required for PostgreSQL by whoever needs those
   * secrets; ignored for a data directory (which keeps its own); a random one for the life of
   * an in-memory or given PGlite when absent.
   */
  keyEncryptionKey?: Uint8Array;
  /** what the data directory's lock says this process opened it for (default "serve") */
  purpose?: LockPurpose;
  /** told about a stale lock removed, or a brief holder waited for */
  notice?: (message: string, details: Record<string, unknown>) => void;
}

/**
 * PGlite's start parameters: its defaults with 32 MB of shared buffers instead of 128 MB. PGlite
 * touches all of them when it opens, so this is ~90 MB less resident memory for the embedded
 * server; the operating system's file cache still holds what does not fit.
 */
async function pgliteOptions(): Promise<PGliteOptions> {
  return {
    startParams: [...PGlite.defaultStartParams, "-c", "shared_buffers=32MB"],
    pgliteWasmModule: await pgliteWasmModule(),
  };
}

let compiledPglite: Promise<WebAssembly.Module | undefined> | undefined;

/**
 * PGlite's WebAssembly, compiled once per process and shared by every PGlite it opens. Handing
 * PGlite a compiled module, instead of letting it instantiate from the file's bytes, measured ~80 ms
 * less per open on this stack: after instantiating from bytes, V8 kept the main thread busy
 * finishing the compile for that long before anything else could run. Undefined (PGlite loads
 * the file itself) if the file is not where this PGlite version keeps it.
 */
function pgliteWasmModule(): Promise<WebAssembly.Module | undefined> {
  return (compiledPglite ??= (async () => {
    try {
      const bytes = await readFile(new URL("pglite.wasm", import.meta.resolve("@electric-sql/pglite")));
      return await WebAssembly.compile(bytes);
    } catch {
      return undefined;
    }
  })());
}

export interface OpenDatabase {
  db: Db;
  backend: "pglite" | "postgres";
  /** the embedded database's data directory, when it is on disk */
  dataDir?: string;
  close(): Promise<void>;
}

const keyEncryptionKeys = new WeakMap<Kysely<any>, Uint8Array>();
const backends = new WeakMap<Kysely<any>, OpenDatabase["backend"]>();

/**
 * Which backend a database opened by openDatabase runs on: what a session-level lock needs to
 * know (on PostgreSQL a pooled statement may run on any connection; PGlite is one session).
 */
export function backendOf(db: Kysely<any>): OpenDatabase["backend"] {
  const backend = backends.get(db);
  if (!backend) throw new Error("this database was not opened by openDatabase");
  return backend;
}

/** The key-encryption key of an open database (see DatabaseOptions.keyEncryptionKey). */
export function keyEncryptionKeyOf(db: Kysely<any>): Uint8Array {
  const key = keyEncryptionKeys.get(db);
  if (!key) {
    throw new Error(
      `no key-encryption key for this database: set ${KEY_ENCRYPTION_KEY_ENV} to 32 random bytes ` +
        `(64 hex digits or 43 base64url characters, e.g. \`openssl rand -hex 32\`)`,
    );
  }
  return key;
}

/** A database whose code can be run in one transaction it does not know of (storage/ambient-transaction.ts). */
function withAmbientTransactions(dialect: Dialect): Db {
  const observed = new ObservedDialect(dialect);
  const ambient = new AmbientTransactionDialect(observed);
  const db = new Kysely<StorageTables>({ dialect: ambient });
  registerAmbientDialect(db, ambient);
  registerObservedDialect(db, observed);
  return db;
}

export async function openDatabase(opts: DatabaseOptions): Promise<OpenDatabase> {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 10, types: TYPE_PARSERS });
    // An idle client can error (e.g. the server restarts); the pool replaces it.
    pool.on("error", () => {});
    if (opts.preparedStatements !== false) new PreparedStatements().attach(pool);
    const db = withAmbientTransactions(new PostgresDialect({ pool }));
    if (opts.keyEncryptionKey) keyEncryptionKeys.set(db, opts.keyEncryptionKey);
    backends.set(db, "postgres");
    return { db, backend: "postgres", close: () => db.destroy() };
  }
  const dataDir = opts.dataDir || "./data";
  if (opts.pglite || dataDir.startsWith("memory://")) {
    const pglite = opts.pglite ?? (await PGlite.create(dataDir, await pgliteOptions()));
    const db = withAmbientTransactions(new SerializedPGliteDialect(pglite));
    keyEncryptionKeys.set(db, opts.keyEncryptionKey ?? new Uint8Array(randomBytes(32)));
    backends.set(db, "pglite");
    return { db, backend: "pglite", close: () => db.destroy() };
  }
  await mkdir(dirname(resolve(dataDir)), { recursive: true });
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await chmod(dataDir, 0o700);
  const lock = await lockDataDir(dataDir, { purpose: opts.purpose ?? "serve", notice: opts.notice });
  const restoreUmask = privateUmask();
  const release = async () => {
    try {
      makePrivate(dataDir);
    } catch {
      // best effort on the way out: the directory itself stays 0700
    }
    restoreUmask();
    await lock.release();
  };
  let pglite: PGlite | undefined;
  try {
    pglite = await PGlite.create(dataDir, await pgliteOptions());
    // Earlier versions left PGlite's files 0666; PGlite's initdb writes them so too. One pass after
    // opening covers both: the directory itself is 0700 already, so nobody else reached them meanwhile.
    makePrivate(dataDir);
    const key = await dataDirKeyEncryptionKey(dataDir, true);
    const db = withAmbientTransactions(new SerializedPGliteDialect(pglite));
    keyEncryptionKeys.set(db, key!);
    backends.set(db, "pglite");
    return {
      db,
      backend: "pglite",
      dataDir,
      close: async () => {
        try {
          await db.destroy();
        } finally {
          await release();
        }
      },
    };
  } catch (err) {
    await pglite?.close().catch(() => {});
    await release();
    throw err;
  }
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

/** The migrations recorded as applied, or undefined before the first run. */
async function appliedMigrations(db: Kysely<any>): Promise<Set<string> | undefined> {
  const { rows } = await sql<{ present: boolean }>`
    select to_regclass('kysely_migration') is not null as present`.execute(db);
  if (!rows[0]?.present) return undefined;
  const applied = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
  return new Set(applied.rows.map((r) => r.name));
}

/** Applies every pending migration of the given modules, in number order. */
export async function migrate(db: Kysely<any>, sets: readonly MigrationSet[]): Promise<void> {
  const migrations = collectMigrations(sets);
  // The usual start has nothing to do: exactly these migrations are applied. Then the Migrator,
  // whose table introspection and lock cost ~100 ms on PGlite, is not needed. Anything else —
  // pending migrations, or ones this version does not know — goes through it.
  const applied = await appliedMigrations(db);
  const names = Object.keys(migrations);
  if (applied && applied.size === names.length && names.every((n) => applied.has(n))) return;
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  const migrator = new Migrator({ db, provider });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === "Error");
  if (error || failed) {
    throw new Error(`migration ${failed?.migrationName ?? ""} failed: ${String(error)}`);
  }
}
