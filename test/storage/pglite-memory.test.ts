// What the embedded database keeps resident: its shared buffers, and how V8 compiles PGlite's
// WebAssembly (baseline code only: the optimizing compiler's background tier-up left tens of MiB in
// malloc arenas for the life of the process). Memory itself is measured by bench/memory.mjs, not here.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { openDatabase, PGLITE_SHARED_BUFFERS } from "../../src/storage/db.js";

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("embedded database memory", () => {
  it("opens PGlite, in memory and on disk, with the configured shared buffers", async () => {
    assert.equal(PGLITE_SHARED_BUFFERS, "16MB");
    const dir = mkdtempSync(join(tmpdir(), "bulwark-pglite-memory-"));
    dirs.push(dir);
    for (const dataDir of ["memory://", dir]) {
      const { db, close } = await openDatabase({ dataDir, unsafeNoFsync: true });
      try {
        const { rows } = await sql<{ shared_buffers: string }>`show shared_buffers`.execute(db);
        assert.equal(rows[0]?.shared_buffers, PGLITE_SHARED_BUFFERS, dataDir);
      } finally {
        await close();
      }
    }
  });

  it("runs PGlite's WebAssembly as baseline code only, even its hottest functions", () => {
    // In a child with V8's natives syntax: every exported function of PGlite's instance after
    // thousands of queries (without the flag, V8 had tiered ~500 of them up to TurboFan code).
    const script = `
      const instances = [];
      const instantiate = WebAssembly.instantiate;
      WebAssembly.instantiate = async (...args) => {
        const r = await instantiate(...args);
        instances.push(r instanceof WebAssembly.Instance ? r : r.instance);
        return r;
      };
      const { sql } = await import("kysely");
      const { openDatabase } = await import(${JSON.stringify(new URL("../../src/storage/db.ts", import.meta.url).href)});
      const { db, close } = await openDatabase({ dataDir: "memory://" });
      for (let i = 0; i < 3000; i++) await sql\`select \${i}::int + 1 as x\`.execute(db);
      await new Promise((r) => setTimeout(r, 1000));
      const isTurboFan = new Function("f", "return %IsTurboFanFunction(f)");
      // PGlite's instance: the one with the most exported functions (the loader's own, tsx's, are small)
      const exported = (instance) => Object.values(instance.exports).filter((f) => typeof f === "function");
      const pglite = instances.map(exported).sort((a, b) => b.length - a.length)[0] ?? [];
      const functions = pglite.length, turboFan = pglite.filter((f) => isTurboFan(f)).length;
      await close();
      console.log(JSON.stringify({ instances: instances.length, functions, turboFan }));
    `;
    const child = spawnSync(
      process.execPath,
      ["--allow-natives-syntax", "--import", "tsx", "--input-type=module", "-e", script],
      { encoding: "utf8", env: { ...process.env, BULWARK_TEST_SKIP_POSTGRES: "1" } },
    );
    assert.equal(child.status, 0, child.stderr);
    const result = JSON.parse(child.stdout.trim().split("\n").at(-1)!);
    assert.ok(result.functions > 1000, child.stdout);
    assert.equal(result.turboFan, 0, child.stdout);
  });
});
