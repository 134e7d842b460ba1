// A Kysely dialect for PGlite that serializes the use of it. PGlite is a single connection, so
// a transaction must hold it exclusively: kysely-pglite 0.6.1 does not, and loses concurrent
// autocommit writes when another request's transaction rolls back (seen when this was written).
// A statement outside a transaction holds it for itself alone; a read the cache below answers
// does not wait for it at all.
//
// It also remembers the results of read-only statements until a write that could change them.
// PGlite runs every query on this process's main thread, one at a time (a keyed page of 50 rows
// costs about 1 ms), and an embedded database is this process's alone (its directory is locked),
// so every write passes through here and can invalidate exactly. Each table has a generation: a
// write moves those of the tables it names as targets and of every table those write in turn (the
// tables their triggers' functions write, and those a foreign key cascades into: read from the
// catalog, again after any schema change); a cached answer holds only while the tables its
// statement names are at the generations it was read at. A statement that is not a plain read or
// plain DML (DDL, a function that may write, a table the catalog does not know) moves every
// generation. Reads inside a transaction are neither answered from nor stored in the cache.
import type { PGlite } from "@electric-sql/pglite";
import type { WalSync } from "./wal-sync.js";
import { PGlitePreparedStatements } from "./pglite-prepared.js";
import { LruCache } from "../core/lru.js";
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from "kysely";

class Mutex {
  #tail: Promise<void> = Promise.resolve();
  lock(): Promise<() => void> {
    let release!: () => void;
    const next = new Promise<void>((r) => (release = r));
    const prev = this.#tail;
    this.#tail = prev.then(() => next);
    return prev.then(() => release);
  }
}

