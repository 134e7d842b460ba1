// `serve --attach-sboms` (ImagesSettings.attachSboms) on a real server: an apk image built here and
// pushed with skopeo is read by the indexer, and its SPDX SBOM comes back as an OCI referrer of the
// image (the referrers API finds it by artifactType, its layer is the schema-valid document GetImageSbom
// answers, skopeo inspects and copies it), pushed with the server as the event's actor, the same bytes when pushed
// again, and never read back as an input (the image is read once). Without the setting, no referrer.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { GENERATED_SBOM_ANNOTATION } from "../../src/images/indexer.js";
import { registryModule } from "../../src/registry/api.js";
import { SERVER_SUBJECT } from "../../src/registry/artifacts.js";
import { backends } from "../support/db-templates.js";
import { flushEvents } from "../support/events.js";
import { restClient } from "../support/http.js";
import {
  apkInstalled,
  buildImage,
  inventoryOf,
  osRelease,
  pushImage,
  waitForInventory,
  type BuiltImage,
} from "../support/images.js";
import { digestOf, OciClient } from "../support/oci.js";
import { assertValid, validSpdx } from "../support/sbom-schemas.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { skopeoIn } from "../support/skopeo.js";
import { until } from "../support/wait.js";

const SPDX = "application/spdx+json";
const OCI_EMPTY = "application/vnd.oci.empty.v1+json";

interface Referrer {
  digest: string;
  mediaType: string;
  artifactType?: string;
  annotations?: Record<string, string>;
}

/** A server, a work directory, an org and what pushing a freshly built apk image takes. */
async function setUp(backend: Parameters<typeof startTestServer>[0], attachSboms: boolean) {
  const work = mkdtempSync(join(tmpdir(), "bulwark-sbom-attach-"));
  const server = await startTestServer(backend, {
    registry: { blobDirectory: join(work, "blobs") },
    images: { attachSboms, pollIntervalMs: 100 },
  });
  const api = restClient(server.url, server.operatorToken);
  assert.equal((await api.post("/iam/v2beta1/groups", { name: "acme" })).status, 200);
  const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
  const oci = new OciClient(server.url, { credential: { username: "_token", password } });
  const skopeo = skopeoIn(work);
  const host = new URL(server.url).host;
  let built = 0;
  const push = async (repository: string): Promise<BuiltImage> => {
    const image = await buildImage(join(work, `image-${++built}`), {
      layers: [
        {
          files: {
            "etc/os-release": osRelease("wolfi", "20230201"),
            "lib/apk/db/installed": apkInstalled([
              { name: "glibc", version: "2.39-r1", license: "LGPL-2.1-or-later" },
              { name: "libcrypto3", version: "3.3.0-r2", origin: "openssl", license: "Apache-2.0" },
            ]),
            // every build its own image
            [`nonce/${randomBytes(6).toString("hex")}`]: randomBytes(16),
          },
        },
      ],
    });
    const run = await pushImage(skopeo, image, { host, repository, creds: `_token:${password}` });
    assert.equal(run.code, 0, run.stderr);
    return image;
  };
  const referrers = async (repository: string, digest: string): Promise<Referrer[]> => {
    const res = await oci.request(
      "GET",
      `/v2/${repository}/referrers/${digest}?artifactType=${encodeURIComponent(SPDX)}`,
    );
    assert.equal(res.status, 200, res.body.toString());
    return (JSON.parse(res.body.toString()) as { manifests: Referrer[] }).manifests;
  };
  return { work, server, api, oci, skopeo, host, password, push, referrers };
}

const repoUidOf = async (api: ReturnType<typeof restClient>, name: string) => {
  const res = await api.get(`/registry/v2beta1/repos?name=${name}`);
  return (res.body.repos as { uid: string; name: string }[]).find((r) => r.name === name)!.uid;
};

