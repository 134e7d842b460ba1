// Every statement a database sends, observed: metrics time them and traces give each a span.
// It works below Kysely, in the driver, so the ambient transaction's begin/commit/savepoints and
// every repository's statements are seen alike. Observers see the SQL text only, never the
// parameters (they hold tokens, emails, secrets).
import type { DatabaseConnection, Driver, Kysely, CompiledQuery, QueryResult } from "kysely";
import { WrappedDialect } from "./wrapped-dialect.js";

/**
 * Called as a statement is sent; the function it returns (if any) is called once the statement
 * answered or failed. Observers must not throw.
 */
export type QueryObserver = (sql: string) => ((error?: unknown) => void) | void;

class Observers {
  readonly list: QueryObserver[] = [];
  /** The finishers of every observer for one statement (none: nothing observes). */
  start(sql: string): Array<(error?: unknown) => void> | undefined {
    if (this.list.length === 0) return undefined;
    const done: Array<(error?: unknown) => void> = [];
    for (const observer of this.list) {
      const finish = observer(sql);
      if (finish) done.push(finish);
    }
    return done;
  }
}

function finishAll(done: Array<(error?: unknown) => void> | undefined, error?: unknown): void {
  if (done) for (const finish of done) finish(error);
}

class ObservedConnection implements DatabaseConnection {
  constructor(
    readonly raw: DatabaseConnection,
    private readonly observers: Observers,
  ) {}
  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const done = this.observers.start(query.sql);
    if (!done) return this.raw.executeQuery<R>(query);
    try {
      const result = await this.raw.executeQuery<R>(query);
      finishAll(done);
      return result;
    } catch (err) {
      finishAll(done, err);
      throw err;
    }
  }
  async *streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    const done = this.observers.start(query.sql);
    let failed = false;
    try {
      yield* this.raw.streamQuery<R>(query, chunkSize);
    } catch (err) {
      failed = true;
      finishAll(done, err);
      throw err;
    } finally {
      // Also when the consumer stops early (a `break` returns the generator).
      if (!failed) finishAll(done);
    }
  }
}

class ObservedDriver implements Driver {
  readonly #wrapped = new WeakMap<DatabaseConnection, ObservedConnection>();
  constructor(
    private readonly inner: Driver,
    private readonly observers: Observers,
  ) {
    // Savepoints only where the inner driver has them (Kysely falls back otherwise).
    if (inner.savepoint) this.savepoint = (c, name, compile) => inner.savepoint!(c, name, compile);
    if (inner.rollbackToSavepoint)
      this.rollbackToSavepoint = (c, name, compile) => inner.rollbackToSavepoint!(c, name, compile);
    if (inner.releaseSavepoint) this.releaseSavepoint = (c, name, compile) => inner.releaseSavepoint!(c, name, compile);
  }
  init() {
    return this.inner.init();
  }
  async acquireConnection(): Promise<DatabaseConnection> {
    const raw = await this.inner.acquireConnection();
    let wrapped = this.#wrapped.get(raw);
    if (!wrapped) this.#wrapped.set(raw, (wrapped = new ObservedConnection(raw, this.observers)));
    return wrapped;
  }
  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection(connection instanceof ObservedConnection ? connection.raw : connection);
  }
  beginTransaction(connection: DatabaseConnection, settings: Parameters<Driver["beginTransaction"]>[1]) {
    return this.inner.beginTransaction(connection, settings);
  }
  commitTransaction(connection: DatabaseConnection) {
    return this.inner.commitTransaction(connection);
  }
  rollbackTransaction(connection: DatabaseConnection) {
    return this.inner.rollbackTransaction(connection);
  }
  savepoint?: Driver["savepoint"];
  rollbackToSavepoint?: Driver["rollbackToSavepoint"];
  releaseSavepoint?: Driver["releaseSavepoint"];
  destroy() {
    return this.inner.destroy();
  }
}

/** A dialect whose statements its database's observers see (`observeQueries`). */
export class ObservedDialect extends WrappedDialect {
  readonly observers = new Observers();
  createDriver(): Driver {
    return new ObservedDriver(this.inner.createDriver(), this.observers);
  }
}

const observed = new WeakMap<object, ObservedDialect>();

/** Records which observed dialect a database was opened with (openDatabase does, for every database). */
export function registerObservedDialect(db: Kysely<any>, dialect: ObservedDialect): void {
  observed.set(db, dialect);
}

/** Adds an observer of every statement `db` sends; returns its removal. */
export function observeQueries(db: Kysely<any>, observer: QueryObserver): () => void {
  const dialect = observed.get(db);
  if (!dialect) throw new Error("this database was not opened by openDatabase: its statements cannot be observed");
  dialect.observers.list.push(observer);
  return () => {
    const i = dialect.observers.list.indexOf(observer);
    if (i >= 0) dialect.observers.list.splice(i, 1);
  };
}
