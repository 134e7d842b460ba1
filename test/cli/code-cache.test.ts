// `serve` runs its bundle through V8's code cache (src/cli/launch.ts, code-cache.ts): the build
// makes the embedded server's cache, a start uses it, and a start without one, or with one V8
// refuses, compiles as usual and writes nothing. Each case runs a copy of the built package, so no
// other test's server shares its cache files.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { isAscii } from "node:buffer";
import { spawn } from "node:child_process";
import { createServer, type AddressInfo } from "node:net";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { servesEmbedded } from "../../src/cli/serve-flags.js";
import { exited } from "../support/cli.js";
import { clonePostgres, postgresUrl } from "../support/db-templates.js";
import { COUNT_LARGE_BUFFERS } from "../support/large-buffers.js";
import { watchOutput } from "../support/wait.js";

const ROOT = process.cwd();
const BUILT_CACHE = join(ROOT, "dist", "bundle", "serve.cjs.embedded.v8cache");
const work = mkdtempSync(join(tmpdir(), "bulwark-code-cache-"));
after(() => rmSync(work, { recursive: true, force: true }));

/** A copy of the built package (its bundle, with the build's cache unless told), in a directory of its own. */
function packageCopy(name: string, { withCache = true } = {}): { root: string; cacheOf(profile: string): string } {
  const root = join(work, name);
  mkdirSync(join(root, "dist"), { recursive: true });
  cpSync(join(ROOT, "bin"), join(root, "bin"), { recursive: true });
  cpSync(join(ROOT, "package.json"), join(root, "package.json"));
  cpSync(join(ROOT, "dist", "bundle"), join(root, "dist", "bundle"), {
    recursive: true,
    filter: (source) => withCache || !/\.v8cache$/.test(source),
  });
  symlinkSync(join(ROOT, "node_modules"), join(root, "node_modules"));
  return { root, cacheOf: (profile) => join(root, "dist", "bundle", `serve.cjs.${profile}.v8cache`) };
}

/**
 * `serve` of the copy at `root` on its own data directory (made by the first start), on the
 * embedded database: the child and its output, watched.
 */
function spawnServe(
  root: string,
  { nodeFlags = [], env = {}, port = "0" }: { nodeFlags?: string[]; env?: Record<string, string>; port?: string } = {},
) {
  const child = spawn(
    process.execPath,
    [...nodeFlags, join(root, "bin", "bulwark.js"), "serve", "--port", port, "--data-dir", join(root, "data")],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DATABASE_URL: "", ...env } },
  );
  return { child, output: watchOutput(child) };
}

/**
 * `serve` of the copy at `root` (on its own data directory, made by the first) until it listens:
 * what its listening line says of the code cache, and its whole output once stopped.
 */
async function serveOnce(
  root: string,
  {
    env = {},
    nodeFlags = [],
    whileListening,
  }: {
    env?: Record<string, string>;
    nodeFlags?: string[];
    /** run once it listens, before it is stopped: its URL, and its output so far */
    whileListening?: (url: string, output: () => string) => Promise<void>;
  } = {},
): Promise<{ codeCache: string | undefined; output: string }> {
  const { child, output } = spawnServe(root, { nodeFlags, env: { BULWARK_UNSAFE_NO_FSYNC: "1", ...env } });
  let codeCache: string | undefined;
  try {
    const [line] = await output.waitFor(/\{[^\n]*"msg":"bulwark listening on (http:\/\/[^"]+)"[^\n]*\}/);
    const listening = JSON.parse(line) as { url: string; codeCache?: string };
    assert.equal((await fetch(`${listening.url}/healthz`)).status, 200);
    codeCache = listening.codeCache;
    await whileListening?.(listening.url, output.text);
  } finally {
    child.kill("SIGTERM");
    assert.equal(await exited(child), 0, output.text());
  }
  return { codeCache, output: output.text() };
}

