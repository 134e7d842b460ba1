// What the embedded database keeps resident: its shared buffers, how V8 compiles PGlite's
// WebAssembly (baseline code only: the optimizing compiler's background tier-up left tens of MiB in
// malloc arenas for the life of the process), and where a new data directory's initdb runs (in a
// process of its own: the WebAssembly memory it touches never shrinks), or what it copies instead.
// Memory itself is measured by bench/memory.mjs; here only what tells the cases apart by far.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { INITDB_TEMPLATE_ENV, openDatabase, PGLITE_SHARED_BUFFERS } from "../../src/storage/db.js";
import { KEY_ENCRYPTION_KEY_FILE } from "../../src/storage/data-dir.js";
import { INITDB_TEMPLATE, prepareInitdbTemplate } from "../support/db-templates.js";
import { COUNT_LARGE_BUFFERS } from "../support/large-buffers.js";
import { moduleUrl, TS_LOADER_ARGS } from "../support/paths.js";

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs an ES module script in a child Node (compiled, or with tsx; PGlite only); its last line of output, parsed. */
function runInChild<T = unknown>(
  script: string,
  nodeFlags: string[] = [],
  env: Record<string, string | undefined> = {},
): { result: T; stdout: string } {
  const child = spawnSync(process.execPath, [...nodeFlags, ...TS_LOADER_ARGS, "--input-type=module", "-e", script], {
    encoding: "utf8",
    env: { ...process.env, BULWARK_TEST_SKIP_POSTGRES: "1", ...env },
  });
  assert.equal(child.status, 0, child.stderr);
  return { result: JSON.parse(child.stdout.trim().split("\n").at(-1)!) as T, stdout: child.stdout };
}

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
      const { openDatabase } = await import(${JSON.stringify(moduleUrl("src/storage/db.ts"))});
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
    const { result, stdout } = runInChild<{ functions: number; turboFan: number }>(script, ["--allow-natives-syntax"]);
    assert.ok(result.functions > 1000, stdout);
    assert.equal(result.turboFan, 0, stdout);
  });

  it("creates a new data directory's database in a process of its own", () => {
    // PGlite's initdb runs in an instance of its own, whose WebAssembly memory (~325 MiB resident)
    // stays until V8 happens to collect it: in the server's process, a first start idled at up to
    // ~640 MiB. Counted in a child: the instances of PGlite's WebAssembly it made (inline, two).
    const dir = mkdtempSync(join(tmpdir(), "bulwark-pglite-initdb-"));
    dirs.push(dir);
    const script = `
      let instances = 0;
      const instantiate = WebAssembly.instantiate;
      WebAssembly.instantiate = async (...args) => {
        const r = await instantiate(...args);
        const exports = Object.keys((r instanceof WebAssembly.Instance ? r : r.instance).exports);
        if (exports.length > 1000) instances++; // PGlite's (the loader's own, tsx's, are small)
        return r;
      };
      const { openDatabase } = await import(${JSON.stringify(moduleUrl("src/storage/db.ts"))});
      const opened = [];
      for (let i = 0; i < 2; i++) {
        const { close } = await openDatabase({ dataDir: ${JSON.stringify(join(dir, "data"))}, unsafeNoFsync: true });
        await close();
        opened.push(instances);
      }
      console.log(JSON.stringify({ opened }));
      // PGlite can leave its WebAssembly's interval timer (10 s) armed after a close: it would
      // keep this child alive
      process.exit(0);
    `;
    // the first open (a new directory) and the second (a later start) each made one; initdb itself
    // runs, not a copy of the test run's template
    assert.deepEqual(runInChild(script, [], { [INITDB_TEMPLATE_ENV]: undefined }).result, { opened: [1, 2] });
  });

  it(`copies a new data directory's database from ${INITDB_TEMPLATE_ENV}: PostgreSQL's files only`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "bulwark-pglite-initdb-"));
    dirs.push(dir);
    await prepareInitdbTemplate();
    const template = join(dir, "template");
    cpSync(INITDB_TEMPLATE, template, { recursive: true });
    // a setting only this template has, and a file that is not PostgreSQL's
    appendFileSync(join(template, "postgresql.auto.conf"), "bulwark.made_from = 'the template'\n");
    writeFileSync(join(template, KEY_ENCRYPTION_KEY_FILE), "not to be copied");
    const dataDir = join(dir, "data");
    const script = `
      const { sql } = await import("kysely");
      const { openDatabase } = await import(${JSON.stringify(moduleUrl("src/storage/db.ts"))});
      const { db, close } = await openDatabase({ dataDir: ${JSON.stringify(dataDir)}, unsafeNoFsync: true });
      const { rows } = await sql\`select current_setting('bulwark.made_from') as made_from\`.execute(db);
      await close();
      console.log(JSON.stringify(rows[0]));
      process.exit(0); // PGlite's interval timer (see above)
    `;
    assert.deepEqual(runInChild(script, [], { [INITDB_TEMPLATE_ENV]: template }).result, {
      made_from: "the template",
    });
    // the data directory's own key, made at its first start; nothing of the staging left
    assert.notEqual(readFileSync(join(dataDir, KEY_ENCRYPTION_KEY_FILE), "utf8"), "not to be copied");
    assert.deepEqual(
      readdirSync(dataDir).filter((name) => name.startsWith(".initdb-")),
      [],
    );

    // A directory that is not one initdb made is refused, and the data directory stays new.
    const empty = join(dir, "empty-template");
    mkdirSync(empty);
    const refusedDir = join(dir, "refused");
    const previous = process.env[INITDB_TEMPLATE_ENV];
    process.env[INITDB_TEMPLATE_ENV] = empty;
    try {
      await assert.rejects(
        openDatabase({ dataDir: refusedDir, unsafeNoFsync: true }),
        new RegExp(`${INITDB_TEMPLATE_ENV} \\(${empty}\\) holds no PG_VERSION`),
      );
    } finally {
      if (previous === undefined) delete process.env[INITDB_TEMPLATE_ENV];
      else process.env[INITDB_TEMPLATE_ENV] = previous;
    }
    assert.equal(existsSync(join(refusedDir, "PG_VERSION")), false);
  });

  it("reads PGlite's two large files into memory that glibc's malloc does not serve", () => {
    // A Buffer of 128 KiB or more that glibc maps and later frees raises, for the life of the
    // process, the size below which glibc serves every allocation from its main arena (which keeps
    // what it grew to). PGlite's WebAssembly (~9 MiB) and file system bundle (~6 MiB), read as
    // Buffers, raised it to 9 MiB at every start. Counted in a child: Node's Buffer allocations
    // of 1 MiB or more while a database opens.
    const dir = mkdtempSync(join(tmpdir(), "bulwark-pglite-reads-"));
    dirs.push(dir);
    const script = `
      ${COUNT_LARGE_BUFFERS}
      const { openDatabase } = await import(${JSON.stringify(moduleUrl("src/storage/db.ts"))});
      // a new directory (its initdb runs in a process of its own), in memory, and a later start
      const dataDirs = [${JSON.stringify(join(dir, "data"))}, "memory://", ${JSON.stringify(join(dir, "data"))}];
      const opened = [];
      for (const dataDir of dataDirs) {
        const { close } = await openDatabase({ dataDir, unsafeNoFsync: true });
        await close();
        opened.push(dataDir);
      }
      console.log(JSON.stringify({ opened: opened.length, large }));
      process.exit(0); // PGlite's interval timer (see above)
    `;
    assert.deepEqual(runInChild(script).result, { opened: 3, large: [] });
  });

  it("finishes a first start interrupted while moving the new database into place", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bulwark-pglite-initdb-"));
    dirs.push(dir);
    // what an interrupted move leaves: the staging directory, still holding PG_VERSION (it moves
    // last), and some of PostgreSQL's entries already moved
    mkdirSync(join(dir, ".initdb-abc123", "base"), { recursive: true });
    writeFileSync(join(dir, ".initdb-abc123", "PG_VERSION"), "17\n");
    mkdirSync(join(dir, "global"));
    writeFileSync(join(dir, "global", "1262"), "half a catalog");
    writeFileSync(join(dir, "postgresql.conf"), "# half a configuration\n");
    const { db, close } = await openDatabase({ dataDir: dir, unsafeNoFsync: true });
    try {
      const { rows } = await sql<{ one: number }>`select 1 as one`.execute(db);
      assert.equal(rows[0]?.one, 1);
    } finally {
      await close();
    }
    const entries = readdirSync(dir);
    assert.ok(entries.includes("PG_VERSION"), entries.join(", "));
    assert.deepEqual(
      entries.filter((name) => name.startsWith(".initdb-")),
      [],
    );
    // and it opens again as any later start does
    const again = await openDatabase({ dataDir: dir, unsafeNoFsync: true });
    await again.close();
  });

  it("removes what a first start's initdb left beside a database in place", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bulwark-pglite-initdb-"));
    dirs.push(dir);
    await (await openDatabase({ dataDir: dir, unsafeNoFsync: true })).close();
    // an initdb that outlived its server made a whole copy; another clean-up stopped half way
    mkdirSync(join(dir, ".initdb-orphan1", "base"), { recursive: true });
    writeFileSync(join(dir, ".initdb-orphan1", "PG_VERSION"), "17\n");
    mkdirSync(join(dir, ".initdb-empty22"));
    const { db, close } = await openDatabase({ dataDir: dir, unsafeNoFsync: true });
    try {
      await sql`select 1`.execute(db);
    } finally {
      await close();
    }
    assert.deepEqual(
      readdirSync(dir).filter((name) => name.startsWith(".initdb-")),
      [],
    );
  });

  it("refuses a directory holding PostgreSQL's files without PG_VERSION, and leaves it as it was", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bulwark-pglite-initdb-"));
    dirs.push(dir);
    // a staging directory without PG_VERSION is no interrupted move: it does not make these leftovers
    mkdirSync(join(dir, ".initdb-nover99"));
    mkdirSync(join(dir, "base", "5"), { recursive: true });
    writeFileSync(join(dir, "base", "5", "1259"), "someone's table");
    await assert.rejects(
      openDatabase({ dataDir: dir, unsafeNoFsync: true }),
      /holds PostgreSQL's files \(base\) but no PG_VERSION/,
    );
    assert.deepEqual(readdirSync(join(dir, "base", "5")), ["1259"]);
  });
});
