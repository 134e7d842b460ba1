// `serve` keeps V8's young generation at its initial size (SERVE_V8_FLAGS): a grown one stays
// committed, and resident, for the life of the process. Seen from the server's own metrics.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serveProcess, type ServeProcess } from "../support/cli.js";

const dirs: string[] = [];
const servers: ServeProcess[] = [];
after(async () => {
  for (const server of servers) await server.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("serve's memory", () => {
  it("keeps V8's new space below its default most through start-up and requests", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bulwark-serve-memory-"));
    dirs.push(dir);
    const probe = createServer().listen(0, "127.0.0.1");
    await once(probe, "listening");
    const metricsPort = String((probe.address() as { port: number }).port);
    probe.close();
    const server = await serveProcess(
      ["--port", "0", "--data-dir", dir, "--unsafe-no-fsync"].concat([
        "--metrics-port",
        metricsPort,
        "--metrics-host",
        "127.0.0.1",
      ]),
    );
    servers.push(server);
    for (let i = 0; i < 200; i++) await (await fetch(`${server.url}/openapi.json`)).arrayBuffer();
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const newSpace = /^bulwark_nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)/m.exec(metrics);
    assert.ok(newSpace, metrics.slice(0, 2000));
    // Without the flag, start-up alone grew it to V8's most (32 MiB: two 16 MiB semi-spaces); with
    // it, 8 MiB when ready and 16 MiB at most after these requests, as measured.
    assert.ok(Number(newSpace[1]) < 32 * 1024 * 1024, `new space ${newSpace[1]} bytes`);
  });
});