/** The build's making start (scripts/build.mjs) of the copy at `root`, run until it exits by itself. */
async function makeCache(root: string): Promise<{ status: number | NodeJS.Signals; output: string }> {
  const { child, output } = spawnServe(root, { env: { BULWARK_MAKE_CODE_CACHE: "1" } });
  const status = await exited(child);
  return { status, output: output.text() };
}

/** The files of the copy's bundle directory that are caches or their temporaries. */
const cacheFiles = (root: string) =>
  readdirSync(join(root, "dist", "bundle")).filter((name) => /\.v8cache|\.tmp$/.test(name));

describe("serve's code cache", () => {
  it("is made by the build, and a start on the embedded database uses it", async () => {
    assert.ok(existsSync(BUILT_CACHE), "the build made dist/bundle/serve.cjs.embedded.v8cache");
    const copy = packageCopy("built");
    assert.equal((await serveOnce(copy.root)).codeCache, "used");
    assert.equal((await serveOnce(copy.root)).codeCache, "used");
  });

  it("is made by a start in making mode, which writes it once listening and stops by itself", async () => {
    const copy = packageCopy("making", { withCache: false });
    const { status, output } = await makeCache(copy.root);
    assert.equal(status, 0, output);
    assert.match(output, /"codeCache":"making"/);
    assert.deepEqual(cacheFiles(copy.root), ["serve.cjs.embedded.v8cache"]);
    assert.equal((await serveOnce(copy.root)).codeCache, "used");
  });

  it("fails the making start, and so the build, when the cache cannot be written", async () => {
    const copy = packageCopy("making-fails", { withCache: false });
    mkdirSync(copy.cacheOf("embedded")); // a directory where the file would be renamed to
    const { status, output } = await makeCache(copy.root);
    assert.equal(status, 1, output);
    assert.match(output, /the code cache was not written/);
    assert.deepEqual(cacheFiles(copy.root), ["serve.cjs.embedded.v8cache"]); // the directory; no temporary left
  });

  it("costs a start without one only its compile, and the start writes none", async () => {
    const copy = packageCopy("none", { withCache: false });
    assert.equal((await serveOnce(copy.root)).codeCache, "none");
    assert.equal((await serveOnce(copy.root)).codeCache, "none");
    assert.deepEqual(cacheFiles(copy.root), []);
  });

  it("costs a start only its compile when V8 refuses it (another Node), and is left as it is", async () => {
    const copy = packageCopy("refused");
    const foreign = Buffer.alloc(4096, 7);
    writeFileSync(copy.cacheOf("embedded"), foreign);
    assert.equal((await serveOnce(copy.root)).codeCache, "refused");
    assert.deepEqual(readFileSync(copy.cacheOf("embedded")), foreign);
    assert.deepEqual(cacheFiles(copy.root), ["serve.cjs.embedded.v8cache"]);
  });

  it("costs nothing but itself when it cannot be read", async () => {
    const copy = packageCopy("unreadable", { withCache: false });
    mkdirSync(copy.cacheOf("embedded")); // a directory where the file would be
    assert.equal((await serveOnce(copy.root)).codeCache, "none");
  });

  it("is read, with the bundle, into memory that glibc's malloc does not serve", async () => {
    // A block of 128 KiB or more that glibc maps and later frees raises, for the life of the
    // process, the size below which glibc serves every allocation from its main arena (which keeps
    // what it grew to). The cache read as a Buffer (~3 MB) and the bundle read as text (~6 MB,
    // into malloc'd memory: glibc's threshold read 8 MiB after such a start, in gdb) raised it.
    // Counted in the server: Node's Buffer allocations of 1 MiB or more until it stops (this sees
    // the cache's read; the bundle's is in Node's C++).
    const copy = packageCopy("outside-malloc");
    const hook = join(work, "count-large-buffers.mjs");
    writeFileSync(
      hook,
      `import { writeSync } from "node:fs";
      ${COUNT_LARGE_BUFFERS}
      process.on("exit", () => writeSync(2, "large Buffers: " + JSON.stringify(large) + "\\n"));`,
    );
    const { codeCache, output } = await serveOnce(copy.root, { nodeFlags: ["--import", pathToFileURL(hook).href] });
    assert.equal(codeCache, "used");
    assert.match(output, /^large Buffers: \[\]$/m);
  });

  it("is kept for a bundle that is ASCII, as the build makes it, and read as one-byte text", () => {
    // One non-ASCII character (a comment's dash) made V8 hold the whole ~6 MB bundle as UTF-16,
    // decoded from UTF-8 on every start.
    const bundle = readFileSync(join(ROOT, "dist", "bundle", "serve.cjs"));
    assert.ok(isAscii(bundle), "dist/bundle/serve.cjs is ASCII");
    assert.match(bundle.toString("latin1", 0, 200), /^\(function \(exports, require, module, __filename, __dirname,/);
  });

  it("is used for a bundle that is not ASCII: the start decodes it as UTF-8", async () => {
    // "a" -> "\u00e4" in a comment: the same length in UTF-16, which is what V8 checks a cache
    // against, one byte longer in UTF-8. Read as Latin-1 it would be a character longer: refused.
    const copy = packageCopy("utf8");
    const file = join(copy.root, "dist", "bundle", "serve.cjs");
    const text = readFileSync(file, "latin1");
    const at = text.indexOf("Jimmy Warting");
    assert.ok(at > 0, "the licence notice the build made ASCII");
    writeFileSync(file, text.slice(0, at) + "Jimmy W\u00e4rting" + text.slice(at + "Jimmy Warting".length), "utf8");
    assert.equal((await serveOnce(copy.root)).codeCache, "used");
  });

  // START_V8_FLAGS and LISTENING_V8_FLAGS (src/cli/serve-flags.ts), seen through V8's own trace of
  // what it optimizes (--trace-opt, written at once by the main thread).
  const optimizing = /^\[(marking|compiling method|completed optimizing) /m;

  it("starts without TurboFan", async () => {
    // A start whose port is taken does the whole start (database, migrations, modules, routes) and
    // fails at listen, so it never turns TurboFan back on: none of its output may be an optimization.
    // (The listening line of a start that succeeds cannot mark the turn: pino writes it on libuv's
    // pool, and V8's trace lines written after the turn can reach the pipe before it.) Without the
    // start flag such a start optimized 89-135 functions.
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    try {
      const { child, output } = spawnServe(packageCopy("turbofan-start").root, {
        nodeFlags: ["--trace-opt"],
        env: { BULWARK_UNSAFE_NO_FSYNC: "1" },
        port: String((taken.address() as AddressInfo).port),
      });
      assert.equal(await exited(child), 1, output.text());
      assert.match(output.text(), /EADDRINUSE/);
      assert.doesNotMatch(output.text(), optimizing, output.text());
    } finally {
      taken.close();
    }
  });

  it("turns TurboFan on once listening", async () => {
    // A server left without TurboFan would serve everything interpreted.
    const optimized = /^\[completed optimizing /m;
    await serveOnce(packageCopy("turbofan").root, {
      nodeFlags: ["--trace-opt"],
      whileListening: async (url, output) => {
        // Requests until V8 has optimized something (each round makes the request path hotter).
        for (let round = 0; !optimized.test(output()); round++) {
          assert.ok(round < 200, "V8 optimized nothing after 20,000 requests");
          await Promise.all(Array.from({ length: 100 }, () => fetch(`${url}/healthz`).then((r) => r.arrayBuffer())));
        }
      },
    });
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
  it("is not read on PostgreSQL, whose V8 flags differ, and not written there either", async () => {
    const copy = packageCopy("postgres");
    const { url, drop } = await clonePostgres();
    try {
      assert.equal((await serveOnce(copy.root, { env: { DATABASE_URL: url } })).codeCache, "none");
      assert.deepEqual(cacheFiles(copy.root), ["serve.cjs.embedded.v8cache"]);
    } finally {
      await drop();
    }
  });
});
