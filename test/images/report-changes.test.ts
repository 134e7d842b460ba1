// Advisory changes reach our vulnerability reports exactly: each import records what it changed
// inside its own transaction (advisory_changes), and a replica turns the recorded changes into
// queued reports. An import whose transaction commits after another replica looked (it waited on
// a lock, PostgreSQL) still reaches the report; a replica that dies between claiming changes and
// committing leaves them for the next. The report worker here is a second "replica" the test
// drives (the server's own periodic look is far away), over the server's database and exports.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import pg from "pg";
import pino from "pino";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { eventsModule } from "../../src/events/api.js";
import { imagesRepositories } from "../../src/images/module.js";
import { matchPackages } from "../../src/images/matching/match.js";
import { ReportWorker } from "../../src/images/reports.js";
import { registryModule } from "../../src/registry/api.js";
import { vulnerabilitiesModule } from "../../src/vulnerabilities/api.js";
import { cgaId, fixedAdvisoriesDocument, IMPORT_PATH } from "../support/advisories.js";
import { ok } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { apkInstalled, buildImage, osRelease, pushImage, waitForInventory } from "../support/images.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { skopeoIn } from "../support/skopeo.js";
import { until } from "../support/wait.js";

const PACKAGE = "bulwark-late-fixture";
const INSTALLED = "1.0-r0";

/** An advisory YAML document of PACKAGE: each advisory detected, then fixed at its version. */
function advisoryDocument(advisories: { id: string; fixedIn: string }[]): string {
  return fixedAdvisoriesDocument(PACKAGE, advisories);
}

