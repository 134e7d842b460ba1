// The embedded database's read cache (src/storage/pglite-dialect.ts): a repeated read is answered
// from memory, but never with data older than the last write — autocommit or committed
// transaction, Kysely or raw SQL — never with a transaction's uncommitted writes, and never for
// reads that are not repeatable (the clock, random, row locks). A cached answer does not wait for
// a transaction that holds the database. Runs on PGlite only: the cache is
// PGlite's (PostgreSQL is shared by replicas and has none).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Kysely, sql } from "kysely";
import { SerializedPGliteDialect } from "../../src/storage/pglite-dialect.js";
import { clonePglite } from "../support/db-templates.js";
import { signal, withinHang } from "../support/wait.js";

/**
 * A database through the dialect over a PGlite clone, and how many statements reached PGlite so
 * far (run by query(), or as a prepared statement), so a test can tell a cached answer from a
 * fresh one.
 */
async function countedDatabase(): Promise<{ db: Kysely<any>; statements: () => number }> {
  const pglite = await clonePglite();
  let reached = 0;
  const query = pglite.query.bind(pglite);
  pglite.query = ((...args: Parameters<typeof query>) => {
    reached++;
    return query(...args);
  }) as typeof pglite.query;
  // A prepared statement runs as protocol messages beginning with Bind ('B'); preparing one
  // (Parse) runs nothing.
  const execProtocol = pglite.execProtocol.bind(pglite);
  pglite.execProtocol = ((message: Uint8Array, ...rest: unknown[]) => {
    if (message[0] === "B".charCodeAt(0)) reached++;
    return execProtocol(message, ...(rest as []));
  }) as typeof pglite.execProtocol;
  return { db: new Kysely({ dialect: new SerializedPGliteDialect(pglite) }), statements: () => reached };
}

