// Operations every aggregate's table shares: get by uid, read-modify-write under a row lock,
// and delete that refuses while anything still references the row.
// Generic over a module's tables (DB): any table with a text `uid` primary key qualifies.
import {
  CompiledQuery,
  sql,
  type Kysely,
  type RawBuilder,
  type Selectable,
  type SelectQueryBuilder,
  type Transaction,
  type Updateable,
} from "kysely";
import type { Freshness } from "../core/service.js";
import { FOREIGN_KEY_VIOLATION, sqlState } from "./errors.js";
import type { DeleteResult } from "./results.js";

export type { DeleteResult };

/** The untyped view the generic helpers query through (their callers' types stay exact). */
type AnyDb = Kysely<any>;

/** The column a read's freshness probe is selected as (never a table's own). */
const FRESHNESS_COLUMN = "__freshness";

/** The probe to select beside a read's data, when the call has one (see CallContext.freshness). */
function freshnessProbe(freshness: Freshness | undefined): RawBuilder<unknown> | undefined {
  return freshness?.probe as RawBuilder<unknown> | undefined;
}

/** Reports the probe's value of a row read with `freshnessProbe` and returns the row without it. */
export function takeFreshness<Row extends Record<string, unknown>>(row: Row, freshness: Freshness | undefined): Row {
  if (!freshness) return row;
  const { [FRESHNESS_COLUMN]: seen, ...data } = row;
  freshness.report(seen);
  return data as Row;
}

/** Selects the call's probe, if any, as the freshness column (see takeFreshness). */
export function withFreshnessProbe<QB extends SelectQueryBuilder<any, any, any>>(
  query: QB,
  freshness: Freshness | undefined,
): QB {
  return withProbe(query, freshnessProbe(freshness));
}

function withProbe<QB extends SelectQueryBuilder<any, any, any>>(
  query: QB,
  probe: RawBuilder<unknown> | undefined,
): QB {
  return probe ? (query.select(probe.as(FRESHNESS_COLUMN)) as QB) : query;
}

/**
 * The row with this uid, or undefined. With the call's `freshness`, its probe is read in the same
 * statement (so an authorization from cached grants is confirmed without another round trip).
 */
export async function getByUid<DB, T extends keyof DB & string>(
  db: Kysely<DB> | Transaction<DB>,
  table: T,
  uid: string,
  freshness?: Freshness,
): Promise<Selectable<DB[T]> | undefined> {
  const { rows } = await (db as AnyDb).executeQuery<Record<string, unknown>>(
    CompiledQuery.raw(getByUidSql(db as AnyDb, table, freshnessProbe(freshness)), [uid]),
  );
  const row = rows[0];
  return (row && takeFreshness(row, freshness)) as Selectable<DB[T]> | undefined;
}

/**
 * The statement of getByUid for a table, with or without a probe, built by Kysely once: the
 * hottest read of all (every Get) then skips building and compiling the same query each time.
 */
const getByUidStatements = new WeakMap<object, Map<string, string>>();
const probeIds = new WeakMap<object, number>();
let probeCount = 0;
/** Probes are long-lived expressions (the authorizer has one): each gets a number for the key. */
function probeId(probe: object): number {
  let id = probeIds.get(probe);
  if (id === undefined) probeIds.set(probe, (id = ++probeCount));
  return id;
}
function getByUidSql(db: AnyDb, table: string, probe: RawBuilder<unknown> | undefined): string {
  // Keyed by the dialect's adapter (one per Kysely instance, shared by its transactions).
  const compiler = db.getExecutor().adapter as object;
  let byTable = getByUidStatements.get(compiler);
  if (!byTable) getByUidStatements.set(compiler, (byTable = new Map()));
  const key = probe ? `${table}\u0000${probeId(probe)}` : table;
  let text = byTable.get(key);
  if (text === undefined) {
    const query = withProbe(db.selectFrom(table).selectAll().where("uid", "=", ""), probe);
    const compiled = query.compile();
    if (compiled.parameters.length !== 1) throw new Error(`getByUid(${table}): expected one parameter`);
    byTable.set(key, (text = compiled.sql));
  }
  return text;
}

