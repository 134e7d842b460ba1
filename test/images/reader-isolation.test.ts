// The indexer's reads on a real server: a hostile layer read in its own thread while the server
// goes on answering (its /healthz answered while the read is still under way), a read past its
// deadline recorded as the image's error, and cosign signatures (an image config, JSON layers)
// never queued as images.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { registryModule } from "../../src/registry/api.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { digestOf, OciClient } from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { skopeoIn, type Run } from "../support/skopeo.js";
import { until, withinHang } from "../support/wait.js";
import {
  apkInstalled,
  buildImage,
  inventoryOf,
  LAYER_ZSTD,
  OCI_CONFIG,
  OCI_MANIFEST,
  pushImage,
  waitForInventory,
  type PlatformSpec,
} from "../support/images.js";
import { rleZstd } from "../support/layers.js";

const MiB = 1024 * 1024;
const ok = (run: Run, what: string) => assert.equal(run.code, 0, `${what}: ${run.stderr}`);
const unique = () => ({ files: { [`nonce/${randomBytes(6).toString("hex")}`]: randomBytes(16) } });

for (const backend of backends()) {
  describe(`inventory reads in their own thread [${backend}]`, () => {
    let work: string;
    let skopeo: ReturnType<typeof skopeoIn>;
    let built = 0;
    const servers: TestServer[] = [];

    /** A server whose reader allows the hostile layer to run (128 MiB windows, unbounded work). */
    async function serverWith(deadlineMs?: number) {
      const server = await startTestServer(backend, {
        registry: { blobDirectory: join(work, `blobs-${servers.length}`) },
        images: {
          pollIntervalMs: 100,
          inventoryLimits: { maxZstdWindowBytes: 128 * MiB, maxZstdWorkPerByte: Number.MAX_SAFE_INTEGER },
          inventoryReadDeadlineMs: deadlineMs,
        },
      });
      servers.push(server);
      const org = await restClient(server.url, server.operatorToken).post("/iam/v2beta1/groups", { name: "acme" });
      assert.equal(org.status, 200, JSON.stringify(org.body));
      const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      return { server, password, host: new URL(server.url).host };
    }

    /** Pushes an image whose second layer is `blocks` one-byte RLE zstd blocks in 128 MiB windows. */
    async function pushHostile(target: Awaited<ReturnType<typeof serverWith>>, blocks: number) {
      const spec: PlatformSpec = {
        layers: [
          { files: { "lib/apk/db/installed": apkInstalled([{ name: "busybox", version: "1.36.1-r6" }]) } },
          unique(),
          { bytes: rleZstd(17, blocks), mediaType: LAYER_ZSTD },
        ],
      };
      const image = await buildImage(join(work, `image-${++built}`), spec);
      ok(
        await pushImage(skopeo, image, {
          host: target.host,
          repository: "acme/hostile",
          creds: `_token:${target.password}`,
        }),
        "push",
      );
      return image;
    }

    before(() => {
      work = mkdtempSync(join(tmpdir(), "bulwark-isolation-"));
      skopeo = skopeoIn(work);
    });
    after(async () => {
      for (const server of servers) await server.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("answers /healthz while a hostile layer is being read, and stops the read on close", async () => {
      // 50,000 blocks each moving a 128 MiB window: minutes of decoding, were it in the event loop.
      const target = await serverWith();
      const image = await pushHostile(target, 50_000);
      // The read has begun: claimed (an attempt counted) and not finished.
      await until(async () => {
        const row = await inventoryOf(target.server, image.digest);
        return row?.state === "pending" && row.attempts >= 1;
      }, "the hostile image's read under way");
      const health = await withinHang(fetch(`${target.server.url}/healthz`), "an answer of /healthz");
      assert.equal(health.status, 200);
      // Answered before the read ended: it is still under way.
      const row = await inventoryOf(target.server, image.digest);
      assert.equal(row?.state, "pending");
      // Closing the server ends the read (its thread terminated) rather than waiting for it.
      await withinHang(target.server.close(), "the server's close during a read");
      servers.splice(servers.indexOf(target.server), 1);
    });

    it("a read past its deadline ends as the image's error; the next image is read", async () => {
      const target = await serverWith(2000);
      const image = await pushHostile(target, 50_000);
      // Waits on the recorded outcome. The layer's work (50,000 moves of a 128 MiB window,
      // terabytes) is beyond any deadline on any machine, so the configured 2000 ms deadline is what
      // ends the read however busy the machine is; the message names that configured limit.
      const row = await waitForInventory(target.server, image.digest);
      assert.equal(row.state, "failed");
      assert.match(row.error ?? "", /reading the image took longer than 2000 ms \(the limit\)/);
      const next = await buildImage(join(work, `image-${++built}`), {
        layers: [
          { files: { "lib/apk/db/installed": apkInstalled([{ name: "glibc", version: "2.39-r1" }]) } },
          unique(),
        ],
      });
      ok(
        await pushImage(skopeo, next, {
          host: target.host,
          repository: "acme/next",
          creds: `_token:${target.password}`,
        }),
        "push",
      );
      assert.equal((await waitForInventory(target.server, next.digest)).state, "done");
    });

    it("never queues a cosign signature (an image config, a JSON layer) as an image", async () => {
      const target = await serverWith();
      const oci = new OciClient(target.server.url, { credential: { username: "_token", password: target.password } });
      const payload = Buffer.from(JSON.stringify({ critical: { type: "cosign container image signature" } }));
      const config = Buffer.from(
        JSON.stringify({ architecture: "", os: "", rootfs: { type: "layers", diff_ids: [] } }),
      );
      for (const blob of [payload, config]) {
        const res = await oci.request("POST", `/v2/acme/signed/blobs/uploads/?digest=${digestOf(blob)}`, {
          headers: { "content-type": "application/octet-stream" },
          body: blob,
        });
        assert.equal(res.status, 201, res.body.toString());
      }
      const signature = JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { mediaType: OCI_CONFIG, digest: digestOf(config), size: config.length },
        layers: [
          {
            mediaType: "application/vnd.dev.cosign.simplesigning.v1+json",
            digest: digestOf(payload),
            size: payload.length,
            annotations: { "dev.cosignproject.cosign/signature": "MEUCIQ==" },
          },
        ],
      });
      const put = await oci.request("PUT", `/v2/acme/signed/manifests/sha256-abc.sig`, {
        headers: { "content-type": OCI_MANIFEST },
        body: signature,
      });
      assert.equal(put.status, 201, put.body.toString());
      // Queued (or not) in the push's own transaction: nothing to wait for.
      assert.equal(await inventoryOf(target.server, digestOf(signature)), undefined);
      // Nor by the one-time backfill of what was stored before the images module.
      assert.ok(!(await target.server.exportsOf(registryModule).imageManifests()).includes(digestOf(signature)));
    });
  });
}
