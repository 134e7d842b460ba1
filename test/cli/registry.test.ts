// The registry from the command line: `serve --registry-port`, and `bulwark registry gc` through
// the server holding a data directory and on the data directory a server used, as an operator runs them.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { S3BlobStore } from "../../src/registry/storage/s3-blob-store.js";
import { BIN, serveProcess, type ServeProcess } from "../support/cli.js";
import { startS3 } from "../support/s3.js";

const dataDir = mkdtempSync(join(tmpdir(), "bulwark-cli-registry-"));

/** The real binary (the server's commands open the database themselves: each needs its own process). */
async function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; out: string; err: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DATABASE_URL: "", ...env },
  });
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c));
  const [code] = (await once(child, "close")) as [number];
  return { code, out, err };
}

/** Every server this suite started: stopped (and waited for) before their directories go. */
const started: ServeProcess[] = [];

/** `bulwark serve` with these arguments, once it says it listens (and where the registry is). */
async function serve(args: string[], env: Record<string, string> = {}): Promise<ServeProcess> {
  const server = await serveProcess(args, env);
  started.push(server);
  return server;
}

async function pushBlob(base: string, authorization: string, bytes: Uint8Array): Promise<string> {
  const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
  const pushed = await fetch(`${base}/v2/acme/app/blobs/uploads/?digest=${digest}`, {
    method: "POST",
    headers: { authorization, "content-type": "application/octet-stream" },
    body: bytes,
  });
  assert.equal(pushed.status, 201, await pushed.text());
  return digest;
}

describe("bulwark serve --registry-port and bulwark registry gc", () => {
  after(async () => {
    await Promise.all(started.map((server) => server.stop()));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("serves the registry on its own port, and collects garbage from the data directory once stopped", async () => {
    const { child, url, registryPort } = await serve(["--port", "0", "--registry-port", "0", "--data-dir", dataDir]);
    assert.ok(registryPort);
    try {
      const registryHost = `127.0.0.1:${registryPort}`;
      const admin = await cli(["admin", "token", "--data-dir", dataDir, "--port", new URL(url).port]);
      assert.equal(admin.code, 0, admin.err);
      const api = { authorization: `Bearer ${admin.out.trim()}` };
      const org = await fetch(`${url}/iam/v2beta1/groups`, { method: "POST", headers: api, body: '{"name":"acme"}' });
      assert.equal(org.status, 200);
      const registryToken = await cli([
        "admin",
        "token",
        "--data-dir",
        dataDir,
        "--port",
        new URL(url).port,
        "--audience",
        registryHost,
      ]);
      await pushBlob(`http://${registryHost}`, `Bearer ${registryToken.out.trim()}`, randomBytes(4096));
      // The registry port serves only the registry.
      assert.equal((await fetch(`http://${registryHost}/iam/v2beta1/groups`, { headers: api })).status, 404);
      // While the server holds the embedded database, gc asks it (test/registry/gc-online.test.ts has more).
      const online = await cli(["registry", "gc", "--data-dir", dataDir, "--grace", "0s", "--dry-run"]);
      assert.equal(online.code, 0, online.err);
      assert.match(online.out, /^would remove: 0 manifests, 1 blob links, 0 blobs/);
      assert.match(online.err, /the server holding .* collects: calling /);
    } finally {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
    const blobFiles = () => readdirSync(join(dataDir, "registry", "blobs", "sha256"), { recursive: true }).length;
    assert.ok(blobFiles() > 0);
    const preview = await cli(["registry", "gc", "--data-dir", dataDir, "--grace", "0s", "--dry-run"]);
    assert.equal(preview.code, 0, preview.err);
    assert.match(preview.out, /^would remove: 0 manifests, 1 blob links, 0 blobs/);
    const kept = await cli(["registry", "gc", "--data-dir", dataDir]);
    assert.match(kept.out, /^removed: 0 manifests, 0 blob links, 0 blobs \(0 bytes\)/, "within the default 1h grace");
    const collected = await cli(["registry", "gc", "--data-dir", dataDir, "--grace", "0s"]);
    assert.equal(collected.code, 0, collected.err);
    assert.match(collected.out, /^removed: 0 manifests, 1 blob links, 1 blobs \(4096 bytes\)/);
    assert.ok(existsSync(join(dataDir, "registry")));
    assert.equal(
      readdirSync(join(dataDir, "registry", "blobs", "sha256"), { recursive: true, withFileTypes: true }).filter((e) =>
        e.isFile(),
      ).length,
      0,
    );
  });

  it("keeps blobs in an S3-compatible bucket with --s3-*, and collects them there", async () => {
    const s3 = await startS3();
    const s3Dir = mkdtempSync(join(tmpdir(), "bulwark-cli-s3-"));
    const flags = ["--s3-bucket", s3.settings.bucket, "--s3-endpoint", s3.endpoint, "--s3-path-style"];
    const credentials = {
      AWS_ACCESS_KEY_ID: s3.settings.accessKeyId!,
      AWS_SECRET_ACCESS_KEY: s3.settings.secretAccessKey!,
    };
    const store = new S3BlobStore(s3.settings);
    try {
      const { child, url } = await serve(["--port", "0", "--data-dir", s3Dir, ...flags], credentials);
      let digest: string;
      try {
        const port = new URL(url).port;
        const api = await cli(["admin", "token", "--data-dir", s3Dir, "--port", port]);
        const org = await fetch(`${url}/iam/v2beta1/groups`, {
          method: "POST",
          headers: { authorization: `Bearer ${api.out.trim()}` },
          body: '{"name":"acme"}',
        });
        assert.equal(org.status, 200);
        const registry = await cli([
          "admin",
          "token",
          "--data-dir",
          s3Dir,
          "--port",
          port,
          "--audience",
          new URL(url).host,
        ]);
        digest = await pushBlob(url, `Bearer ${registry.out.trim()}`, randomBytes(2048));
        assert.equal(await store.has(digest), true, "the blob is in the bucket");
        assert.equal(existsSync(join(s3Dir, "registry")), false, "and nothing on the local disk");
      } finally {
        child.kill("SIGTERM");
        await once(child, "exit");
      }
      const gc = await cli(["registry", "gc", "--data-dir", s3Dir, "--grace", "0s", ...flags], credentials);
      assert.equal(gc.code, 0, gc.err);
      assert.match(gc.out, /^removed: 0 manifests, 1 blob links, 1 blobs \(2048 bytes\)/);
      assert.equal(await store.has(digest), false, "collected from the bucket");
    } finally {
      await Promise.all(started.map((server) => server.stop()));
      await store.close();
      await s3.close();
      rmSync(s3Dir, { recursive: true, force: true });
    }
  });
});
