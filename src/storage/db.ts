// Opens the database: embedded PGlite persisted to a data directory (the default), or
// PostgreSQL through a connection pool when a URL is given; and runs the modules' migrations.
// An embedded data directory is locked for as long as it is open and kept private to its owner
// (storage/data-dir.ts). Every open database has a key-encryption key (keyEncryptionKeyOf) for
// the secrets it stores sealed: the data directory's own, or the one given (PostgreSQL).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { closeSync, existsSync, fsyncSync, openSync, readdirSync } from "node:fs";
import { chmod, copyFile, cp, mkdir, mkdtemp, readdir, rename, rm, stat } from "node:fs/promises";
import { dirname, join, relative, resolve, sep } from "node:path";
import { Kysely, Migrator, PostgresDialect, sql, type Dialect, type Migration, type MigrationProvider } from "kysely";
import { PGlite, type PGliteOptions } from "@electric-sql/pglite";
import { NodeFS } from "@electric-sql/pglite/nodefs";
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm";
import type { StorageTables } from "./schema.js";
import { SerializedPGliteDialect } from "./pglite-dialect.js";
import { WalSync, isWalSegment, type SyncFile } from "./wal-sync.js";
import { ObservedDialect, registerObservedDialect } from "./observed.js";
import { AmbientTransactionDialect, registerAmbientDialect } from "./ambient-transaction.js";
import { PGLITE_V8_FLAGS } from "../core/v8-flags.js";
import { pgliteFsBundle, pgliteWasmModule } from "./pglite-wasm.js";
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
   * PostgreSQL: pipeline mode (default true), which sends a transaction's begin with its first
   * statement and its last statements with its commit (storage/ambient-transaction.ts). Off for
   * something between the server and PostgreSQL that cannot take it, or that delays small
   * packets (no TCP_NODELAY: a pipelined answer then waits on the client's delayed ACK).
   */
  pipelining?: boolean;
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
  /**
   * An on-disk embedded database: run without fsync (PostgreSQL's -F, PGlite's own default). A
   * committed transaction then survives the process being killed (the operating system has its
   * writes) but not a power loss or kernel crash, which can also corrupt the database. For tests
   * and scratch data only. Ignored elsewhere (in-memory PGlite never syncs; PostgreSQL is configured
   * on its server).
   */
  unsafeNoFsync?: boolean;
  /** An on-disk embedded database: how a WAL file is synced (the kernel's fsync; tests hold it). */
  syncWalFile?: SyncFile;
}

/**
 * PGlite's NODEFS with a working fsync. PGlite's Emscripten build leaves both sync calls without
 * effect on a NODEFS mount: fdatasync is a stub that answers 0, and fsync calls the stream's
 * `fsync` operation, which NODEFS does not define. This gives NODEFS that operation, calling the
 * kernel's fsync on the real file (or directory: PostgreSQL syncs pg_wal after adding a segment),
 * before the data directory is mounted. PostgreSQL must then use fsync for the WAL
 * (wal_sync_method=fsync; its default, fdatasync, reaches the stub).
 *
 * With a WalSync (storage/wal-sync.ts), a WAL file's fsync is only noted there, and every other
 * change to a file first syncs what is noted: the dialect then waits for the WAL off the main
 * thread before it answers anything.
 */
class DurableNodeFS extends NodeFS {
  constructor(
    dataDir: string,
    private readonly walSync?: WalSync,
  ) {
    super(dataDir);
  }

