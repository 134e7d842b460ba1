// The registry from the command line: `serve --registry-port`, and `bulwark registry gc` on the
// data directory a server used, as an operator runs them.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dataDir = mkdtempSync(join(tmpdir(), "bulwark-cli-registry-"));

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DATABASE_URL: "" },
  });
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c));
  const [code] = (await once(child, "close")) as [number];
  return { code, out, err };
}

describe("bulwark serve --registry-port and bulwark registry gc", () => {
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it("serves the registry on its own port, and collects garbage from the data directory once stopped", async () => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "src/cli/main.ts", "serve", "--port", "0", "--registry-port", "0", "--data-dir", dataDir],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DATABASE_URL: "" } },
    );
    const { url, registryPort } = await new Promise<{ url: string; registryPort: string }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no ready line in 60 s")), 60_000);
      child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
        const m = /bulwark listening on (http:\/\/[^"\s]+) \(registry also on port (\d+)\)/.exec(chunk);
        if (m) {
          clearTimeout(timer);
          resolve({ url: m[1]!, registryPort: m[2]! });
        }
      });
      child.on("exit", (code) => reject(new Error(`exited ${code}`)));
    });
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
      const auth = { authorization: `Bearer ${registryToken.out.trim()}` };
      const bytes = randomBytes(4096);
      const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
      const pushed = await fetch(`http://${registryHost}/v2/acme/app/blobs/uploads/?digest=${digest}`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/octet-stream" },
        body: bytes,
      });
      assert.equal(pushed.status, 201, await pushed.text());
      // The registry port serves only the registry.
      assert.equal((await fetch(`http://${registryHost}/iam/v2beta1/groups`, { headers: api })).status, 404);
      // While the server holds the embedded database, gc refuses and says why.
      const busy = await cli(["registry", "gc", "--data-dir", dataDir]);
      assert.notEqual(busy.code, 0);
      assert.match(busy.err, /in use by another process/);
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
});
