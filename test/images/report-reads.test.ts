// Reading vulnerability reports and image configs back: "newest" is the order the database stored
// reports in (not the writer's clock), DiffImages compares with our newest report whatever
// version of ours wrote it, an index listed by digest or tag answers with the reports made on it
// as well as its platforms', out-of-range times are INVALID_ARGUMENT (not a 500), and hostile
// image configs (null, fields of the wrong type) are served without a 500.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash, randomBytes } from "node:crypto";
import { sql } from "kysely";
import { Code, ConnectError } from "@connectrpc/connect";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { Vulnerabilities } from "../../src/gen/platform/registry/v1/vulnerabilities.platform_pb.js";
import { imagesRepositories } from "../../src/images/module.js";
import { ok } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import { query, restClient } from "../support/http.js";
import {
  apkInstalled,
  buildImage,
  osRelease,
  pushImage,
  waitForInventory,
  type PlatformSpec,
} from "../support/images.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";
import { skopeoIn } from "../support/skopeo.js";
import { until } from "../support/wait.js";

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const sha256 = (bytes: Uint8Array | string) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

const platform = (architecture: string): PlatformSpec => ({
  architecture,
  layers: [
    {
      files: {
        "etc/os-release": osRelease("wolfi", "20230201"),
        "lib/apk/db/installed": apkInstalled([{ name: "busybox", version: "1.36.1-r6" }]),
        [`nonce/${randomBytes(6).toString("hex")}`]: randomBytes(16),
      },
    },
  ],
});

/** An uploaded report's body (CreateVulnReport's vuln_report) naming one finding. */
const upload = (digest: string, id: string, createdAt?: string) => ({
  digest,
  scanner: { name: "GRYPE", version: "0.80.0" },
  ...(createdAt ? { createdAt } : {}),
  vulnerabilities: [{ id, severity: "HIGH" }],
});

