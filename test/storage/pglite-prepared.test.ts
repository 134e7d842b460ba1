// Prepared statements on PGlite (src/storage/pglite-prepared.ts): each statement text is parsed
// once (a statement without parameters it does not prepare is one call), and every run answers
// exactly what PGlite's own query() answers — rows, types, counts and errors — alone, side by side
// with other statements on the one connection, and across a change of the schema. Runs on PGlite
// only (the PostgreSQL backend's are test/storage/prepared-statements).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Kysely, sql } from "kysely";
import type { PGlite } from "@electric-sql/pglite";
import { PGlitePreparedStatements } from "../../src/storage/pglite-prepared.js";
import { SerializedPGliteDialect } from "../../src/storage/pglite-dialect.js";
import { clonePglite } from "../support/db-templates.js";

/** The first byte of each protocol message a PGlite was sent through execProtocol, in order. */
function recordMessages(pglite: PGlite): string[] {
  const sent: string[] = [];
  const execProtocol = pglite.execProtocol.bind(pglite);
  pglite.execProtocol = ((message: Uint8Array, ...rest: unknown[]) => {
    sent.push(String.fromCharCode(message[0]!));
    return execProtocol(message, ...(rest as []));
  }) as typeof pglite.execProtocol;
  return sent;
}

describe("PGlite prepared statements", () => {
  let pglite: PGlite;
  let prepared: PGlitePreparedStatements;
  let sent: string[];
  before(async () => {
    pglite = await clonePglite();
    sent = recordMessages(pglite);
    prepared = new PGlitePreparedStatements(pglite);
    await pglite.exec(`create table probe (id int8 primary key, label text not null unique, doc jsonb,
      bytes bytea, at timestamptz, tags text[], ratio float8, flag boolean)`);
  });
  after(() => pglite.close());

  it("answers what query() answers: rows, field types, counts, every type both ways", async () => {
    const at = new Date("2026-11-27T12:34:56.789Z");
    const insert = "insert into probe values ($1, $2, $3, $4, $5, $6, $7, $8) returning *";
    const values = [
      [1, "one", JSON.stringify({ a: [1, "x"] }), new Uint8Array([0, 1, 255]), at, ["a", "b,c", 'd"e'], 0.25, true],
      [2, "two", null, null, null, null, null, null],
    ];
    for (const row of values) assert.equal((await prepared.query(insert, row)).affectedRows, 1);
    for (const [text, params] of [
      ["select * from probe order by id", []],
      ["select * from probe where id = $1", [1]],
      ["select * from probe where label = any($1::text[]) order by id", [["one", "two"]]],
      ["select * from probe where at = $1", [at]],
      ["select doc -> 'a' as a, bytes, tags[2] as second from probe where flag = $1", [true]],
      ["select count(*) as n, sum(ratio) as total from probe where $1::text is null or label = $1", [null]],
      ["update probe set ratio = ratio * 2 where id > $1", [0]],
      ["delete from probe where id = $1", [404]],
    ] as const) {
      const expected = await pglite.query(text, [...params]);
      const actual = await prepared.query(text, params);
      assert.deepEqual(actual.rows, expected.rows, text);
      assert.deepEqual(actual.fields, expected.fields, text);
      assert.equal(actual.affectedRows, expected.affectedRows, text);
    }
    const [row] = (await prepared.query<Record<string, unknown>>("select * from probe where id = $1", [1])).rows;
    assert.deepEqual(row, {
      id: 1,
      label: "one",
      doc: { a: [1, "x"] },
      bytes: new Uint8Array([0, 1, 255]),
      at,
      tags: ["a", "b,c", 'd"e'],
      ratio: 1, // 0.25 doubled by each of the two updates above (query()'s and ours)
      flag: true,
    });
  });

  it("parses a text once: every later run is one Bind, Execute and Sync", async () => {
    const text = "select label from probe where id = $1";
    sent.length = 0;
    for (let i = 0; i < 5; i++) assert.deepEqual((await prepared.query(text, [2])).rows, [{ label: "two" }]);
    assert.deepEqual(sent, ["P", "B", "B", "B", "B", "B"]);
  });

  it("runs statements side by side (an RPC's reads inside one transaction) without mixing their answers", async () => {
    await pglite.query("begin");
    try {
      // the same new text from two callers at once, and many texts at once
      const same = "select label from probe where id = $1 and $2::int >= 0";
      const [a, b] = await Promise.all([prepared.query(same, [1, 0]), prepared.query(same, [2, 0])]);
      assert.deepEqual([a.rows, b.rows], [[{ label: "one" }], [{ label: "two" }]]);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => prepared.query(`select $1::int + ${i} as n`, [i])),
      );
      assert.deepEqual(
        answers.map((r) => r.rows),
        Array.from({ length: 20 }, (_, i) => [{ n: 2 * i }]),
      );
    } finally {
      await pglite.query("rollback");
    }
  });

  it("fails as query() fails (code, constraint), and leaves a transaction to roll back", async () => {
    await pglite.query("begin");
    const refused = await prepared.query("insert into probe (id, label) values ($1, $2)", [3, "one"]).then(
      () => undefined,
      (err: { code?: string; constraint?: string }) => err,
    );
    assert.equal(refused?.code, "23505");
    assert.equal(refused?.constraint, "probe_label_key");
    await assert.rejects(prepared.query("select 1 as one where $1::int = 1", [1]), { code: "25P02" });
    await pglite.query("rollback");
    assert.deepEqual((await prepared.query("select 1 as one where $1::int = 1", [1])).rows, [{ one: 1 }]);
    await assert.rejects(prepared.query("select from nowhere where x = $1", [1]), { code: "42P01" });
    await assert.rejects(prepared.query("select from nowhere where x = $1", [1]), { code: "42P01" }, "not kept");
  });

  it("runs texts beyond its capacity unprepared, with the same answers", async () => {
    const small = new PGlitePreparedStatements(pglite, 2);
    sent.length = 0;
    for (let i = 0; i < 4; i++)
      assert.deepEqual((await small.query(`select ${i} + $1::int as n`, [1])).rows, [{ n: i + 1 }]);
    assert.deepEqual(sent, ["P", "B", "P", "B"], "two prepared, two through query()");
  });

  it("sends a statement without parameters that it does not prepare in one call, with query()'s answers", async () => {
    // a transaction's begin and commit, settings, DDL: where query() makes six calls
    for (const text of ["show timezone", "values (1, 'a'), (2, null)", "begin", "rollback"]) {
      const expected = await pglite.query(text);
      sent.length = 0;
      assert.deepEqual(await prepared.query(text, []), expected, text);
      assert.deepEqual(sent, ["P"], `${text}: one call`);
    }
    await prepared.query("begin", []);
    await prepared.query("insert into probe (id, label) values ($1, $2)", [10, "ten"]);
    await prepared.query("savepoint before_failing", []);
    await assert.rejects(prepared.query("create table probe (x int)", []), { code: "42P07" });
    await assert.rejects(prepared.query("show timezone", []), { code: "25P02" }, "the transaction is failed");
    await prepared.query("rollback to savepoint before_failing", []);
    await prepared.query("commit", []);
    assert.equal(pglite.isInTransaction(), false);
    assert.deepEqual((await pglite.query("select label from probe where id = 10")).rows, [{ label: "ten" }]);
    await pglite.query("delete from probe where id = 10");
  });
});

