// One transaction around code that does not know it: `withinTransaction(db, fn)` runs `fn` with
// every statement any repository sends through `db` — its own transactions included, which
// become savepoints — on one connection, in one transaction, committed when `fn` resolves and
// rolled back when it throws. The events outbox uses it so an RPC's change and the event that
// records it commit together, whatever the handler's repositories do inside.
//
// It works below Kysely, in the driver (every dialect openDatabase makes is wrapped): while a
// scope is open, acquiring a connection from the same async context answers the scope's own.
// Work an RPC starts and leaves running after the scope closed (a fire-and-forget refresh) gets
// an ordinary connection again.
//
// On a driver that pipelines (node-postgres in pipeline mode), a transaction's `begin` is sent
// and not waited for: the first statement follows it in the same round trip. A scope's last
// statements (`beforeCommit`: the outbox's event) go out together with its `commit`. A created
// group then costs two round trips to PostgreSQL, event included, instead of four.
import { AsyncLocalStorage } from "node:async_hooks";
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from "kysely";
import { WrappedDialect } from "./wrapped-dialect.js";

interface Scope {
  readonly driver: AmbientDriver;
  /** what repositories get from acquireConnection while the scope is open */
  readonly connection: ScopeConnection;
  open: boolean;
  /**
   * the open savepoints of nested transactions, innermost last (they nest; siblings never run at
   * once): each one's name ("" for one begun before any statement ran in the scope, which needs
   * no savepoint) and how many `last` statements there were as it began (a rollback to it drops
   * the ones registered since)
   */
  savepoints: Array<{ name: string; lastCount: number }>;
  counter: number;
  /** run once the transaction committed */
  committed: Array<() => void>;
  /** statements to send last, with the commit (beforeCommit), and what gets their results */
  last: Array<{ query: CompiledQuery; then: (result: QueryResult<unknown>) => void }>;
}

class ScopeConnection implements DatabaseConnection {
  /** whether a statement ran since the scope's transaction began */
  used = false;
  /** the scope this connection is: found through it, not the async context (which a closed scope may have left) */
  scope!: Scope;
  constructor(readonly raw: DatabaseConnection) {}
  // A transaction begun in the scope and left running after it closed must not send statements
  // on a connection already committed and returned to the pool (someone else's session by then).
  #check() {
    if (!this.scope.open) throw new Error("a statement ran on a transaction scope that already closed");
    this.used = true;
  }
  executeQuery<R>(query: CompiledQuery) {
    this.#check();
    return this.raw.executeQuery<R>(query);
  }
  streamQuery<R>(query: CompiledQuery, chunkSize?: number) {
    this.#check();
    return this.raw.streamQuery<R>(query, chunkSize);
  }
}

const scopes = new AsyncLocalStorage<Scope>();
/** scopes whose `fn` has not settled yet, across every driver */
let runningScopes = 0;

/**
 * Runs `fn` with `scope` as its async context's store. An enabled AsyncLocalStorage makes Node 20
 * run a hook for every promise the process creates, anywhere (+27% CPU per authenticated GET, which
 * never opens a scope): the storage is disabled again whenever no scope is running. Work a scope
 * left running then finds no store, as it finds a closed scope's: an ordinary connection either way.
 */
async function runInScope<T>(scope: Scope, fn: () => Promise<T>): Promise<T> {
  runningScopes++;
  try {
    return await scopes.run(scope, fn);
  } finally {
    if (--runningScopes === 0) scopes.disable();
  }
}

class AmbientDriver implements Driver {
  /** Kysely initializes a driver on its first statement; a scope's own connection needs that done */
  initialized = false;
  /** begins sent and not answered yet, of transactions outside scopes (pipelining drivers) */
  readonly #begun = new WeakMap<DatabaseConnection, Promise<void>>();
  constructor(
    private readonly inner: Driver,
    /** whether statements sent without waiting share a round trip (node-postgres in pipeline mode) */
    private readonly pipelines: boolean,
  ) {}

