// Group commit on the embedded database (src/storage/wal-sync.ts): a WAL file's sync runs off the
// main thread, and nothing the database answers — a commit, a read, a cached read — reaches its
// caller before every commit made so far is synced. Shown on an on-disk database whose WAL syncs
// the test holds: what must wait has not settled while a sync is held, and settles once released.
// (test/storage/durability.test.ts shows the real fsync with strace, and kill -9.)
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fs, { fsync, mkdirSync, mkdtempSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { openDatabase } from "../../src/storage/db.js";
import { WalSync, isWalSegment } from "../../src/storage/wal-sync.js";

/** WAL syncs that run at once until `hold()`, then wait for `release()` (or fail at `fail()`). */
class HeldSyncs {
  #holding = false;
  readonly #held: Array<{ run: () => void; fail: (err: Error) => void }> = [];
  #waiter: (() => void) | undefined;
  synced = 0;
  /** where each sync's start and end are told (`pool-start N`, `pool-done N`), if anywhere */
  log: string[] | undefined;

  readonly sync = (fd: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const id = this.synced + this.#held.length + Math.random();
      this.log?.push(`pool-start ${id}`);
      const run = () =>
        fsync(fd, (err) => {
          if (err) return reject(err);
          this.synced++;
          this.log?.push(`pool-done ${id}`);
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

  it("let a transaction read only commits already synced", async () => {
    const { database, db, syncs } = await heldDatabase();
    try {
      syncs.hold();
      const insert = sql`insert into t values (1)`.execute(db);
      await syncs.someHeld();
      const inTransaction = db.transaction().execute((tx) => sql<{ id: number }>`select id from t`.execute(tx));
      assert.equal(await settled(inTransaction), false, "a transaction begins once the commits it may read are synced");
      syncs.release();
      await insert;
      assert.deepEqual((await inTransaction).rows, [{ id: 1 }]);
    } finally {
      await database.close();
    }
  });

  it("sync the WAL on the main thread before any data page is written, while a sync runs on the pool", async () => {
    const { database, db, syncs } = await heldDatabase();
    // What reaches the files, in order: which file each write and fsync on this thread went to.
    const calls: string[] = [];
    const pathOf = (fd: number) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return "?";
      }
    };
    const { writeSync: write, fsyncSync: sync } = fs;
    // PostgreSQL's requests to sync the WAL (what it then counts as flushed)
    const note = Object.getOwnPropertyDescriptor(WalSync.prototype, "note")!;
    try {
      await sql`create table v (id int primary key, text text)`.execute(db);
      Object.assign(fs, {
        writeSync: (fd: number, ...rest: unknown[]) => {
          calls.push(`write ${pathOf(fd)}`);
          return (write as (...a: unknown[]) => number)(fd, ...rest);
        },
        fsyncSync: (fd: number) => {
          calls.push(`fsync ${pathOf(fd)}`);
          return sync(fd);
        },
      });
      syncBuiltinESMExports();
      Object.defineProperty(WalSync.prototype, "note", {
        ...note,
        value(this: WalSync, path: string) {
          calls.push(`note ${path}`);
          return (note.value as (p: string) => void).call(this, path);
        },
      });
      syncs.log = calls;
      syncs.hold();
      // enough rows to fill the WAL's buffers and shared buffers, then a checkpoint writes data pages
      const insert = sql`insert into v select g, repeat('x', 200) from generate_series(1, 20000) g`.execute(db);
      await syncs.someHeld();
      const checkpoint = sql`checkpoint`.execute(db);
      assert.equal(await settled(checkpoint), false, "the checkpoint is answered once the commit before it is synced");
      syncs.release();
      await Promise.all([insert, checkpoint]);
    } finally {
      Object.assign(fs, { writeSync: write, fsyncSync: sync });
      syncBuiltinESMExports();
      Object.defineProperty(WalSync.prototype, "note", note);
      await database.close();
    }
    // PostgreSQL writes a data page once the WAL up to the page's last change is flushed, as far
    // as it knows: once it asked for that sync. So no data page is written after such a request
    // until the WAL was synced: on this thread, or by a pool sync that began after the request.
    const wal = /pg_wal\/[0-9A-F]{24}$/;
    const data = /\/(base|global|pg_xact|pg_multixact)\//;
    let walUnsynced = false;
    let dataWrites = 0;
    const startedAfterRequest = new Set<string>();
    for (const call of calls) {
      const [kind, id] = call.split(" ");
      if (kind === "note") {
        walUnsynced = true;
        startedAfterRequest.clear();
      } else if (kind === "pool-start") startedAfterRequest.add(id!);
      else if (kind === "pool-done" && startedAfterRequest.has(id!)) walUnsynced = false;
      else if (kind === "fsync" && wal.test(call)) walUnsynced = false;
      else if (call.startsWith("write ") && data.test(call)) {
        dataWrites++;
        assert.equal(walUnsynced, false, `a data page was written ahead of the WAL that precedes it: ${call}`);
      }
    }
    assert.ok(dataWrites > 0, "the checkpoint wrote data pages");
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
      assert.ok(syncs.synced - before <= 2, `21 commits took ${syncs.synced - before} syncs`);
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

  it("remember a failed sync on the main thread: nothing is answered as durable after it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bulwark-walsync-"));
    dirs.push(dir);
    mkdirSync(join(dir, "pg_wal"));
    const segment = join(dir, "pg_wal", "000000010000000000000001");
    writeFileSync(segment, "x");
    const syncs = new HeldSyncs();
    syncs.hold();
    const wal = new WalSync(syncs.sync);
    wal.note(segment);
    const answered = wal.durable();
    await syncs.someHeld();
    const { fsyncSync: sync } = fs;
    Object.assign(fs, {
      fsyncSync: () => {
        throw Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" });
      },
    });
    syncBuiltinESMExports();
    try {
      assert.throws(() => wal.now(), /WAL could not be synced/);
    } finally {
      Object.assign(fs, { fsyncSync: sync });
      syncBuiltinESMExports();
    }
    // the kernel reports a lost write once: the pool's sync now succeeds, and must not count
    syncs.release();
    await assert.rejects(answered, /WAL could not be synced/);
    assert.equal(wal.idle, false);
    await assert.rejects(wal.durable(), /WAL could not be synced/);
    assert.throws(
      () => wal.now(),
      (err: NodeJS.ErrnoException) => err.code === "EIO",
    );
    wal.close();
  });

  it("know WAL segments by their path", () => {
    assert.equal(isWalSegment("/d/data/pg_wal/000000010000000000000001"), true);
    assert.equal(isWalSegment("/d/data/pg_wal/archive_status"), false);
    assert.equal(isWalSegment("/d/data/base/5/16384"), false);
    assert.equal(isWalSegment("/d/data/pg_wal/000000010000000000000001.partial"), false);
  });
});
