// A Kysely dialect for PGlite that serializes connections. PGlite is a single connection, so
// a transaction must hold it exclusively: kysely-pglite 0.6.1 does not, and loses concurrent
// autocommit writes when another request's transaction rolls back (seen when this was written).
//
// It also remembers the results of read-only statements until the next write. PGlite runs every
// query on this process's main thread, one at a time (a keyed page of 50 rows costs about 1 ms),
// and an embedded database is this process's alone (its directory is locked), so every write
// passes through here and can invalidate exactly: any statement that is not a plain read, and
// every commit or rollback, starts a new generation, and only entries of the current generation
// answer. Reads inside a transaction are neither answered from nor stored in the cache.
//
// Journal tables (the events module's: every pull is recorded) are the exception: a write that
// touches journal tables only moves the journal's own generation (all of them at once: one may
// cascade into another), so recording pulls does not end the cached reads of repos, tags and
// manifests 20 times a second. A read that names a journal table is keyed to both generations.
import type { PGlite } from "@electric-sql/pglite";
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
/** A data-modifying WITH clause. */
const WRITES = /\b(insert|update|delete|merge)\b/i;
/** The tables a data-modifying statement names as its targets. */
const WRITE_TARGETS = /\b(?:insert\s+into|update|delete\s+from|merge\s+into)\s+(?:only\s+)?("?)([a-z_][a-z0-9_]*)\1/gi;
/** Statements that are writes of rows and nothing else (no DDL, settings, locks, copies). */
const DML = /^\s*(with|insert|update|delete|merge)\b/i;

/** Statements that begin, end or mark a point in a transaction, or set something for its rest only. */
const TRANSACTION_CONTROL = /^\s*(begin|start\s+transaction|commit|end|rollback|abort|savepoint|release|set\s+local)\b/i;

/** The generations a cached answer was read at: a number, or a text when journal tables are named. */
type Stamp = number | string;

const CACHE_ENTRIES = 2000;
/** Larger answers are not kept (bounds the cache's memory). */
const CACHE_MAX_ROWS = 500;

/**
 * What a statement's text is, decided once per text: whether it is a repeatable read, whether a
 * write touches journal tables only, whether a read names one.
 */
class StatementKinds {
  readonly #repeatable = new LruCache<string, boolean>(CACHE_ENTRIES);
  readonly #writesJournalOnly = new LruCache<string, boolean>(CACHE_ENTRIES);
  readonly #readsJournal = new LruCache<string, boolean>(CACHE_ENTRIES);
  readonly #named: RegExp | undefined;

  constructor(private readonly journal: ReadonlySet<string>) {
    // as a word anywhere in the text (a comment, a literal): erring on the safe side
    if (journal.size > 0) this.#named = new RegExp(`\\b(${[...journal].join("|")})\\b`, "i");
  }

  /** Whether a statement writes rows of journal tables and of no other table. */
  writesJournalOnly(sqlText: string): boolean {
    let only = this.#writesJournalOnly.get(sqlText);
    if (only === undefined) {
      only = false;
      if (this.journal.size > 0 && DML.test(sqlText)) {
        const targets = [...sqlText.matchAll(WRITE_TARGETS)].map((m) => m[2]!.toLowerCase());
        only = targets.length > 0 && targets.every((t) => this.journal.has(t));
      }
      this.#writesJournalOnly.set(sqlText, only);
    }
    return only;
  }

  /** Whether a read names a journal table. */
  readsJournal(sqlText: string): boolean {
    let named = this.#readsJournal.get(sqlText);
    if (named === undefined) {
      named = this.#named?.test(sqlText) ?? false;
      this.#readsJournal.set(sqlText, named);
    }
    return named;
  }

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

export class SerializedPGliteDialect implements Dialect {
  /** held by each connection for as long as it is acquired (a transaction, or one statement) */
  readonly #mutex = new Mutex();

  constructor(
    private readonly pglite: PGlite,
    private readonly closeOnDestroy = true,
    /** tables whose writes change no other table (no triggers, no cascades out); see the top */
    private readonly journalTables: readonly string[] = [],
  ) {}

  /**
   * Runs `fn` with the database to itself: it waits for the connection like any query, so no
   * transaction is open while `fn` runs and none starts until it ends (a consistent snapshot).
   * `fn` must not use the database through Kysely meanwhile (that would wait for itself).
   */
  async exclusive<T>(fn: (pglite: PGlite) => Promise<T>): Promise<T> {
    const release = await this.#mutex.lock();
    try {
      return await fn(this.pglite);
    } finally {
      release();
    }
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
    const mutex = this.#mutex;
    let release: (() => void) | undefined;
    const kinds = new StatementKinds(new Set(this.journalTables.map((t) => t.toLowerCase())));
    const cache = new LruCache<string, { stamp: Stamp; rows: unknown[] }>(CACHE_ENTRIES);
    let generation = 0;
    let journalGeneration = 0;
    let inTransaction = false;
    /** within a transaction: whether it wrote anything but journal tables, and whether it wrote those */
    let wroteShared = false;
    let wroteJournal = false;
    /** What a cached read depends on: the shared generation, and the journal's if it names a journal table. */
    const stampOf = (readsJournal: boolean): Stamp =>
      readsJournal ? `${generation}:${journalGeneration}` : generation;
    const run = async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
      const result = await pg.query<R>(query.sql, query.parameters as unknown[]);
      return {
        rows: result.rows,
        numAffectedRows: result.affectedRows != null ? BigInt(result.affectedRows) : undefined,
      };
    };
    /** A transaction's end moves the generations of what it wrote (the shared one if anything else). */
    const ended = () => {
      inTransaction = false;
      if (wroteShared) generation++;
      if (wroteJournal) journalGeneration++;
      wroteJournal = false;
    };
    // Rows are handed out as copies: a caller may change what it got without changing the cache.
    const copy = <R>(rows: unknown[]) => ({ rows: rows.map((r) => ({ ...(r as object) })) as R[] });
    const connection: DatabaseConnection = {
      async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
        if (!kinds.isRepeatableRead(query.sql)) {
          const journalOnly = kinds.writesJournalOnly(query.sql);
          try {
            return await run<R>(query);
          } finally {
            if (journalOnly) {
              journalGeneration++;
              if (inTransaction) wroteJournal = true;
            } else if (inTransaction && TRANSACTION_CONTROL.test(query.sql)) {
              // a savepoint or `set local` changes no data; the transaction's end moves what it wrote
            } else {
              generation++;
              if (inTransaction) wroteShared = true;
            }
          }
        }
        const key = inTransaction ? undefined : cacheKey(query.sql, query.parameters);
        if (key === undefined) return run<R>(query);
        const readsJournal = kinds.readsJournal(query.sql);
        const stamp = stampOf(readsJournal);
        const hit = cache.get(key);
        if (hit && hit.stamp === stamp) return copy<R>(hit.rows);
        const result = await run<R>(query);
        if (stampOf(readsJournal) === stamp && result.rows.length <= CACHE_MAX_ROWS)
          cache.set(key, { stamp, rows: result.rows.map((r) => ({ ...(r as object) })) });
        return result;
      },
      // eslint-disable-next-line require-yield
      async *streamQuery() {
        throw new Error("streaming is not supported on PGlite");
      },
    };
    return {
      async init() {},
      async acquireConnection() {
        release = await mutex.lock();
        return connection;
      },
      async releaseConnection() {
        const r = release;
        release = undefined;
        r?.();
      },
      async beginTransaction(c) {
        inTransaction = true;
        wroteShared = false;
        wroteJournal = false;
        try {
          await c.executeQuery(CompiledQuery.raw("begin"));
        } catch (err) {
          inTransaction = false;
          throw err;
        }
      },
      async commitTransaction(c) {
        try {
          await c.executeQuery(CompiledQuery.raw("commit"));
        } finally {
          ended();
        }
      },
      async rollbackTransaction(c) {
        try {
          await c.executeQuery(CompiledQuery.raw("rollback"));
        } finally {
          ended();
        }
      },
      async destroy() {
        if (closeOnDestroy) await pg.close();
      },
    };
  }
}
