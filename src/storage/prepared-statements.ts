// Server-side prepared statements on PostgreSQL. node-postgres prepares a statement once per
// connection when a query has a name; PostgreSQL then skips parsing and (after a few runs)
// planning it. Measured here: a primary-key select cost PostgreSQL ~70 µs of CPU unnamed and
// ~35 µs named, on a machine where the database shares the cores with the server.
// Each distinct SQL text gets a name; texts beyond `capacity` (e.g. IN lists of many lengths)
// run unnamed, so neither side holds an unbounded number of statements.
import pg from "pg";

/** SQL that is worth preparing: plain data statements (not transaction control or DDL). */
const PREPARABLE = /^\s*(select|insert|update|delete|with)\b/i;

/** A prepared statement gone stale: its result type changed (a migration), or the server dropped it. */
function isStaleStatement(err: { code?: string; message?: string } | undefined): boolean {
  return err?.code === "26000" || (err?.code === "0A000" && /cached plan/.test(err.message ?? ""));
}

const PATCHED = Symbol("bulwark.preparedStatements");

type Query = (config: unknown, values?: unknown, callback?: unknown) => unknown;

export class PreparedStatements {
  #names = new Map<string, string>();
  /** bumped when a statement went stale: every connection prepares under new names from then on */
  #generation = 0;

  constructor(readonly capacity = 1000) {}

  /** The statement name for this SQL text, or undefined to run it unnamed. */
  nameOf(text: string): string | undefined {
    let name = this.#names.get(text);
    if (name === undefined) {
      if (this.#names.size >= this.capacity || !PREPARABLE.test(text)) return undefined;
      name = `bulwark_${this.#generation}_${this.#names.size}`;
      this.#names.set(text, name);
    }
    return name;
  }

  /** Forgets every name (the statements they named are stale). */
  reset(): void {
    this.#generation++;
    this.#names = new Map();
  }

  /** Makes every client of `pool` run preparable queries as named statements. */
  attach(pool: pg.Pool): void {
    pool.on("connect", (client) => this.patch(client));
  }

  private patch(client: pg.PoolClient): void {
    const target = client as unknown as { query: Query; [PATCHED]?: true };
    if (target[PATCHED]) return;
    target[PATCHED] = true;
    const query = target.query.bind(client) as Query;
    target.query = (config, values, callback) => {
      // Kysely calls query(text, parameters) and awaits the promise; anything else passes through.
      const name = typeof config === "string" && Array.isArray(values) && !callback ? this.nameOf(config) : undefined;
      if (name === undefined) return query(config, values, callback);
      const run = (n: string) =>
        new Promise<unknown>((resolve, reject) => {
          // A Query made from the text, named afterwards: given a config object instead, pg
          // copies it property by property and wraps its promise once more (~4 µs a query).
          const named: pg.Query & { name?: string } = new pg.Query(
            config as string,
            values as unknown[],
            (err: Error | undefined, result: unknown) => {
              if (!err) return resolve(result);
              // As pg does: a stack that leads back here, not to the socket's read.
              Error.captureStackTrace(err);
              reject(err);
            },
          );
          named.name = n;
          query(named);
        });
      return run(name).catch((err: { code?: string; message?: string }) => {
        if (!isStaleStatement(err)) throw err;
        // Prepared before a schema change (or dropped by the server): prepare it again, once.
        // Inside a transaction the error has aborted it, so the retry fails too and the caller sees that.
        this.reset();
        return run(this.nameOf(config as string)!);
      });
    };
  }
}
