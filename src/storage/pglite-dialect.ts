// A Kysely dialect for PGlite that serializes connections. PGlite is a single connection, so
// a transaction must hold it exclusively: kysely-pglite 0.6.1 does not, and loses concurrent
// autocommit writes when another request's transaction rolls back (seen when this was written).
import type { PGlite } from "@electric-sql/pglite";
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

export class SerializedPGliteDialect implements Dialect {
  constructor(
    private readonly pglite: PGlite,
    private readonly closeOnDestroy = true,
  ) {}

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
    const mutex = new Mutex();
    let release: (() => void) | undefined;
    const connection: DatabaseConnection = {
      async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
        const result = await pg.query<R>(query.sql, query.parameters as unknown[]);
        return {
          rows: result.rows,
          numAffectedRows: result.affectedRows != null ? BigInt(result.affectedRows) : undefined,
        };
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
      },
      async commitTransaction(c) {
        await c.executeQuery(CompiledQuery.raw("commit"));
      },
      async rollbackTransaction(c) {
        await c.executeQuery(CompiledQuery.raw("rollback"));
      },
      async destroy() {
        if (closeOnDestroy) await pg.close();
      },
    };
  }
}
