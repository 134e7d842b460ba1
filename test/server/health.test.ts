// The probes: /livez answers while the process serves and asks nothing else; /readyz answers 200
// only while the database is reachable and migrated, the blob store takes a write and no shutdown
// began, else 503 naming each failed check (no internals). Both are anonymous and outside the
// rate limits. Each failure is made for real: a migration's record removed from the database, the
// blob store's upload area replaced by a file (which no write gets past, root or not), PostgreSQL
// refusing the database's connections.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { sql } from "kysely";
import { registryModule } from "../../src/registry/api.js";
import { backends, postgresUrl } from "../support/db-templates.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { until } from "../support/wait.js";

interface Answer {
  status: number;
  body: { status: string; checks?: { name: string; status: string; reason?: string }[] };
  headers: Headers;
}

async function probe(server: TestServer, path: "/livez" | "/readyz"): Promise<Answer> {
  const res = await fetch(`${server.url}${path}`);
  return { status: res.status, body: (await res.json()) as Answer["body"], headers: res.headers };
}

/** The checks /readyz names, as "name: STATUS[ (reason)]". */
const checksOf = (answer: Answer) =>
  (answer.body.checks ?? []).map((c) => `${c.name}: ${c.status}${c.reason ? ` (${c.reason})` : ""}`);

const ALL_SERVING = ["database: SERVING", "blob store: SERVING", "shutdown: SERVING"];

for (const backend of backends()) {
  describe(`/livez and /readyz (${backend})`, () => {
    let server: TestServer;
    const blobDir = mkdtempSync(join(tmpdir(), "bulwark-health-blobs-"));

    before(async () => {
      server = await startTestServer(backend, {
        registry: { blobDirectory: blobDir },
        // an address limit that refuses the second API request: probes are not counted against it
        rateLimits: { address: { perSecond: 0.001, burst: 1 } },
      });
    });
    after(async () => {
      await server?.close();
      rmSync(blobDir, { recursive: true, force: true });
    });

    it("both answer 200 on a healthy server, anonymously, uncached, and outside the rate limits", async () => {
      const live = await probe(server, "/livez");
      assert.equal(live.status, 200);
      assert.deepEqual(live.body, { status: "SERVING" });
      assert.equal(live.headers.get("cache-control"), "no-store");
      const ready = await probe(server, "/readyz");
      assert.equal(ready.status, 200, JSON.stringify(ready.body));
      assert.equal(ready.body.status, "SERVING");
      assert.deepEqual(checksOf(ready), ALL_SERVING);
      assert.equal(ready.headers.get("cache-control"), "no-store");
      // the address's one request is spent here; probes go on being answered
      await fetch(`${server.url}/iam/v2beta1/groups`);
      assert.equal((await fetch(`${server.url}/iam/v2beta1/groups`)).status, 429, "the limit is on");
      const probes = await Promise.all(
        Array.from({ length: 20 }, (_, i) => probe(server, i % 2 ? "/livez" : "/readyz")),
      );
      assert.deepEqual(
        probes.map((p) => p.status),
        probes.map(() => 200),
      );
      // the probe's writes leave nothing behind in the blob store
      const staged = [];
      for await (const upload of server.exportsOf(registryModule).store.listUploads()) staged.push(upload);
      assert.deepEqual(staged, []);
    });

    it("a migration the database has not applied: /readyz 503 naming the database, /livez 200; applied again: 200", async () => {
      const { rows } = await sql<{
        name: string;
        timestamp: string;
      }>`delete from kysely_migration where name = (select max(name) from kysely_migration) returning name, timestamp`.execute(
        server.db,
      );
      assert.equal(rows.length, 1);
      try {
        const ready = await probe(server, "/readyz");
        assert.equal(ready.status, 503);
        assert.deepEqual(ready.body, {
          status: "NOT_SERVING",
          checks: [
            { name: "database", status: "NOT_SERVING", reason: "not migrated" },
            { name: "blob store", status: "SERVING" },
            { name: "shutdown", status: "SERVING" },
          ],
        });
        assert.equal((await probe(server, "/livez")).status, 200, "liveness asks nothing of the database");
      } finally {
        await sql`insert into kysely_migration (name, timestamp) values (${rows[0]!.name}, ${rows[0]!.timestamp})`.execute(
          server.db,
        );
      }
      assert.deepEqual(checksOf(await probe(server, "/readyz")), ALL_SERVING);
    });

    it("a blob store that takes no write: /readyz 503 naming the blob store; writable again: 200", async () => {
      const uploads = join(blobDir, "uploads");
      rmSync(uploads, { recursive: true, force: true });
      // a file where the upload area's directory belongs: no write gets past it, not even root's
      writeFileSync(uploads, "not a directory");
      try {
        const ready = await probe(server, "/readyz");
        assert.equal(ready.status, 503);
        assert.deepEqual(ready.body, {
          status: "NOT_SERVING",
          checks: [
            { name: "database", status: "SERVING" },
            { name: "blob store", status: "NOT_SERVING", reason: "failed" },
            { name: "shutdown", status: "SERVING" },
          ],
        });
        assert.doesNotMatch(JSON.stringify(ready.body), /ENOTDIR|EEXIST|uploads|\/tmp/, "no internals");
      } finally {
        rmSync(uploads, { force: true });
        mkdirSync(uploads, { mode: 0o700 });
      }
      assert.deepEqual(checksOf(await probe(server, "/readyz")), ALL_SERVING);
    });

    if (backend === "postgres") {
      it("PostgreSQL refusing the database's connections: /readyz 503, database unreachable; allowed again: 200", async () => {
        const database = new URL(server.databaseUrl!).pathname.slice(1);
        const admin = new pg.Client({ connectionString: postgresUrl() });
        await admin.connect();
        try {
          await admin.query(`alter database ${database} allow_connections false`);
          await admin.query(
            "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()",
            [database],
          );
          // the pool may hold a client the termination has not reached yet: the next probes find out
          const down = await until(async () => {
            const ready = await probe(server, "/readyz");
            return ready.status === 503 ? ready : undefined;
          }, "/readyz answering 503 with the database refusing connections");
          assert.deepEqual(checksOf(down), [
            "database: NOT_SERVING (unreachable)",
            "blob store: SERVING",
            "shutdown: SERVING",
          ]);
          assert.equal((await probe(server, "/livez")).status, 200);
        } finally {
          await admin.query(`alter database ${database} allow_connections true`);
          await admin.end();
        }
        const up = await until(async () => {
          const ready = await probe(server, "/readyz");
          return ready.status === 200 ? ready : undefined;
        }, "/readyz answering 200 once the database takes connections again");
        assert.deepEqual(checksOf(up), ALL_SERVING);
      });
    }
  });
}
