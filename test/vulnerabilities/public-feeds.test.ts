// The feeds of a public advisory group (`--public-advisories`) without credentials, as OSV clients
// and apk scanners call them: osv.dev's documented `curl -d` requests replayed anonymously against
// real corpus documents (wolfi-dev advisory YAML, RustSec OSV records); Wolfi and Chainguard names
// (and their purls) for the same Wolfi documents; a private organization's advisories never in an
// anonymous answer, and their ids answered like unknown ones; unknown ecosystems refused naming
// the known ones; one timestamp precision in every record; the per-address rate limit.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { assertNotFound, assertRpcError, assertUnauthenticated, fieldViolations, ok } from "../support/assertions.js";
import {
  ADVISORY_FIXTURES,
  fixtureDocument,
  fixtureFiles,
  IMPORT_PATH,
  listAllAdvisories,
} from "../support/advisories.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createIdentity, createRoleBinding, VIEWER_ROLE_UID, type Json } from "../support/fixtures.js";
import { restClient, type JsonResponse } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";
import * as wolfiEcosystem from "../../src/vulnerabilities/migrations/011_wolfi_ecosystem.js";

/** The one timestamp form of every OSV record served: RFC 3339, UTC, milliseconds. */
const OSV_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** The private organization's documents (the rest of the fixtures are public). */
const PRIVATE_YAML = join(ADVISORY_FIXTURES, "wolfi", "cedar.advisories.yaml");
const PRIVATE_OSV = join(ADVISORY_FIXTURES, "rustsec", "RUSTSEC-2024-0375.json");
/** cedar's advisory alias, which a public ztunnel advisory has too */
const SHARED_ALIAS = "GHSA-wwq9-3cpr-mm53";

/** What `curl -d '<body>' <url>` sends (osv.dev's documented requests): a form-typed POST, no credentials. */
async function curlData(url: string, body: string): Promise<JsonResponse> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

const idsOf = (answer: Json): string[] => (answer.vulns ?? []).map((v: Json) => v.id as string).sort();