describe("PGlite read cache", () => {
  let db: Kysely<any>;
  let statements: () => number;
  before(async () => {
    ({ db, statements } = await countedDatabase());
    await sql`create table cache_probe (id int primary key, label text not null)`.execute(db);
    await sql`insert into cache_probe values (1, 'one')`.execute(db);
  });
  after(() => db.destroy());

  const labels = async () =>
    (await db.selectFrom("cache_probe").select(["id", "label"]).orderBy("id").execute()).map((r) => r.label);
  /** Runs `read` and says how many statements reached PGlite. */
  const reaching = async <T>(read: () => Promise<T>) => {
    const before = statements();
    const value = await read();
    return { value, reached: statements() - before };
  };

  it("answers a repeated read from memory, with rows the caller may change", async () => {
    await labels();
    const again = await reaching(labels);
    assert.deepEqual(again.value, ["one"]);
    assert.equal(again.reached, 0, "from the cache");
    const rows = await db.selectFrom("cache_probe").selectAll().execute();
    rows[0]!.label = "changed by a caller";
    assert.deepEqual(await labels(), ["one"], "the cache keeps its own copy");
  });

  it("a write (Kysely or raw SQL, autocommit) is seen by the next read", async () => {
    await labels();
    await db.insertInto("cache_probe").values({ id: 2, label: "two" }).execute();
    assert.deepEqual(await labels(), ["one", "two"]);
    await sql`update cache_probe set label = 'TWO' where id = 2`.execute(db);
    const next = await reaching(labels);
    assert.deepEqual(next.value, ["one", "TWO"]);
    assert.equal(next.reached, 1);
  });

  it("a failed write still starts a new generation", async () => {
    await labels();
    await assert.rejects(sql`insert into cache_probe values (1, 'duplicate')`.execute(db));
    assert.equal((await reaching(labels)).reached, 1);
  });

  it("inside a transaction reads see its writes; outside, only after commit; never after rollback", async () => {
    await labels();
    let inside: string[] = [];
    const wrote = signal();
    const held = signal();
    const trx = db.transaction().execute(async (t) => {
      await t.insertInto("cache_probe").values({ id: 3, label: "three" }).execute();
      inside = (await t.selectFrom("cache_probe").select("label").orderBy("id").execute()).map((r) => r.label);
      wrote.resolve();
      await held.promise;
    });
    await withinHang(wrote.promise, "the transaction's write");
    // The write made the cached answer stale: this read waits for the transaction (PGlite is one
    // connection) and then sees its commit.
    const outside = labels();
    held.resolve();
    await trx;
    assert.deepEqual(inside, ["one", "TWO", "three"]);
    assert.deepEqual(await outside, ["one", "TWO", "three"]);

    await assert.rejects(
      db.transaction().execute(async (t) => {
        await t.insertInto("cache_probe").values({ id: 4, label: "four" }).execute();
        assert.deepEqual(
          (await t.selectFrom("cache_probe").select("label").orderBy("id").execute()).map((r) => r.label),
          ["one", "TWO", "three", "four"],
        );
        throw new Error("roll back");
      }),
      /roll back/,
    );
    assert.deepEqual(await labels(), ["one", "TWO", "three"], "rolled back: not seen, not cached");
  });

  it("answers a cached read while a transaction holds the database, with what was committed", async () => {
    const committed = await labels();
    const holding = signal();
    const held = signal();
    const trx = db.transaction().execute(async (t) => {
      await sql`select 1`.execute(t);
      holding.resolve();
      await held.promise;
      await t.updateTable("cache_probe").set({ label: "ONE" }).where("id", "=", 1).execute();
    });
    try {
      await withinHang(holding.promise, "the transaction");
      // Answered from memory: it does not wait for the transaction, which waits for this test.
      const during = await withinHang(reaching(labels), "a cached read while a transaction is open");
      assert.deepEqual(during, { value: committed, reached: 0 });
    } finally {
      held.resolve();
      await trx;
    }
    assert.deepEqual(await labels(), ["ONE", ...committed.slice(1)], "the commit is seen after it");
    await sql`update cache_probe set label = 'one' where id = 1`.execute(db);
  });

  it("does not repeat reads of the clock, random numbers or row locks", async () => {
    for (const statement of [
      sql`select random() as v`,
      sql`select now() as v`,
      sql`select current_timestamp as v`,
      sql`select label as v from cache_probe where id = 1 for update`,
    ]) {
      await statement.execute(db);
      assert.equal((await reaching(() => statement.execute(db))).reached, 1, statement.compile(db).sql);
    }
  });

  it("does not keep reads as of a time (a parameter that is a Date)", async () => {
    const asOf = (t: Date) => sql`select count(*) as n from cache_probe where ${t} > '2000-01-01'`.execute(db);
    const t = new Date();
    await asOf(t);
    assert.equal((await reaching(() => asOf(t))).reached, 1);
  });

  it("keys answers by parameters", async () => {
    const byId = (id: number) => db.selectFrom("cache_probe").select("label").where("id", "=", id).execute();
    assert.deepEqual(await byId(1), [{ label: "one" }]);
    assert.deepEqual(await byId(2), [{ label: "TWO" }]);
    assert.deepEqual((await reaching(() => byId(1))).value, [{ label: "one" }]);
  });
});

