// The background indexer over real pushes (skopeo, images built in the test): an apk image's
// inventory (packages with origin and license, config, sizes), a dpkg image's, each platform of
// an index, the same image in two repos read once with both repos' reports queued, an attached
// SBOM re-reading its image (only from a repo of the organization holding it: another tenant's
// SBOM naming the image changes nothing), hostile layers recorded as the image's error while the
// queue goes on, a storage failure shown as a generic error and retried by a push, a push of a
// read image not waiting on a report batch, and the one-time backfill of images stored before the
// images module ran.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import { mkdtempSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { imagesModule } from "../../src/images/api.js";
import { INTERNAL_READ_ERROR } from "../../src/images/indexer.js";
import { InventoriesRepository } from "../../src/images/storage/inventories.js";
import { imagesDb } from "../../src/images/storage/schema.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { digestOf, OciClient } from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { skopeoIn, type Run } from "../support/skopeo.js";
import { until, withinHang } from "../support/wait.js";
import {
  apkInstalled,
  buildImage,
  dpkgStatus,
  inventoryOf,
  osRelease,
  pushImage,
  waitForInventory,
  type BuiltImage,
  type PlatformSpec,
} from "../support/images.js";

const MiB = 1024 * 1024;
const ok = (run: Run, what: string) => assert.equal(run.code, 0, `${what}: ${run.stderr}`);

/** Real wolfi package names and versions; libcrypto3 and libssl3 are subpackages of openssl. */
const WOLFI = [
  { name: "ca-certificates-bundle", version: "20240315-r0", license: "MPL-2.0 AND MIT" },
  { name: "glibc", version: "2.39-r1", license: "LGPL-2.1-or-later" },
  { name: "libcrypto3", version: "3.3.0-r2", origin: "openssl", license: "Apache-2.0" },
  { name: "libssl3", version: "3.3.0-r2", origin: "openssl", license: "Apache-2.0" },
  { name: "busybox", version: "1.36.1-r6", license: "GPL-2.0-only" },
];

const wolfiImage = (extra: PlatformSpec["layers"] = []): PlatformSpec => ({
  layers: [
    {
      files: {
        "etc/os-release": osRelease("wolfi", "20230201"),
        "lib/apk/db/installed": apkInstalled(WOLFI),
        "etc/motd": "welcome\n",
      },
    },
    { compression: "zstd", entries: [{ path: "etc/motd", whiteout: true }], files: { "app/run": "#!/bin/sh\n" } },
    ...extra,
  ],
  config: { Env: ["PATH=/usr/bin"], Cmd: ["/app/run"], Labels: { "org.example.team": "platform" } },
  created: "2024-05-01T12:00:00Z",
});

/** A layer that makes every build of an image distinct (so tests never share digests). */
const unique = () => ({ files: { [`nonce/${randomBytes(6).toString("hex")}`]: randomBytes(16) } });