  override init(pg: PGlite, options: Parameters<NodeFS["init"]>[1]): ReturnType<NodeFS["init"]> {
    const wal = this.walSync;
    const addFsync = (mod: { NODEFS: unknown }) => {
      type Stream = { nfd?: number; node: unknown; bulwarkWal?: boolean };
      type Op = (...args: any[]) => unknown;
      const nodefs = mod.NODEFS as {
        stream_ops: Record<string, Op>;
        node_ops: Record<string, Op>;
        realPath(node: unknown): string;
        tryFSOperation<T>(operation: () => T): T;
      };
      const isWal = (stream: Stream) => (stream.bulwarkWal ??= isWalSegment(nodefs.realPath(stream.node)));
      /** before a change PostgreSQL orders after its WAL: the noted WAL synced, now */
      const walFirst = () => {
        if (wal?.behind) nodefs.tryFSOperation(() => wal.now());
      };
      nodefs.stream_ops.fsync = (stream: Stream) => {
        if (stream.nfd === undefined) return 0;
        if (wal && isWal(stream)) {
          nodefs.tryFSOperation(() => wal.note(nodefs.realPath(stream.node)));
          return 0;
        }
        walFirst();
        nodefs.tryFSOperation(() => fsyncSync(stream.nfd!));
        return 0;
      };
      if (!wal) return;
      const { write, setattr: setStreamAttr } = nodefs.stream_ops;
      nodefs.stream_ops.write = (stream: Stream, ...rest: unknown[]) => {
        if (wal.behind && !isWal(stream)) walFirst();
        return write!(stream, ...rest);
      };
      nodefs.stream_ops.setattr = (...args: unknown[]) => {
        walFirst(); // a truncation
        return setStreamAttr!(...args);
      };
      for (const name of ["setattr", "unlink", "rename", "rmdir"]) {
        const op = nodefs.node_ops[name]!;
        nodefs.node_ops[name] = (...args: unknown[]) => {
          walFirst();
          return op(...args);
        };
      }
    };
    return super.init(pg, { ...options, preRun: [...(options.preRun ?? []), addFsync] });
  }
}

/**
 * Syncs every file and directory under `dir` to disk: PGlite's initdb writes a new data directory
 * without syncing it (as `initdb --no-sync`), so its first files would otherwise be at the mercy
 * of the operating system's cache until a checkpoint rewrote them.
 */
function syncTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) syncTree(path);
    else if (entry.isFile()) syncPath(path);
  }
  syncPath(dir);
}