for (const backend of backends()) {
  describe(`public advisory feeds [${backend}]`, () => {
    let server: TestServer;
    const publicGroup = randomBytes(20).toString("hex");
    let privateOrg: Json;
    let publicAdvisories: Json[];
    let privateAdvisories: Json[];
    /** a public, fixed Wolfi advisory (sysstat's or another) */
    let fixed: Json;
    let fixedVersion: string;
    let readerToken: string;
    let member: ReturnType<typeof restClient>;
    const anonymous = () => restClient(server.url);
    const osv = (path: string) => `${server.url}${path}`;

    before(async () => {
      server = await startTestServer(backend, {
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
      });
      const operator = restClient(server.url, server.operatorToken);
      privateOrg = await createGroup(operator, undefined, "private advisories");
      const publicFiles = fixtureFiles().filter((f) => f !== PRIVATE_YAML && f !== PRIVATE_OSV);
      const imported = ok(
        await operator.post(IMPORT_PATH, { parent: publicGroup, documents: publicFiles.map(fixtureDocument) }),
      );
      for (const r of imported.results) assert.equal(r.problem, undefined, `${r.name}: ${JSON.stringify(r.problem)}`);
      // The private RustSec record with its times as another publisher might write them: an
      // offset, microseconds, a tenth of a second.
      const record = JSON.parse(readFileSync(PRIVATE_OSV, "utf8")) as Json;
      assert.equal(record.modified, "2024-09-26T12:26:22Z");
      record.modified = "2024-09-26T14:26:22.123456+02:00";
      record.published = "2024-09-25T12:00:00.5Z";
      const privateImport = ok(
        await operator.post(IMPORT_PATH, {
          parent: privateOrg.uid,
          documents: [
            fixtureDocument(PRIVATE_YAML),
            { name: "RUSTSEC-2024-0375.json", content: JSON.stringify(record) },
          ],
        }),
      );
      for (const r of privateImport.results) assert.equal(r.problem, undefined, JSON.stringify(r));
      publicAdvisories = (await listAllAdvisories(operator, { "uidp.childrenOf": publicGroup })).items;
      privateAdvisories = (await listAllAdvisories(operator, { "uidp.childrenOf": privateOrg.uid })).items;
      assert.equal(privateAdvisories.length, 2);
      fixed = publicAdvisories.find((a) => a.artifactName === "sysstat" && a.events.at(-1).fixed)!;
      assert.ok(fixed, "sysstat's fixed advisory is public");
      fixedVersion = fixed.events.at(-1).fixed.fixedVersion;

      const reader = await createIdentity(operator, privateOrg.uid, "private reader", "feeds-reader");
      await createRoleBinding(operator, privateOrg.uid, reader.uid, VIEWER_ROLE_UID);
      readerToken = await server.tokenFor(reader.uid);
      member = restClient(server.url, readerToken);
    });
    after(() => server?.close());

    it("osv.dev's documented requests, anonymously: query by name in Wolfi and in Chainguard, by either purl, querybatch, GET /v1/vulns", async () => {
      const record = ok(await anonymous().get(`/v1/vulns/${fixed.advisoryId}`), "GET /v1/vulns");
      assert.equal(record.id, fixed.advisoryId);
      assert.deepEqual(record.affected[0].package, {
        ecosystem: "Wolfi",
        name: "sysstat",
        purl: "pkg:apk/wolfi/sysstat",
      });
      assert.deepEqual(record.affected[0].ranges, [
        { type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed: fixedVersion }] },
      ]);
      assert.deepEqual(record.related, fixed.aliases);

      const old = "12.7.2-r0"; // before the fix
      const byWolfi = ok(
        await curlData(osv("/v1/query"), `{"version": "${old}", "package": {"name": "sysstat", "ecosystem": "Wolfi"}}`),
      );
      assert.ok(idsOf(byWolfi).includes(fixed.advisoryId), JSON.stringify(byWolfi));
      assert.deepEqual(
        byWolfi.vulns.find((v: Json) => v.id === fixed.advisoryId),
        record,
        "the same record",
      );
      const byChainguard = ok(
        await curlData(
          osv("/v1/query"),
          `{"version": "${old}", "package": {"name": "sysstat", "ecosystem": "Chainguard"}}`,
        ),
      );
      assert.deepEqual(idsOf(byChainguard), idsOf(byWolfi), "Chainguard reads the Wolfi documents");
      for (const purl of [`pkg:apk/wolfi/sysstat@${old}`, `pkg:apk/chainguard/sysstat@${old}?arch=x86_64`]) {
        const byPurl = ok(await curlData(osv("/v1/query"), `{"package": {"purl": "${purl}"}}`), purl);
        assert.deepEqual(idsOf(byPurl), idsOf(byWolfi), purl);
      }
      const atFix = ok(
        await curlData(osv("/v1/query"), `{"package": {"purl": "pkg:apk/wolfi/sysstat@${fixedVersion}"}}`),
      );
      assert.ok(!idsOf(atFix).includes(fixed.advisoryId), "the fixed version is not affected");

      // A public RustSec record by its crates.io name and by its purl, with osv.dev's spelling.
      const rust = publicAdvisories.find((a) => a.advisoryId === "RUSTSEC-2022-0031")!;
      assert.ok(rust, "RUSTSEC-2022-0031 is public");
      const batch = ok(
        await curlData(
          osv("/v1/querybatch"),
          JSON.stringify({
            queries: [
              { package: { purl: `pkg:apk/chainguard/sysstat@${old}` } },
              { commit: "6879efc2c1596d11a6a6ad296f80063b558d5e0f" },
              { package: { ecosystem: "crates.io", name: "rulex" }, version: "0.4.2" },
              { package: { purl: "pkg:cargo/rulex@0.4.3" } },
              { package: { ecosystem: "Wolfi", name: "no-such-package" }, version: "1.0-r0" },
            ],
          }),
        ),
      );
      assert.equal(batch.results.length, 5);
      assert.deepEqual(idsOf(batch.results[0]), idsOf(byWolfi));
      assert.ok(batch.results[0].vulns.every((v: Json) => Object.keys(v).sort().join() === "id,modified"));
      assert.deepEqual(batch.results[1], {}, "no git ranges here: a commit matches nothing");
      assert.deepEqual(idsOf(batch.results[2]), ["RUSTSEC-2022-0031"]);
      assert.deepEqual(batch.results[3], {}, "the fixed crate version");
      assert.deepEqual(batch.results[4], {});

      const secdb = await fetch(osv("/vulnerabilities/secdb.json"));
      assert.equal(secdb.status, 200);
      const packages = new Map(
        ((await secdb.json()) as Json).packages.map((p: Json) => [p.pkg.name, p.pkg.secfixes] as const),
      );
      assert.ok((packages.get("sysstat") as Json)?.[fixedVersion]?.includes(fixed.advisoryId), "sysstat's fix");
    });

    it("a private organization's advisories: never in an anonymous answer, their ids answered as unknown ones; its readers see them and the public ones", async () => {
      const cedar = privateAdvisories.find((a) => a.artifactName === "cedar")!;
      const unknown = await anonymous().get("/v1/vulns/CGA-2222-2222-2222");
      const hidden = await anonymous().get(`/v1/vulns/${cedar.advisoryId}`);
      assertNotFound(unknown, "an unknown id");
      assertNotFound(hidden, "a private id");
      assert.deepEqual(
        { ...hidden.body, message: undefined, details: hidden.body.details.slice(0, 1) },
        { ...unknown.body, message: undefined, details: unknown.body.details.slice(0, 1) },
        "the same answer as for an id that does not exist",
      );
      assertNotFound(await anonymous().get("/v1/vulns/RUSTSEC-2024-0375"), "a private OSV record");

      // The alias cedar shares with a public ztunnel advisory: the public one alone.
      const shared = ok(await anonymous().get(`/v1/vulns/${SHARED_ALIAS}`));
      const publicWithAlias = publicAdvisories.filter((a) => a.aliases.includes(SHARED_ALIAS)).map((a) => a.advisoryId);
      assert.ok(publicWithAlias.length > 0);
      assert.ok(!JSON.stringify(shared).includes(cedar.advisoryId), JSON.stringify(shared));
      assert.ok(!JSON.stringify(shared).includes("cedar"), JSON.stringify(shared));

      const privateQueries = [
        { package: { name: "cedar", ecosystem: "Wolfi" } },
        { package: { purl: "pkg:apk/chainguard/cedar@0.1-r0" } },
        { package: { name: "atty", ecosystem: "crates.io" }, version: "0.2.14" },
        { package: { purl: "pkg:cargo/atty@0.2.14" } },
      ];
      const batch = ok(await anonymous().post("/v1/querybatch", { queries: privateQueries }));
      assert.deepEqual(batch.results, [{}, {}, {}, {}]);
      for (const q of privateQueries)
        assert.deepEqual(ok(await anonymous().post("/v1/query", q)), {}, JSON.stringify(q));
      const secdb = (await (await fetch(`${server.url}/vulnerabilities/secdb.json`)).json()) as Json;
      assert.ok(secdb.packages.length > 0);
      assert.ok(!secdb.packages.some((p: Json) => p.pkg.name === "cedar"), "cedar is not in the public secdb");

      // A reader of the organization: its advisories and the public ones.
      ok(await member.get(`/v1/vulns/${cedar.advisoryId}`), "a reader's own advisory");
      const both = ok(await member.get(`/v1/vulns/${SHARED_ALIAS}`));
      for (const id of [cedar.advisoryId, ...publicWithAlias]) assert.ok(both.related.includes(id), id);
      const memberBatch = ok(
        await member.post("/v1/querybatch", {
          queries: [...privateQueries, { package: { name: "sysstat", ecosystem: "Wolfi" }, version: "12.7.2-r0" }],
        }),
      );
      assert.deepEqual(idsOf(memberBatch.results[0]), [cedar.advisoryId]);
      assert.deepEqual(idsOf(memberBatch.results[1]), [cedar.advisoryId]);
      assert.deepEqual(idsOf(memberBatch.results[2]), ["RUSTSEC-2024-0375"]);
      assert.ok(idsOf(memberBatch.results[4]).includes(fixed.advisoryId), "a public advisory");
      const memberSecdb = await fetch(`${server.url}/vulnerabilities/secdb.json`, {
        headers: { authorization: `Bearer ${readerToken}` },
      });
      const memberPackages = ((await memberSecdb.json()) as Json).packages.map((p: Json) => p.pkg.name);
      assert.ok(memberPackages.includes("cedar") && memberPackages.includes("sysstat"));

      // A token that does not verify is refused, never taken for no credentials.
      const forged = restClient(server.url, "not-a-token");
      assertUnauthenticated(
        await forged.post("/v1/query", { package: { name: "sysstat", ecosystem: "Wolfi" } }),
        "forged",
      );
      assertUnauthenticated(await forged.get(`/v1/vulns/${fixed.advisoryId}`), "forged GET");
    });

    it("unknown ecosystems: 400 naming the known ones, nothing answered; OSV's names in any case and with a release", async () => {
      const bad = await curlData(
        `${server.url}/v1/query`,
        '{"version": "1.0", "package": {"name": "sysstat", "ecosystem": "Wolfy"}}',
      );
      assertRpcError(bad, 400, 3, "unknown ecosystem");
      const [violation] = fieldViolations(bad);
      assert.equal(violation!.field, "package.ecosystem");
      for (const known of ["Wolfi", "Chainguard", "crates.io", "PyPI", "Alpine", "Debian"])
        assert.ok(violation!.description.includes(known), `${known} in ${violation!.description}`);
      assert.match(bad.body.message, /"Wolfy"/);

      const batch = await anonymous().post("/v1/querybatch", {
        queries: [{ package: { name: "sysstat", ecosystem: "Wolfi" } }, { package: { name: "x", ecosystem: "apk" } }],
      });
      assertRpcError(batch, 400, 3, "an unknown ecosystem in a batch");
      assert.equal(fieldViolations(batch)[0]!.field, "queries[1].package.ecosystem");

      const lower = ok(await anonymous().post("/v1/query", { package: { name: "sysstat", ecosystem: "wolfi" } }));
      const exact = ok(await anonymous().post("/v1/query", { package: { name: "sysstat", ecosystem: "Wolfi" } }));
      assert.ok(idsOf(exact).includes(fixed.advisoryId));
      assert.deepEqual(idsOf(lower), idsOf(exact));
      assert.deepEqual(
        ok(await anonymous().post("/v1/query", { package: { name: "sysstat", ecosystem: "Debian:12" } })),
        {},
      );
    });

    it("modified and published: the same precision in every record served (RFC 3339, UTC, milliseconds)", async () => {
      const operator = restClient(server.url, server.operatorToken);
      const ids = [...new Set([...publicAdvisories, ...privateAdvisories].map((a) => a.advisoryId as string))];
      assert.ok(ids.length > 30);
      const records: Json[] = [];
      for (const id of ids) records.push(ok(await operator.get(`/v1/vulns/${id}`), id));
      for (const id of publicAdvisories.map((a) => a.advisoryId))
        records.push(ok(await anonymous().get(`/v1/vulns/${id}`)));
      for (const alias of [SHARED_ALIAS, "CVE-2022-31100"]) records.push(ok(await operator.get(`/v1/vulns/${alias}`)));
      const queried = ok(
        await operator.post("/v1/querybatch", {
          queries: [...publicAdvisories, ...privateAdvisories].map((a) => ({
            package: { name: a.artifactName, ...(a.artifactType === "apk" ? { ecosystem: "Wolfi" } : {}) },
          })),
        }),
      );
      const batchTimes = queried.results.flatMap((r: Json) => (r.vulns ?? []).map((v: Json) => v.modified));
      assert.ok(batchTimes.length > 0);
      for (const time of batchTimes) assert.match(time, OSV_TIME);
      let withdrawn = 0;
      for (const r of records) {
        assert.match(r.modified, OSV_TIME, r.id);
        if (r.published !== undefined) assert.match(r.published, OSV_TIME, r.id);
        if (r.withdrawn !== undefined) {
          assert.match(r.withdrawn, OSV_TIME, r.id);
          withdrawn++;
        }
      }
      assert.ok(withdrawn > 0, "the RustSec fixtures have withdrawn records");
      // An imported record's times, whatever their offset and precision, the same instants.
      const atty = ok(await operator.get("/v1/vulns/RUSTSEC-2024-0375"));
      assert.equal(atty.modified, "2024-09-26T12:26:22.123Z");
      assert.equal(atty.published, "2024-09-25T12:00:00.500Z");
      // A Wolfi record's modified is its latest event's time.
      const wolfi = ok(await operator.get(`/v1/vulns/${fixed.advisoryId}`));
      assert.equal(wolfi.modified, fixed.events.at(-1).createTime);
    });

    it("advisory YAML advisories stored as Chainguard's (before Wolfi's name) are Wolfi's after the upgrade", async () => {
      const group = await createGroup(restClient(server.url, server.operatorToken), undefined, "imported earlier");
      ok(
        await restClient(server.url, server.operatorToken).post(IMPORT_PATH, {
          parent: group.uid,
          documents: [fixtureDocument(PRIVATE_YAML), fixtureDocument(PRIVATE_OSV)],
        }),
      );
      const inGroup = () =>
        server.db.selectFrom("advisories").where("parent_uid", "=", group.uid).orderBy("advisory_id");
      // the rows as imports wrote them before: every advisory YAML advisory Chainguard's
      await server.db
        .updateTable("advisories")
        .set({ ecosystem: "Chainguard", purl: "pkg:apk/chainguard/cedar" })
        .where("parent_uid", "=", group.uid)
        .where("artifact_name", "=", "cedar")
        .execute();
      await wolfiEcosystem.up(server.db);
      assert.deepEqual(await inGroup().select(["artifact_name", "ecosystem", "purl"]).execute(), [
        { artifact_name: "cedar", ecosystem: "Wolfi", purl: "pkg:apk/wolfi/cedar" },
        { artifact_name: "atty", ecosystem: "crates.io", purl: "pkg:cargo/atty" },
      ]);
    });
  });

  describe(`feeds' access [${backend}]`, () => {
    it("anonymous callers are held to the per-address rate limit", async () => {
      const publicGroup = randomBytes(20).toString("hex");
      // one request an hour: a slow machine cannot earn back the one expected refused
      const server = await startTestServer(backend, {
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
        rateLimits: { address: { perSecond: 1 / 3600, burst: 2 } },
      });
      try {
        const anonymous = restClient(server.url);
        assertNotFound(await anonymous.get("/v1/vulns/CGA-2222-2222-2222"), "first");
        ok(await anonymous.post("/v1/query", { package: { name: "sysstat", ecosystem: "Wolfi" } }), "second");
        const limited = await anonymous.post("/v1/querybatch", { queries: [] });
        assertRpcError(limited, 429, 8, "third");
        assert.ok(Number(limited.headers.get("retry-after")) >= 1);
      } finally {
        await server.close();
      }
    });

    it("with no public advisory group, the feeds need credentials", async () => {
      const server = await startTestServer(backend);
      try {
        const anonymous = restClient(server.url);
        assertUnauthenticated(await anonymous.get("/v1/vulns/CGA-2222-2222-2222"), "GET /v1/vulns");
        assertUnauthenticated(await anonymous.post("/v1/query", { package: { purl: "pkg:apk/wolfi/x" } }), "query");
        assertUnauthenticated(await anonymous.post("/v1/querybatch", { queries: [] }), "querybatch");
        assertUnauthenticated(await anonymous.get("/vulnerabilities/secdb.json"), "secdb");
        ok(await restClient(server.url, server.operatorToken).post("/v1/querybatch", { queries: [] }), "with a token");
      } finally {
        await server.close();
      }
    });
  });
}
