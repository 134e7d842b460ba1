// Registry v1 GetSbom and GetRawSbom, and the extension's GetImageSbom (SPDX or CycloneDX), on a real server: images pushed over the registry protocol
// (a single-platform image and a two-platform index), their inventories recorded in the images
// tables as the indexer records them (the background reader is another part of the module), and
// the answers read over REST: the SPDX document valid against the official schema, the graph
// matching it, an index's platform picked by `arch` (amd64 by default), and the errors.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import type { Inventory } from "../../src/images/inventory/types.js";
import { InventoriesRepository } from "../../src/images/storage/inventories.js";
import { imagesDb } from "../../src/images/storage/schema.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { workload } from "../support/principals.js";
import { descriptorOf, digestOf, MEDIA_TYPES, OciClient } from "../support/oci.js";
import { assertValid, validCycloneDx, validSpdx } from "../support/sbom-schemas.js";
import { startTestServer, type TestServer } from "../support/server.js";

const OCI_INDEX = "application/vnd.oci.image.index.v1+json";

function inventory(architecture: string, packages: [string, string, string][]): Inventory {
  return {
    os: "linux",
    architecture,
    variant: "",
    config: {},
    sizeCompressed: 100,
    sizeUncompressed: 200,
    packageSource: "apk",
    distro: "wolfi",
    distroVersion: "",
    packages: packages.map(([name, version, origin]) => ({
      type: "apk",
      name,
      version,
      arch: architecture === "amd64" ? "x86_64" : "aarch64",
      origin,
      license: "Apache-2.0",
      purl: `pkg:apk/wolfi/${name}@${version}?arch=${architecture === "amd64" ? "x86_64" : "aarch64"}`,
    })),
  };
}