for (const backend of backends()) {
  describe(`reading reports and image configs back [${backend}]`, () => {
    let server: TestServer;
    let work: string;
    let api: ReturnType<typeof restClient>;
    let registryAuth: string;
    let repo: string;
    let index: string;
    let amd64: string;
    let arm64: string;

    const repoUid = async (name: string) =>
      (await sql<{ uid: string }>`select uid from repos where name = ${name}`.execute(server.db)).rows[0]!.uid;
    const reportCount = async () =>
      Number((await sql<{ n: string }>`select count(*) as n from vuln_reports`.execute(server.db)).rows[0]!.n);

    /** Pushes an image whose config blob is `config` as is (one non-tar layer: its inventory fails, unused here). */
    async function pushRaw(name: string, tag: string, config: string): Promise<string> {
      const blob = async (bytes: Uint8Array) => {
        const digest = sha256(bytes);
        const res = await fetch(`${server.url}/v2/${name}/blobs/uploads/?digest=${digest}`, {
          method: "POST",
          headers: { authorization: registryAuth, "content-type": "application/octet-stream" },
          body: bytes,
        });
        assert.equal(res.status, 201, await res.text());
        return { digest, size: bytes.length };
      };
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { mediaType: "application/vnd.oci.image.config.v1+json", ...(await blob(Buffer.from(config))) },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", ...(await blob(randomBytes(64))) }],
      });
      const res = await fetch(`${server.url}/v2/${name}/manifests/${tag}`, {
        method: "PUT",
        headers: { authorization: registryAuth, "content-type": OCI_MANIFEST },
        body: manifest,
      });
      assert.equal(res.status, 201, await res.text());
      return res.headers.get("docker-content-digest")!;
    }

    before(async () => {
      work = mkdtempSync(join(tmpdir(), "bulwark-report-reads-"));
      server = await startTestServer(backend, { registry: { blobDirectory: join(work, "blobs") } });
      api = restClient(server.url, server.operatorToken);
      ok(await api.post("/iam/v2beta1/groups", { name: "acme" }));
      const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      registryAuth = `Bearer ${password}`;
      const image = await buildImage(join(work, "multi"), [platform("amd64"), platform("arm64")]);
      const run = await pushImage(skopeoIn(work), image, {
        host: new URL(server.url).host,
        repository: "acme/app",
        creds: `_token:${password}`,
      });
      assert.equal(run.code, 0, run.stderr);
      index = image.digest;
      [amd64, arm64] = image.platforms.map((p) => p.digest) as [string, string];
      for (const d of [amd64, arm64]) assert.equal((await waitForInventory(server, d)).state, "done");
      repo = await repoUid("app");
      // the server's first (empty) reports of the two images, before the tests write theirs
      const { reports } = imagesRepositories(server.db);
      await until(
        async () =>
          (await reports.latest(repo, amd64, "bulwark")) !== undefined &&
          (await reports.latest(repo, arm64, "bulwark")) !== undefined,
        "the first reports of the pushed images",
      );
    });
    after(async () => {
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("the newest report is the last stored, whatever time its writer's clock gave it", async () => {
      const { reports } = imagesRepositories(server.db);
      const now = Date.now();
      const write = (version: string, createdAt: Date) =>
        reports.insert({
          repoUid: repo,
          digest: arm64,
          scannerName: 0,
          scannerVersion: version,
          origin: "bulwark",
          createdAt,
          vulnerabilities: [],
          findingsDigest: version,
        });
      await write("bulwark first", new Date(now));
      // a replica whose clock is an hour behind writes the newer one
      await write("bulwark second", new Date(now - 3_600_000));
      assert.equal((await reports.latest(repo, arm64, "bulwark"))?.scannerVersion, "bulwark second");
      const listed = ok(await api.get(`/registry/v1/vuln_reports${query({ digest: arm64 })}`));
      assert.deepEqual(
        listed.items.slice(0, 2).map((r: { scanner: { version: string } }) => r.scanner.version),
        ["bulwark second", "bulwark first"],
        "newest first: the last stored, then the one before it (the server's first report last)",
      );
    });

    it("DiffImages compares with our newest report, whichever version of ours wrote it", async () => {
      // Written under an older version: reports are written only when the findings change.
      await imagesRepositories(server.db).reports.insert({
        repoUid: repo,
        digest: amd64,
        scannerName: 0,
        scannerVersion: "bulwark 0.0.1-older",
        origin: "bulwark",
        createdAt: new Date(),
        vulnerabilities: [{ id: "CGA-2222-3333-4444", severity: "HIGH" }],
        findingsDigest: "older",
      });
      const diff = ok(await api.get(`/bulwark/registry/v1/repos/${repo}/diff${query({ from: amd64, to: arm64 })}`));
      assert.deepEqual(diff.warnings, [], JSON.stringify(diff.warnings));
      assert.deepEqual(
        diff.vulnerabilities.metadata.map((m: { digest: string; scanner: { version: string } }) => [
          m.digest,
          m.scanner.version,
        ]),
        [
          [amd64, "bulwark 0.0.1-older"],
          [arm64, "bulwark second"],
        ],
      );
      assert.deepEqual(
        diff.vulnerabilities.removed.map((v: { id: string }) => v.id),
        ["CGA-2222-3333-4444"],
      );
    });

    it("an index by digest or tag answers with the reports made on it and on its platforms", async () => {
      ok(await api.post(`/registry/v1/vuln_reports/${repo}`, upload(index, "GHSA-on-the-index")));
      ok(await api.post(`/registry/v1/vuln_reports/${repo}`, upload(amd64, "GHSA-on-amd64")));
      const ids = (body: Record<string, unknown>) =>
        (body.items as { vulnerabilities: { id: string }[] }[])
          .flatMap((r) => r.vulnerabilities.map((v) => v.id))
          .filter((id) => id.startsWith("GHSA-"));
      const expected = ["GHSA-on-amd64", "GHSA-on-the-index"];
      const byDigest = ok(
        await api.get(`/registry/v1/vuln_reports${query({ digest: index, "scanner.name": "GRYPE" })}`),
      );
      assert.deepEqual(ids(byDigest).sort(), expected);
      const inRepo = ok(await api.get(`/registry/v1/vuln_reports${query({ digest: index, repo_id: repo })}`));
      assert.deepEqual(ids(inRepo).sort(), expected);
      const byTag = ok(await api.get(`/registry/v1/vuln_reports${query({ repo_id: repo, tag: "v1" })}`));
      assert.deepEqual(ids(byTag).sort(), expected);
      // a platform image by digest: its own reports only
      const platformOnly = ok(
        await api.get(`/registry/v1/vuln_reports${query({ digest: amd64, "scanner.name": "GRYPE" })}`),
      );
      assert.deepEqual(ids(platformOnly), ["GHSA-on-amd64"]);
    });

    it("refuses times no database can store as INVALID_ARGUMENT, storing nothing", async () => {
      const grpc = operatorGrpc(server, Vulnerabilities);
      const far = { seconds: 10n ** 15n, nanos: 0 };
      const failure = (p: Promise<unknown>) =>
        p.then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      try {
        const before = await reportCount();
        const listed = await failure(grpc.client.listVulnReports({ digest: amd64, createdSince: far }));
        assert.equal(listed?.code, Code.InvalidArgument, String(listed));
        assert.match(listed.rawMessage, /created_since/);
        const raw = await failure(grpc.client.getRawVulnReport({ digest: amd64, createdAt: far }));
        assert.equal(raw?.code, Code.InvalidArgument, String(raw));
        assert.match(raw.rawMessage, /created_at/);
        const created = await failure(
          grpc.client.createVulnReport({
            repoId: repo,
            vulnReport: { digest: amd64, scanner: { name: 1, version: "1" }, createdAt: far, vulnerabilities: [] },
          }),
        );
        assert.equal(created?.code, Code.InvalidArgument, String(created));
        assert.match(created.rawMessage, /vuln_report\.created_at/);
        const ancient = await failure(
          grpc.client.createVulnReport({
            repoId: repo,
            vulnReport: {
              digest: amd64,
              scanner: { name: 1, version: "1", dbBuildTime: { seconds: -(10n ** 12n), nanos: 0 } },
              vulnerabilities: [],
            },
          }),
        );
        assert.equal(ancient?.code, Code.InvalidArgument, String(ancient));
        assert.match(ancient.rawMessage, /db_build_time/);
        assert.equal(await reportCount(), before);
      } finally {
        grpc.close();
      }
    });

    it("serves hostile image configs (null, fields of the wrong type) without failing", async () => {
      const hostile = [
        "null",
        "[]",
        JSON.stringify({ architecture: 5, os: "linux", config: { Env: "x", Labels: { a: 1 }, Cmd: [1], User: {} } }),
        JSON.stringify({ architecture: "arm", variant: 7, config: null }),
        JSON.stringify({
          architecture: "amd64",
          os: "linux",
          config: { ExposedPorts: [1], Volumes: "x", Entrypoint: "sh" },
        }),
      ];
      for (const [i, config] of hostile.entries()) {
        const digest = await pushRaw("acme/hostile", `h${i}`, config);
        const id = await repoUid("hostile");
        const what = `config ${config}`;
        const imageConfig = ok(await api.get(`/registry/v1/repos/${id}/digests/${digest}/imageconfig`), what);
        assert.deepEqual(imageConfig.env ?? [], [], what);
        assert.deepEqual(imageConfig.labels ?? {}, {}, what);
        assert.deepEqual(imageConfig.cmd ?? [], [], what);
        assert.deepEqual(imageConfig.exposedPorts ?? {}, {}, what);
        const archs = ok(await api.get(`/registry/v1/repos/${id}/digests/${digest}/architectures`), what);
        const expected = i === 3 ? ["arm"] : i === 4 ? ["amd64"] : [];
        assert.deepEqual(archs.archs ?? [], expected, what);
        ok(await api.get(`/registry/v1/repos/${id}/digests/${digest}/size`), what);
        ok(await api.get(`/registry/v2beta1/repos/${id}/digests/${digest}/architectures`), what);
        ok(await api.get(`/registry/v2beta1/repos/${id}/digests/${digest}/size`), what);
      }
    });
  });
}