/**
 * Locks the row, lets `change` compute the new column values (it may throw to abort), writes
 * them. Undefined when the row does not exist.
 */
export async function updateByUid<DB, T extends keyof DB & string>(
  db: Kysely<DB>,
  table: T,
  uid: string,
  change: (current: Selectable<DB[T]>, trx: Transaction<DB>) => Promise<Updateable<DB[T]>> | Updateable<DB[T]>,
): Promise<Selectable<DB[T]> | undefined> {
  return db.transaction().execute(async (trx) => {
    const anyTrx = trx as unknown as Transaction<any>;
    const name: string = table;
    const current = (await anyTrx
      .selectFrom(name)
      .selectAll()
      .where("uid", "=", uid)
      .forUpdate()
      .executeTakeFirst()) as Selectable<DB[T]> | undefined;
    if (!current) return undefined;
    const values = await change(current, trx);
    const updated = anyTrx
      .updateTable(name)
      .set(values as never)
      .where("uid", "=", uid)
      .returningAll()
      .executeTakeFirstOrThrow();
    return updated as Promise<Selectable<DB[T]>>;
  });
}

interface Dependent {
  table: string;
  column: string;
}

// Which tables reference which, read from the catalog: the schema is fixed once migrations
// have run, and a dependent missing here would still be stopped by its foreign key.
const dependentsCache = new WeakMap<object, Map<string, Promise<Dependent[]>>>();

function dependentsOf(db: AnyDb, table: string): Promise<Dependent[]> {
  let perTable = dependentsCache.get(db);
  if (!perTable) dependentsCache.set(db, (perTable = new Map()));
  let found = perTable.get(table);
  if (!found) {
    found = sql<Dependent>`
      select cl.relname::text as table, a.attname::text as column
      from pg_constraint c
      join pg_class cl on cl.oid = c.conrelid
      join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
      where c.contype = 'f' and c.confrelid = ${table}::regclass and c.confdeltype in ('a', 'r')
      order by cl.relname, a.attname`
      .execute(db)
      .then((r) => r.rows);
    perTable.set(table, found);
  }
  return found;
}

/** "child role bindings" for a parent link, "role bindings" for any other reference. */
function label(d: Dependent): string {
  const name = d.table.replace(/_/g, " ");
  return d.column === "parent_uid" ? `child ${name}` : name;
}

async function blockers(db: AnyDb | Transaction<any>, dependents: Dependent[], uid: string): Promise<string[]> {
  if (dependents.length === 0) return [];
  const checks = dependents.map(
    (d, i) =>
      sql`select ${i}::int as i where exists (select 1 from ${sql.table(d.table)} where ${sql.ref(d.column)} = ${uid})`,
  );
  const result = await sql<{ i: number }>`${sql.join(checks, sql` union all `)}`.execute(db);
  return [...new Set(result.rows.map((r) => label(dependents[r.i]!)))];
}

/**
 * Deletes a row unless something still references it. The row lock (FOR UPDATE) conflicts with
 * the FOR KEY SHARE lock a concurrent insert of a referencing row takes, so the check cannot race
 * with a new reference; the foreign keys stand behind it regardless.
 */
export async function deleteByUid<DB>(
  typed: Kysely<DB>,
  typedTable: keyof DB & string,
  uid: string,
): Promise<DeleteResult> {
  const db = typed as AnyDb;
  const table: string = typedTable;
  const dependents = await dependentsOf(db, table);
  try {
    return await db.transaction().execute(async (trx) => {
      const current = await trx.selectFrom(table).select("uid").where("uid", "=", uid).forUpdate().executeTakeFirst();
      if (!current) return { kind: "not_found" } as const;
      const blockedBy = await blockers(trx, dependents, uid);
      if (blockedBy.length > 0) return { kind: "not_empty", blockedBy } as const;
      await trx.deleteFrom(table).where("uid", "=", uid).execute();
      return { kind: "deleted" } as const;
    });
  } catch (err) {
    if (sqlState(err) !== FOREIGN_KEY_VIOLATION) throw err;
    const blockedBy = await blockers(db, dependents, uid);
    return { kind: "not_empty", blockedBy: blockedBy.length ? blockedBy : ["dependent resources"] };
  }
}
