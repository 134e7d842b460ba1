// chainguard.platform.registry.Vulnerabilities over REST: uploaded Grype/Trivy reports listed
// beside ours, the caller's visibility (another org reads nothing; a finding of an advisory group
// the viewer cannot see is never named), history (created_since), bad input changing nothing.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import { imagesRepositories } from "../../src/images/module.js";
import { ADVISORY_UID_KEY } from "../../src/images/storage/reports.js";
import { backends } from "../support/db-templates.js";
import { lastEventSeq } from "../support/events.js";
import { createGroup, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { workload, type Workload } from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const VULN_REPORT_CREATED = "dev.chainguard.api.platform.registry.vuln_report.created.v1";

function digestOf(bytes: Uint8Array | string): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** Pushes a one-layer image to `name:tag` over the OCI API; answers its digest. */
async function pushImage(server: TestServer, name: string, tag: string, authorization: string): Promise<string> {
  const blob = async (bytes: Uint8Array) => {
    const digest = digestOf(bytes);
    const res = await fetch(`${server.url}/v2/${name}/blobs/uploads/?digest=${digest}`, {
      method: "POST",
      headers: { authorization, "content-type": "application/octet-stream" },
      body: bytes,
    });
    assert.equal(res.status, 201, await res.text());
    return { digest, size: bytes.length };
  };
  const config = await blob(Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", n: Math.random() })));
  const layer = await blob(randomBytes(64));
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
    layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", ...layer }],
  });
  const res = await fetch(`${server.url}/v2/${name}/manifests/${tag}`, {
    method: "PUT",
    headers: { authorization, "content-type": OCI_MANIFEST },
    body: manifest,
  });
  assert.equal(res.status, 201, await res.text());
  return res.headers.get("docker-content-digest")!;
}

/** A Grype JSON report with one match, as `grype -o json` writes it (the fields we read). */
function grypeReport(digest: string): Json {
  return {
    matches: [
      {
        vulnerability: {
          id: "GHSA-xxxx-yyyy-zzzz",
          severity: "High",
          description: "a flaw in libexample",
          urls: ["https://example.invalid/advisory"],
          fix: { versions: ["1.2.4"], state: "fixed" },
          cvss: [{ version: "3.1", metrics: { baseScore: 7.5 } }],
        },
        relatedVulnerabilities: [{ id: "CVE-2024-0001" }],
        artifact: {
          name: "libexample",
          version: "1.2.3",
          purl: "pkg:apk/wolfi/libexample@1.2.3?arch=x86_64",
          locations: [{ path: "/lib/apk/db/installed" }],
        },
      },
    ],
    source: { type: "image", target: { manifestDigest: digest } },
    descriptor: { name: "grype", version: "0.80.0" },
  };
}

