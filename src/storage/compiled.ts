// Typed queries built and compiled by Kysely once, then run with new parameter values each time.
// A hot read answered from PGlite's read cache costs less than building and compiling its query
// again (getByUid in table.ts does the same for its one statement); the query is still written
// with the query builder over the module's table types, so its columns and results stay typed.
import { CompiledQuery, type Compilable, type Kysely } from "kysely";

/** Where a parameter goes while the query is built once: replaced by the call's value at each run. */
class Slot {
  constructor(readonly index: number) {}
}

interface Statement {
  sql: string;
  /** for each parameter of the statement: the call's argument it takes, or a value of the query's own */
  parameters: readonly (Slot | { value: unknown })[];
}

/**
 * A query that `build` makes from its arguments, compiled on first use (per database dialect) and
 * then run with the arguments of each call. `build` must make the same statement whatever the
 * values: an argument may only be used as a value (a comparison, a limit), never decide the
 * statement's shape (write one query per shape instead).
 */
export function compiledOnce<DB, Args extends unknown[], Row>(
  build: (db: Kysely<DB>, ...args: Args) => Compilable<Row>,
): (db: Kysely<DB>, ...args: Args) => Promise<Row[]> {
  // Keyed by the dialect's adapter: one per Kysely instance, shared by its transactions.
  const statements = new WeakMap<object, Statement>();
  return async (db, ...args) => {
    const adapter = db.getExecutor().adapter as object;
    let statement = statements.get(adapter);
    if (!statement) statements.set(adapter, (statement = compile(db, build, build.length - 1)));
    const parameters = statement.parameters.map((p) => (p instanceof Slot ? args[p.index] : p.value));
    const { rows } = await db.executeQuery<Row>(CompiledQuery.raw(statement.sql, parameters));
    return rows;
  };
}

function compile<DB, Args extends unknown[], Row>(
  db: Kysely<DB>,
  build: (db: Kysely<DB>, ...args: Args) => Compilable<Row>,
  arity: number,
): Statement {
  const slots = Array.from({ length: arity }, (_, i) => new Slot(i));
  const compiled = build(db, ...(slots as unknown as Args)).compile();
  const parameters = compiled.parameters.map((p) => (p instanceof Slot ? p : { value: p }));
  const used = new Set(parameters.flatMap((p) => (p instanceof Slot ? [p.index] : [])));
  if (used.size !== arity) throw new Error(`compiledOnce: ${arity - used.size} argument(s) not used as a value`);
  return { sql: compiled.sql, parameters };
}
