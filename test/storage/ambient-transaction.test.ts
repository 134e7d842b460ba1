// One transaction around code that does not know it (storage/ambient-transaction.ts), on both
// backends: everything inside commits or rolls back together, a nested transaction is a
// savepoint, `recoverable` keeps the scope usable after a failed statement, `afterCommit`
// runs only after a commit, and `beforeCommit` statements go last, with the commit. On PostgreSQL
// (pipeline mode) a begin and a commit share a round trip with the statements next to them.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import pg from "pg";
import { backends, clonePglite, clonePostgres } from "../support/db-templates.js";
import { openDatabase, type OpenDatabase } from "../../src/storage/db.js";
import { afterCommit, beforeCommit, recoverable, withinTransaction } from "../../src/storage/ambient-transaction.js";
import { observeQueries } from "../../src/storage/observed.js";
import { startTestServer } from "../support/server.js";
import { restClient } from "../support/http.js";
import { createGroup } from "../support/fixtures.js";

/** That no session of PostgreSQL's database at `url` is left inside a transaction nobody ends. */
async function assertNoSessionInTransaction(url: string): Promise<void> {
  // Asked on a session of its own: a pool could hand the question to that very session.
  const probe = new pg.Client({ connectionString: url });
  await probe.connect();
  try {
    const { rows } = await probe.query<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity
       where datname = current_database() and state like 'idle in transaction%'`,
    );
    assert.equal(rows[0]!.n, 0, "no pooled session is left in a transaction");
  } finally {
    await probe.end();
  }
}

for (const backend of backends()) {
  describe(`ambient transactions [${backend}]`, () => {
    let database: OpenDatabase;
    let drop: (() => Promise<void>) | undefined;
    let url: string | undefined;
    before(async () => {
      if (backend === "pglite") database = await openDatabase({ pglite: await clonePglite() });
      else {
        const cloned = await clonePostgres();
        drop = cloned.drop;
        url = cloned.url;
        database = await openDatabase({ databaseUrl: cloned.url });
      }
      await sql`create table ambient_probe (k text primary key)`.execute(database.db);
    });
    after(async () => {
      await database.close();
      await drop?.();
    });

    const keys = async () =>
      (await sql<{ k: string }>`select k from ambient_probe order by k`.execute(database.db)).rows.map((r) => r.k);
    const insert = (k: string) => sql`insert into ambient_probe (k) values (${k})`.execute(database.db);

    it("commits everything inside together, and rolls everything back on a throw", async () => {
      await withinTransaction(database.db, async () => {
        await insert("a1");
        await database.db.transaction().execute(async (trx) => {
          await sql`insert into ambient_probe (k) values ('a2')`.execute(trx);
        });
      });
      await assert.rejects(
        withinTransaction(database.db, async () => {
          await insert("b1");
          await database.db.transaction().execute(async (trx) => {
            await sql`insert into ambient_probe (k) values ('b2')`.execute(trx);
          });
          throw new Error("handler failed");
        }),
        /handler failed/,
      );
      assert.deepEqual(await keys(), ["a1", "a2"]);
    });

    it("rolls back a failed nested transaction alone, and recovers after a failed statement", async () => {
      await withinTransaction(database.db, async () => {
        await insert("c1");
        await assert.rejects(
          database.db.transaction().execute(async (trx) => {
            await sql`insert into ambient_probe (k) values ('c2')`.execute(trx);
            throw new Error("inner failed");
          }),
        );
        await assert.rejects(
          recoverable(() => insert("c1")),
          (err: { code?: string }) => err.code === "23505",
        );
        await insert("c3");
      });
      const all = await keys();
      assert.ok(all.includes("c1") && all.includes("c3") && !all.includes("c2"), all.join());
    });

    it("rolls back a failed nested transaction that began before any statement, and goes on", async () => {
      // The scope's first transaction needs no savepoint: its rollback starts the scope over.
      await withinTransaction(database.db, async () => {
        await assert.rejects(
          database.db.transaction().execute(async (trx) => {
            await sql`insert into ambient_probe (k) values ('e1')`.execute(trx);
            await database.db.transaction().execute(async (inner) => {
              await sql`insert into ambient_probe (k) values ('e2')`.execute(inner);
            });
            throw new Error("first failed");
          }),
          /first failed/,
        );
        await database.db.transaction().execute(async (trx) => {
          await sql`insert into ambient_probe (k) values ('e3')`.execute(trx);
          await assert.rejects(
            database.db.transaction().execute(async (inner) => {
              await sql`insert into ambient_probe (k) values ('e4')`.execute(inner);
              throw new Error("inner failed");
            }),
          );
        });
        await insert("e5");
      });
      assert.deepEqual(
        (await keys()).filter((k) => k.startsWith("e")),
        ["e3", "e5"],
      );
    });

    it("runs afterCommit callbacks after a commit only", async () => {
      const seen: string[] = [];
      await withinTransaction(database.db, async () => {
        await insert("d1");
        afterCommit(() => seen.push("committed d1"));
        assert.deepEqual(seen, []);
      });
      await withinTransaction(database.db, async () => {
        afterCommit(() => seen.push("never"));
        throw new Error("rolled back");
      }).catch(() => undefined);
      afterCommit(() => seen.push("outside a scope: at once"));
      assert.deepEqual(seen, ["committed d1", "outside a scope: at once"]);
    });

    it("refuses a statement from a transaction begun in the scope and left running after it closed", async () => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let late: Promise<unknown> | undefined;
      await withinTransaction(database.db, async () => {
        late = database.db.transaction().execute(async (trx) => {
          await gate;
          await sql`insert into ambient_probe (k) values ('f1')`.execute(trx);
        });
        // the savepoint is taken before the scope closes
        await new Promise((r) => setImmediate(r));
      });
      release();
      await assert.rejects(late!, /transaction scope that already closed/);
      assert.ok(!(await keys()).includes("f1"));
      // Nor was its rollback sent on the scope's connection, released by then, with a new begin
      // after it: no session is left inside a transaction nobody ends.
      if (url) await assertNoSessionInTransaction(url);
      else {
        // PGlite is one session: VACUUM refuses to run inside a transaction block. (now() against
        // statement_timestamp() is no probe: a prepared run's Bind and Execute may get two times.)
        await assert.doesNotReject(
          sql`vacuum ambient_probe`.execute(database.db),
          "the session is not left in a transaction",
        );
      }
    });

    // The storage behind scopes is switched off whenever none runs (its promise hook costs every
    // request); one closing while another still runs must leave the other's statements in it.
    it(
      "keeps a scope's later statements in its transaction when another scope closed meanwhile",
      { timeout: 120_000 },
      async () => {
        const other =
          backend === "pglite"
            ? await openDatabase({ pglite: await clonePglite() })
            : await clonePostgres().then(async (c) =>
                Object.assign(await openDatabase({ databaseUrl: c.url }), { drop: c.drop }),
              );
        try {
          let inside!: () => void;
          const insideNow = new Promise<void>((r) => (inside = r));
          let release!: () => void;
          const gate = new Promise<void>((r) => (release = r));
          const outer = withinTransaction(database.db, async () => {
            await insert("g1");
            inside();
            await gate;
            await insert("g2");
            throw new Error("the outer scope fails");
          });
          try {
            await insideNow;
            await withinTransaction(other.db, async () => {
              await sql`select 1`.execute(other.db);
            });
          } finally {
            release();
          }
          await assert.rejects(outer, /the outer scope fails/);
          const left = await keys();
          assert.ok(!left.includes("g1") && !left.includes("g2"), `rolled back together: ${left.join(", ")}`);
        } finally {
          await other.close();
          await (other as { drop?: () => Promise<void> }).drop?.();
        }
      },
    );

    it("sends beforeCommit statements last, and gives them their results once committed", async () => {
      const seen: string[] = [];
      await withinTransaction(database.db, async () => {
        // Registered first, sent last: it finds h1, which the scope inserts after registering it.
        beforeCommit(
          sql`insert into ambient_probe (k) select 'h2' where exists (select 1 from ambient_probe where k = 'h1')
            returning k`.compile(database.db),
          (result) => seen.push(`last: ${JSON.stringify(result.rows)}`),
        );
        await insert("h1");
        afterCommit(() => seen.push("afterCommit"));
        assert.deepEqual(seen, []);
      });
      assert.deepEqual(seen, ["afterCommit", 'last: [{"k":"h2"}]']);
      assert.deepEqual(
        (await keys()).filter((k) => k.startsWith("h")),
        ["h1", "h2"],
      );
    });

    it("rolls everything back when a last statement fails, and calls none of the scope's callbacks", async () => {
      const seen: string[] = [];
      await assert.rejects(
        withinTransaction(database.db, async () => {
          await insert("i1");
          afterCommit(() => seen.push("afterCommit"));
          beforeCommit(sql`select 1 / 0`.compile(database.db), () => seen.push("then"));
        }),
        (err: { code?: string }) => err.code === "22012",
      );
      assert.deepEqual(seen, []);
      assert.ok(!(await keys()).includes("i1"));
      // The connection is usable again, in no transaction.
      await withinTransaction(database.db, () => insert("i2"));
      assert.ok((await keys()).includes("i2"));
      if (url) await assertNoSessionInTransaction(url);
    });

    it("drops what a savepoint registered with beforeCommit when it rolls back", async () => {
      const last = (k: string) => sql`insert into ambient_probe (k) values (${k})`.compile(database.db);
      await withinTransaction(database.db, async () => {
        await insert("j1");
        await assert.rejects(
          database.db.transaction().execute(async () => {
            beforeCommit(last("j2"), () => {});
            throw new Error("inner failed");
          }),
        );
        beforeCommit(last("j3"), () => {});
      });
      assert.deepEqual(
        (await keys()).filter((k) => k.startsWith("j")),
        ["j1", "j3"],
      );
      assert.throws(() => beforeCommit(last("j4"), () => {}), /outside an open transaction scope/);
    });

    /** What `db` sent and when each answered: a scope with a last statement, then a plain transaction. */
    async function roundTrips(db: OpenDatabase["db"], key: string) {
      const log: string[] = [];
      const name = (text: string) => /^\s*(begin|commit)/.exec(text)?.[1] ?? (/'last'/.test(text) ? "last" : "insert");
      const stop = observeQueries(db, (text) => {
        log.push(`send ${name(text)}`);
        return () => log.push(`answer ${name(text)}`);
      });
      try {
        await withinTransaction(db, async () => {
          beforeCommit(sql`select 'last'`.compile(db), () => {});
          await sql`insert into ambient_probe (k) values (${`${key}1`})`.execute(db);
        });
        const scope = [...log];
        log.length = 0;
        await db.transaction().execute((trx) => sql`insert into ambient_probe (k) values (${`${key}2`})`.execute(trx));
        return { scope, transaction: [...log] };
      } finally {
        stop();
      }
    }

    /** Each statement answered before the next was sent. */
    const ONE_AT_A_TIME = {
      scope: ["begin", "insert", "last", "commit"].flatMap((s) => [`send ${s}`, `answer ${s}`]),
      transaction: ["begin", "insert", "commit"].flatMap((s) => [`send ${s}`, `answer ${s}`]),
    };

    if (backend === "postgres") {
      it("sends a begin and a commit without waiting: they share round trips with the statements next to them", async () => {
        assert.deepEqual(await roundTrips(database.db, "k"), {
          scope: [
            ...["send begin", "send insert", "answer begin", "answer insert"],
            ...["send last", "send commit", "answer last", "answer commit"],
          ],
          transaction: [
            ...["send begin", "send insert", "answer begin", "answer insert"],
            ...["send commit", "answer commit"],
          ],
        });
      });

      it("sends each statement once the one before it answered with pipelining off (--no-pipelining)", async () => {
        const unpipelined = await openDatabase({ databaseUrl: url!, pipelining: false });
        try {
          await sql`select 1`.execute(unpipelined.db); // Kysely's first statement initializes its driver
          assert.deepEqual(await roundTrips(unpipelined.db, "m"), ONE_AT_A_TIME);
        } finally {
          await unpipelined.close();
        }
      });
    } else
      it("sends each statement once the one before it answered", async () => {
        assert.deepEqual(await roundTrips(database.db, "k"), ONE_AT_A_TIME);
      });

    it("gives work left running after the scope closed an ordinary connection", async () => {
      let late: Promise<unknown> | undefined;
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      await withinTransaction(database.db, async () => {
        late = gate.then(() => insert("e1"));
      });
      release();
      await late;
      assert.ok((await keys()).includes("e1"));
    });
  });
}

// The server's setting reaches its database (serve --no-pipelining, ServerConfig.pipelining): what
// a group create, event included, sends to PostgreSQL right after its begin.
if (backends().includes("postgres"))
  describe("a server's pipelining setting [postgres]", () => {
    for (const pipelining of [undefined, false])
      it(`${pipelining === undefined ? "on (the default)" : "off"}: the create's first statement is sent ${pipelining === undefined ? "before" : "after"} its begin answered`, async () => {
        const server = await startTestServer("postgres", pipelining === undefined ? {} : { pipelining });
        try {
          const api = restClient(server.url, server.operatorToken);
          const log: string[] = [];
          const stop = observeQueries(server.db, (text) => {
            const name = /^\s*begin\b/.test(text) ? "begin" : "statement";
            log.push(`send ${name}`);
            return () => log.push(`answer ${name}`);
          });
          try {
            await createGroup(api, undefined, `pipelining-${pipelining ?? "default"}`);
          } finally {
            stop();
          }
          const begin = log.indexOf("send begin");
          assert.ok(begin >= 0, log.join());
          assert.equal(log[begin + 1], pipelining === undefined ? "send statement" : "answer begin", log.join());
        } finally {
          await server.close();
        }
      });
  });
