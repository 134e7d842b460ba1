// `bulwark images diff|vulns|sbom` against a real server, on images pushed over the registry
// protocol whose inventories are recorded (test/support/image-contents.ts).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { CliHome, runCli } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { inventory, pkg, pushPlatformImage, saveInventory, type Pushed } from "../support/image-contents.js";
import { OciClient } from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";

for (const backend of backends()) {
  describe(`bulwark images diff, vulns and sbom [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let older: Pushed;
    let newer: Pushed;

    const cli = (args: string[]) =>
      runCli(home, args, { env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken } });

    before(async () => {
      // Synthetic images with inventories recorded by the test: the indexer must not read them.
      server = await startTestServer(backend, { images: { inventoryConcurrency: 0 } });
      home = new CliHome();
      await restClient(server.url, server.operatorToken).post("/iam/v2beta1/groups", { name: "acme" });
      const registryHost = server.tokens.urls.registryAudience;
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, { audience: [registryHost] });
      const oci = new OciClient(server.url, { credential: { username: "_token", password: registryToken } });
      older = await pushPlatformImage(oci, "acme/app", { architecture: "amd64" });
      newer = await pushPlatformImage(oci, "acme/app", { architecture: "amd64", variant: "" });
      // the newer one is "latest"
      const manifest = await oci.getManifest("acme/app", newer.digest);
      assert.equal(
        (await oci.putManifest("acme/app", "latest", manifest.body, manifest.headers.get("content-type")!)).status,
        201,
      );
      await saveInventory(server, older.digest, inventory([pkg("openssl", "3.3.0-r0"), pkg("zlib", "1.3-r0")]));
      await saveInventory(server, newer.digest, inventory([pkg("openssl", "3.3.2-r0"), pkg("busybox", "1.36.1-r7")]));
    });
    after(async () => {
      home?.close();
      await server?.close();
    });

    it("images diff: packages added, removed and changed, by digest and by tag", async () => {
      const res = await cli(["images", "diff", `acme/app@${older.digest}`, "acme/app"]);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(
        res.stdout.replace(/sha256:[0-9a-f]{64}/g, "<digest>"),
        "Packages added (1):\n  busybox 1.36.1-r7\n" +
          "Packages removed (1):\n  zlib 1.3-r0\n" +
          "Packages changed (1):\n  openssl 3.3.0-r0 -> 3.3.2-r0\n" +
          "Vulnerabilities fixed (0):\nVulnerabilities introduced (0):\n" +
          "warning: no vulnerability report for <digest> yet: its vulnerabilities are not compared\n" +
          "warning: no vulnerability report for <digest> yet: its vulnerabilities are not compared\n",
      );
      const json = await cli(["images", "diff", `acme/app@${older.digest}`, "acme/app:latest", "-o", "json"]);
      assert.equal(json.code, 0, json.stderr);
      const parsed = JSON.parse(json.stdout);
      assert.deepEqual(parsed.packages.changed, [
        {
          name: "openssl",
          current: { version: "3.3.2-r0", reference: "pkg:apk/wolfi/openssl@3.3.2-r0?arch=x86_64" },
          previous: { version: "3.3.0-r0", reference: "pkg:apk/wolfi/openssl@3.3.0-r0?arch=x86_64" },
        },
      ]);
    });

    it("bad image references are usage errors; an unknown tag says so", async () => {
      const bad = await cli(["images", "diff", "acme/app@sha256:nope", "acme/app"]);
      assert.equal(bad.code, 2, bad.stderr);
      assert.match(bad.stderr, /is not a digest/);
      const missing = await cli(["images", "diff", "acme/app:nope", "acme/app"]);
      assert.notEqual(missing.code, 0);
      assert.match(missing.stderr, /acme\/app has no tag "nope"/);
      const format = await cli(["images", "sbom", "acme/app", "--format", "xml"]);
      assert.equal(format.code, 2, format.stderr);
      assert.match(format.stderr, /--format must be spdx or cyclonedx/);
    });
  });
}