// Each table has its generation: a write ends the cached reads of the tables it may change (its
// targets, the tables their triggers write, those a foreign key cascades into) and no others.
describe("PGlite read cache, table by table", () => {
  let db: Kysely<any>;
  let statements: () => number;
  before(async () => {
    ({ db, statements } = await countedDatabase());
    await sql`create table state_probe (id int primary key, label text not null)`.execute(db);
    await sql`create table journal_probe (seq int primary key, what text not null)`.execute(db);
    await sql`create table journal_child (seq int references journal_probe on delete cascade)`.execute(db);
    await sql`create table audit_probe (what text not null)`.execute(db);
    await sql`insert into state_probe values (1, 'one')`.execute(db);
  });
  after(() => db.destroy());

  const reached = async (read: () => Promise<unknown>) => {
    const before = statements();
    await read();
    return statements() - before;
  };
  const state = () => db.selectFrom("state_probe").select("label").orderBy("id").execute();
  const journal = async () =>
    (await db.selectFrom("journal_probe").select("what").orderBy("seq").execute()).map((r) => r.what);
  const children = () => sql`select count(*)::int as n from journal_child`.execute(db);
  const audit = async () =>
    (await sql<{ what: string }>`select what from audit_probe`.execute(db)).rows.map((r) => r.what);

  it("a write keeps the cached reads of other tables and ends those of its own", async () => {
    await state();
    assert.deepEqual(await journal(), []);
    await db.insertInto("journal_probe").values({ seq: 1, what: "pulled" }).execute();
    assert.equal(await reached(state), 0, "the state read stays cached");
    assert.deepEqual(await journal(), ["pulled"], "the journal read sees the write");
    await sql`with e as (insert into journal_probe values (2, 'pushed') returning seq)
      insert into "journal_child" select seq from e`.execute(db);
    assert.equal(await reached(state), 0);
    assert.deepEqual(await journal(), ["pulled", "pushed"]);
    await children();
    await db.deleteFrom("journal_probe").where("seq", "=", 2).execute(); // cascades into journal_child
    assert.equal(await reached(children), 1, "a cascade ends the reads of the table it changes");
    assert.equal(await reached(state), 0);
  });

  it("a transaction keeps the reads of tables it did not write; its commit ends the others'", async () => {
    await state();
    await journal();
    await db.transaction().execute(async (t) => {
      await sql`set local synchronous_commit = off`.execute(t);
      await t.insertInto("journal_probe").values({ seq: 3, what: "in a transaction" }).execute();
      await sql`savepoint inner_step`.execute(t);
      await t.insertInto("journal_child").values({ seq: 3 }).execute();
      await sql`release savepoint inner_step`.execute(t);
    });
    assert.equal(await reached(state), 0);
    assert.deepEqual(await journal(), ["pulled", "in a transaction"]);
  });

  it("a write through a trigger ends the reads of the table the trigger writes, also one made after the first use", async () => {
    assert.deepEqual(await audit(), []);
    await sql`create function audit_state() returns trigger language plpgsql as $$
      begin insert into audit_probe values (new.label); return new; end $$`.execute(db);
    await sql`create trigger state_audit after update on state_probe for each row execute function audit_state()`.execute(
      db,
    );
    await audit();
    await journal();
    await db.updateTable("state_probe").set({ label: "ONE" }).where("id", "=", 1).execute();
    assert.deepEqual(await audit(), ["ONE"], "the trigger's table was seen to change");
    assert.deepEqual(await state(), [{ label: "ONE" }]);
    assert.equal(await reached(journal), 0, "an unrelated table's read stays cached");
  });

  it("upserts and row locks inside a write name their tables; a table the catalog does not know ends every read", async () => {
    await state();
    await sql`insert into journal_probe values (5, 'again') on conflict (seq) do update set what = 'upserted'`.execute(
      db,
    );
    await sql`insert into journal_probe values (5, 'again') on conflict (seq) do update set what = 'upserted'`.execute(
      db,
    );
    assert.equal(await reached(state), 0);
    assert.deepEqual((await journal()).at(-1), "upserted");
    await sql`update journal_probe set what = 'locked' where seq in (select seq from journal_probe where seq = 5 for update)`.execute(
      db,
    );
    assert.equal(await reached(state), 0);
    assert.deepEqual((await journal()).at(-1), "locked");
    await sql`create temporary table scratch (n int)`.execute(db);
    await state();
    await sql`insert into scratch values (1)`.execute(db);
    assert.equal(await reached(state), 1, "a write the catalog cannot place moves everything");
  });

  it("a read of a view or of the schema's own function depends on every write", async () => {
    await sql`create view state_view as select label from state_probe`.execute(db);
    await sql`create function state_count() returns bigint language sql stable as $$ select count(*) from state_probe $$`.execute(
      db,
    );
    const view = () => sql`select label from state_view`.execute(db);
    const counted = () => sql<{ n: string }>`select state_count() as n`.execute(db);
    await view();
    await counted();
    assert.equal(await reached(view), 0, "cached while nothing is written");
    await sql`insert into state_probe values (2, 'two')`.execute(db);
    assert.deepEqual((await view()).rows, [{ label: "ONE" }, { label: "two" }]);
    assert.equal(Number((await counted()).rows[0]!.n), 2);
    // a write that calls a function of ours may write anything: every read ends
    await sql`create function add_audit(what text) returns text language sql as $$ insert into audit_probe values (what) returning what $$`.execute(
      db,
    );
    const before = await audit();
    await journal();
    await sql`insert into journal_probe select 7, add_audit('through a function')`.execute(db);
    assert.deepEqual(await audit(), [...before, "through a function"]);
    assert.equal(await reached(journal), 1);
  });
});
