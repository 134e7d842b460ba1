// `serve` on the embedded database keeps V8's young generation at its initial size
// (SERVE_V8_FLAGS): a grown one stays committed, and resident, for the life of the process. On
// PostgreSQL it leaves V8's defaults, which serve more requests per second. Seen from the server's
// own metrics.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serveProcess, type ServeProcess } from "../support/cli.js";
import { clonePostgres, postgresUrl } from "../support/db-templates.js";

const MiB = 1024 * 1024;
const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** V8's new space (bytes) of a `serve` with `args`/`env`, after start-up and 200 requests. */
async function newSpaceAfterRequests(args: string[], env: Record<string, string> = {}): Promise<number> {
  const probe = createServer().listen(0, "127.0.0.1");
  await once(probe, "listening");
  const metricsPort = String((probe.address() as { port: number }).port);
  probe.close();
  const server: ServeProcess = await serveProcess(
    ["--port", "0", ...args, "--metrics-port", metricsPort, "--metrics-host", "127.0.0.1"],
    env,
  );
  cleanups.push(() => server.stop().then(() => {}));
  for (let i = 0; i < 200; i++) await (await fetch(`${server.url}/openapi.json`)).arrayBuffer();
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const newSpace = /^bulwark_nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)/m.exec(metrics);
  assert.ok(newSpace, metrics.slice(0, 2000));
  return Number(newSpace[1]);
}

describe("serve's memory", () => {
  it("keeps V8's new space below its default most through start-up and requests, on PGlite", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bulwark-serve-memory-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const newSpace = await newSpaceAfterRequests(["--data-dir", dir, "--unsafe-no-fsync"]);
    // Without the flag, start-up alone grew it to V8's most (32 MiB: two 16 MiB semi-spaces); with
    // it, 8 MiB when ready and 16 MiB at most after these requests, as measured.
    assert.ok(newSpace < 32 * MiB, `new space ${newSpace} bytes`);
  });
});

describe("serve's memory [postgres]", { skip: !postgresUrl() && "needs PostgreSQL" }, () => {
  it("leaves V8's new space to its defaults on PostgreSQL", async () => {
    const { url, drop } = await clonePostgres();
    cleanups.push(drop);
    // V8's default: 32 MiB (two 16 MiB semi-spaces) by the time the server is ready
    assert.ok((await newSpaceAfterRequests([], { DATABASE_URL: url })) >= 32 * MiB);
  });
});
