// The image read RPCs on images pushed over the registry protocol: ImagesService (v2beta1 and its
// v2 twin) GetArchitectures / GetSize, the v1 Registry's GetArchs / GetSize / GetImageConfig /
// ListManifestMetadata, and ImageContentsService GetImageInventory / DiffImages, over REST and
// gRPC, on a multi-platform index and its images.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { Registry } from "../../src/gen/platform/registry/v1/registry.platform_pb.js";
import { ImageContentsService } from "../../src/gen/bulwark/registry/v1/images_pb.js";
import { ImagesService as GaImagesService } from "../../src/gen/chainguard/platform/registry/v2/images_pb.js";
import { assertInvalidArgument, assertResourceNotFound, assertRpcError, ok } from "../support/assertions.js";
import { OUR_SCANNER_VERSION } from "../../src/images/reports.js";
import { ReportsRepository } from "../../src/images/storage/reports.js";
import { imagesDb } from "../../src/images/storage/schema.js";
import { backends } from "../support/db-templates.js";
import { restClient, query } from "../support/http.js";
import { descriptorOf, digestOf, MEDIA_TYPES, OciClient } from "../support/oci.js";
import { inventory, pkg, pushPlatformImage, saveInventory, type Pushed } from "../support/image-contents.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";

for (const backend of backends()) {
  describe(`image read RPCs [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let repo: string;
    let amd64: Pushed;
    let arm64: Pushed;
    let armv7: Pushed;
    let index: string;
    let newer: Pushed;

    before(async () => {
      // Synthetic images with inventories recorded by the test: the indexer must not read them.
      server = await startTestServer(backend, { images: { inventoryConcurrency: 0 } });
      api = restClient(server.url, server.operatorToken);
      const org = ok(await api.post("/iam/v2beta1/groups", { name: "acme" })).uid;
      const registryHost = server.tokens.urls.registryAudience;
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, { audience: [registryHost] });
      const oci = new OciClient(server.url, { credential: { username: "_token", password: registryToken } });
      amd64 = await pushPlatformImage(oci, "acme/app", { architecture: "amd64" });
      arm64 = await pushPlatformImage(oci, "acme/app", { architecture: "arm64", variant: "v8" });
      armv7 = await pushPlatformImage(oci, "acme/app", { architecture: "arm", variant: "v7" });
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: MEDIA_TYPES.ociIndex,
        manifests: [
          {
            ...descriptorOf(MEDIA_TYPES.ociManifest, "x"),
            digest: amd64.digest,
            platform: { architecture: "amd64", os: "linux" },
          },
          {
            ...descriptorOf(MEDIA_TYPES.ociManifest, "x"),
            digest: arm64.digest,
            platform: { architecture: "arm64", os: "linux", variant: "v8" },
          },
          {
            ...descriptorOf(MEDIA_TYPES.ociManifest, "x"),
            digest: armv7.digest,
            platform: { architecture: "arm", os: "linux", variant: "v7" },
          },
        ],
      });
      index = digestOf(manifest);
      assert.equal((await oci.putManifest("acme/app", "latest", manifest, MEDIA_TYPES.ociIndex)).status, 201);
      newer = await pushPlatformImage(oci, "acme/app", { architecture: "amd64", variant: "" });
      const repos = ok(await api.get(`/registry/v2beta1/repos${query({ "uidp.children_of": org })}`)).repos;
      repo = repos.find((r: { name: string }) => r.name === "app").uid;
    });
    after(async () => server?.close());

    it("GetArchitectures: an index's platforms as the hosted API names them; an image's own", async () => {
      const archs = ok(await api.get(`/registry/v2beta1/repos/${repo}/digests/${index}/architectures`));
      assert.deepEqual(archs, { architectures: ["amd64", "arm64", "arm/v7"] });
      const one = ok(await api.get(`/registry/v2beta1/repos/${repo}/digests/${armv7.digest}/architectures`));
      assert.deepEqual(one, { architectures: ["arm/v7"] });
      // the GA twin, over gRPC
      const grpc = operatorGrpc(server, GaImagesService);
      try {
        const res = await grpc.client.getArchitectures({ repoUid: repo, digest: index });
        assert.deepEqual(res.architectures, ["amd64", "arm64", "arm/v7"]);
      } finally {
        grpc.close();
      }
      // v1
      assert.deepEqual(ok(await api.get(`/registry/v1/repos/${repo}/digests/${index}/architectures`)), {
        archs: ["amd64", "arm64", "arm/v7"],
      });
    });

    it("GetSize: config + layers of the platform asked for, amd64 by default", async () => {
      const base = `/registry/v2beta1/repos/${repo}/digests/${index}/size`;
      assert.deepEqual(ok(await api.get(base)), { size: String(amd64.size), architecture: "amd64" });
      assert.deepEqual(ok(await api.get(base + query({ architecture: "arm64" }))), {
        size: String(arm64.size),
        architecture: "arm64",
      });
      assert.deepEqual(ok(await api.get(`/registry/v2/repos/${repo}/digests/${index}/size?architecture=arm/v7`)), {
        size: String(armv7.size),
        architecture: "arm/v7",
      });
      assert.deepEqual(ok(await api.get(`/registry/v1/repos/${repo}/digests/${arm64.digest}/size`)), {
        size: String(arm64.size),
        arch: "arm64",
      });
      assertResourceNotFound(await api.get(base + query({ architecture: "s390x" })), "platform");
      assertResourceNotFound(
        await api.get(`/registry/v1/repos/${repo}/digests/${arm64.digest}/size?arch=amd64`),
        "platform",
      );
    });

    it("GetImageConfig: the platform image's runtime config, from its config blob", async () => {
      const config = ok(await api.get(`/registry/v1/repos/${repo}/digests/${index}/imageconfig?arch=arm64`));
      assert.deepEqual(config, {
        user: "65532",
        exposedPorts: { "8080/tcp": {} },
        env: ["PATH=/usr/bin", "PLATFORM=arm64"],
        entrypoint: ["/usr/bin/app"],
        cmd: ["--serve"],
        volumes: {},
        workingDir: "/work",
        labels: { "org.opencontainers.image.title": "app arm64" },
        stopSignal: "SIGTERM",
      });
    });

    it("bad input is INVALID_ARGUMENT, unknown images and repos NOT_FOUND, and nothing else", async () => {
      assertInvalidArgument(await api.get(`/registry/v2beta1/repos/${repo}/digests/sha256:abc/size`), "digest");
      assertInvalidArgument(await api.get(`/registry/v1/repos/${repo}/digests/latest/architectures`), "digest");
      const unknown = `sha256:${"0".repeat(64)}`;
      assertResourceNotFound(await api.get(`/registry/v2beta1/repos/${repo}/digests/${unknown}/size`), "manifest");
      assertResourceNotFound(await api.get(`/registry/v1/repos/${repo}/digests/${unknown}/imageconfig`), "manifest");
      const otherRepo = `${repo.slice(0, repo.lastIndexOf("/"))}/${"0".repeat(16)}`;
      assert.equal((await api.get(`/registry/v2beta1/repos/${otherRepo}/digests/${index}/architectures`)).status, 404);
    });

    it("GetImageInventory: pending until read; then the inventory, per platform of an index", async () => {
      const path = `/bulwark/registry/v1/repos/${repo}/digests/${index}/inventory`;
      const pending = ok(await api.get(path)).items;
      assert.deepEqual(
        pending.map((i: { digest: string; state: string }) => [i.digest, i.state]),
        [
          [amd64.digest, "STATE_PENDING"],
          [arm64.digest, "STATE_PENDING"],
          [armv7.digest, "STATE_PENDING"],
        ],
      );
      await saveInventory(
        server,
        amd64.digest,
        inventory([pkg("openssl", "3.3.0-r0"), pkg("libcrypto3", "3.3.0-r0", "openssl")]),
      );
      const grpc = operatorGrpc(server, ImageContentsService);
      try {
        const res = await grpc.client.getImageInventory({ repoUid: repo, digest: index, arch: "amd64" });
        assert.equal(res.items.length, 1);
        const item = res.items[0]!;
        assert.equal(item.digest, amd64.digest);
        assert.equal(item.distro, "wolfi");
        assert.equal(item.sizeUncompressed, 5678n);
        assert.deepEqual(item.labels, { tier: "test" });
        assert.deepEqual(
          item.packages.map((p) => [p.name, p.origin, p.purl]),
          [
            ["openssl", "openssl", "pkg:apk/wolfi/openssl@3.3.0-r0?arch=x86_64"],
            ["libcrypto3", "openssl", "pkg:apk/wolfi/libcrypto3@3.3.0-r0?arch=x86_64"],
          ],
        );
        assert.ok(item.indexedAt);
      } finally {
        grpc.close();
      }
      assertResourceNotFound(await api.get(`${path}?arch=ppc64le`), "platform");
    });

    it("ListManifestMetadata: purls, origin purls of subpackages, licenses; pending images refused", async () => {
      // A repeated message cannot travel in a query string: gRPC.
      const grpc = operatorGrpc(server, Registry);
      try {
        const list = await grpc.client.listManifestMetadata({
          repoId: repo,
          items: [{ filter: { case: "indexFilter", value: { digest: index, arch: "amd64" } } }],
        });
        assert.deepEqual(
          list.items.map((i) => ({
            digest: i.digest,
            pkgs: i.pkgMetadata.map((m) => [m.purl, m.originPurl, m.license, m.eolDate, m.buildTimestamp]),
          })),
          [
            {
              digest: amd64.digest,
              pkgs: [
                ["pkg:apk/wolfi/openssl@3.3.0-r0?arch=x86_64", "", "Apache-2.0", undefined, undefined],
                [
                  "pkg:apk/wolfi/libcrypto3@3.3.0-r0?arch=x86_64",
                  "pkg:apk/wolfi/openssl@3.3.0-r0?arch=x86_64",
                  "Apache-2.0",
                  undefined,
                  undefined,
                ],
              ],
            },
          ],
        );
        await assert.rejects(
          grpc.client.listManifestMetadata({
            repoId: repo,
            items: [{ filter: { case: "imageDigest", value: arm64.digest } }],
          }),
          (err: ConnectError) => err.code === Code.FailedPrecondition && /not read yet/.test(err.rawMessage),
        );
        await assert.rejects(
          grpc.client.listManifestMetadata({ repoId: repo, items: [{ filter: { case: "imageDigest", value: "x" } }] }),
          (err: ConnectError) => err.code === Code.InvalidArgument && /items\[0\]\.image_digest/.test(err.rawMessage),
        );
      } finally {
        grpc.close();
      }
    });

    it("DiffImages: packages added, removed and changed by type and name", async () => {
      await saveInventory(
        server,
        newer.digest,
        inventory([pkg("openssl", "3.3.2-r0"), pkg("libcrypto3", "3.3.2-r0", "openssl"), pkg("busybox", "1.36.1-r7")]),
      );
      const path = `/bulwark/registry/v1/repos/${repo}/diff`;
      const diff = ok(await api.get(path + query({ from: index, to: newer.digest })));
      assert.deepEqual(diff.packages, {
        added: [{ name: "busybox", version: "1.36.1-r7", reference: "pkg:apk/wolfi/busybox@1.36.1-r7?arch=x86_64" }],
        removed: [],
        changed: [
          {
            name: "libcrypto3",
            current: { version: "3.3.2-r0", reference: "pkg:apk/wolfi/libcrypto3@3.3.2-r0?arch=x86_64" },
            previous: { version: "3.3.0-r0", reference: "pkg:apk/wolfi/libcrypto3@3.3.0-r0?arch=x86_64" },
          },
          {
            name: "openssl",
            current: { version: "3.3.2-r0", reference: "pkg:apk/wolfi/openssl@3.3.2-r0?arch=x86_64" },
            previous: { version: "3.3.0-r0", reference: "pkg:apk/wolfi/openssl@3.3.0-r0?arch=x86_64" },
          },
        ],
      });
      // the reverse
      const back = ok(await api.get(path + query({ from: newer.digest, to: amd64.digest })));
      assert.deepEqual(
        back.packages.removed.map((p: { name: string }) => p.name),
        ["busybox"],
      );
      assert.deepEqual(diff.vulnerabilities, { added: [], removed: [], metadata: [] });
      assert.equal(diff.warnings.length, 2);

      // vulnerabilities: from each image's newest report of ours
      const reports = new ReportsRepository(imagesDb(server.db));
      const vuln = (id: string, cve: string, severity: string) => ({
        id,
        aliases: [cve],
        purls: ["pkg:apk/wolfi/openssl@3.3.0-r0?arch=x86_64"],
        severity,
      });
      const report = (digest: string, vulnerabilities: object[]) =>
        reports.insert({
          repoUid: repo,
          digest,
          scannerName: 0,
          scannerVersion: OUR_SCANNER_VERSION,
          origin: "bulwark",
          createdAt: new Date(),
          vulnerabilities: vulnerabilities as Record<string, unknown>[],
          findingsDigest: digest,
        });
      await report(amd64.digest, [vuln("CGA-aaaa", "CVE-2024-0001", "HIGH"), vuln("CGA-bbbb", "CVE-2024-0002", "LOW")]);
      await report(newer.digest, [
        vuln("CGA-bbbb", "CVE-2024-0002", "LOW"),
        vuln("CGA-cccc", "CVE-2024-0003", "CRITICAL"),
      ]);
      const withVulns = ok(await api.get(path + query({ from: index, to: newer.digest })));
      assert.deepEqual(withVulns.vulnerabilities.added, [
        { id: "CVE-2024-0003", reference: "CGA-cccc", severity: "CRITICAL" },
      ]);
      assert.deepEqual(withVulns.vulnerabilities.removed, [
        { id: "CVE-2024-0001", reference: "CGA-aaaa", severity: "HIGH" },
      ]);
      assert.deepEqual(
        withVulns.vulnerabilities.metadata.map((m: { digest: string; scanner: object }) => [m.digest, m.scanner]),
        [
          [amd64.digest, { name: "bulwark", version: OUR_SCANNER_VERSION }],
          [newer.digest, { name: "bulwark", version: OUR_SCANNER_VERSION }],
        ],
      );
      assert.deepEqual(withVulns.warnings, []);

      // an image not read yet cannot be compared
      assertRpcError(await api.get(path + query({ from: arm64.digest, to: newer.digest })), 400, 9, "pending");
      assertInvalidArgument(await api.get(path + query({ from: "nope", to: newer.digest })), "from");
    });
  });
}
