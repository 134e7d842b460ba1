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
    const kinds = new StatementKinds();
    const cache = new LruCache<string, { generation: number; rows: unknown[] }>(CACHE_ENTRIES);
    let generation = 0;
    let inTransaction = false;
    const run = async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
      const result = await pg.query<R>(query.sql, query.parameters as unknown[]);
      return {
        rows: result.rows,
        numAffectedRows: result.affectedRows != null ? BigInt(result.affectedRows) : undefined,
      };
    };
    // Rows are handed out as copies: a caller may change what it got without changing the cache.
    const copy = <R>(rows: unknown[]) => ({ rows: rows.map((r) => ({ ...(r as object) })) as R[] });
    const connection: DatabaseConnection = {
      async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
        if (!kinds.isRepeatableRead(query.sql)) {
          try {
            return await run<R>(query);
          } finally {
            generation++;
          }
        }
        const key = inTransaction ? undefined : cacheKey(query.sql, query.parameters);
        if (key === undefined) return run<R>(query);
        const hit = cache.get(key);
        if (hit && hit.generation === generation) return copy<R>(hit.rows);
        const startedAt = generation;
        const result = await run<R>(query);
        if (generation === startedAt && result.rows.length <= CACHE_MAX_ROWS)
          cache.set(key, { generation, rows: result.rows.map((r) => ({ ...(r as object) })) });
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
        await c.executeQuery(CompiledQuery.raw("begin"));
        inTransaction = true;
      },
      async commitTransaction(c) {
        try {
          await c.executeQuery(CompiledQuery.raw("commit"));
        } finally {
          inTransaction = false;
          generation++;
        }
      },
      async rollbackTransaction(c) {
        try {
          await c.executeQuery(CompiledQuery.raw("rollback"));
        } finally {
          inTransaction = false;
          generation++;
        }
      },
      async destroy() {
        if (closeOnDestroy) await pg.close();
      },
    };
  }
}
