// `bulwark images diff|vulns|sbom` against a real server: diff on images pushed over the registry
// protocol whose inventories are recorded (test/support/image-contents.ts); sbom, vulns and the
// VULNS column on a real apk image (built here, pushed with skopeo, read by the indexer) matched
// against wolfi advisories imported into a public group.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { ADVISORY_FIXTURES, fixtureDocument, IMPORT_PATH } from "../support/advisories.js";
import { CliHome, collapse, runCli } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { inventory, pkg, pushPlatformImage, saveInventory, type Pushed } from "../support/image-contents.js";
import { apkInstalled, buildImage, osRelease, pushImage, waitForInventory } from "../support/images.js";
import { OciClient } from "../support/oci.js";
import { assertValid, validCycloneDx, validSpdx } from "../support/sbom-schemas.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { skopeoIn } from "../support/skopeo.js";
import { until } from "../support/wait.js";

for (const backend of backends()) {
  describe(`bulwark images diff, vulns and sbom [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let older: Pushed;
    let newer: Pushed;

    const cli = (args: string[]) =>
      runCli(home, args, { env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken } });

    before(async () => {
      // the indexer stays idle: these layers are no file system; the inventories are recorded below
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

/** Real wolfi packages at versions the imported advisories affect (test/fixtures/images/expected-findings.json). */
const AFFECTED = [
  { name: "sysstat", version: "12.7.1-r0", license: "GPL-2.0-or-later" },
  { name: "haproxy-3.0", version: "3.0.4-r0", license: "GPL-2.0-or-later" },
  { name: "glibc", version: "2.39-r1", license: "LGPL-2.1-or-later" },
];
/** What the wolfi fixtures say of them (expected-findings.json, computed from the YAML by a script). */
const EXPECTED_FINDINGS = [
  ["CGA-6ppr-r643-ffxr", "CVE-2023-33204", "sysstat", "12.7.1-r0", "12.7.4-r0", "FIXED"],
  ["CGA-wr9c-57vm-38hq", "CVE-2024-49214", "haproxy-3.0", "3.0.4-r0", "3.0.5-r0", "FIXED"],
];

for (const backend of backends()) {
  describe(`bulwark images sbom, vulns and the VULNS column on a real apk image [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let work: string;
    let digest: string;
    const publicGroup = randomBytes(20).toString("hex");

    const cli = (args: string[]) =>
      runCli(home, args, { env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken } });
    const ok = async (args: string[]) => {
      const res = await cli(args);
      assert.equal(res.code, 0, `${args.join(" ")}: ${res.stderr}`);
      return res.stdout;
    };

    before(async () => {
      work = mkdtempSync(join(tmpdir(), "bulwark-cli-images-"));
      server = await startTestServer(backend, {
        registry: { blobDirectory: join(work, "blobs") },
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
        images: { pollIntervalMs: 100 },
      });
      home = new CliHome();
      const api = restClient(server.url, server.operatorToken);
      const documents = ["sysstat", "haproxy-3.0"].map((p) =>
        fixtureDocument(join(ADVISORY_FIXTURES, "wolfi", `${p}.advisories.yaml`)),
      );
      const imported = await api.post(IMPORT_PATH, { parent: publicGroup, documents });
      assert.equal(imported.status, 200, JSON.stringify(imported.body));
      for (const r of imported.body.results) assert.equal(r.problem, undefined, JSON.stringify(r.problem));
      assert.equal((await api.post("/iam/v2beta1/groups", { name: "acme" })).status, 200);

      const image = await buildImage(join(work, "image"), {
        layers: [
          {
            files: {
              "etc/os-release": osRelease("wolfi", "20230201"),
              "lib/apk/db/installed": apkInstalled(AFFECTED),
            },
          },
        ],
      });
      const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      const pushed = await pushImage(skopeoIn(work), image, {
        host: new URL(server.url).host,
        repository: "acme/wolfi",
        creds: `_token:${password}`,
      });
      assert.equal(pushed.code, 0, pushed.stderr);
      digest = image.digest;
      assert.equal((await waitForInventory(server, digest)).state, "done");
      // the report follows the inventory in the background: wait until ListVulnReports names it
      await until(async () => {
        const res = await api.get(`/registry/v1/vuln_reports?digest=${encodeURIComponent(digest)}`);
        return (res.body.items ?? []).length > 0;
      }, `a vulnerability report for ${digest}`);
    });
    after(async () => {
      home?.close();
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("images vulns: a row per finding from the wolfi advisories, as a table and as JSON", async () => {
      const table = collapse(await ok(["images", "vulns", "acme/wolfi:v1"]));
      const rows = table.trimEnd().split("\n");
      assert.equal(rows[0], "ID  ALIASES  PACKAGE  INSTALLED  FIXED  STATE  SEVERITY");
      const parsed = rows.slice(1).map((r) => r.split("  "));
      assert.deepEqual(
        parsed.map(([id, aliases, pkg, installed, fixed, state]) => [
          id,
          aliases!.split(", ").find((a) => a.startsWith("CVE-")),
          pkg,
          installed,
          fixed,
          state,
        ]),
        EXPECTED_FINDINGS,
      );
      for (const row of parsed) assert.match(row[6]!, /^(UNKNOWN|LOW|MEDIUM|HIGH|CRITICAL)$/);

      const json = JSON.parse(await ok(["images", "vulns", `acme/wolfi@${digest}`, "-o", "json"])) as {
        id: string;
        aliases: string[];
        purls: string[];
        fix: { versions: string[]; state: string };
      }[];
      assert.deepEqual(json.map((v) => [v.id, v.purls, v.fix]).sort(), [
        [
          "CGA-6ppr-r643-ffxr",
          ["pkg:apk/wolfi/sysstat@12.7.1-r0?arch=x86_64"],
          { versions: ["12.7.4-r0"], state: "FIXED" },
        ],
        [
          "CGA-wr9c-57vm-38hq",
          ["pkg:apk/wolfi/haproxy-3.0@3.0.4-r0?arch=x86_64"],
          { versions: ["3.0.5-r0"], state: "FIXED" },
        ],
      ]);
    });

    it("images sbom: SPDX by default and CycloneDX with --format, each valid against its schema", async () => {
      const spdx = JSON.parse(await ok(["images", "sbom", "acme/wolfi:v1"])) as {
        spdxVersion: string;
        packages: { name: string; versionInfo: string }[];
      };
      assertValid(validSpdx, spdx);
      assert.equal(spdx.spdxVersion, "SPDX-2.3");
      assert.deepEqual(
        spdx.packages
          .slice(1)
          .map((p) => `${p.name}@${p.versionInfo}`)
          .sort(),
        ["glibc@2.39-r1", "haproxy-3.0@3.0.4-r0", "sysstat@12.7.1-r0"],
      );
      const cdx = JSON.parse(await ok(["images", "sbom", `acme/wolfi@${digest}`, "--format", "cyclonedx"])) as {
        bomFormat: string;
        components: { purl: string }[];
      };
      assertValid(validCycloneDx, cdx);
      assert.equal(cdx.bomFormat, "CycloneDX");
      assert.deepEqual(cdx.components.map((c) => c.purl).sort(), [
        "pkg:apk/wolfi/glibc@2.39-r1?arch=x86_64",
        "pkg:apk/wolfi/haproxy-3.0@3.0.4-r0?arch=x86_64",
        "pkg:apk/wolfi/sysstat@12.7.1-r0?arch=x86_64",
      ]);
    });

    it("images list and tags list count the image's vulnerabilities", async () => {
      assert.match(
        collapse(await ok(["images", "tags", "list", "acme/wolfi"])),
        /^ID  NAME  DIGEST  VULNS .*\n\S+  v1  \S+  2  /,
      );
      assert.match(collapse(await ok(["images", "list"])), /^REPO  TAGS  VULNS  UPDATED\nacme\/wolfi  v1  2  /);
    });
  });
}