for (const backend of backends()) {
  describe(`advisory changes reach the reports [${backend}]`, () => {
    let server: TestServer;
    let work: string;
    const publicGroup = randomBytes(20).toString("hex");
    // a second group of public advisories: imports into one group take turns, into two they do not
    const otherPublicGroup = randomBytes(20).toString("hex");
    let repoUid: string;
    let digest: string;
    let n = 0;
    const nextId = () => cgaId(Number.parseInt(randomBytes(3).toString("hex"), 16) * 16 + n++);

    const repositories = () => imagesRepositories(server.db);
    /**
     * Another replica's report worker (its registry replaceable, to make it die mid-claim), which
     * only does what the test asks: closed, so that queueing wakes no background recomputation.
     */
    const replica = async (registry: {
      reposHoldingMany(digests: readonly string[]): Promise<Map<string, string[]>>;
    }) => {
      const { reports, inventories, advisoryChanges } = repositories();
      const worker = new ReportWorker({
        db: server.db,
        reports,
        advisoryChanges,
        inventories,
        advisories: server.exportsOf(vulnerabilitiesModule),
        registry,
        match: matchPackages,
        events: server.exportsOf(eventsModule).journal,
        now: () => new Date(),
        logger: pino({ level: "silent" }),
      });
      await worker.close();
      return worker;
    };
    const healthy = () => replica(server.exportsOf(registryModule));
    const importDocument = async (content: string, parent = publicGroup) => {
      const api = restClient(server.url, server.operatorToken);
      const res = ok(
        await api.post(IMPORT_PATH, {
          parent,
          documents: [{ name: `${PACKAGE}.advisories.yaml`, content }],
        }),
      );
      assert.equal(res.results[0].problem, undefined, JSON.stringify(res.results[0]));
    };
    /** The ids our newest report of the image names. */
    const reported = async () => {
      const latest = await repositories().reports.latest(repoUid, digest, "bulwark");
      return (latest?.vulnerabilities ?? []).map((v) => v.id as string).sort();
    };
    const follow = async (worker: ReportWorker) => {
      await worker.checkAdvisories();
      await worker.drain();
    };

    before(async () => {
      work = mkdtempSync(join(tmpdir(), "bulwark-report-changes-"));
      server = await startTestServer(backend, {
        registry: { blobDirectory: join(work, "blobs") },
        rootGroups: [
          { uid: publicGroup, name: "public advisories" },
          { uid: otherPublicGroup, name: "more public advisories" },
        ],
        advisories: { publicGroups: [publicGroup, otherPublicGroup] },
        // the server's own look at the advisories never comes during the test: this test's replica looks
        images: { pollIntervalMs: 3_600_000 },
      });
      const api = restClient(server.url, server.operatorToken);
      ok(await api.post("/iam/v2beta1/groups", { name: "acme" }));
      const image = await buildImage(join(work, "image"), {
        layers: [
          {
            files: {
              "etc/os-release": osRelease("wolfi", "20230201"),
              "lib/apk/db/installed": apkInstalled([{ name: PACKAGE, version: INSTALLED }]),
            },
          },
        ],
      });
      const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      const run = await pushImage(skopeoIn(work), image, {
        host: new URL(server.url).host,
        repository: "acme/app",
        creds: `_token:${password}`,
      });
      assert.equal(run.code, 0, run.stderr);
      digest = image.digest;
      assert.equal((await waitForInventory(server, digest)).state, "done");
      repoUid = (await sql<{ uid: string }>`select uid from repos where name = 'app'`.execute(server.db)).rows[0]!.uid;
    });
    after(async () => {
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("an import committing after another replica looked still reaches the report", async () => {
      const late = nextId();
      const early = nextId();
      // `late` exists, fixed below the installed version: not reported.
      await importDocument(advisoryDocument([{ id: late, fixedIn: "0.5-r0" }]));
      const worker = await healthy();
      await follow(worker);
      assert.ok(!(await reported()).includes(late));

      const lateContent = advisoryDocument([{ id: late, fixedIn: "2.0-r0" }]);
      let lateImport: Promise<void>;
      let locker: pg.Client | undefined;
      if (server.databaseUrl) {
        // The re-import of `late` waits on its advisory's row, locked here, while `early` (same
        // package, the other group: imports into one group wait for each other) is imported,
        // committed and followed by a replica, several times over.
        locker = new pg.Client({ connectionString: server.databaseUrl });
        await locker.connect();
        await locker.query("begin");
        await locker.query("select uid from advisories where advisory_id = $1 for update", [late]);
        lateImport = importDocument(lateContent);
        await until(
          async () =>
            Number(
              (
                await locker!.query(
                  "select count(*) as n from pg_locks where not granted and locktype = 'transactionid'",
                )
              ).rows[0].n,
            ) > 0,
          "the import of the late advisory waiting on its row's lock",
        );
      } else lateImport = Promise.resolve();
      try {
        await importDocument(advisoryDocument([{ id: early, fixedIn: "2.0-r0" }]), otherPublicGroup);
        for (let i = 0; i < 3; i++) await follow(worker);
        assert.deepEqual(await reported(), [early], "the late import has not committed yet");
      } finally {
        await locker?.query("commit");
        await locker?.end();
      }
      await lateImport;
      if (!server.databaseUrl) await importDocument(lateContent);
      await follow(worker);
      assert.deepEqual(await reported(), [early, late].sort(), "the late commit reached the report");
      assert.equal(await repositories().advisoryChanges.pending(), 0, "every change followed");
    });

    it("a replica dying between claiming changes and committing leaves them for the next", async () => {
      const id = nextId();
      await importDocument(advisoryDocument([{ id, fixedIn: "3.0-r0" }]));
      const changes = repositories().advisoryChanges;
      const recorded = await changes.pending();
      assert.ok(recorded > 0, "the import recorded its change");
      const dying = await replica({
        reposHoldingMany: () => Promise.reject(new Error("the replica died mid-claim")),
      });
      await assert.rejects(dying.checkAdvisories(), /died mid-claim/);
      assert.equal(await changes.pending(), recorded, "the claimed changes are still recorded");
      assert.ok(!(await reported()).includes(id));

      const worker = await healthy();
      assert.equal(await worker.checkAdvisories(), 1, "the image, in its one repo, queued");
      assert.equal(await changes.pending(), 0);
      await worker.drain();
      assert.ok((await reported()).includes(id));
    });

    it("an import that fails records no change", async () => {
      const before = await repositories().advisoryChanges.pending();
      const api = restClient(server.url, server.operatorToken);
      // an unknown group: the import writes nothing, and no change is recorded
      const res = await api.post(IMPORT_PATH, {
        parent: randomBytes(20).toString("hex"),
        documents: [{ name: "x.advisories.yaml", content: advisoryDocument([{ id: nextId(), fixedIn: "9.0-r0" }]) }],
      });
      assert.notEqual(res.status, 200, JSON.stringify(res.body));
      assert.equal(await repositories().advisoryChanges.pending(), before);
    });
  });
}
