// Group commit on the embedded database (src/storage/wal-sync.ts): a WAL file's sync runs off the
// main thread, and nothing the database answers — a commit, a read, a cached read — reaches its
// caller before every commit made so far is synced. Shown on an on-disk database whose WAL syncs
// the test holds: what must wait has not settled while a sync is held, and settles once released.
// (test/storage/durability.test.ts shows the real fsync with strace, and kill -9.)
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { fsync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { openDatabase } from "../../src/storage/db.js";
import { isWalSegment } from "../../src/storage/wal-sync.js";

/** WAL syncs that run at once until `hold()`, then wait for `release()` (or fail at `fail()`). */
class HeldSyncs {
  #holding = false;
  readonly #held: Array<{ run: () => void; fail: (err: Error) => void }> = [];
  #waiter: (() => void) | undefined;
  synced = 0;

  readonly sync = (fd: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const run = () =>
        fsync(fd, (err) => {
          if (err) return reject(err);
          this.synced++;
          resolve();
        });
      if (!this.#holding) return run();
      this.#held.push({ run, fail: reject });
      this.#waiter?.();
    });

  hold(): void {
    this.#holding = true;
  }
  /** Resolves once a sync is held. */
  async someHeld(): Promise<void> {
    while (this.#held.length === 0) await new Promise<void>((resolve) => (this.#waiter = resolve));
    this.#waiter = undefined;
  }
  release(): void {
    this.#holding = false;
    for (const h of this.#held.splice(0)) h.run();
  }
  fail(): void {
    this.#holding = false;
    for (const h of this.#held.splice(0)) h.fail(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
  }
}

/** Whether `promise` has settled, once everything already queued ran (promises and I/O callbacks). */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  return done;
}

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function heldDatabase() {
  const dir = mkdtempSync(join(tmpdir(), "bulwark-walsync-"));
  dirs.push(dir);
  const syncs = new HeldSyncs();
  const database = await openDatabase({ dataDir: join(dir, "data"), syncWalFile: syncs.sync });
  const { db } = database;
  await sql`create table t (id int primary key)`.execute(db);
  await sql`create table u (id int primary key)`.execute(db);
  return { database, db, syncs };
}

describe("the embedded database's WAL syncs", () => {
  it("are made off the main thread, and a commit is answered only once its sync is done", async () => {
    const { database, db, syncs } = await heldDatabase();
    try {
      const before = syncs.synced;
      syncs.hold();
      const insert = sql`insert into t values (1)`.execute(db);
      await syncs.someHeld();
      assert.equal(await settled(insert), false, "the insert's commit is not answered while its WAL sync is held");
      // A read that sees the commit is not answered before it is durable either.
      const read = sql<{ id: number }>`select id from t`.execute(db);
      assert.equal(await settled(read), false, "a read made after the commit waits for its sync");
      syncs.release();
      await insert;
      assert.deepEqual((await read).rows, [{ id: 1 }]);
      assert.ok(syncs.synced > before, "the commit's WAL was synced through the held sync");
    } finally {
      await database.close();
    }
  });

  it("answer a cached read only once every earlier commit is synced", async () => {
    const { database, db, syncs } = await heldDatabase();
    try {
      await sql`insert into t values (7)`.execute(db);
      // the same read twice: the second is answered by the read cache
      const read = () =>
        db
          .selectFrom("t" as never)
          .select("id" as never)
          .where("id" as never, "=", 7 as never)
          .execute();
      await read();
      await read();
      syncs.hold();
      const other = sql`insert into u values (1)`.execute(db); // another table: t's cached read stays
      await syncs.someHeld();
      const cached = read();
      assert.equal(await settled(cached), false, "a cache hit is not answered while an earlier commit's sync is held");
      syncs.release();
      await other;
      assert.deepEqual(await cached, [{ id: 7 }]);
    } finally {
      await database.close();
    }
  });

  it("gather commits made during a sync into the next one", async () => {
    const { database, db, syncs } = await heldDatabase();
    try {
      syncs.hold();
      const first = sql`insert into t values (1)`.execute(db);
      await syncs.someHeld();
      const before = syncs.synced;
      const rest = Array.from({ length: 20 }, (_, i) => sql`insert into t values (${i + 2})`.execute(db));
      for (const r of rest) assert.equal(await settled(r), false);
      syncs.release();
      await Promise.all([first, ...rest]);
      assert.ok(syncs.synced - before < 21, `21 commits took ${syncs.synced - before} syncs`);
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from t`.execute(db);
      assert.equal(rows[0]!.n, 21);
    } finally {
      await database.close();
    }
  });

  it("fail every later answer once a sync failed", async () => {
    const { database, db, syncs } = await heldDatabase();
    try {
      syncs.hold();
      const insert = sql`insert into t values (1)`.execute(db);
      await syncs.someHeld();
      syncs.fail();
      await assert.rejects(insert, /WAL could not be synced/);
      await assert.rejects(sql`insert into t values (2)`.execute(db), /WAL could not be synced/);
    } finally {
      await database.close().catch(() => {});
    }
  });

  it("know WAL segments by their path", () => {
    assert.equal(isWalSegment("/d/data/pg_wal/000000010000000000000001"), true);
    assert.equal(isWalSegment("/d/data/pg_wal/archive_status"), false);
    assert.equal(isWalSegment("/d/data/base/5/16384"), false);
    assert.equal(isWalSegment("/d/data/pg_wal/000000010000000000000001.partial"), false);
  });
});