for (const backend of backends()) {
  describe(`image indexer [${backend}]`, () => {
    let server: TestServer;
    let work: string;
    let skopeo: ReturnType<typeof skopeoIn>;
    let host: string;
    let creds: string;
    let password: string;
    let built = 0;
    const build = (spec: PlatformSpec | PlatformSpec[]) => buildImage(join(work, `image-${++built}`), spec);
    const push = async (image: BuiltImage, repository: string) =>
      ok(await pushImage(skopeo, image, { host, repository, creds }), `push to ${repository}`);
    const repoUid = async (name: string) =>
      (await sql<{ uid: string }>`select uid from repos where name = ${name}`.execute(server.db)).rows[0]!.uid;
    /** Whether a report of the image in the repo is queued or already made (a report worker may have run). */
    const reportQueuedOrMade = async (repo: string, digest: string) => {
      const { rows } = await sql<{ n: number }>`
        select (select count(*) from image_report_queue where repo_uid = ${repo} and digest = ${digest})
             + (select count(*) from vuln_reports where repo_uid = ${repo} and digest = ${digest}) as n`.execute(
        server.db,
      );
      return Number(rows[0]!.n) > 0;
    };

    before(async () => {
      work = mkdtempSync(join(tmpdir(), "bulwark-indexer-"));
      skopeo = skopeoIn(work);
      server = await startTestServer(backend, {
        registry: { blobDirectory: join(work, "blobs") },
        // a tar bomb ends at 8 MiB decompressed here, not at the default's gigabytes
        images: { pollIntervalMs: 100, inventoryLimits: { maxDecompressedBytes: 8 * MiB } },
      });
      host = new URL(server.url).host;
      for (const name of ["acme", "rival"]) {
        const org = await restClient(server.url, server.operatorToken).post("/iam/v2beta1/groups", { name });
        assert.equal(org.status, 200, JSON.stringify(org.body));
      }
      password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      creds = `_token:${password}`;
    });
    after(async () => {
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("reads a pushed apk image: packages with origin and license, config, sizes", async () => {
      const image = await build(wolfiImage([unique()]));
      await push(image, "acme/wolfi");
      const row = await waitForInventory(server, image.digest);
      assert.equal(row.state, "done", row.error ?? "");
      assert.equal(row.attempts, 1);
      assert.equal(row.error, null);
      assert.equal(row.packageSource, "apk");
      assert.equal(row.distro, "wolfi");
      assert.equal(row.distroVersion, "20230201");
      assert.deepEqual(
        row.packages.map((p) => [p.type, p.name, p.version, p.origin, p.license, p.arch]),
        WOLFI.map((p) => ["apk", p.name, p.version, p.origin ?? p.name, p.license, "x86_64"]),
      );
      assert.equal(
        row.packages.find((p) => p.name === "libcrypto3")!.purl,
        "pkg:apk/wolfi/libcrypto3@3.3.0-r2?arch=x86_64",
      );
      assert.equal(row.os, "linux");
      assert.equal(row.architecture, "amd64");
      assert.equal(row.created?.toISOString(), "2024-05-01T12:00:00.000Z");
      assert.deepEqual(row.config.Labels, { "org.example.team": "platform" });
      assert.deepEqual(row.config.Cmd, ["/app/run"]);
      const [platform] = image.platforms;
      assert.equal(
        row.sizeCompressed,
        platform!.config.length + platform!.layers.reduce((n, l) => n + l.size, 0),
        "config + layers as stored",
      );
      assert.equal(
        row.sizeUncompressed,
        platform!.layers.reduce((n, l) => n + l.uncompressedSize, 0),
        "the layers decompressed",
      );
      // the packages are indexed by name and by origin
      assert.ok((await imagePackagesDigests(server, ["openssl"], [])).includes(image.digest));
      assert.ok((await imagePackagesDigests(server, ["busybox"], [])).includes(image.digest));
      assert.ok(await reportQueuedOrMade(await repoUid("wolfi"), image.digest), "its report is queued");
    });

    it("reads a dpkg image", async () => {
      const image = await build({
        layers: [
          {
            files: {
              "etc/os-release": osRelease("debian", "12"),
              "var/lib/dpkg/status": dpkgStatus([
                { name: "libssl3", version: "3.0.11-1~deb12u2", source: "openssl (3.0.11-1~deb12u2)" },
                { name: "zlib1g", version: "1:1.2.13.dfsg-1", source: "zlib" },
                { name: "bash", version: "5.2.15-2+b2" },
              ]),
            },
          },
          unique(),
        ],
      });
      await push(image, "acme/debian");
      const row = await waitForInventory(server, image.digest);
      assert.equal(row.state, "done", row.error ?? "");
      assert.equal(row.packageSource, "dpkg");
      assert.equal(row.distro, "debian");
      assert.deepEqual(
        row.packages.map((p) => [p.type, p.name, p.version, p.origin, p.arch]),
        [
          ["deb", "libssl3", "3.0.11-1~deb12u2", "openssl", "amd64"],
          ["deb", "zlib1g", "1:1.2.13.dfsg-1", "zlib", "amd64"],
          ["deb", "bash", "5.2.15-2+b2", "bash", "amd64"],
        ],
      );
      assert.match(row.packages[0]!.purl, /^pkg:deb\/debian\/libssl3@3\.0\.11-1~deb12u2\?arch=amd64/);
    });

    it("reads each platform of a pushed index, and not the index", async () => {
      const amd64 = wolfiImage([unique()]);
      const arm64 = { ...wolfiImage([unique()]), architecture: "arm64", variant: "v8" };
      const image = await build([amd64, arm64]);
      await push(image, "acme/multi");
      const rows = await Promise.all(image.platforms.map((p) => waitForInventory(server, p.digest)));
      assert.deepEqual(
        rows.map((r) => [r.state, r.architecture, r.variant, r.packages.length]),
        [
          ["done", "amd64", "", WOLFI.length],
          ["done", "arm64", "v8", WOLFI.length],
        ],
      );
      assert.equal(await inventoryOf(server, image.digest), undefined, "an index has no inventory of its own");
    });

    it("reads an image pushed to two repos once, and queues both repos' reports", async () => {
      const image = await build(wolfiImage([unique()]));
      await push(image, "acme/first");
      const first = await waitForInventory(server, image.digest);
      assert.equal(first.state, "done");
      await push(image, "acme/second");
      const second = await repoUid("second");
      await until(() => reportQueuedOrMade(second, image.digest), "the second repo's report queued");
      const again = (await inventoryOf(server, image.digest))!;
      assert.equal(again.attempts, 1, "read once");
      assert.equal(again.indexTime?.getTime(), first.indexTime?.getTime(), "not read again");
      assert.ok(await reportQueuedOrMade(await repoUid("first"), image.digest));
    });

    it("records hostile layers as the image's error, and reads the next image", async () => {
      const gzip = gzipSync(Buffer.from("not a tar archive, and cut short".repeat(1000)));
      const hostile: [what: string, spec: PlatformSpec][] = [
        // 64 MiB of zeros (~64 KiB compressed) against the 8 MiB limit
        ["a tar bomb", { layers: [{ entries: [{ path: "zeros", size: 64 * MiB }] }, unique()] }],
        [
          "a ../ path",
          {
            layers: [
              { entries: [{ header: { name: "../../etc/passwd", size: 5 }, body: Buffer.from("root\n") }] },
              unique(),
            ],
          },
        ],
        ["a truncated gzip", { layers: [{ bytes: gzip.subarray(0, gzip.length >> 1) }, unique()] }],
        [
          "a symlink loop",
          {
            layers: [
              {
                entries: [
                  { path: "lib/apk/db", symlink: "../../lib/apk/loop" },
                  { path: "lib/apk/loop", symlink: "db" },
                ],
              },
              unique(),
            ],
          },
        ],
      ];
      const images: BuiltImage[] = [];
      for (const [, spec] of hostile) images.push(await build(spec));
      for (const [i, image] of images.entries()) await push(image, `acme/hostile-${i}`);
      const good = await build(wolfiImage([unique()]));
      await push(good, "acme/after-hostile");
      for (const [i, image] of images.entries()) {
        const row = await waitForInventory(server, image.digest);
        const what = hostile[i]![0];
        if (what === "a symlink loop" && row.state === "done") {
          // a loop the reader need not follow: no package database behind it
          assert.equal(row.packageSource, "", what);
          continue;
        }
        assert.equal(row.state, "failed", `${what}: ${JSON.stringify(row)}`);
        assert.ok(row.error && row.error.length > 0, `${what} has its error recorded`);
        assert.equal(row.attempts, 1, `${what}: a malformed image is not read again`);
      }
      const row = await waitForInventory(server, good.digest);
      assert.equal(row.state, "done", "the queue goes on after hostile images");
    });

    it("reads an image again when an SBOM is attached to it (not one the server generated)", async () => {
      const image = await build(wolfiImage([unique()]));
      await push(image, "acme/with-sbom");
      const before = await waitForInventory(server, image.digest);
      assert.equal(before.state, "done");
      const sbom = Buffer.from(
        JSON.stringify({
          bomFormat: "CycloneDX",
          specVersion: "1.5",
          version: 1,
          components: [
            { type: "library", name: "zlib", version: "1.3.1-r0", purl: "pkg:apk/wolfi/zlib@1.3.1-r0?arch=x86_64" },
          ],
        }),
      );
      await pushReferrer(server, password, "acme/with-sbom", image, sbom, "application/vnd.cyclonedx+json");
      const after = await until(async () => {
        const row = await inventoryOf(server, image.digest);
        return row?.state === "done" && row.indexTime! > before.indexTime! ? row : undefined;
      }, "the image read again after its SBOM was attached");
      assert.equal(after.attempts, 1, "a re-read starts its attempts anew");
      assert.equal(after.packageSource, "sbom:cyclonedx", "the attached SBOM is used");
      assert.deepEqual(
        after.packages.map((p) => [p.name, p.version]),
        [["zlib", "1.3.1-r0"]],
      );
    });

    const cyclonedx = (name: string, version: string) =>
      Buffer.from(
        JSON.stringify({
          bomFormat: "CycloneDX",
          specVersion: "1.5",
          version: 1,
          components: [{ type: "library", name, version, purl: `pkg:apk/wolfi/${name}@${version}?arch=x86_64` }],
        }),
      );

    it("ignores an SBOM another organization attaches to an image: not read again, the layers still tell", async () => {
      const image = await build(wolfiImage([unique()]));
      await push(image, "acme/victim");
      const before = await waitForInventory(server, image.digest);
      assert.equal(before.packageSource, "apk");

      // A repo of another organization, not holding the image, names it as its SBOM's subject.
      await pushReferrer(server, password, "rival/forgery", image, cyclonedx("nothing", "1"), CYCLONEDX);
      const unchanged = (await inventoryOf(server, image.digest))!;
      assert.deepEqual(
        [unchanged.state, unchanged.attempts, unchanged.indexTime?.getTime(), unchanged.packageSource],
        ["done", before.attempts, before.indexTime?.getTime(), "apk"],
        "not queued again by another organization's SBOM",
      );

      // Holding the image too does not let it speak for acme's copy: not queued, and a read
      // (queued here by hand) ignores its SBOM while repos of two organizations hold the image.
      await push(image, "rival/forgery");
      await pushReferrer(server, password, "rival/forgery", image, cyclonedx("nothing", "2"), CYCLONEDX);
      assert.equal((await inventoryOf(server, image.digest))!.indexTime?.getTime(), before.indexTime?.getTime());
      assert.ok(await new InventoriesRepository(imagesDb(server.db)).requeue(image.digest, new Date()));
      server.exportsOf(imagesModule).indexer.wake();
      const reread = await until(async () => {
        const row = await inventoryOf(server, image.digest);
        return row?.state === "done" && row.indexTime! > before.indexTime! ? row : undefined;
      }, "the image read again");
      assert.equal(reread.packageSource, "apk", "read from its layers");
      assert.equal(reread.packages.length, WOLFI.length);
    });

    it("reads an image from its layers again once another organization pushes it (its SBOM no longer speaks for it)", async () => {
      const image = await build(wolfiImage([unique()]));
      await push(image, "acme/sbom-first");
      const first = await waitForInventory(server, image.digest);
      await pushReferrer(server, password, "acme/sbom-first", image, cyclonedx("zlib", "1.3.1-r0"), CYCLONEDX);
      const fromSbom = await until(async () => {
        const row = await inventoryOf(server, image.digest);
        return row?.state === "done" && row.packageSource === "sbom:cyclonedx" ? row : undefined;
      }, "the image read from the SBOM of its own organization");
      assert.ok(fromSbom.indexTime! > first.indexTime!);

      await push(image, "rival/copy");
      const fromLayers = await until(async () => {
        const row = await inventoryOf(server, image.digest);
        return row?.state === "done" && row.indexTime! > fromSbom.indexTime! ? row : undefined;
      }, "the image read again after another organization pushed it");
      assert.equal(fromLayers.packageSource, "apk");
    });

    it("shows a storage failure as a generic error, and reads the image again when it is pushed again", async () => {
      const image = await build(wolfiImage([unique()]));
      await push(image, "acme/flaky");
      const before = await waitForInventory(server, image.digest);
      assert.equal(before.state, "done");
      // The image's own layer becomes unreadable: opening it fails with an error naming its path.
      const layer = image.platforms[0]!.layers.at(-1)!.digest.slice("sha256:".length);
      const path = join(work, "blobs", "blobs", "sha256", layer.slice(0, 2), layer);
      renameSync(path, `${path}.aside`);
      symlinkSync(path, path); // a loop: ELOOP on open
      try {
        assert.ok(await new InventoriesRepository(imagesDb(server.db)).requeue(image.digest, new Date()));
        server.exportsOf(imagesModule).indexer.wake();
        const failed = await until(async () => {
          const row = await inventoryOf(server, image.digest);
          return row?.state === "failed" ? row : undefined;
        }, "the read failed (retried, then given up)");
        assert.equal(failed.error, INTERNAL_READ_ERROR, "no internal detail (a file path) for callers");
        assert.equal(failed.errorKind, "transient");
      } finally {
        rmSync(path);
        renameSync(`${path}.aside`, path);
      }
      await pushImage(skopeo, image, { host, repository: "acme/flaky", creds, tag: "again" });
      const after = await until(async () => {
        const row = await inventoryOf(server, image.digest);
        return row?.state === "done" ? row : undefined;
      }, "the image read again after it was pushed again");
      assert.equal(after.packages.length, WOLFI.length);
    });

    it(
      "answers a push of a read image while a report batch holds that image's report queue row",
      { skip: backend === "pglite" && "an embedded database runs one transaction at a time" },
      async () => {
        const image = await build(wolfiImage([unique()]));
        await push(image, "acme/busy");
        assert.equal((await waitForInventory(server, image.digest)).state, "done");
        const repo = await repoUid("busy");
        const platform = image.platforms[0]!;
        const oci = new OciClient(server.url, { credential: { username: "_token", password } });
        // A transaction holding the (repo, image) queue row uncommitted, as a report batch does.
        await server.db.transaction().execute(async (trx) => {
          await sql`insert into image_report_queue (repo_uid, digest, queue_time)
            values (${repo}, ${image.digest}, now()) on conflict do nothing`.execute(trx);
          await sql`delete from image_report_queue where repo_uid = ${repo} and digest = ${image.digest}`.execute(trx);
          const put = await withinHang(
            oci.request("PUT", `/v2/acme/busy/manifests/another-tag`, {
              headers: { "content-type": image.mediaType },
              body: platform.manifest,
            }),
            "answer to the push while the report queue row is held",
          );
          assert.equal(put.status, 201, put.body.toString());
        });
      },
    );

    it(
      "queues, once, the images stored before the images module ran",
      { skip: backend === "pglite" && "needs a second server on the same database" },
      async () => {
        const image = await build(wolfiImage([unique()]));
        await push(image, "acme/earlier");
        await waitForInventory(server, image.digest);
        // As if the images module had never run: its rows and its backfill mark gone.
        await sql`delete from image_inventories where digest = ${image.digest}`.execute(server.db);
        await sql`delete from images_state where name = 'inventory-backfill'`.execute(server.db);
        const again = await startTestServer(backend, {
          replicaOf: server,
          registry: { blobDirectory: join(work, "blobs") },
          images: { pollIntervalMs: 100 },
        });
        try {
          const row = await waitForInventory(again, image.digest);
          assert.equal(row.state, "done");
        } finally {
          await again.close();
        }
      },
    );

    it("exports a wake for the indexer", () => {
      assert.equal(typeof server.exportsOf(imagesModule).indexer.wake, "function");
    });
  });
}

async function imagePackagesDigests(server: TestServer, names: string[], purls: string[]): Promise<string[]> {
  const { InventoriesRepository } = await import("../../src/images/storage/inventories.js");
  const { imagesDb } = await import("../../src/images/storage/schema.js");
  return new InventoriesRepository(imagesDb(server.db)).digestsWithPackages(names, purls);
}

const CYCLONEDX = "application/vnd.cyclonedx+json";

/** Pushes `document` as an OCI referrer (an artifact manifest with one layer) of `image`'s manifest. */
async function pushReferrer(
  server: TestServer,
  password: string,
  repository: string,
  image: BuiltImage,
  document: Buffer,
  artifactType: string,
): Promise<void> {
  const oci = new OciClient(server.url, { credential: { username: "_token", password } });
  const empty = Buffer.from("{}");
  for (const blob of [document, empty]) {
    const res = await oci.request("POST", `/v2/${repository}/blobs/uploads/?digest=${digestOf(blob)}`, {
      headers: { "content-type": "application/octet-stream" },
      body: blob,
    });
    assert.equal(res.status, 201, res.body.toString());
  }
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    artifactType,
    config: { mediaType: "application/vnd.oci.empty.v1+json", digest: digestOf(empty), size: empty.length },
    layers: [{ mediaType: artifactType, digest: digestOf(document), size: document.length }],
    subject: { mediaType: image.mediaType, digest: image.digest, size: image.platforms[0]!.manifest.length },
  });
  const put = await oci.request("PUT", `/v2/${repository}/manifests/${digestOf(manifest)}`, {
    headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
    body: manifest,
  });
  assert.equal(put.status, 201, put.body.toString());
}