describe("PGlite prepared statements through the dialect", () => {
  let db: Kysely<any>;
  /** how many times the dialect read the catalog's write graph (its trigger query) */
  let graphReads = 0;
  before(async () => {
    const pglite = await clonePglite();
    const query = pglite.query.bind(pglite);
    pglite.query = ((...args: Parameters<typeof query>) => {
      if (/from pg_trigger/.test(String(args[0]))) graphReads++;
      return query(...args);
    }) as typeof pglite.query;
    db = new Kysely({ dialect: new SerializedPGliteDialect(pglite) });
  });
  after(() => db.destroy());

  it("are kept, with the catalog's write graph, across reads that lock rows, take advisory locks or move a sequence", async () => {
    // An update by uid (storage/table.ts) locks its row with `select ... for update` first. Taken
    // for a schema change, that dropped every prepared statement and read the catalog's write graph
    // again (four queries) in each Update and Delete RPC.
    await sql`create table lock_probe (id int primary key, label text not null)`.execute(db);
    await sql`create sequence lock_probe_ids`.execute(db);
    await sql`insert into lock_probe values (1, 'one')`.execute(db);
    const read = () => sql`select label from lock_probe where id > ${0}`.execute(db);
    await read();
    const preparedName = async () =>
      (
        await sql<{ name: string }>`select name from pg_prepared_statements
          where statement like ${"%from lock_probe where id >%"}`.execute(db)
      ).rows.map((r) => r.name);
    const before = await preparedName();
    assert.equal(before.length, 1);
    const graphBefore = graphReads;
    await db.transaction().execute(async (trx) => {
      await sql`select label from lock_probe where id = ${1} for update`.execute(trx);
      await sql`select label from lock_probe where id = ${1} for share`.execute(trx);
      await sql`select pg_advisory_xact_lock(${42})`.execute(trx);
      await sql`select nextval('lock_probe_ids')`.execute(trx);
      await sql`update lock_probe set label = 'ONE' where id = ${1}`.execute(trx);
    });
    await db.deleteFrom("lock_probe").where("id", "=", 1).execute();
    await read();
    assert.deepEqual(await preparedName(), before, "the statement prepared before is still the one used");
    assert.equal(graphReads, graphBefore, "the write graph was not read again");
  });

  it("are dropped when the schema changes: a read after ALTER TABLE has the new column", async () => {
    await sql`create table shape_probe (id int primary key)`.execute(db);
    await sql`insert into shape_probe values (1)`.execute(db);
    const all = () => sql<Record<string, unknown>>`select * from shape_probe where id > ${0}`.execute(db);
    assert.deepEqual((await all()).rows, [{ id: 1 }]);
    await sql`alter table shape_probe add column label text not null default 'x'`.execute(db);
    assert.deepEqual((await all()).rows, [{ id: 1, label: "x" }]);
    const held = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements
      where statement like ${"%from shape_probe where%"}`.execute(db);
    assert.deepEqual(held.rows, [{ n: 1 }], "the statement prepared before the change was closed");
    // inside a transaction too, where the change is not committed yet
    await db.transaction().execute(async (trx) => {
      await sql`alter table shape_probe add column n int not null default 7`.execute(trx);
      const rows = (await sql<Record<string, unknown>>`select * from shape_probe where id > ${0}`.execute(trx)).rows;
      assert.deepEqual(rows, [{ id: 1, label: "x", n: 7 }]);
    });
  });
});