for (const backend of backends()) {
  describe(`serve --attach-sboms [${backend}]`, () => {
    let s: Awaited<ReturnType<typeof setUp>>;
    let server: TestServer;

    before(async () => {
      s = await setUp(backend, true);
      server = s.server;
    });
    after(async () => {
      await server?.close();
      if (s?.work) rmSync(s.work, { recursive: true, force: true });
    });

    it("pushes the image's SPDX SBOM as a referrer: found by artifactType, schema-valid, read by skopeo", async () => {
      const image = await s.push("acme/wolfi");
      assert.equal((await waitForInventory(server, image.digest)).state, "done");
      const [referrer, ...more] = await until(async () => {
        const found = await s.referrers("acme/wolfi", image.digest);
        return found.length ? found : undefined;
      }, `an SBOM referrer of ${image.digest}`);
      assert.deepEqual(more, []);
      assert.equal(referrer!.artifactType, SPDX);
      assert.equal(referrer!.annotations?.[GENERATED_SBOM_ANNOTATION], "true");

      const got = await s.oci.getManifest("acme/wolfi", referrer!.digest);
      assert.equal(got.status, 200);
      assert.equal(digestOf(got.body), referrer!.digest);
      const manifest = JSON.parse(got.body.toString()) as {
        artifactType: string;
        config: { mediaType: string; digest: string; size: number };
        layers: { mediaType: string; digest: string }[];
        subject: { digest: string; mediaType: string; size: number };
      };
      assert.equal(manifest.artifactType, SPDX);
      assert.deepEqual(manifest.config, { mediaType: OCI_EMPTY, digest: digestOf("{}"), size: 2 });
      assert.equal(manifest.subject.digest, image.digest);
      assert.equal(manifest.subject.mediaType, image.mediaType);
      assert.equal(manifest.layers.length, 1);
      assert.equal(manifest.layers[0]!.mediaType, SPDX);
      const empty = await s.oci.request("GET", `/v2/acme/wolfi/blobs/${manifest.config.digest}`);
      assert.equal(empty.body.toString(), "{}");

      // the layer is the document GetImageSbom answers for the image in this repo, byte for byte
      const layer = await s.oci.request("GET", `/v2/acme/wolfi/blobs/${manifest.layers[0]!.digest}`);
      assert.equal(layer.status, 200);
      const document = JSON.parse(layer.body.toString()) as { packages: { name: string; versionInfo: string }[] };
      assertValid(validSpdx, document);
      assert.deepEqual(
        document.packages.map((p) => p.versionInfo),
        [image.digest, "2.39-r1", "3.3.0-r2"],
      );
      const repoUid = await repoUidOf(s.api, "wolfi");
      const served = await s.api.get(`/bulwark/registry/v1/repos/${repoUid}/digests/${image.digest}/sbom`);
      assert.equal(served.status, 200, JSON.stringify(served.body));
      assert.equal(layer.body.toString(), served.body.document);

      // a registry client reads it as any artifact: its manifest, and a copy of it with its blobs
      const inspected = await s.skopeo(
        "inspect",
        "--raw",
        "--tls-verify=false",
        "--creds",
        `_token:${s.password}`,
        `docker://${s.host}/acme/wolfi@${referrer!.digest}`,
      );
      assert.equal(inspected.code, 0, inspected.stderr);
      assert.equal(digestOf(inspected.stdout), referrer!.digest);
      const copied = await s.skopeo(
        "copy",
        "--preserve-digests",
        "--src-tls-verify=false",
        "--src-creds",
        `_token:${s.password}`,
        `docker://${s.host}/acme/wolfi@${referrer!.digest}`,
        `oci:${join(s.work, "sbom-copy")}:sbom`,
      );
      assert.equal(copied.code, 0, copied.stderr);
      const [, hex] = manifest.layers[0]!.digest.split(":");
      assert.equal(readFileSync(join(s.work, "sbom-copy", "blobs", "sha256", hex!), "utf8"), layer.body.toString());

      // pushed by the server, recorded as a push; the SBOM never became an input: the image was read once
      await flushEvents(server);
      const pushes = (await server.db
        .selectFrom("events" as never)
        .select(["actor_subject", "body"] as never)
        .where("type" as never, "=", "dev.chainguard.registry.push.v1" as never)
        .execute()) as { actor_subject: string | null; body: { digest: string; type: string } | string }[];
      const bodies = pushes.map((p) => ({
        actor: p.actor_subject,
        ...(typeof p.body === "string" ? JSON.parse(p.body) : p.body),
      })) as { actor: string; digest: string; type: string; repository: string }[];
      const ours = bodies.filter((b) => b.actor === SERVER_SUBJECT);
      assert.deepEqual(
        ours.map((b) => [b.type, b.digest, b.repository]).sort(),
        [
          ["blob", digestOf("{}"), "acme/wolfi"],
          ["blob", manifest.layers[0]!.digest, "acme/wolfi"],
          ["manifest", referrer!.digest, "acme/wolfi"],
        ].sort(),
      );
      const row = await inventoryOf(server, image.digest);
      assert.equal(row?.state, "done");
      assert.equal(row?.attempts, 1);
    });

    it("is idempotent: the same SBOM pushed again is the same artifact and changes nothing", async () => {
      const image = await s.push("acme/again");
      await waitForInventory(server, image.digest);
      const [referrer] = await until(async () => {
        const found = await s.referrers("acme/again", image.digest);
        return found.length ? found : undefined;
      }, `an SBOM referrer of ${image.digest}`);
      const manifest = (await s.oci.getManifest("acme/again", referrer!.digest)).body;
      const parsed = JSON.parse(manifest.toString()) as { layers: { digest: string }[] };
      const document = (await s.oci.request("GET", `/v2/acme/again/blobs/${parsed.layers[0]!.digest}`)).body;
      const registry = server.exportsOf(registryModule);
      const again = await registry.pushArtifact(await repoUidOf(s.api, "again"), {
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        manifest,
        blobs: [Buffer.from("{}"), document],
      });
      assert.deepEqual(again, { digest: referrer!.digest, stored: false });
      assert.equal((await s.referrers("acme/again", image.digest)).length, 1);
      assert.equal((await inventoryOf(server, image.digest))?.attempts, 1);
    });
  });

  describe(`without --attach-sboms [${backend}]`, () => {
    let s: Awaited<ReturnType<typeof setUp>>;

    before(async () => {
      s = await setUp(backend, false);
    });
    after(async () => {
      await s?.server.close();
      if (s?.work) rmSync(s.work, { recursive: true, force: true });
    });

    it("attaches no SBOM", async () => {
      const image = await s.push("acme/plain");
      assert.equal((await waitForInventory(s.server, image.digest)).state, "done");
      // the report follows the same saved inventory (its listener runs beside the attacher's)
      await until(async () => {
        const res = await s.api.get(`/registry/v1/vuln_reports?digest=${encodeURIComponent(image.digest)}`);
        return (res.body.items ?? []).length > 0;
      }, `a vulnerability report for ${image.digest}`);
      assert.deepEqual(await s.referrers("acme/plain", image.digest), []);
    });
  });
}