function syncPath(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * PGlite's shared buffers: 16 MB instead of PostgreSQL's 128 MB. PGlite touches all of them when
 * it opens, so each megabyte here is a megabyte of resident memory for as long as the server runs
 * (32 MB measured ~26 MiB more than 8 MB). Hot reads are answered by the dialect's read cache
 * (storage/pglite-dialect.ts) before they reach PGlite, and the operating system's file cache
 * still holds the pages that do not fit.
 */
export const PGLITE_SHARED_BUFFERS = "16MB";

/**
 * The PostgreSQL extensions every PGlite a server opens has loaded: pg_trgm, for the advisories'
 * trigram index (vulnerabilities/migrations/016). A PGlite opened on a migrated database without
 * them could not write to the indexed table; tests that create their own PGlite pass these too.
 */
export const PGLITE_EXTENSIONS = { pg_trgm } as const;

/**
 * PGlite's start parameters: its defaults with PGLITE_SHARED_BUFFERS.
 *
 * A durable one (a data directory on disk, unless unsafeNoFsync) drops PGlite's -F (fsync off),
 * syncs the WAL with fsync, and mounts the directory through DurableNodeFS, so a commit is
 * acknowledged only once its WAL record is on disk. In memory nothing is durable: -F stays.
 */
function pgliteStartParams(durable: boolean): string[] {
  const params = durable
    ? [...PGlite.defaultStartParams.filter((p) => p !== "-F"), "-c", "wal_sync_method=fsync"]
    : PGlite.defaultStartParams;
  return [...params, "-c", `shared_buffers=${PGLITE_SHARED_BUFFERS}`];
}

/**
 * The options of every PGlite a server opens: the start parameters above, the process's compiled
 * WebAssembly and file system bundle, the extensions; and for a durable directory its file system.
 * Exported for the tests' databases, which are opened as a server's in-memory ones are.
 */
export async function pgliteOptions(durableDir?: string, walSync?: WalSync): Promise<PGliteOptions> {
  const fsBundle = pgliteFsBundle();
  return {
    startParams: pgliteStartParams(Boolean(durableDir)),
    pgliteWasmModule: await pgliteWasmModule(),
    ...(fsBundle ? { fsBundle } : {}),
    extensions: PGLITE_EXTENSIONS,
    ...(durableDir ? { fs: new DurableNodeFS(durableDir, walSync) } : {}),
  };
}

/**
 * What initializeDataDir's process runs: PGlite's create on an empty directory (its initdb), then a
 * clean close. argv: the directory, PGlite's start parameters (JSON). It ends as soon as its
 * parent goes (its stdin closes), so a killed server leaves no initdb running for long.
 */
const initdbScript = () => `
import { PGlite } from ${JSON.stringify(import.meta.resolve("@electric-sql/pglite"))};
process.stdin.on("end", () => process.exit(1)).resume();
const pglite = await PGlite.create(process.argv[1], { startParams: JSON.parse(process.argv[2]) });
await pglite.close();
process.exit(0);`;

/** Where a new data directory's database is created before it is moved into place. */
const INITDB_STAGING_PREFIX = ".initdb-";

/**
 * A directory PGlite's initdb made (a data directory after its first start's initdb, before it was
 * opened: `initializeDataDir` with sync off), copied in place of running initdb. For test suites
 * and CI jobs that create many data directories: initdb costs ~5 s of CPU, a copy ~0.1 s.
 */
export const INITDB_TEMPLATE_ENV = "BULWARK_INITDB_TEMPLATE";

/**
 * Creates a new data directory's database (PostgreSQL's initdb), in a process of its own, in a
 * staging directory inside the data directory; then moves its entries into place, PG_VERSION
 * last. The server then opens the directory as every later start does.
 *
 * - A process, not this one: initdb touches ~325 MiB of PGlite's WebAssembly memory, which stays
 *   resident until V8 collects that instance. Done here, a first start idled at up to ~640 MiB
 *   where a later start on the same directory idles at ~170. A worker thread left ~70 MiB in its
 *   malloc arena; a process returns it all.
 * - Staged: the directory counts as new until PG_VERSION is in place. A staging directory that
 *   holds PG_VERSION is a move that was interrupted (PG_VERSION moves last): what it moved is
 *   removed and the database created again. Without one, PostgreSQL's files and no PG_VERSION are
 *   refused, never overwritten.
 * - Durable (unless `sync` is false): initdb writes without syncing (as `initdb --no-sync`), so the
 *   staged files and the staging directory's name are synced before anything moves, and the data
 *   directory before and after PG_VERSION's move.
 * - With BULWARK_INITDB_TEMPLATE set, PostgreSQL's files in its directory are copied into the
 *   staging directory instead of running initdb; all the rest is the same.
 */
export async function initializeDataDir(dataDir: string, sync: boolean): Promise<void> {
  const found = await readdir(dataDir, { withFileTypes: true });
  const staged = found.filter((entry) => entry.name.startsWith(INITDB_STAGING_PREFIX));
  const interrupted = staged.some((entry) => existsSync(join(dataDir, entry.name, "PG_VERSION")));
  const leftovers = found.filter((entry) => isDatabasePath(entry.name, entry.isDirectory()));
  if (leftovers.length > 0 && !interrupted)
    throw new Error(
      `${dataDir} holds PostgreSQL's files (${leftovers.map((e) => e.name).join(", ")}) but no PG_VERSION: ` +
        "not a database this server can open (a first start of an earlier version, interrupted, leaves " +
        "this too); move it aside or choose another --data-dir",
    );
  for (const entry of [...staged, ...leftovers]) await rm(join(dataDir, entry.name), { recursive: true, force: true });
  const staging = await mkdtemp(join(dataDir, INITDB_STAGING_PREFIX));
  const failed = (why: string) => new Error(`creating the database in ${dataDir} failed: ${why}`);
  const template = process.env[INITDB_TEMPLATE_ENV];
  if (template) {
    try {
      // PostgreSQL's files only: whatever else a template holds (a data directory's key) stays.
      const databaseFile = async (source: string) => {
        const name = relative(template, source).split(sep).join("/");
        return name === "" || isDatabasePath(name, (await stat(source)).isDirectory());
      };
      await cp(template, staging, { recursive: true, errorOnExist: true, force: false, filter: databaseFile });
    } catch (err) {
      throw failed(`copying ${INITDB_TEMPLATE_ENV} (${template}): ${err instanceof Error ? err.message : err}`);
    }
    if (!existsSync(join(staging, "PG_VERSION")))
      throw failed(`${INITDB_TEMPLATE_ENV} (${template}) holds no PG_VERSION: not a database initdb made`);
  } else await initdb(staging, failed);
  if (sync) {
    syncTree(staging);
    syncPath(dataDir);
  }
  for (const name of await readdir(staging))
    if (name !== "PG_VERSION") await rename(join(staging, name), join(dataDir, name));
  if (sync) syncPath(dataDir);
  await rename(join(staging, "PG_VERSION"), join(dataDir, "PG_VERSION"));
  if (sync) syncPath(dataDir);
  await rm(staging, { recursive: true, force: true });
}

/** PGlite's initdb into `staging`, in a process of its own (see initializeDataDir). */
async function initdb(staging: string, failed: (why: string) => Error): Promise<void> {
  // initdb's own writes are synced by the caller, whole: PGlite's defaults (-F) are what it needs
  const startParams = pgliteStartParams(false);
  let stderr = "";
  let exit: [number | null, NodeJS.Signals | null];
  try {
    const child = spawn(
      process.execPath,
      [PGLITE_V8_FLAGS, "--input-type=module", "-e", initdbScript(), staging, JSON.stringify(startParams)],
      { stdio: ["pipe", "ignore", "pipe"] },
    );
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
    exit = (await once(child, "close")) as typeof exit;
  } catch (err) {
    throw failed(err instanceof Error ? err.message : String(err)); // the process did not start
  }
  if (exit[0] !== 0) throw failed(`exit ${exit[0] ?? exit[1]}: ${stderr.trim() || "no output"}`);
  if (!existsSync(join(staging, "PG_VERSION"))) throw failed(`initdb wrote no PG_VERSION: ${stderr.trim()}`);
}

/** A PostgreSQL connection pool's occupancy now (pg.Pool's counts). */
export interface PoolStats {
  /** connections open, busy or idle */
  total: number;
  idle: number;
  /** queries waiting for a connection */
  waiting: number;
  /** the most connections the pool opens */
  max: number;
}

/** A statement run on a database held exclusively (no parameters' types: rows as PGlite returns them). */
export type SnapshotQuery = <R>(sql: string, parameters?: unknown[]) => Promise<R[]>;

/** One of PostgreSQL's files in a snapshot: its path relative to the data directory (`/`-separated). */
export interface SnapshotFile {
  name: string;
  size: number;
}

/** The embedded database as one consistent copy of PostgreSQL's own files, and what was read from that same state. */
export interface DatabaseSnapshot<T> {
  /** the private directory holding the copy (`files` are relative to it) */
  dir: string;
  /** every directory of the copy, parents first (empty ones too: PostgreSQL needs them) */
  directories: string[];
  files: SnapshotFile[];
  /** what `during` answered */
  read: T;
  /** removes the copy (the caller calls it once done, also on failure) */
  remove(): Promise<void>;
}

export interface OpenDatabase {
  db: Db;
  backend: "pglite" | "postgres";
  /** PostgreSQL: the connection pool's occupancy (the embedded database has no pool) */
  poolStats?(): PoolStats;
  /** the embedded database's data directory, when it is on disk */
  dataDir?: string;
  /**
   * Embedded on disk only: a copy of PostgreSQL's files, taken after a checkpoint while no
   * transaction is open (every statement waits meanwhile; the copy is made with asynchronous file
   * calls, so the process goes on serving what needs no database), and `during`'s reads of that
   * same state (e.g. which blobs it references).
   */
  snapshot?<T>(during: (query: SnapshotQuery) => Promise<T>): Promise<DatabaseSnapshot<T>>;
  close(): Promise<void>;
}

/**
 * What of a data directory is PostgreSQL's (PGlite's PGDATA is the data directory itself): its
 * version file and configuration, and its `base`, `global` and `pg_*` directories. Nothing else —
 * not postmaster.pid, nor Bulwark's own files (its lock, keys, recorded URLs, the blobs under
 * registry/) — goes into a snapshot or comes out of a restore.
 */
const DATABASE_TOP_FILES = new Set([
  "PG_VERSION",
  "postgresql.conf",
  "postgresql.auto.conf",
  "pg_hba.conf",
  "pg_ident.conf",
  "postmaster.opts",
]);
const DATABASE_TOP_DIRECTORY = /^(base|global|pg_[a-z_]+)$/;
const DATABASE_PATH_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;

/**
 * Whether `name` (relative, `/`-separated) may be one of PostgreSQL's files (or, with
 * `directory`, directories) in a data directory: never absolute, never `..`, only PostgreSQL's entries.
 */
export function isDatabasePath(name: string, directory = false): boolean {
  if (typeof name !== "string" || name.length === 0 || name.length > 1024) return false;
  const segments = name.split("/");
  if (!segments.every((s) => DATABASE_PATH_SEGMENT.test(s) && s !== "." && s !== "..")) return false;
  if (segments.length === 1) return directory ? DATABASE_TOP_DIRECTORY.test(name) : DATABASE_TOP_FILES.has(name);
  return DATABASE_TOP_DIRECTORY.test(segments[0]!);
}

/** Where snapshots are staged: inside the (private) data directory, under a name no snapshot copies. */
const SNAPSHOT_STAGING_PREFIX = ".snapshot-";

function snapshotOf(dialect: SerializedPGliteDialect, dataDir: string): NonNullable<OpenDatabase["snapshot"]> {
  return async (during) => {
    const dir = await mkdtemp(join(dataDir, SNAPSHOT_STAGING_PREFIX));
    const remove = () => rm(dir, { recursive: true, force: true });
    try {
      const directories: string[] = [];
      const files: SnapshotFile[] = [];
      const read = await dialect.exclusive(async (pglite) => {
        const read = await during(async <R>(text: string, parameters?: unknown[]) => {
          return (await pglite.query<R>(text, parameters)).rows;
        });
        // The data files current as of now; the WAL is copied too (a restore replays it from here).
        await pglite.query("CHECKPOINT");
        // Nothing writes meanwhile: PGlite runs in this thread, and only when asked, and nothing may ask.
        await copyDatabaseFiles(dataDir, dir, "", directories, files);
        return read;
      });
      return { dir, directories, files, read, remove };
    } catch (err) {
      await remove();
      throw err;
    }
  };
}

async function copyDatabaseFiles(
  from: string,
  to: string,
  relative: string,
  directories: string[],
  files: SnapshotFile[],
): Promise<void> {
  for (const entry of await readdir(join(from, relative), { withFileTypes: true })) {
    const name = relative ? `${relative}/${entry.name}` : entry.name;
    if (entry.isDirectory() && isDatabasePath(name, true)) {
      await mkdir(join(to, name), { mode: 0o700 });
      directories.push(name);
      await copyDatabaseFiles(from, to, name, directories, files);
    } else if (entry.isFile() && isDatabasePath(name)) {
      await copyFile(join(from, name), join(to, name));
      files.push({ name, size: (await stat(join(to, name))).size });
    }
  }
}

/**
 * Snapshots a failed process left behind (the directory is this process's now: it holds the
 * lock), and, once the database is in place, what a first start's initdb left (an empty staging
 * directory after an interrupted clean-up, or a copy made by an initdb that outlived its server).
 * One such an initdb still writes may fail to go: it is left for the next start (a database in
 * place never looks at it).
 */
async function removeStaleStaging(dataDir: string, databaseInPlace: boolean): Promise<void> {
  for (const name of await readdir(dataDir))
    if (name.startsWith(SNAPSHOT_STAGING_PREFIX)) await rm(join(dataDir, name), { recursive: true, force: true });
    else if (databaseInPlace && name.startsWith(INITDB_STAGING_PREFIX))
      await rm(join(dataDir, name), { recursive: true, force: true }).catch(() => {});
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
function withAmbientTransactions(dialect: Dialect, pipelines = false): Db {
  const observed = new ObservedDialect(dialect);
  const ambient = new AmbientTransactionDialect(observed, pipelines);
  const db = new Kysely<StorageTables>({ dialect: ambient });
  registerAmbientDialect(db, ambient);
  registerObservedDialect(db, observed);
  return db;
}

export async function openDatabase(opts: DatabaseOptions): Promise<OpenDatabase> {
  if (opts.databaseUrl) {
    // Loaded only here: node-postgres's import costs ~60 ms of an embedded server's start-up.
    const [{ default: pg }, { TYPE_PARSERS }, { PreparedStatements }] = await Promise.all([
      import("pg"),
      import("./timestamps.js"),
      import("./prepared-statements.js"),
    ]);
    const max = opts.poolSize ?? 10;
    // Pipeline mode: a statement is sent as it is made, not once the one before it answered.
    // Each still has its own Sync (a failure ends only its own), and the transactions below use it
    // to save round trips (storage/ambient-transaction.ts).
    const pipelining = opts.pipelining !== false;
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max, types: TYPE_PARSERS, pipeline: pipelining });
    // An idle client can error (e.g. the server restarts); the pool replaces it.
    pool.on("error", () => {});
    if (opts.preparedStatements !== false) new PreparedStatements().attach(pool);
    const db = withAmbientTransactions(new PostgresDialect({ pool }), pipelining);
    if (opts.keyEncryptionKey) keyEncryptionKeys.set(db, opts.keyEncryptionKey);
    backends.set(db, "postgres");
    const poolStats = () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max });
    return { db, backend: "postgres", poolStats, close: () => db.destroy() };
  }
  const dataDir = opts.dataDir || "./data";
  if (opts.pglite || dataDir.startsWith("memory://")) {
    const pglite = opts.pglite ?? (await PGlite.create(dataDir, await pgliteOptions()));
    const dialect = new SerializedPGliteDialect(pglite);
    const db = withAmbientTransactions(dialect);
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
  let walSync: WalSync | undefined;
  try {
    const durable = !opts.unsafeNoFsync;
    const fresh = !existsSync(join(dataDir, "PG_VERSION"));
    await removeStaleStaging(dataDir, !fresh);
    if (fresh) await initializeDataDir(dataDir, durable);
    walSync = durable ? new WalSync(opts.syncWalFile) : undefined;
    pglite = await PGlite.create(dataDir, await pgliteOptions(durable ? dataDir : undefined, walSync));
    // what PGlite's start wrote is synced before anything is answered (the dialect waits from here)
    walSync?.now();
    // Earlier versions left PGlite's files 0666; PGlite's initdb writes them so too. One pass after
    // opening covers both: the directory itself is 0700 already, so nobody else reached them meanwhile.
    makePrivate(dataDir);
    const key = await dataDirKeyEncryptionKey(dataDir, true);
    const dialect = new SerializedPGliteDialect(pglite, true, walSync);
    const db = withAmbientTransactions(dialect);
    keyEncryptionKeys.set(db, key!);
    backends.set(db, "pglite");
    return {
      db,
      backend: "pglite",
      dataDir,
      snapshot: snapshotOf(dialect, dataDir),
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
    walSync?.close();
    await release();
    throw err;
  }
}

/**
 * Checks a data directory made of a snapshot's files (OpenDatabase.snapshot) by opening it once
 * with PGlite, durably (PostgreSQL's crash recovery replays the WAL from the snapshot's checkpoint
 * and syncs what it writes), then syncs all of it to disk. The caller puts the key-encryption key
 * beside it; the first server to open it migrates it.
 */
export async function checkRestoredDataDir(dir: string): Promise<void> {
  const restoreUmask = privateUmask();
  try {
    const pglite = await PGlite.create(dir, await pgliteOptions(dir));
    await pglite.close();
    makePrivate(dir);
    syncTree(dir);
  } finally {
    restoreUmask();
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

/**
 * The known migrations the database has not applied (all of them before the first run): what
 * `/readyz` waits for while another replica migrates, or after the database was restored from an
 * older backup. Migrations the database has that this version does not know are not counted.
 */
export async function pendingMigrations(db: Kysely<any>, sets: readonly MigrationSet[]): Promise<string[]> {
  const applied = await appliedMigrations(db);
  return Object.keys(collectMigrations(sets)).filter((name) => !applied?.has(name));
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
