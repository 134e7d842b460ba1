// `serve` runs its bundle through V8's code cache (src/cli/launch.ts, code-cache.ts): the first
// start writes the cache beside the bundle, later starts use it, a cache V8 refuses is written
// again, and a cache that cannot be read or written costs nothing but the cache. Each case runs a
// copy of the built package, so no other test's server shares its cache files.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { servesEmbedded } from "../../src/cli/serve-flags.js";
import { exited } from "../support/cli.js";
import { clonePostgres, postgresUrl } from "../support/db-templates.js";
import { until, watchOutput } from "../support/wait.js";

const ROOT = process.cwd();
const work = mkdtempSync(join(tmpdir(), "bulwark-code-cache-"));
after(() => rmSync(work, { recursive: true, force: true }));

/** A copy of the built package (its bundle without cache files), in a directory of its own. */
function packageCopy(name: string): { root: string; cacheOf(profile: string): string } {
  const root = join(work, name);
  mkdirSync(join(root, "dist"), { recursive: true });
  cpSync(join(ROOT, "bin"), join(root, "bin"), { recursive: true });
  cpSync(join(ROOT, "package.json"), join(root, "package.json"));
  cpSync(join(ROOT, "dist", "bundle"), join(root, "dist", "bundle"), {
    recursive: true,
    filter: (source) => !/\.v8cache|\.tmp$/.test(source),
  });
  symlinkSync(join(ROOT, "node_modules"), join(root, "node_modules"));
  return { root, cacheOf: (profile) => join(root, "dist", "bundle", `serve.cjs.${profile}.v8cache`) };
}

/**
 * `serve` of the copy at `root` (on its own data directory, made by the first) until it listens:
 * what its listening line says of the code cache.
 */
async function serveOnce(root: string, env: Record<string, string> = {}): Promise<string | undefined> {
  const dataDir = join(root, "data");
  const child = spawn(
    process.execPath,
    [join(root, "bin", "bulwark.js"), "serve", "--port", "0", "--data-dir", dataDir, "--unsafe-no-fsync"],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DATABASE_URL: "", ...env } },
  );
  const output = watchOutput(child);
  try {
    const [line] = await output.waitFor(/\{[^\n]*"msg":"bulwark listening on (http:\/\/[^"]+)"[^\n]*\}/);
    const listening = JSON.parse(line) as { url: string; codeCache?: string };
    assert.equal((await fetch(`${listening.url}/healthz`)).status, 200);
    return listening.codeCache;
  } finally {
    child.kill("SIGTERM");
    assert.equal(await exited(child), 0, output.text());
  }
}

describe("serve's code cache", () => {
  it("is written by the first start and used by the next", async () => {
    const copy = packageCopy("first");
    assert.equal(await serveOnce(copy.root), "none");
    await until(() => existsSync(copy.cacheOf("embedded")), "the cache file");
    assert.equal(await serveOnce(copy.root), "used");
  });

  it("is written again when V8 refuses it", async () => {
    const copy = packageCopy("refused");
    writeFileSync(copy.cacheOf("embedded"), Buffer.alloc(4096, 7));
    assert.equal(await serveOnce(copy.root), "refused");
    await until(() => readFileSync(copy.cacheOf("embedded"))[0] !== 7, "the cache written again");
    assert.equal(await serveOnce(copy.root), "used");
  });

  it("costs nothing but itself when it cannot be read or written", async () => {
    const copy = packageCopy("unwritable");
    // a directory where the file would be: neither read nor renamed into place
    mkdirSync(copy.cacheOf("embedded"));
    assert.equal(await serveOnce(copy.root), "none");
    assert.equal(await serveOnce(copy.root), "none");
  });

  it("reads the database option as the command does", () => {
    const cases: Array<[string[], Record<string, string>, boolean]> = [
      [[], {}, true],
      [[], { DATABASE_URL: "" }, true],
      [[], { DATABASE_URL: "postgres://db/x" }, false],
      [["--database-url", "postgres://db/x"], {}, false],
      [["--database-url=postgres://db/x"], {}, false],
      [["--database-url", ""], { DATABASE_URL: "postgres://db/x" }, true],
      [["--port", "0", "--database-url", "postgres://db/x", "--data-dir", "d"], {}, false],
      [["--", "--database-url", "postgres://db/x"], {}, true],
    ];
    for (const [args, env, embedded] of cases)
      assert.equal(servesEmbedded(args, env), embedded, `${JSON.stringify(args)} ${JSON.stringify(env)}`);
  });
});

describe("serve's code cache [postgres]", { skip: !postgresUrl() && "needs PostgreSQL" }, () => {
  it("is a cache of its own on PostgreSQL, whose V8 flags differ", async () => {
    const copy = packageCopy("postgres");
    const { url, drop } = await clonePostgres();
    try {
      assert.equal(await serveOnce(copy.root, { DATABASE_URL: url }), "none");
      await until(() => existsSync(copy.cacheOf("postgres")), "the PostgreSQL profile's cache file");
      assert.equal(await serveOnce(copy.root, { DATABASE_URL: url }), "used");
      assert.equal(existsSync(copy.cacheOf("embedded")), false);
    } finally {
      await drop();
    }
  });
});
