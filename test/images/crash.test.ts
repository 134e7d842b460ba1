// kill -9 of a `bulwark serve` process while it reads a large pushed image: the read was in the
// background (the push had its answer), and after a restart the image's read resumes and
// completes, the killed read counted as an attempt. On the embedded database (a data directory,
// where the restarted process frees the dead one's lease at once) and on PostgreSQL (where another
// replica takes the image over once the dead replica's lease ran out).
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { openDatabase } from "../../src/storage/db.js";
import { postgresUrl } from "../support/db-templates.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { restClient } from "../support/http.js";
import { serveProcess, type ServeProcess } from "../support/cli.js";
import { skopeoIn } from "../support/skopeo.js";
import { until } from "../support/wait.js";
import { apkInstalled, buildImage, inventoryOf, osRelease, pushImage, waitForInventory } from "../support/images.js";
import { CLI_ARGS } from "../support/paths.js";

const MiB = 1024 * 1024;

/** A large image: 320 MiB of incompressible bytes in four layers ahead of the package database. */
function buildLargeImage(dir: string) {
  return buildImage(dir, {
    layers: [
      ...[0, 1, 2, 3].map((i) => ({ entries: [{ path: `data/blob-${i}`, size: 80 * MiB, random: true }] })),
      {
        files: {
          "etc/os-release": osRelease("wolfi", "20230201"),
          "lib/apk/db/installed": apkInstalled([{ name: "glibc", version: "2.39-r1" }]),
        },
      },
    ],
  });
}

/** `bulwark admin token` on the data directory (the registry audience when given). */
async function adminToken(dataDir: string, port: string, audience?: string): Promise<string> {
  const child = spawn(
    process.execPath,
    [
      ...CLI_ARGS,
      ...["admin", "token", "--data-dir", dataDir],
      ...["--host", "127.0.0.1", "--port", port],
      ...(audience ? ["--audience", audience] : []),
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DATABASE_URL: "" } },
  );
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
  const [code] = await once(child, "close");
  assert.equal(code, 0, err);
  return out.trim();
}

/** Whether the process logged `message` about `digest`. */
const logged = (server: ServeProcess, message: string, digest: string) =>
  server.lines.some((line) => line.includes(message) && line.includes(digest));

describe("images: kill -9 during an image's inventory [pglite data dir]", () => {
  const work = mkdtempSync(join(tmpdir(), "bulwark-index-kill-"));
  const dataDir = join(work, "data");
  const servers: ServeProcess[] = [];
  after(async () => {
    for (const s of servers) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill("SIGKILL");
    rmSync(work, { recursive: true, force: true });
  });

  it("resumes the read after a restart, and completes it", async () => {
    const image = await buildLargeImage(join(work, "image"));
    const serveArgs = ["--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, "--log-level", "debug"];
    const first = await serveProcess(serveArgs);
    servers.push(first);
    const url = new URL(first.url);
    const [apiToken, password] = await Promise.all([
      adminToken(dataDir, url.port),
      adminToken(dataDir, url.port, url.host),
    ]);
    const org = await restClient(first.url, apiToken).post("/iam/v2beta1/groups", { name: "acme" });
    assert.equal(org.status, 200, JSON.stringify(org.body));
    const skopeo = skopeoIn(work);
    const pushed = await pushImage(skopeo, image, {
      host: url.host,
      repository: "acme/big",
      creds: `_token:${password}`,
    });
    assert.equal(pushed.code, 0, pushed.stderr);

    // Killed once it began reading (the push was answered before).
    await until(() => logged(first, "reading an image's inventory", image.digest), "the read began");
    assert.ok(!logged(first, "an image's inventory was read", image.digest), "killed mid-read");
    first.child.kill("SIGKILL");
    await once(first.child, "exit");

    const second = await serveProcess([...serveArgs.slice(0, 3), String(url.port), ...serveArgs.slice(4)]);
    servers.push(second);
    await until(() => logged(second, "an image's inventory was read", image.digest), "the read completed");
    await second.stop();

    const database = await openDatabase({ dataDir });
    try {
      const row = await inventoryOf(database, image.digest);
      assert.equal(row?.state, "done");
      assert.equal(row?.attempts, 2, "the killed read counted as an attempt");
      assert.deepEqual(
        row?.packages.map((p) => [p.name, p.version]),
        [["glibc", "2.39-r1"]],
      );
      assert.equal(
        row?.sizeUncompressed,
        image.platforms[0]!.layers.reduce((n, l) => n + l.uncompressedSize, 0),
      );
    } finally {
      await database.close();
    }
  });
});

describe(
  "images: kill -9 of a replica during an image's inventory [postgres]",
  { skip: !postgresUrl() && "needs PostgreSQL" },
  () => {
    const work = mkdtempSync(join(tmpdir(), "bulwark-index-kill-pg-"));
    const blobDirectory = join(work, "blobs");
    let primary: TestServer | undefined;
    let child: ServeProcess | undefined;
    let taker: TestServer | undefined;
    after(async () => {
      if (child && child.child.exitCode === null && child.child.signalCode === null) child.child.kill("SIGKILL");
      await taker?.close();
      await primary?.close();
      rmSync(work, { recursive: true, force: true });
    });

    it("another replica reads the image once the killed replica's lease ran out", async () => {
      const image = await buildLargeImage(join(work, "image"));
      // The primary serves the push and reads nothing; the child replica reads.
      primary = await startTestServer("postgres", { registry: { blobDirectory }, images: { inventoryConcurrency: 0 } });
      const publicUrls = { issuerUrl: primary.urls.issuer, apiUrl: primary.urls.apiAudience };
      child = await serveProcess(
        [
          ...["--host", "127.0.0.1", "--port", "0", "--blob-dir", blobDirectory, "--inventory-concurrency", "1"],
          // A short lease: the taker waits it out after the kill (the default, 30 s, would be the test's cost).
          ...["--inventory-lease", "4s"],
          ...["--issuer-url", publicUrls.issuerUrl, "--api-url", publicUrls.apiUrl],
        ],
        { DATABASE_URL: primary.databaseUrl! },
      );
      const org = await restClient(primary.url, primary.operatorToken).post("/iam/v2beta1/groups", { name: "acme" });
      assert.equal(org.status, 200, JSON.stringify(org.body));
      const password = await primary.tokenFor(OPERATOR_SUBJECT, { audience: [primary.tokens.urls.registryAudience] });
      const host = new URL(primary.url).host;
      const pushed = await pushImage(skopeoIn(work), image, {
        host,
        repository: "acme/big",
        creds: `_token:${password}`,
      });
      assert.equal(pushed.code, 0, pushed.stderr);

      const server = primary;
      const reading = await until(async () => {
        const row = await inventoryOf(server, image.digest);
        return row?.state === "pending" && row.attempts === 1 ? row : undefined;
      }, "the child's read began");
      assert.equal(reading.state, "pending", "killed mid-read");
      child.child.kill("SIGKILL");
      await once(child.child, "exit");

      taker = await startTestServer("postgres", {
        replicaOf: primary,
        publicUrls,
        registry: { blobDirectory },
        images: { pollIntervalMs: 200 },
      });
      const row = await waitForInventory(primary, image.digest);
      assert.equal(row.state, "done", row.error ?? "");
      assert.equal(row.attempts, 2, "the killed read counted as an attempt");
      assert.deepEqual(
        row.packages.map((p) => [p.name, p.version]),
        [["glibc", "2.39-r1"]],
      );
    });
  },
);
