// Vulnerability reports end to end, through the real worker: the wolfi fixtures imported into a
// public advisory group, an apk image pushed with skopeo, and its report appearing with no manual
// step (the indexer reads it, the worker matches it). The expectation is the independent
// script's (test/fixtures/images/expected-findings.json, computed from the same YAML by
// expected-findings.py), and three findings checked by hand against the YAML. Then an advisory
// change that flips a finding (a new report row, history kept, the vuln_report.created event),
// the cross-org rules (another org's private advisory never named in this org's report, named in
// that org's own report of the same image; another org lists nothing of ours), the same image in
// a second repo reported without a second read, and the v1 Registry.GetVulnReport over REST and
// gRPC.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import { sql } from "kysely";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import { Registry } from "../../src/gen/platform/registry/v1/registry.platform_pb.js";
import { imagesModule } from "../../src/images/api.js";
import type { InstalledPackage } from "../../src/images/inventory/types.js";
import type { ReportWorker } from "../../src/images/reports.js";
import { ok } from "../support/assertions.js";
import { ADVISORY_FIXTURES, cgaId, fixtureDocument, IMPORT_PATH } from "../support/advisories.js";
import { backends } from "../support/db-templates.js";
import { lastEventSeq } from "../support/events.js";
import { createGroup, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { apkInstalled, buildImage, inventoryOf, osRelease, pushImage, waitForInventory } from "../support/images.js";
import { workload, type Workload } from "../support/principals.js";
import { bearer, startTestServer, type TestServer } from "../support/server.js";
import { skopeoIn } from "../support/skopeo.js";
import { until } from "../support/wait.js";

const VULN_REPORT_CREATED = "dev.chainguard.api.platform.registry.vuln_report.created.v1";
const IMAGES_FIXTURES = join(import.meta.dirname, "..", "fixtures", "images");
type Expected = { id: string; aliases: string[]; purls: string[]; fix: { versions: string[]; state: string } };
const EXPECTED = JSON.parse(readFileSync(join(IMAGES_FIXTURES, "expected-findings.json"), "utf8")) as Expected[];
/** The Wolfi apks of the fixture package list (real names and versions; libcrypto3/libssl3 are openssl's). */
const WOLFI_PACKAGES = (JSON.parse(readFileSync(join(IMAGES_FIXTURES, "packages.json"), "utf8")) as InstalledPackage[])
  .filter((p) => p.purl.startsWith("pkg:apk/wolfi/"))
  .map((p) => ({ name: p.name, version: p.version, origin: p.origin, license: p.license }));
/** Two packages of ours the fixtures have no advisories for: the advisories below name them. */
const BUSYBOX = { name: "busybox", version: "1.36.1-r6", origin: "busybox", license: "GPL-2.0-only" };
const GLIBC = { name: "glibc", version: "2.39-r1", origin: "glibc", license: "LGPL-2.1-or-later" };
const purl = (p: { name: string; version: string }) => `pkg:apk/wolfi/${p.name}@${p.version}?arch=x86_64`;

const BUSYBOX_ADVISORY = cgaId(280_001);
const GLIBC_ADVISORY = cgaId(280_002);

/** A one-advisory document: detected, and (when given) fixed at `fixedVersion`. */
function advisoryDocument(pkg: string, id: string, alias: string, fixedVersion?: string): string {
  return [
    "schema-version: 2.0.2",
    "package:",
    `  name: ${pkg}`,
    "advisories:",
    `  - id: ${id}`,
    "    aliases:",
    `      - ${alias}`,
    "    events:",
    "      - timestamp: 2024-06-01T00:00:00Z",
    "        type: detection",
    "        data:",
    "          type: manual",
    ...(fixedVersion
      ? [
          "      - timestamp: 2024-07-01T00:00:00Z",
          "        type: fixed",
          "        data:",
          `          fixed-version: ${fixedVersion}`,
        ]
      : []),
    "",
  ].join("\n");
}

/** The wolfi fixtures and the images fixtures (what expected-findings.py reads, without the OSV records). */
function fixtureDocuments() {
  const wolfi = join(ADVISORY_FIXTURES, "wolfi");
  const own = join(IMAGES_FIXTURES, "advisories");
  return [
    ...readdirSync(wolfi)
      .filter((f) => f.endsWith(".advisories.yaml"))
      .map((f) => fixtureDocument(join(wolfi, f))),
    ...readdirSync(own)
      .filter((f) => f.endsWith(".advisories.yaml"))
      .map((f) => ({ name: `images/${f}`, content: readFileSync(join(own, f), "utf8") })),
  ];
}

const ids = (report: Json) => (report.vulnerabilities as Json[]).map((v) => v.id as string).sort();

for (const backend of backends()) {
  describe(`vulnerability reports through the worker [${backend}]`, () => {
    let server: TestServer;
    let work: string;
    let skopeo: ReturnType<typeof skopeoIn>;
    let host: string;
    let creds: string;
    const publicGroup = "5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f";
    let operator: ReturnType<typeof restClient>;
    let acme: Json;
    let globex: Json;
    let viewerA: Workload;
    let viewerB: Workload;
    let digest: string;
    let acmeRepo: string;
    let firstReport: Json;

    const worker = () => server.exportsOf(imagesModule).reports as ReportWorker;
    const list = (token: string, params: Record<string, string>) =>
      restClient(server.url, token).get(`/registry/v1/vuln_reports?${new URLSearchParams(params)}`);
    const listed = async (token: string, params: Record<string, string>): Promise<Json[]> =>
      ok(await list(token, params), `list ${JSON.stringify(params)}`).items ?? [];
    /** the uid of repo `name` in organization `org` */
    const repoUid = async (org: Json, name: string) =>
      (
        await sql<{ uid: string }>`select uid from repos where name = ${name} and uid like ${`${org.uid}/%`}`.execute(
          server.db,
        )
      ).rows[0]!.uid;
    const importDocuments = async (parent: string, documents: { name: string; content: string }[]) => {
      const imported = ok(await operator.post(IMPORT_PATH, { parent, documents }), "import");
      for (const r of imported.results) assert.equal(r.problem, undefined, `${r.name}: ${JSON.stringify(r.problem)}`);
    };

    before(async () => {
      work = mkdtempSync(join(tmpdir(), "bulwark-reports-"));
      skopeo = skopeoIn(work);
      server = await startTestServer(backend, {
        registry: { blobDirectory: join(work, "blobs") },
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
        images: { pollIntervalMs: 100 },
      });
      host = new URL(server.url).host;
      operator = restClient(server.url, server.operatorToken);
      creds = `_token:${await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] })}`;
      acme = await createGroup(operator, undefined, "acme");
      globex = await createGroup(operator, undefined, "globex");
      const viewer = { uid: builtinRoleUid("viewer"), capabilities: [] };
      viewerA = await workload(server, operator, acme.uid, "viewer-a", [{ at: acme.uid, role: viewer }]);
      viewerB = await workload(server, operator, globex.uid, "viewer-b", [{ at: globex.uid, role: viewer }]);
      await importDocuments(publicGroup, [
        ...fixtureDocuments(),
        { name: "busybox.advisories.yaml", content: advisoryDocument("busybox", BUSYBOX_ADVISORY, "CVE-2099-2801") },
      ]);
      // globex's own advisory group (its organization): acme may never see it.
      await importDocuments(globex.uid, [
        { name: "glibc.advisories.yaml", content: advisoryDocument("glibc", GLIBC_ADVISORY, "CVE-2099-2802") },
      ]);
    });
    after(async () => {
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("reports a pushed apk image with no manual step: by repo, tag and digest, as computed independently", async () => {
      const image = await buildImage(join(work, "app"), {
        layers: [
          {
            files: {
              "etc/os-release": osRelease("wolfi", "20230201"),
              "lib/apk/db/installed": apkInstalled([...WOLFI_PACKAGES, BUSYBOX, GLIBC]),
            },
          },
        ],
      });
      digest = image.digest;
      const pushed = await pushImage(skopeo, image, { host, repository: "acme/app", creds });
      assert.equal(pushed.code, 0, pushed.stderr);
      acmeRepo = await repoUid(acme, "app");

      const reports = await until(async () => {
        const items = await listed(viewerA.token, { repo_id: acmeRepo });
        return items.length > 0 ? items : undefined;
      }, "acme/app's report");
      assert.equal(reports.length, 1);
      firstReport = reports[0]!;
      assert.equal(firstReport.digest, digest);
      assert.equal(firstReport.scanner.name, "UNKNOWN", "our scanner has no Scanner.Name of its own");
      assert.match(firstReport.scanner.version, /^bulwark /);
      assert.ok(firstReport.scanner.dbBuildTime, "db_build_time: when the advisories last changed");

      // expected-findings.py's findings for these packages (computed from the YAML, not by our matcher)
      const purls = new Set(WOLFI_PACKAGES.map(purl));
      const expected = EXPECTED.filter((e) => e.purls.some((p) => purls.has(p)));
      assert.ok(expected.length >= 15, "a non-trivial expectation");
      const got = (firstReport.vulnerabilities as Json[]).map((v) => ({
        id: v.id,
        aliases: v.aliases,
        purls: v.purls,
        fix: v.fix,
      }));
      const busybox = {
        id: BUSYBOX_ADVISORY,
        aliases: ["CVE-2099-2801"],
        purls: [purl(BUSYBOX)],
        fix: { versions: [], state: "NOT_FIXED" },
      };
      const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
      assert.deepEqual(got.sort(byId), [...expected, busybox].sort(byId));

      // By hand from the YAML: openssl's CVE-2024-5535 is fixed in 3.3.1-r3, above the installed
      // 3.3.0-r6 of its subpackages (matched by origin) ...
      const cve5535 = got.find((v) => v.aliases.includes("CVE-2024-5535"))!;
      assert.equal(cve5535.id, "CGA-3mrr-589r-46qj");
      assert.deepEqual(cve5535.purls, [
        "pkg:apk/wolfi/libcrypto3@3.3.0-r6?arch=x86_64",
        "pkg:apk/wolfi/libssl3@3.3.0-r6?arch=x86_64",
      ]);
      assert.deepEqual(cve5535.fix, { versions: ["3.3.1-r3"], state: "FIXED" });
      // ... heimdal's only advisory is fixed in 7.8.0-r1, below heimdal-libs 7.8.0-r2: nothing ...
      assert.ok(!got.some((v) => v.purls.some((p: string) => p.includes("heimdal-libs"))));
      // ... and openssl's CVE-2023-6129 ends in a false-positive determination: never.
      assert.ok(!got.some((v) => v.id === "CGA-gmc7-prpg-3wrh" || v.aliases.includes("CVE-2023-6129")));
      assert.ok(!ids(firstReport).includes(GLIBC_ADVISORY), "globex's private advisory is not acme's");

      // by tag and by digest: the same report
      assert.deepEqual(await listed(viewerA.token, { repo_id: acmeRepo, tag: image.tag }), reports);
      assert.deepEqual(await listed(viewerA.token, { digest }), reports);
    });

    it("follows an advisory change: a fix below the installed version removes the finding, with history and the event", async () => {
      const seq = await lastEventSeq(server);
      await importDocuments(publicGroup, [
        {
          name: "busybox.advisories.yaml",
          content: advisoryDocument("busybox", BUSYBOX_ADVISORY, "CVE-2099-2801", "1.36.1-r1"),
        },
      ]);
      const history = await until(async () => {
        const items = await listed(viewerA.token, { repo_id: acmeRepo });
        return items.length > 1 ? items : undefined;
      }, "acme/app's second report");
      assert.equal(history.length, 2, "one new row");
      const [newest, oldest] = history as [Json, Json];
      assert.deepEqual(oldest, firstReport, "the first report is kept as it was");
      assert.ok(!ids(newest).includes(BUSYBOX_ADVISORY), "fixed in 1.36.1-r1, below the installed 1.36.1-r6");
      assert.deepEqual(
        ids(newest),
        ids(oldest).filter((id) => id !== BUSYBOX_ADVISORY),
      );
      assert.ok(Date.parse(newest.scanner.dbBuildTime) > Date.parse(oldest.scanner.dbBuildTime));

      // created_since: before the first report, both; at the first report's time, the newest only
      const before = new Date(Date.parse(oldest.createdAt) - 1).toISOString();
      assert.equal((await listed(viewerA.token, { digest, created_since: before })).length, 2);
      assert.deepEqual(await listed(viewerA.token, { digest, created_since: oldest.createdAt }), [newest]);

      const events = (
        await sql<{ subject: string; type: string; parent_uid: string }>`
          select subject, type, parent_uid from events where seq > ${seq} and type = ${VULN_REPORT_CREATED}`.execute(
          server.db,
        )
      ).rows;
      assert.deepEqual(
        events.map((e) => [e.subject, e.parent_uid]),
        [[acmeRepo, acme.uid]],
        "one event, for the one changed report, its subject the repo",
      );
    });

    it("reports the same image in another org's repo without reading it again, with that org's advisories", async () => {
      const readBefore = await inventoryOf(server, digest);
      const advisoryRows = worker().advisoryRowsRead;
      assert.equal(readBefore?.attempts, 1);
      const image = { dir: join(work, "app"), tag: "v1", digest, mediaType: "", platforms: [] };
      const pushed = await pushImage(skopeo, image, { host, repository: "globex/app", creds, tag: "prod" });
      assert.equal(pushed.code, 0, pushed.stderr);
      const globexRepo = await repoUid(globex, "app");
      const [globexReport] = await until(async () => {
        const items = await listed(viewerB.token, { repo_id: globexRepo });
        return items.length > 0 ? items : undefined;
      }, "globex/app's report");
      const readAfter = await waitForInventory(server, digest);
      assert.equal(readAfter.attempts, 1, "read once");
      assert.equal(readAfter.indexTime?.getTime(), readBefore?.indexTime?.getTime());

      assert.equal(worker().advisoryRowsRead, advisoryRows, "matched from the worker's copy of the advisories");
      assert.ok(ids(globexReport!).includes(GLIBC_ADVISORY), "globex's report names globex's advisory");
      const acmeNow = (await listed(viewerA.token, { repo_id: acmeRepo }))[0]!;
      assert.deepEqual(ids(globexReport!), [...ids(acmeNow), GLIBC_ADVISORY].sort());

      // acme's reports never name it, whoever reads them (the operator sees every group)
      for (const token of [viewerA.token, server.operatorToken])
        for (const report of await listed(token, { repo_id: acmeRepo }))
          assert.ok(!ids(report).includes(GLIBC_ADVISORY));
      // acme's viewer lists acme's reports of the digest only; globex lists nothing of acme's
      assert.ok((await listed(viewerA.token, { digest })).every((r) => !ids(r).includes(GLIBC_ADVISORY)));
      assert.equal((await listed(viewerA.token, { repo_id: globexRepo })).length, 0);
      assert.equal((await listed(viewerB.token, { repo_id: acmeRepo })).length, 0);
      assert.deepEqual(await listed(viewerB.token, { digest }), [globexReport]);
    });

    it("answers Registry.GetVulnReport in the tenant VulnReport shape, over REST and gRPC", async () => {
      const path = `/registry/v1/repos/${acmeRepo}/digests/${digest}/vulnreport`;
      const rest = ok(await restClient(server.url, viewerA.token).get(path), "GetVulnReport");
      const newest = (await listed(viewerA.token, { repo_id: acmeRepo }))[0]!;
      assert.equal(rest.scanner.name, "bulwark");
      assert.equal(`bulwark ${rest.scanner.version}`, newest.scanner.version);
      assert.equal(rest.reportGeneration, newest.createdAt);
      assert.equal(rest.vulnerabilityDbLastBuildTime, newest.scanner.dbBuildTime);
      // one match per affected package
      const matches = rest.vulnerabilityMatches as Json[];
      assert.equal(
        matches.length,
        (newest.vulnerabilities as Json[]).reduce((n, v) => n + v.purls.length, 0),
      );
      const libcrypto = matches.find(
        (m) => m.vulnerability.id === "CGA-3mrr-589r-46qj" && m.pkg.name === "libcrypto3",
      )!;
      assert.equal(libcrypto.vulnerability.displayId, "CVE-2024-5535");
      assert.deepEqual(libcrypto.pkg, {
        id: "pkg:apk/wolfi/libcrypto3@3.3.0-r6?arch=x86_64",
        name: "libcrypto3",
        version: "3.3.0-r6",
        license: WOLFI_PACKAGES.find((p) => p.name === "libcrypto3")!.license,
        description: "",
        purl: "pkg:apk/wolfi/libcrypto3@3.3.0-r6?arch=x86_64",
      });
      assert.deepEqual(libcrypto.fix, { versions: ["3.3.1-r3"], state: "FIXED" });
      assert.ok(!matches.some((m) => m.vulnerability.id === GLIBC_ADVISORY));
      const raw = JSON.parse(Buffer.from(rest.rawVulnReport, "base64").toString("utf8"));
      assert.equal(raw.schema, "bulwark.dev/vuln-report/v1");
      assert.equal(raw.digest, digest);
      assert.equal(raw.matches.length, newest.vulnerabilities.length);

      // gRPC (Connect's gRPC transport, as acme's viewer)
      const sessions = new Http2SessionManager(server.url);
      const rpc = createClient(
        Registry,
        createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(viewerA.token)], sessionManager: sessions }),
      );
      try {
        const viaGrpc = await rpc.getVulnReport({ repoId: acmeRepo, digest });
        assert.equal(viaGrpc.id, rest.id);
        assert.equal(viaGrpc.scanner?.name, "bulwark");
        assert.equal(viaGrpc.vulnerabilityMatches.length, matches.length);
        assert.deepEqual(JSON.parse(Buffer.from(viaGrpc.rawVulnReport).toString("utf8")), raw);
        await assert.rejects(rpc.getVulnReport({ repoId: acmeRepo, digest: "sha256:nope" }), (err: ConnectError) => {
          assert.equal(err.code, Code.InvalidArgument);
          return true;
        });
      } finally {
        sessions.abort();
      }

      // globex may not read acme's; an unknown image is NOT_FOUND
      const denied = await restClient(server.url, viewerB.token).get(path);
      assert.ok([403, 404].includes(denied.status), `${denied.status}`);
      const unknown = await restClient(server.url, viewerA.token).get(
        `/registry/v1/repos/${acmeRepo}/digests/sha256:${"0".repeat(64)}/vulnreport`,
      );
      assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
    });
  });
}