for (const backend of backends()) {
  describe(`vulnerability reports API [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let acme: Json;
    let globex: Json;
    let acmeRepo: string;
    let globexRepo: string;
    let digest: string;
    let globexDigest: string;
    let ownerA: Workload;
    let viewerA: Workload;
    let ownerB: Workload;

    const reportCount = async () =>
      Number(
        (
          (await server.db
            .selectFrom("vuln_reports" as never)
            .select((eb: any) => eb.fn.countAll().as("n"))
            .executeTakeFirstOrThrow()) as { n: string | number }
        ).n,
      );
    const repoUid = async (name: string) =>
      (
        (await server.db
          .selectFrom("repos" as never)
          .select("uid" as never)
          .where("name" as never, "=", name as never)
          .executeTakeFirstOrThrow()) as { uid: string }
      ).uid;
    const create = (token: string, repo: string, report: Json, raw?: string) =>
      restClient(server.url, token).post(
        `/registry/v1/vuln_reports/${repo}${raw === undefined ? "" : `?raw_report_filepath=${encodeURIComponent(raw)}`}`,
        report,
      );
    const list = (token: string, params: Record<string, string>) =>
      restClient(server.url, token).get(`/registry/v1/vuln_reports?${new URLSearchParams(params)}`);

    before(async () => {
      // Synthetic images with inventories recorded by the test: the indexer must not read them.
      server = await startTestServer(backend, { images: { inventoryConcurrency: 0 } });
      api = restClient(server.url, server.operatorToken);
      acme = await createGroup(api, undefined, "acme");
      globex = await createGroup(api, undefined, "globex");
      const operator = `Bearer ${await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] })}`;
      digest = await pushImage(server, "acme/app", "v1", operator);
      globexDigest = await pushImage(server, "globex/secret", "v1", operator);
      acmeRepo = await repoUid("app");
      globexRepo = await repoUid("secret");
      const owner = { uid: builtinRoleUid("owner"), capabilities: [] };
      const viewer = { uid: builtinRoleUid("viewer"), capabilities: [] };
      ownerA = await workload(server, api, acme.uid, "ci-a", [{ at: acme.uid, role: owner }]);
      viewerA = await workload(server, api, acme.uid, "viewer-a", [{ at: acme.uid, role: viewer }]);
      ownerB = await workload(server, api, globex.uid, "owner-b", [{ at: globex.uid, role: owner }]);
    });
    after(() => server.close());

    it("stores an uploaded Grype report (inline raw JSON), records its event, and lists it beside ours", async () => {
      // One of ours, as the recompute worker writes it: a finding of acme's own advisory and one
      // of globex's (which a report in acme's repo can never consider; here to prove the read filter).
      const { reports } = imagesRepositories(server.db);
      const ours = await reports.insert({
        repoUid: acmeRepo,
        digest,
        scannerName: 0,
        scannerVersion: "bulwark test",
        origin: "bulwark",
        createdAt: new Date(Date.now() - 60_000),
        vulnerabilities: [
          { id: "CVE-2024-1111", severity: "HIGH", [ADVISORY_UID_KEY]: `${acme.uid}/0123456789abcdef` },
          { id: "CVE-2024-2222", severity: "LOW", [ADVISORY_UID_KEY]: `${globex.uid}/0123456789abcdef` },
        ],
        findingsDigest: "x",
      });
      const seq = await lastEventSeq(server);
      const raw = JSON.stringify(grypeReport(digest));
      const res = await create(ownerA.token, acmeRepo, { digest, scanner: { name: "GRYPE", version: "0.80.0" } }, raw);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.scanner.name, "GRYPE");
      assert.equal(res.body.vulnerabilities.length, 1);
      const v = res.body.vulnerabilities[0];
      assert.equal(v.id, "GHSA-xxxx-yyyy-zzzz");
      assert.deepEqual(v.aliases, ["CVE-2024-0001"]);
      assert.equal(v.severity, "HIGH");
      assert.deepEqual(v.fix, { versions: ["1.2.4"], state: "FIXED" });
      assert.deepEqual(v.cvss, [{ score: "7.5", version: "3.1" }]);

      const events = (await server.db
        .selectFrom("events" as never)
        .selectAll()
        .where("seq" as never, ">", seq as never)
        .where("type" as never, "=", VULN_REPORT_CREATED as never)
        .execute()) as Json[];
      assert.equal(events.length, 1);
      assert.equal(events[0]!.subject, acmeRepo);
      assert.equal(events[0]!.parent_uid, acme.uid);

      const listed = await list(viewerA.token, { repo_id: acmeRepo });
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      assert.deepEqual(
        listed.body.items.map((r: Json) => r.scanner.name),
        ["GRYPE", "UNKNOWN"],
        "newest first: the upload, then ours",
      );
      const ourReport = listed.body.items[1];
      assert.deepEqual(
        ourReport.vulnerabilities.map((x: Json) => x.id),
        ["CVE-2024-1111"],
        "globex's advisory is not named to acme's viewer",
      );
      assert.ok(!JSON.stringify(listed.body).includes(ADVISORY_UID_KEY));

      // By digest, by tag, by scanner; created_since keeps only the newer one.
      assert.equal((await list(viewerA.token, { digest })).body.items.length, 2);
      assert.equal((await list(viewerA.token, { repo_id: acmeRepo, tag: "v1" })).body.items.length, 2);
      assert.equal((await list(viewerA.token, { repo_id: acmeRepo, tag: "nope" })).body.items.length, 0);
      assert.deepEqual(
        (await list(viewerA.token, { digest, "scanner.name": "GRYPE" })).body.items.map((r: Json) => r.scanner.name),
        ["GRYPE"],
      );
      const since = await list(viewerA.token, { digest, created_since: ours.createdAt.toISOString() });
      assert.deepEqual(
        since.body.items.map((r: Json) => r.scanner.name),
        ["GRYPE"],
      );

      // The raw report of the upload is the document sent.
      const rawRes = await restClient(server.url, viewerA.token).get(
        `/registry/v1/vuln_reports/raw?digest=${encodeURIComponent(digest)}&scanner=GRYPE`,
      );
      assert.equal(rawRes.status, 200, JSON.stringify(rawRes.body));
      assert.equal(rawRes.body.rawReport, raw);
    });

    it("shows another org nothing of acme's reports", async () => {
      assert.deepEqual((await list(ownerB.token, { repo_id: acmeRepo })).body.items, []);
      assert.deepEqual((await list(ownerB.token, { digest })).body.items, []);
      const raw = await restClient(server.url, ownerB.token).get(
        `/registry/v1/vuln_reports/raw?digest=${encodeURIComponent(digest)}`,
      );
      assert.equal(raw.status, 404);
    });

    it("refuses bad uploads and stores nothing", async () => {
      const before = await reportCount();
      const seq = await lastEventSeq(server);
      const cases: [string, Promise<{ status: number; body: Json }>, number][] = [
        ["no digest", create(ownerA.token, acmeRepo, { scanner: { name: "GRYPE" } }), 400],
        ["bad digest", create(ownerA.token, acmeRepo, { digest: "sha256:xyz", scanner: { name: "GRYPE" } }), 400],
        ["no scanner named", create(ownerA.token, acmeRepo, { digest }), 400],
        ["raw not JSON", create(ownerA.token, acmeRepo, { digest, scanner: { name: "GRYPE" } }, "{not json"), 400],
        [
          "raw of the other scanner",
          create(ownerA.token, acmeRepo, { digest, scanner: { name: "TRIVY" } }, JSON.stringify(grypeReport(digest))),
          400,
        ],
        [
          "raw as a path to fetch",
          create(ownerA.token, acmeRepo, { digest, scanner: { name: "GRYPE" } }, "gs://bucket/report.json"),
          400,
        ],
        [
          "an image of another repo",
          create(
            ownerA.token,
            acmeRepo,
            { digest: globexDigest, scanner: { name: "GRYPE" } },
            JSON.stringify(grypeReport(globexDigest)),
          ),
          404,
        ],
        [
          "a viewer without the create capabilities",
          create(viewerA.token, acmeRepo, { digest, scanner: { name: "GRYPE" } }, JSON.stringify(grypeReport(digest))),
          403,
        ],
        [
          "another org's repo",
          create(
            ownerA.token,
            globexRepo,
            { digest: globexDigest, scanner: { name: "GRYPE" } },
            JSON.stringify(grypeReport(globexDigest)),
          ),
          404,
        ],
      ];
      for (const [what, pending, status] of cases) {
        const res = await pending;
        assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
      }
      assert.equal(await reportCount(), before);
      const events = (await server.db
        .selectFrom("events" as never)
        .selectAll()
        .where("seq" as never, ">", seq as never)
        .where("type" as never, "=", VULN_REPORT_CREATED as never)
        .execute()) as Json[];
      assert.deepEqual(events, []);
    });

    it("accepts a Trivy report as a data: URI", async () => {
      const trivy = {
        SchemaVersion: 2,
        Results: [
          {
            Target: "app (wolfi 20230201)",
            Vulnerabilities: [
              {
                VulnerabilityID: "CVE-2024-3333",
                PkgName: "libexample",
                InstalledVersion: "1.2.3",
                FixedVersion: "1.2.5",
                Status: "fixed",
                Severity: "CRITICAL",
                PkgIdentifier: { PURL: "pkg:apk/wolfi/libexample@1.2.3" },
                CVSS: { nvd: { V3Score: 9.8 } },
              },
            ],
          },
          { Target: "no findings" },
        ],
      };
      const uri = `data:application/json;base64,${Buffer.from(JSON.stringify(trivy)).toString("base64")}`;
      const res = await create(ownerA.token, acmeRepo, { digest, scanner: { name: "TRIVY", version: "0.50.0" } }, uri);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(
        res.body.vulnerabilities.map((v: Json) => [v.id, v.severity, v.fix.state, v.fix.versions]),
        [["CVE-2024-3333", "CRITICAL", "FIXED", ["1.2.5"]]],
      );
    });

    it("needs repo_id or digest", async () => {
      const res = await list(viewerA.token, {});
      assert.equal(res.status, 400);
      assert.equal(res.body.details[0]?.fieldViolations?.[0]?.field ?? "repo_id", "repo_id");
    });
  });
}