  /**
   * A transaction's end (`end`, its commit) together with its begin's answer: if the begin
   * failed, so does the commit. That happens only when the connection failed, which fails the
   * statements between them too.
   */
  async #ended(connection: DatabaseConnection, end: Promise<void>): Promise<void> {
    const begun = this.#begun.get(connection);
    this.#begun.delete(connection);
    await firstFailure([begun ?? Promise.resolve(), end]);
  }

  #scope(): Scope | undefined {
    const scope = scopes.getStore();
    return scope?.open && scope.driver === this ? scope : undefined;
  }

  async init() {
    await this.inner.init();
    this.initialized = true;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    return this.#scope()?.connection ?? this.inner.acquireConnection();
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    if (connection instanceof ScopeConnection) return;
    return this.inner.releaseConnection(connection);
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    if (!(connection instanceof ScopeConnection)) {
      if (!this.pipelines) return this.inner.beginTransaction(connection, settings);
      // Sent, not waited for: the transaction's first statement follows it in the same round trip.
      this.#begun.set(connection, unawaited(this.inner.beginTransaction(connection, settings)));
      return;
    }
    const scope = connection.scope;
    if (!scope.open) throw new Error("a transaction began on a closed transaction scope");
    // The first thing a scope does (an RPC's one repository transaction, typically): rolling it
    // back is rolling back the whole, still empty, transaction, so no savepoint is sent (two
    // round trips fewer for most recorded RPCs).
    if (!connection.used && scope.savepoints.length === 0) {
      scope.savepoints.push({ name: "", lastCount: scope.last.length });
      return;
    }
    const name = `nested_${++scope.counter}`;
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${name}`));
    scope.savepoints.push({ name, lastCount: scope.last.length });
  }

  // The savepoint is forgotten only once released: a failed release is followed by Kysely's
  // rollback, which must roll back to that same savepoint.
  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    if (!(connection instanceof ScopeConnection))
      return this.#ended(connection, this.inner.commitTransaction(connection));
    const savepoints = connection.scope.savepoints;
    const { name } = savepoints.at(-1)!;
    if (name !== "") await connection.executeQuery(CompiledQuery.raw(`release savepoint ${name}`));
    savepoints.pop();
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (!(connection instanceof ScopeConnection)) {
      this.#begun.delete(connection); // its failure, if it failed, is the failure being rolled back
      return this.inner.rollbackTransaction(connection);
    }
    const scope = connection.scope;
    const savepoints = scope.savepoints;
    const { name, lastCount } = savepoints.at(-1)!;
    // What was meant to be sent last from inside the savepoint is rolled back with it.
    scope.last.length = lastCount;
    try {
      // A transaction left running after its scope closed (its statement was refused): the scope's
      // own end settled its transaction, and the connection went back to the pool, someone else's
      // session by now, where neither a rollback nor a new begin may go.
      if (!connection.scope.open) return;
      if (name === "") {
        // Back to the state before any statement: the transaction rolled back and begun again.
        await this.inner.rollbackTransaction(connection.raw);
        await this.inner.beginTransaction(connection.raw, {});
        connection.used = false;
        return;
      }
      await connection.executeQuery(CompiledQuery.raw(`rollback to savepoint ${name}`));
    } finally {
      savepoints.pop();
    }
  }

  /** Runs `fn` in a savepoint of the open scope: its failure leaves the scope's transaction usable. */
  async recoverable<T>(scope: Scope, fn: () => Promise<T>): Promise<T> {
    await this.beginTransaction(scope.connection, {});
    let result: T;
    try {
      result = await fn();
    } catch (err) {
      await this.rollbackTransaction(scope.connection);
      throw err;
    }
    await this.commitTransaction(scope.connection);
    return result;
  }

  savepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler["compileQuery"]) {
    return this.inner.savepoint!(unwrap(connection), name, compile);
  }
  rollbackToSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler["compileQuery"]) {
    return this.inner.rollbackToSavepoint!(unwrap(connection), name, compile);
  }
  releaseSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler["compileQuery"]) {
    return this.inner.releaseSavepoint!(unwrap(connection), name, compile);
  }

  destroy() {
    return this.inner.destroy();
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    const current = this.#scope();
    if (current) return fn();
    const raw = await this.inner.acquireConnection();
    const scope: Scope = {
      driver: this,
      connection: new ScopeConnection(raw),
      open: true,
      savepoints: [],
      counter: 0,
      committed: [],
      last: [],
    };
    scope.connection.scope = scope;
    let result: T;
    let lastResults: Array<QueryResult<unknown>>;
    try {
      // Pipelining, the begin is not waited for: `fn`'s first statement follows it.
      const begun = this.pipelines
        ? unawaited(this.inner.beginTransaction(raw, {}))
        : await this.inner.beginTransaction(raw, {});
      try {
        result = await runInScope(scope, fn);
      } catch (err) {
        scope.open = false;
        await this.inner.rollbackTransaction(raw).catch(() => {});
        throw err;
      }
      scope.open = false;
      try {
        lastResults = await this.#commitWithLast(raw, scope, begun);
      } catch (err) {
        // Pipelined, a failed last statement made PostgreSQL answer the commit with a rollback;
        // otherwise nothing was committed yet. Either way the transaction must not stay open.
        await this.inner.rollbackTransaction(raw).catch(() => {});
        throw err;
      }
    } finally {
      scope.open = false;
      await this.inner.releaseConnection(raw);
    }
    // after the release: a driver may answer a commit only once it is durable (storage/wal-sync.ts)
    for (const then of scope.committed) then();
    scope.last.forEach((last, i) => last.then(lastResults[i]!));
    return result;
  }

  /** Sends the scope's last statements and its commit: in one round trip when pipelining. */
  async #commitWithLast(
    raw: DatabaseConnection,
    scope: Scope,
    begun: Promise<void> | void,
  ): Promise<Array<QueryResult<unknown>>> {
    if (!this.pipelines) {
      const results: Array<QueryResult<unknown>> = [];
      for (const last of scope.last) results.push(await raw.executeQuery(last.query));
      await this.inner.commitTransaction(raw);
      return results;
    }
    // Each call below hands its statement to the driver before it returns (nothing awaits on the
    // way down), so they go out in this order, without waiting for each other's answers.
    const results = scope.last.map((last) => raw.executeQuery(last.query));
    const commit = this.inner.commitTransaction(raw);
    await firstFailure([begun ?? Promise.resolve(), ...results, commit]);
    return Promise.all(results);
  }
}

/** `promise`, with its failure marked handled until someone awaits it. */
function unawaited<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}

/** Waits for every promise; throws the first failure in their order (not in time). */
async function firstFailure(promises: ReadonlyArray<Promise<unknown>>): Promise<void> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((s) => s.status === "rejected");
  if (failed) throw failed.reason;
}

function unwrap(connection: DatabaseConnection): DatabaseConnection {
  return connection instanceof ScopeConnection ? connection.raw : connection;
}

/** A dialect whose driver can run code in one transaction it does not know about. */
export class AmbientTransactionDialect extends WrappedDialect {
  driver: AmbientDriver | undefined;
  constructor(
    inner: Dialect,
    /** whether the driver pipelines: statements sent without waiting share a round trip */
    private readonly pipelines = false,
  ) {
    super(inner);
  }
  createDriver(): Driver {
    return (this.driver = new AmbientDriver(this.inner.createDriver(), this.pipelines));
  }
}

const dialects = new WeakMap<object, AmbientTransactionDialect>();

/** Records which dialect a database was opened with (openDatabase does, for every database). */
export function registerAmbientDialect(db: Kysely<any>, dialect: AmbientTransactionDialect): void {
  dialects.set(db, dialect);
}

/**
 * Runs `fn` in one transaction on `db`: every statement sent through `db` from `fn`'s async
 * context joins it (a nested `db.transaction()` is a savepoint); commits when `fn` resolves,
 * rolls back when it throws. Inside an open scope it only runs `fn`.
 */
export async function withinTransaction<T>(db: Kysely<any>, fn: () => Promise<T>): Promise<T> {
  const dialect = dialects.get(db);
  if (!dialect) throw new Error("this database was not opened by openDatabase: no ambient transactions");
  if (!dialect.driver?.initialized) {
    // Kysely makes and initializes the driver on the first statement.
    await db.selectNoFrom((eb) => eb.lit(1).as("one")).execute();
  }
  return dialect.driver!.run(fn);
}

/**
 * Runs `then` once what the calling code wrote is committed: at the end of the open transaction
 * scope, or now outside one. Never after a rollback. `then` must not throw.
 */
export function afterCommit(then: () => void): void {
  const scope = scopes.getStore();
  if (scope?.open) scope.committed.push(then);
  else then();
}

/**
 * Runs `fn` so that its failure leaves the caller's transaction usable: inside an open scope, in
 * a savepoint (PostgreSQL aborts a whole transaction on a failed statement); outside one, as is.
 * For code that catches a storage failure and goes on using the database (answering an existing
 * resource after a create conflicted).
 */
export function recoverable<T>(fn: () => Promise<T>): Promise<T> {
  const scope = scopes.getStore();
  return scope?.open ? scope.driver.recoverable(scope, fn) : fn();
}

/**
 * Sends `query` as the open transaction scope's last statement: after everything its code ran
 * and, when the driver pipelines, in one round trip with the commit. `then` gets its result once
 * the transaction committed (never after a rollback; after the scope's afterCommit callbacks); it
 * must not throw. A savepoint rolled back also drops what was registered inside it. Outside a
 * scope this throws: nothing would commit it.
 */
export function beforeCommit(query: CompiledQuery, then: (result: QueryResult<unknown>) => void): void {
  const scope = scopes.getStore();
  if (!scope?.open) throw new Error("beforeCommit outside an open transaction scope");
  scope.last.push({ query, then });
}
