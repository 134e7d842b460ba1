// Vulnerabilities.ListVulnCountReports and ListCumulativeVulnCountReports over REST: summaries of
// our reports of a repo's tag by severity (repo by uid or by name, or several references), the
// newest report without a range, every report of a range with one, the CVE ids of a whole range
// when cumulative; another org and unknown repos read nothing; bad input is INVALID_ARGUMENT.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import { imagesRepositories } from "../../src/images/module.js";
import { ADVISORY_UID_KEY } from "../../src/images/storage/reports.js";
import { backends } from "../support/db-templates.js";
import { createGroup, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { pushPlatformImage } from "../support/image-contents.js";
import { OciClient } from "../support/oci.js";
import { workload, type Workload } from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";

for (const backend of backends()) {
  describe(`vulnerability count reports [${backend}]`, () => {
    let server: TestServer;
    let acme: Json;
    let repo: string;
    let viewer: Workload;
    let outsider: Workload;
    const older = new Date("2026-01-01T00:00:00Z");
    const newer = new Date("2026-02-01T00:00:00Z");

    const get = (token: string, path: string, params: Record<string, string>) =>
      restClient(server.url, token).get(`/registry/v1/vuln_reports/${path}?${new URLSearchParams(params)}`);

    before(async () => {
      // The image is synthetic and its reports are written by the test: the indexer stays idle.
      server = await startTestServer(backend, { images: { inventoryConcurrency: 0 } });
      const api = restClient(server.url, server.operatorToken);
      acme = await createGroup(api, undefined, "acme");
      const globex = await createGroup(api, undefined, "globex");
      const token = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      const oci = new OciClient(server.url, { credential: { username: "_token", password: token } });
      const { digest } = await pushPlatformImage(oci, "acme/app", { architecture: "amd64" });
      const repos = await api.get(`/registry/v2beta1/repos?uidp.descendants_of=${acme.uid}`);
      repo = repos.body.repos.find((r: Json) => r.name === "app").uid;
      const put = await api.post(`/registry/v2beta1/tags/${repo}`, { name: "v1", digest });
      assert.equal(put.status, 200, JSON.stringify(put.body));

      const advisory = `${acme.uid}/0123456789abcdef`;
      const { reports } = imagesRepositories(server.db);
      const ours = (createdAt: Date, vulnerabilities: Json[]) =>
        reports.insert({
          repoUid: repo,
          digest,
          scannerName: 0,
          scannerVersion: "bulwark test",
          origin: "bulwark",
          createdAt,
          vulnerabilities: vulnerabilities.map((v) => ({ ...v, [ADVISORY_UID_KEY]: advisory })),
          findingsDigest: createdAt.toISOString(),
        });
      await ours(older, [
        { id: "CGA-aaaa-aaaa-aaaa", aliases: ["CVE-2024-0001"], severity: "HIGH" },
        { id: "CGA-bbbb-bbbb-bbbb", aliases: ["CVE-2024-0002"], severity: "LOW" },
      ]);
      await ours(newer, [
        { id: "CGA-aaaa-aaaa-aaaa", aliases: ["CVE-2024-0001"], severity: "HIGH" },
        { id: "CVE-2024-0003", severity: "CRITICAL" },
      ]);
      viewer = await workload(server, api, acme.uid, "viewer", [
        { at: acme.uid, role: { uid: builtinRoleUid("viewer"), capabilities: [] } },
      ]);
      outsider = await workload(server, api, globex.uid, "owner-b", [
        { at: globex.uid, role: { uid: builtinRoleUid("owner"), capabilities: [] } },
      ]);
    });
    after(() => server?.close());

    it("without a range: the newest report's counts, by repo uid or by name", async () => {
      for (const name of [repo, "acme/app"]) {
        const res = await get(viewer.token, "counts", { repo: name, tag: "v1" });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.items.length, 1);
        const item = res.body.items[0];
        assert.equal(item.repo, name);
        assert.equal(item.tag, "v1");
        assert.equal(item.date, newer.toISOString());
        assert.deepEqual(item.cveIds, ["CVE-2024-0001", "CVE-2024-0003"]);
        assert.deepEqual(item.highCveIds, ["CVE-2024-0001"]);
        assert.deepEqual(item.critCveIds, ["CVE-2024-0003"]);
        assert.deepEqual(item.vulnCounts, [
          { severity: "HIGH", count: 1 },
          { severity: "CRITICAL", count: 1 },
        ]);
        assert.ok(Number(item.sizeBytes) >= 0);
      }
    });

    it("with a range: one summary per report; cumulative: the CVE ids of the whole range", async () => {
      const range = { repo, tag: "v1", from: "2025-12-01T00:00:00Z", to: "2026-03-01T00:00:00Z" };
      const each = await get(viewer.token, "counts", range);
      assert.deepEqual(
        each.body.items.map((i: Json) => i.date),
        [newer.toISOString(), older.toISOString()],
      );
      const onlyOld = await get(viewer.token, "counts", { ...range, to: "2026-01-15T00:00:00Z" });
      assert.deepEqual(
        onlyOld.body.items.map((i: Json) => i.cveIds),
        [["CVE-2024-0001", "CVE-2024-0002"]],
      );
      const cumulative = await get(viewer.token, "counts_cumulative", range);
      assert.equal(cumulative.body.items.length, 1);
      assert.deepEqual(cumulative.body.items[0].cveIds, ["CVE-2024-0001", "CVE-2024-0002", "CVE-2024-0003"]);
      assert.deepEqual(cumulative.body.items[0].lowCveIds, ["CVE-2024-0002"]);
    });

    it("another org, an unknown repo or tag: nothing; bad input: INVALID_ARGUMENT", async () => {
      assert.deepEqual((await get(outsider.token, "counts", { repo, tag: "v1" })).body.items, []);
      assert.deepEqual(
        (await get(outsider.token, "counts_cumulative", { repo: "acme/app", tag: "v1" })).body.items,
        [],
      );
      assert.deepEqual((await get(viewer.token, "counts", { repo: "acme/nope", tag: "v1" })).body.items, []);
      assert.deepEqual((await get(viewer.token, "counts", { repo, tag: "v2" })).body.items, []);
      for (const params of [{ tag: "v1" }, { repo, tag: "" }, { repo, tag: "bad tag" }] as Record<string, string>[]) {
        const res = await get(viewer.token, "counts", params);
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal(res.body.code, 3);
      }
    });
  });
}
