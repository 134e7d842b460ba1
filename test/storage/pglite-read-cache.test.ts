// The embedded database's read cache (src/storage/pglite-dialect.ts): a repeated read is answered
// from memory, but never with data older than the last write — autocommit or committed
// transaction, Kysely or raw SQL — never with a transaction's uncommitted writes, and never for
// reads that are not repeatable (the clock, random, row locks). Runs on PGlite only: the cache is
// PGlite's (PostgreSQL is shared by replicas and has none).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Kysely, sql } from "kysely";
import { SerializedPGliteDialect } from "../../src/storage/pglite-dialect.js";
import { clonePglite } from "../support/db-templates.js";

describe("PGlite read cache", () => {
  let db: Kysely<any>;
  let queries = 0;
  before(async () => {
    const pglite = await clonePglite();
    // Counts the statements that reach PGlite, so a test can tell a cached answer from a fresh one.
    const query = pglite.query.bind(pglite);
    pglite.query = ((...args: Parameters<typeof query>) => {
      queries++;
      return query(...args);
    }) as typeof pglite.query;
    db = new Kysely({ dialect: new SerializedPGliteDialect(pglite) });
    await sql`create table cache_probe (id int primary key, label text not null)`.execute(db);
    await sql`insert into cache_probe values (1, 'one')`.execute(db);
  });
  after(() => db.destroy());

  const labels = async () =>
    (await db.selectFrom("cache_probe").select(["id", "label"]).orderBy("id").execute()).map((r) => r.label);
  /** Runs `read` and says how many statements reached PGlite. */
  const reaching = async <T>(read: () => Promise<T>) => {
    const before = queries;
    const value = await read();
    return { value, reached: queries - before };
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
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const trx = db.transaction().execute(async (t) => {
      await t.insertInto("cache_probe").values({ id: 3, label: "three" }).execute();
      inside = (await t.selectFrom("cache_probe").select("label").orderBy("id").execute()).map((r) => r.label);
      await held;
    });
    // This read waits for the transaction (PGlite is one connection) and then sees its commit.
    const outside = labels();
    release();
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