/** Statements that only read and give the same answer until the data changes. */
const READ = /^\s*(select|with)\b/i;
/** What makes a read unfit to repeat: row locks, volatile or side-effecting functions, the clock. */
const UNREPEATABLE = [
  /\bfor\s+(update|share|no\s+key\s+update|key\s+share)\b/i,
  /\b(nextval|setval|currval|lastval|now|random|clock_timestamp|statement_timestamp|transaction_timestamp|timeofday|set_config|pg_\w+|txid_\w+|gen_random_\w+|uuid_generate_\w+)\s*\(/i,
  /\b(current_timestamp|current_date|current_time|localtime|localtimestamp)\b/i,
];
/** A read that changes a setting (the search path among them). */
const SETS_CONFIG = /\bset_config\s*\(/i;
/** A data-modifying WITH clause. */
const WRITES = /\b(insert|update|delete|merge)\b/i;
/**
 * The tables a data-modifying statement (or a trigger function's body) names as its targets. Not
 * `for update` (a row lock) nor `do update set` (an upsert's, whose table the insert names).
 */
const WRITE_TARGETS =
  /\b(?:insert\s+into|(?<!\b(?:for|key|do)\s+)update|delete\s+from|merge\s+into)\s+(?:only\s+)?("?)([a-z_][a-z0-9_]*)\1/gi;
/** Statements that are writes of rows and nothing else (no DDL, settings, locks, copies). */
const DML = /^\s*(with|insert|update|delete|merge)\b/i;
/** Statements that begin, end or mark a point in a transaction, or set something for its rest only. */
const TRANSACTION_CONTROL =
  /^\s*(begin|start\s+transaction|commit|end|rollback|abort|savepoint|release|set\s+local)\b/i;

/** Every table a write of each table may change, and the relations reads can name. */
interface WriteGraph {
  /** table → itself and every table its writes may change (triggers, cascades), transitively */
  closure: Map<string, readonly string[]>;
  /** tables whose triggers' functions run SQL this cannot read (dynamic EXECUTE): their writes move everything */
  opaque: Set<string>;
  /** views and the schema's own functions: a read naming one depends on every table */
  views: Set<string>;
  /** a word naming any table or view */
  names: RegExp | undefined;
}

async function readWriteGraph(pg: PGlite): Promise<WriteGraph> {
  const tables = (
    await pg.query<{ name: string; kind: string }>(
      `select c.relname as name, c.relkind::text as kind from pg_class c
       where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'f')`,
    )
  ).rows;
  const triggers = (
    await pg.query<{ name: string; body: string }>(
      `select c.relname as name, p.prosrc as body from pg_trigger t
       join pg_class c on c.oid = t.tgrelid join pg_proc p on p.oid = t.tgfoid
       where not t.tgisinternal and c.relnamespace = current_schema()::regnamespace`,
    )
  ).rows;
  // A foreign key whose action on delete or update changes the referencing table's rows.
  const cascades = (
    await pg.query<{ referenced: string; referencing: string }>(
      `select referenced.relname as referenced, referencing.relname as referencing from pg_constraint k
       join pg_class referenced on referenced.oid = k.confrelid join pg_class referencing on referencing.oid = k.conrelid
       where k.contype = 'f' and (k.confdeltype in ('c', 'n', 'd') or k.confupdtype in ('c', 'n', 'd'))`,
    )
  ).rows;
  // A function of the schema's own may read any table (a trigger's too, if called by name).
  const functions = (
    await pg.query<{ name: string }>(
      `select proname as name from pg_proc where pronamespace = current_schema()::regnamespace`,
    )
  ).rows.map((f) => f.name);
  const known = new Set(tables.map((t) => t.name));
  const views = new Set([...tables.filter((t) => t.kind === "v" || t.kind === "m").map((t) => t.name), ...functions]);
  const direct = new Map<string, Set<string>>([...known].map((t) => [t, new Set([t])]));
  const opaque = new Set<string>();
  const callsFunction = functions.length
    ? new RegExp(`\\b(${functions.map((f) => f.replace(/[^a-z0-9_]/gi, "")).join("|")})\\s*\\(`, "i")
    : undefined;
  for (const { name, body } of triggers) {
    // dynamic SQL, or a call of another function of ours: what it writes cannot be read here
    if (/\bexecute\b/i.test(body) || callsFunction?.test(body)) opaque.add(name);
    for (const m of body.matchAll(WRITE_TARGETS)) {
      const target = m[2]!.toLowerCase();
      if (known.has(target)) direct.get(name)?.add(target);
      else opaque.add(name);
    }
  }
  for (const { referenced, referencing } of cascades) direct.get(referenced)?.add(referencing);
  const closure = new Map<string, readonly string[]>();
  for (const table of known) {
    const seen = new Set<string>();
    const visit = (t: string) => {
      if (seen.has(t)) return;
      seen.add(t);
      for (const next of direct.get(t) ?? []) visit(next);
    };
    visit(table);
    closure.set(table, [...seen].sort());
    if ([...seen].some((t) => opaque.has(t))) opaque.add(table);
  }
  const escaped = [...known, ...functions].map((t) => t.replace(/[^a-z0-9_]/gi, "")).filter(Boolean);
  const names = escaped.length ? new RegExp(`\\b(${escaped.join("|")})\\b`, "gi") : undefined;
  return { closure, opaque, views, names };
}

/** What a write changes: these tables, or everything. */
type Writes = readonly string[] | "everything";

const CACHE_ENTRIES = 2000;
/** Larger answers are not kept (bounds the cache's memory). */
const CACHE_MAX_ROWS = 500;

/** Whether a statement's text is a repeatable read, decided once per text. */
class StatementKinds {
  readonly #repeatable = new LruCache<string, boolean>(CACHE_ENTRIES);

  isRepeatableRead(sqlText: string): boolean {
    let repeatable = this.#repeatable.get(sqlText);
    if (repeatable === undefined) {
      repeatable =
        READ.test(sqlText) &&
        !UNREPEATABLE.some((r) => r.test(sqlText)) &&
        !(/^\s*with\b/i.test(sqlText) && WRITES.test(sqlText));
      this.#repeatable.set(sqlText, repeatable);
    }
    return repeatable;
  }
}

/** Which tables each statement's text writes or reads, by the catalog's write graph (kept per text until the schema changes). */
class TableUse {
  readonly #writes = new LruCache<string, Writes>(CACHE_ENTRIES);
  readonly #reads = new LruCache<string, readonly string[] | "everything">(CACHE_ENTRIES);

  constructor(readonly graph: WriteGraph) {}

  writes(sqlText: string): Writes {
    let writes = this.#writes.get(sqlText);
    if (writes === undefined) {
      writes = "everything";
      // a write that calls a function of ours may write anything
      const named = [...sqlText.matchAll(this.graph.names ?? /$^/g)].map((m) => m[1]!.toLowerCase());
      if (DML.test(sqlText) && !named.some((n) => this.graph.views.has(n))) {
        const changed = new Set<string>();
        let known = true;
        for (const m of sqlText.matchAll(WRITE_TARGETS)) {
          const target = m[2]!.toLowerCase();
          const closure = this.graph.closure.get(target);
          if (!closure || this.graph.opaque.has(target)) known = false;
          else for (const t of closure) changed.add(t);
        }
        if (known && changed.size > 0) writes = [...changed];
      }
      this.#writes.set(sqlText, writes);
    }
    return writes;
  }

  /** The tables a read names (as words anywhere in its text: erring on the safe side); everything for a view. */
  reads(sqlText: string): readonly string[] | "everything" {
    let reads = this.#reads.get(sqlText);
    if (reads === undefined) {
      const named = new Set([...sqlText.matchAll(this.graph.names ?? /$^/g)].map((m) => m[1]!.toLowerCase()));
      reads = [...named].some((t) => this.graph.views.has(t)) ? "everything" : [...named].sort();
      this.#reads.set(sqlText, reads);
    }
    return reads;
  }
}

/**
 * The cache key of a statement with its parameters; undefined when a parameter has no exact text
 * form, or is a time: those are reads "as of now" (an expiry, a session's validity) that never
 * come again with the same value, and would only push useful entries out.
 */
function cacheKey(sqlText: string, parameters: readonly unknown[]): string | undefined {
  let key = sqlText;
  for (const p of parameters) {
    // Length-prefixed, so no two parameter lists make the same key.
    if (typeof p === "string") key += `\u0000s${p.length}:${p}`;
    else if (typeof p === "number") key += `\u0000n${p}`;
    else if (typeof p === "bigint") key += `\u0000i${p}`;
    else if (typeof p === "boolean") key += `\u0000b${p}`;
    else if (p === null || p === undefined) key += "\u0000z";
    else return undefined;
  }
  return key;
}

/** Longest stretch of statements run back to back before the event loop gets a turn. */
const MAX_RUN_WITHOUT_TURN_MS = 20;

/**
 * PGlite answers a statement without any I/O: its promise settles as a microtask, so a request
 * awaiting statement after statement (an import's transaction) never lets the event loop turn.
 * Nothing else happens meanwhile: no socket is read, and once the loop does turn, its timers come
 * first, so a keep-alive connection whose next request had arrived long ago is closed as idle
 * (the client sees a reset). This notes whether the loop has turned since the last statement
 * asked, and lets it turn (timers, I/O) when it has not for a while.
 */
class LoopTurns {
  /** when a turn was asked for and has not come yet; undefined: none pending */
  #askedAt: number | undefined;
  readonly #turned = () => {
    this.#askedAt = undefined;
  };

  /** Resolves at once, unless statements ran without a turn for too long: then after one. */
  async beforeStatement(): Promise<void> {
    const now = performance.now();
    if (this.#askedAt === undefined) {
      this.#askedAt = now;
      setImmediate(this.#turned);
    } else if (now - this.#askedAt > MAX_RUN_WITHOUT_TURN_MS) {
      // The pending #turned runs first (it was queued first), so the next statement asks anew.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
}

/** Released connections kept for reuse, at most (more are acquired at once only under heavy concurrency). */
const IDLE_CONNECTIONS = 64;

/** One of Kysely's connections: it holds the database (the mutex) from a transaction's begin to its end. */
class PGliteConnection implements DatabaseConnection {
  inTransaction = false;
  /** kept among the released ones: never handed out twice at once, even if released twice */
  idle = false;
  #release: (() => void) | undefined;

  constructor(private readonly execute: <R>(c: PGliteConnection, query: CompiledQuery) => Promise<QueryResult<R>>) {}

  get holds(): boolean {
    return this.#release !== undefined;
  }

  hold(release: () => void): void {
    this.#release = release;
  }

  /** Lets the database go, if held (at a transaction's end, or at the release of a connection that failed to end one). */
  letGo(): void {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    return this.execute<R>(this, query);
  }

  // eslint-disable-next-line require-yield
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error("streaming is not supported on PGlite");
  }
}

/**
 * The connection this dialect made, under the wrappers that pass a transaction's begin and end
 * through with their own connection (storage/observed.ts: each keeps the one it wraps as `raw`).
 */
function ownConnection(connection: DatabaseConnection): PGliteConnection {
  let c: unknown = connection;
  while (!(c instanceof PGliteConnection)) {
    c = (c as { raw?: unknown } | undefined)?.raw;
    if (c === undefined) throw new Error("a transaction began on a connection this PGlite dialect did not make");
  }
  return c;
}

export class SerializedPGliteDialect implements Dialect {
  /** held by a transaction from its begin to its end, by a statement outside one while it runs, and by exclusive() */
  readonly #mutex = new Mutex();
  /** each statement text prepared once (dropped at every schema change) */
  readonly #prepared: PGlitePreparedStatements;

  constructor(
    private readonly pglite: PGlite,
    private readonly closeOnDestroy = true,
    /** an on-disk database's WAL syncs, waited for before anything is answered (storage/wal-sync.ts) */
    private readonly walSync?: WalSync,
  ) {
    this.#prepared = new PGlitePreparedStatements(pglite);
  }

  /** Settles once every commit made so far is on disk (at once when there is nothing to wait for). */
  #durable(): Promise<void> | undefined {
    const wal = this.walSync;
    return wal && !wal.idle ? wal.durable() : undefined;
  }

  /**
   * Runs `fn` with the database to itself: it waits for the connection like any query, so no
   * transaction is open while `fn` runs and none starts until it ends (a consistent snapshot).
   * `fn` must not use the database through Kysely meanwhile (that would wait for itself).
   */
  async exclusive<T>(fn: (pglite: PGlite) => Promise<T>): Promise<T> {
    const release = await this.#mutex.lock();
    let result: T;
    try {
      await this.#durable(); // what fn reads is on disk
      result = await fn(this.pglite);
    } finally {
      this.#prepared.reset(); // fn may have changed the schema
      release();
    }
    await this.#durable();
    return result;
  }

  createAdapter() {
    return new PostgresAdapter();
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
  createIntrospector(db: Kysely<any>) {
    return new PostgresIntrospector(db);
  }
  createDriver(): Driver {
    const pg = this.pglite;
    const closeOnDestroy = this.closeOnDestroy;
    const walSync = this.walSync;
    const durable = () => this.#durable();
    const mutex = this.#mutex;
    const prepared = this.#prepared;
    const kinds = new StatementKinds();
    const cache = new LruCache<string, { stamp: string; rows: unknown[] }>(CACHE_ENTRIES);
    /** moves with every change that may touch any table, and with every schema change */
    let everything = 0;
    /** moves with every write of any kind (what a read of a view depends on) */
    let anyWrite = 0;
    const generations = new Map<string, number>();
    /** the catalog's write graph: read when first needed, again after a schema change */
    let use: TableUse | undefined;
    /** what the open transaction (the one holding the database) wrote, and whether it changed the schema */
    let wrote: Set<string> | "everything" = new Set();
    let schemaChanged = false;

    const schemaMayHaveChanged = () => {
      use = undefined;
      prepared.reset();
    };
    const tableUse = async (): Promise<TableUse | undefined> => {
      try {
        use ??= new TableUse(await readWriteGraph(pg));
        return use;
      } catch {
        return undefined; // e.g. inside a failed transaction: the statement counts as touching everything
      }
    };
    /**
     * Whether a statement that is neither DML nor a repeatable read may have changed the schema:
     * anything but a read. A read that locks rows (an update's `for update`), takes an advisory
     * lock or moves a sequence changes no table's shape. One that sets a setting (the search path)
     * or calls a function of the schema's own may, and so may any read that comes before the graph
     * is known. Each change costs the next statements the graph, read again, and every prepared
     * statement.
     */
    const mayChangeSchema = (sqlText: string) =>
      !READ.test(sqlText) || SETS_CONFIG.test(sqlText) || (use?.reads(sqlText) ?? "everything") === "everything";
    const moved = (writes: Writes) => {
      anyWrite++;
      if (writes === "everything") everything++;
      else for (const t of writes) generations.set(t, (generations.get(t) ?? 0) + 1);
    };
    const noteWrite = (c: PGliteConnection, writes: Writes, schema: boolean) => {
      moved(writes);
      if (schema) schemaMayHaveChanged();
      if (!c.inTransaction) return;
      schemaChanged ||= schema;
      if (writes === "everything") wrote = "everything";
      else if (wrote !== "everything") for (const t of writes) wrote.add(t);
    };
    /** What a cached read depends on: every table it names at its generation (a view: every write). */
    const stampOf = (reads: readonly string[] | "everything"): string => {
      // a read naming no table of ours (a sequence, the catalog, a function of PostgreSQL's) may
      // still see any write
      if (reads === "everything" || reads.length === 0) return `w${anyWrite}`;
      let stamp = `${everything}`;
      for (const t of reads) stamp += `:${generations.get(t) ?? 0}`;
      return stamp;
    };
    const run = async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
      const result = await prepared.query<R>(query.sql, query.parameters);
      return {
        rows: result.rows,
        numAffectedRows: result.affectedRows != null ? BigInt(result.affectedRows) : undefined,
      };
    };
    /** Runs `fn` with the database held: by the connection's transaction, or for this statement alone. */
    const holding = async <T>(c: PGliteConnection, fn: () => Promise<T>): Promise<T> => {
      if (c.holds) return fn();
      const release = await mutex.lock();
      try {
        return await fn();
      } finally {
        release();
      }
    };
    /** A transaction's end moves the generations of what it wrote (again: its reads were never cached). */
    const ended = (c: PGliteConnection) => {
      c.inTransaction = false;
      if (wrote === "everything" || wrote.size > 0) moved(wrote === "everything" ? wrote : [...wrote]);
      if (schemaChanged) schemaMayHaveChanged();
      wrote = new Set();
      schemaChanged = false;
      c.letGo();
    };
    // Rows are handed out as copies: a caller may change what it got without changing the cache.
    const copy = <R>(rows: unknown[]) => ({ rows: rows.map((r) => ({ ...(r as object) })) as R[] });
    const turns = new LoopTurns();
    /** connections released, for the next acquisitions */
    const idle: PGliteConnection[] = [];
    const executeQuery = async <R>(c: PGliteConnection, query: CompiledQuery): Promise<QueryResult<R>> => {
      await turns.beforeStatement();
      if (!kinds.isRepeatableRead(query.sql)) {
        // a savepoint or `set local` changes no data; the transaction's end moves what it wrote
        if (c.inTransaction && TRANSACTION_CONTROL.test(query.sql)) return run<R>(query);
        const dml = DML.test(query.sql);
        return holding(c, async () => {
          const writes: Writes = (dml && (use ?? (await tableUse()))?.writes(query.sql)) || "everything";
          try {
            return await run<R>(query);
          } finally {
            noteWrite(c, writes, !dml && mayChangeSchema(query.sql));
          }
        });
      }
      const key = c.inTransaction ? undefined : cacheKey(query.sql, query.parameters);
      if (key === undefined) return holding(c, () => run<R>(query));
      // Answered from the cache without holding the database: what it holds was committed (a
      // transaction's writes move their tables' generations as they are made), and a miss waits
      // for the database like any statement.
      const tables = use ?? (await holding(c, tableUse));
      if (!tables) return holding(c, () => run<R>(query));
      const reads = tables.reads(query.sql);
      const hit = cache.get(key);
      if (hit && hit.stamp === stampOf(reads)) return copy<R>(hit.rows);
      return holding(c, async () => {
        const stamp = stampOf(reads);
        const result = await run<R>(query);
        if (stampOf(reads) === stamp && result.rows.length <= CACHE_MAX_ROWS)
          cache.set(key, { stamp, rows: result.rows.map((r) => ({ ...(r as object) })) });
        return result;
      });
    };
    return {
      async init() {},
      // A connection holds the database only while a transaction of its own is open; otherwise each
      // statement takes it for itself, and a read the cache answers never waits for it.
      async acquireConnection() {
        const c = idle.pop() ?? new PGliteConnection(executeQuery);
        c.idle = false;
        return c;
      },
      async releaseConnection(connection) {
        const c = ownConnection(connection);
        c.letGo();
        c.inTransaction = false;
        // Kept for the next acquisition: a new one each time costs its wrappers too (observed.ts).
        if (!c.idle && idle.length < IDLE_CONNECTIONS) {
          c.idle = true;
          idle.push(c);
        }
        // Whatever the connection answered (a commit, or a read that may show one) reaches its
        // caller once every commit so far is synced; the next statement runs meanwhile.
        await durable();
      },
      async beginTransaction(connection) {
        const c = ownConnection(connection);
        c.hold(await mutex.lock());
        // A transaction's statements answer its body before any release: what they may read (the
        // commits so far) is synced first. The database is held, so nothing commits meanwhile.
        // (Kysely's connection() sessions and startTransaction() do not wait like this; Bulwark
        // uses neither on PGlite.)
        try {
          await durable();
          c.inTransaction = true;
          wrote = new Set();
          schemaChanged = false;
          await connection.executeQuery(CompiledQuery.raw("begin"));
        } catch (err) {
          c.inTransaction = false;
          c.letGo();
          throw err;
        }
      },
      async commitTransaction(c) {
        try {
          await c.executeQuery(CompiledQuery.raw("commit"));
        } finally {
          ended(ownConnection(c));
        }
      },
      async rollbackTransaction(c) {
        try {
          await c.executeQuery(CompiledQuery.raw("rollback"));
        } finally {
          ended(ownConnection(c));
        }
      },
      async destroy() {
        try {
          if (closeOnDestroy) await pg.close();
          walSync?.now();
        } finally {
          walSync?.close();
        }
      },
    };
  }
}