for (const backend of backends()) {
  describe(`Registry v1 GetSbom and GetRawSbom [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let oci: OciClient;
    let repoId: string;
    let single: string;
    let index: string;
    let amd64: string;
    let arm64: string;
    let pending: string;

    /** Pushes an image manifest with one layer; its digest. */
    async function pushPlatform(architecture: string, note: string, tag: string): Promise<string> {
      const config = JSON.stringify({ architecture, os: "linux", config: { Labels: { note } } });
      const layer = `layer of ${note}`;
      for (const blob of [config, layer]) assert.equal((await oci.postBlob("acme/app", blob)).status, 201);
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: MEDIA_TYPES.ociManifest,
        config: descriptorOf(MEDIA_TYPES.ociConfig, config),
        layers: [descriptorOf(MEDIA_TYPES.ociLayer, layer)],
      });
      const put = await oci.putManifest("acme/app", tag, manifest, MEDIA_TYPES.ociManifest);
      assert.equal(put.status, 201, put.body.toString());
      return digestOf(manifest);
    }

    before(async () => {
      // the indexer stays idle: the synthetic layers are no file system; the inventories are recorded below
      server = await startTestServer(backend, { images: { inventoryConcurrency: 0 } });
      api = restClient(server.url, server.operatorToken);
      const org = (await api.post("/iam/v2beta1/groups", { name: "acme" })).body.uid as string;
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, {
        audience: [server.tokens.urls.registryAudience],
      });
      oci = new OciClient(server.url, { credential: { username: "_token", password: registryToken } });
      single = await pushPlatform("amd64", "single", "single");
      amd64 = await pushPlatform("amd64", "multi amd64", "amd64");
      arm64 = await pushPlatform("arm64", "multi arm64", "arm64");
      pending = await pushPlatform("amd64", "not read yet", "pending");
      const indexBody = JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_INDEX,
        manifests: [
          {
            ...descriptorOf(MEDIA_TYPES.ociManifest, "x"),
            digest: amd64,
            platform: { os: "linux", architecture: "amd64" },
          },
          {
            ...descriptorOf(MEDIA_TYPES.ociManifest, "x"),
            digest: arm64,
            platform: { os: "linux", architecture: "arm64" },
          },
        ],
      });
      // the descriptors' sizes must be the manifests' own: fetch them
      const sized = JSON.parse(indexBody) as { manifests: { digest: string; size: number }[] };
      for (const m of sized.manifests) m.size = (await oci.getManifest("acme/app", m.digest)).body.length;
      const indexJson = JSON.stringify(sized);
      const put = await oci.putManifest("acme/app", "multi", indexJson, OCI_INDEX);
      assert.equal(put.status, 201, put.body.toString());
      index = digestOf(indexJson);
      const repos = await api.get(`/registry/v2beta1/repos?uidp.childrenOf=${encodeURIComponent(org)}`);
      repoId = (repos.body.repos as { uid: string; name: string }[]).find((r) => r.name === "app")!.uid;

      // record the inventories as the indexer does: queued, claimed, saved
      const inventories = new InventoriesRepository(imagesDb(server.db as never));
      const read: Record<string, Inventory> = {
        [single]: inventory("amd64", [
          ["glibc", "2.39-r5", "glibc"],
          ["libcrypto3", "3.3.0-r8", "openssl"],
        ]),
        [amd64]: inventory("amd64", [["busybox", "1.36.1-r7", "busybox"]]),
        [arm64]: inventory("arm64", [
          ["busybox", "1.36.1-r7", "busybox"],
          ["zlib", "1.3.1-r0", "zlib"],
        ]),
      };
      for (const digest of [...Object.keys(read), pending]) await inventories.enqueue(digest, new Date());
      for (let i = 0; i < Object.keys(read).length + 1; i++) {
        const claimed = await inventories.claim(new Date(), 60_000);
        assert.ok(claimed);
        if (claimed.digest !== pending) assert.ok(await inventories.save(claimed, read[claimed.digest]!, new Date()));
      }
      // `pending` stays claimed and unsaved: a read in progress
    });
    after(async () => {
      await server?.close();
    });

    const sbomPath = (digest: string, arch = "") =>
      `/registry/v1/repos/${repoId}/digests/${digest}/sbom${arch ? `?arch=${encodeURIComponent(arch)}` : ""}`;
    const rawPath = (digest: string, arch = "") =>
      `/registry/v1/repos/${repoId}/digest/${digest}/rawsbom${arch ? `?arch=${encodeURIComponent(arch)}` : ""}`;

    it("GetSbom answers the image's SPDX document, valid against the schema, with its graph", async () => {
      const res = await api.get(sbomPath(single));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const raw = Buffer.from(res.body.rawSbom as string, "base64");
      const doc = JSON.parse(raw.toString("utf8")) as unknown;
      assert.ok(validSpdx(doc), JSON.stringify(validSpdx.errors));
      assert.equal(res.body.format, "spdx-2.3");
      assert.equal(res.body.source, "GENERATED");
      assert.match(res.body.tool, /^bulwark-/);
      assert.equal(res.body.digest, digestOf(raw));
      assert.equal(res.body.name, `${server.tokens.urls.registryAudience}/acme/app@${single}`);
      assert.ok(res.body.generatedAt);
      const purls = (res.body.graph.nodes as { package: { purl: string } }[]).map((n) => n.package.purl);
      assert.deepEqual(purls.slice(1), [
        "pkg:apk/wolfi/glibc@2.39-r5?arch=x86_64",
        "pkg:apk/wolfi/libcrypto3@3.3.0-r8?arch=x86_64",
      ]);
      assert.match(purls[0]!, /^pkg:oci\/app@sha256%3A[0-9a-f]{64}\?arch=amd64&repository_url=.*\/acme\/app$/);
      assert.deepEqual(
        (res.body.graph.edges as { type: string }[]).map((e) => e.type),
        ["DESCRIBES", "CONTAINS", "CONTAINS"],
      );
      // the same document every time
      assert.equal((await api.get(sbomPath(single))).body.rawSbom, res.body.rawSbom);
    });

    it("GetRawSbom answers the SPDX JSON; for an index, the platform `arch` names (amd64 by default)", async () => {
      const names = async (path: string) => {
        const res = await api.get(path);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const doc = JSON.parse(res.body.rawSbom as string) as { packages: { name: string; versionInfo: string }[] };
        assert.ok(validSpdx(doc), JSON.stringify(validSpdx.errors));
        return {
          digest: doc.packages[0]!.versionInfo,
          names: doc.packages.slice(1).map((p) => p.name),
        };
      };
      assert.deepEqual(await names(rawPath(index)), { digest: amd64, names: ["busybox"] });
      assert.deepEqual(await names(rawPath(index, "arm64")), { digest: arm64, names: ["busybox", "zlib"] });
      assert.deepEqual(await names(rawPath(single)), { digest: single, names: ["glibc", "libcrypto3"] });
      assert.equal((await api.get(sbomPath(index, "arm64"))).status, 200);
    });

    it("answers NOT_FOUND, INVALID_ARGUMENT and FAILED_PRECONDITION as it should", async () => {
      const unknown = `sha256:${"0".repeat(64)}`;
      const notFound = await api.get(sbomPath(unknown));
      assert.equal(notFound.status, 404, JSON.stringify(notFound.body));
      assert.equal((await api.get(rawPath(index, "s390x"))).status, 404);
      const bad = await api.get(sbomPath("sha256:nothex"));
      assert.equal(bad.status, 400, JSON.stringify(bad.body));
      assert.match(JSON.stringify(bad.body), /digest/);
      const waiting = await api.get(sbomPath(pending));
      assert.equal(waiting.status, 400, JSON.stringify(waiting.body));
      assert.equal(waiting.body.code, 9); // FAILED_PRECONDITION
      assert.match(waiting.body.message, /still being read/);
    });

    const imageSbomPath = (digest: string, query: Record<string, string> = {}) =>
      `/bulwark/registry/v1/repos/${repoId}/digests/${digest}/sbom` +
      (Object.keys(query).length ? `?${new URLSearchParams(query)}` : "");

    it("GetImageSbom answers SPDX by default and CycloneDX when asked, each valid against its schema", async () => {
      const spdx = await api.get(imageSbomPath(single));
      assert.equal(spdx.status, 200, JSON.stringify(spdx.body));
      assert.equal(spdx.body.format, "spdx-2.3");
      assert.equal(spdx.body.mediaType, "application/spdx+json");
      assertValid(validSpdx, JSON.parse(spdx.body.document as string));
      // the same document GetRawSbom answers
      assert.equal(spdx.body.document, (await api.get(rawPath(single))).body.rawSbom);

      const cdx = await api.get(imageSbomPath(single, { format: "cyclonedx" }));
      assert.equal(cdx.status, 200, JSON.stringify(cdx.body));
      assert.equal(cdx.body.format, "cyclonedx-1.5");
      assert.equal(cdx.body.mediaType, "application/vnd.cyclonedx+json");
      const bom = JSON.parse(cdx.body.document as string) as { components: { purl: string }[] };
      assertValid(validCycloneDx, bom);
      assert.deepEqual(
        bom.components.map((c) => c.purl),
        ["pkg:apk/wolfi/glibc@2.39-r5?arch=x86_64", "pkg:apk/wolfi/libcrypto3@3.3.0-r8?arch=x86_64"],
      );

      // an index: amd64 by default, `arch` picks another platform
      const platformOf = async (query: Record<string, string>) => {
        const res = await api.get(imageSbomPath(index, query));
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const doc = JSON.parse(res.body.document as string) as { components: { name: string }[] };
        return doc.components.map((c) => c.name);
      };
      assert.deepEqual(await platformOf({ format: "cyclonedx" }), ["busybox"]);
      assert.deepEqual(await platformOf({ format: "cyclonedx", arch: "arm64" }), ["busybox", "zlib"]);
    });

    it("GetImageSbom answers errors as GetSbom does, and an unknown format is INVALID_ARGUMENT", async () => {
      const format = await api.get(imageSbomPath(single, { format: "xml" }));
      assert.equal(format.status, 400, JSON.stringify(format.body));
      assert.equal(format.body.code, 3);
      assert.match(format.body.message, /format/);
      assert.equal((await api.get(imageSbomPath(`sha256:${"0".repeat(64)}`))).status, 404);
      assert.equal((await api.get(imageSbomPath(index, { arch: "s390x" }))).status, 404);
      const bad = await api.get(imageSbomPath("sha256:nothex"));
      assert.equal(bad.status, 400, JSON.stringify(bad.body));
      assert.equal(bad.body.code, 3);
      const waiting = await api.get(imageSbomPath(pending, { format: "cyclonedx" }));
      assert.equal(waiting.body.code, 9, JSON.stringify(waiting.body)); // FAILED_PRECONDITION
      assert.match(waiting.body.message, /still being read/);
      // another org's caller cannot read it
      const globex = (await api.post("/iam/v2beta1/groups", { name: "globex" })).body.uid as string;
      const owner = { uid: builtinRoleUid("owner"), capabilities: [] };
      const outsider = restClient(
        server.url,
        (await workload(server, api, globex, "owner-globex", [{ at: globex, role: owner }])).token,
      );
      const denied = await outsider.get(imageSbomPath(single));
      assert.ok([403, 404].includes(denied.status), JSON.stringify(denied.body));
    });
  });
}
