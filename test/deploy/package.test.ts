// The npm package as an operator installs it: `npm pack`, the tarball installed into an empty
// directory, `npx bulwark serve` from there. Backend-independent (the installed server runs on its
// embedded database), so it runs once. The run's preparation built dist/ (test/support/prepare.ts),
// so `npm pack`'s prepack finds the build up to date and rebuilds nothing under the other suites.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { createReadStream, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { isBuiltin } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { extract } from "tar-stream";
import { buildImage, pushImage } from "../support/images.js";
import { restClient } from "../support/http.js";
import { digestOf } from "../support/oci.js";
import { skopeoIn } from "../support/skopeo.js";
import { HANG_MS, watchOutput, withinHang } from "../support/wait.js";
import { exited } from "../support/cli.js";
import { isBulwarkSetting } from "../support/paths.js";

const ROOT = process.cwd();
const manifest = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  name: string;
  version: string;
  dependencies: Record<string, string>;
};

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * The environment of every command here: this process's without BULWARK_* settings or a database
 * URL (the installed server must run on its defaults and the given flags alone), the CLI's config
 * in a private directory. HOME stays: npm's cache, warm after `npm ci`, lives under it.
 */
function cleanEnv(configDir: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !isBulwarkSetting(k) && k !== "DATABASE_URL") env[k] = v;
  return { ...env, BULWARK_CONFIG_DIR: configDir };
}

function run(cmd: string, args: string[], options: { cwd: string; env: Record<string, string> }): Promise<Run> {
  return withinHang(
    new Promise<Run>((resolve) => {
      execFile(cmd, args, { ...options, maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
      );
    }),
    `end of ${cmd} ${args.join(" ")}`,
  );
}

/** Every entry's path in a gzipped tar archive (through tar-stream, never by hand). */
async function tarEntries(file: string): Promise<string[]> {
  const names: string[] = [];
  const reader = extract();
  reader.on("entry", (header, stream, next) => {
    names.push(header.name);
    stream.on("end", next);
    stream.resume();
  });
  await pipeline(createReadStream(file), createGunzip(), reader);
  return names;
}

/** The package names the bundle imports at run time: bare specifiers of its imports, dynamic imports and resolves. */
function bundleImports(sources: string[]): Set<string> {
  const found = new Set<string>();
  const patterns = [
    /^import\s[^;]*?from\s*"([^"]+)";/gm,
    /^import\s*"([^"]+)";/gm,
    /\bimport\(\s*"([^"]+)"\s*\)/g,
    /\b__require\(\s*"([^"]+)"\s*\)/g,
    /(?<![\w$.])require\(\s*"([^"]+)"\s*\)/g,
    /\.resolve\(\s*"([^"]+)"\s*\)/g,
  ];
  for (const source of sources)
    for (const pattern of patterns)
      for (const [, specifier] of source.matchAll(pattern)) {
        if (specifier!.startsWith(".") || isBuiltin(specifier!)) continue;
        const parts = specifier!.split("/");
        found.add(specifier!.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!);
      }
  return found;
}

describe("the npm package", () => {
  const work = mkdtempSync(join(tmpdir(), "bulwark-package-"));
  const app = join(work, "app");
  const env = cleanEnv(join(work, "config"));
  let tarball = "";
  after(() => rmSync(work, { recursive: true, force: true }));

  before(async () => {
    const packed = await run("npm", ["pack", "--json", "--pack-destination", work], { cwd: ROOT, env });
    assert.equal(packed.code, 0, packed.stderr);
    // npm prints the prepack's output ahead of the JSON
    const [{ filename }] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("["))) as [{ filename: string }];
    tarball = join(work, filename);
  });

  it("holds the built CLI, its documents and package.json, and no sources, tests, secrets or data", async () => {
    const entries = await tarEntries(tarball);
    for (const expected of [
      "package/package.json",
      "package/README.md",
      "package/bin/bulwark.js",
      "package/bin/docker-credential-bulwark.js",
      "package/dist/bundle/launch.js",
      "package/dist/bundle/main.js",
      "package/dist/bundle/serve.cjs",
      // V8's code cache of the embedded server, made by the build (the container image's too)
      "package/dist/bundle/serve.cjs.embedded.v8cache",
      "package/dist/bundle/docker-credential.js",
      "package/dist/bundle/read-worker.js",
      "package/openapi/openapi.json",
      "package/dist/console/index.html",
    ])
      assert.ok(entries.includes(expected), `${expected} is in the package`);
    const unwanted = entries.filter(
      (name) =>
        /^package\/(test|src|bench|scripts|data|reference|third_party|proto|clients|\.ci|node_modules)\//.test(name) ||
        /(^|\/)\.env(\.|$)/.test(name) ||
        /(^|\/)(bulwark\.lock|key-encryption-key|issuer-signing-key\.json|PG_VERSION)$/.test(name) ||
        /\.(ts|map|tgz|log|tmp)$/.test(name),
    );
    assert.deepEqual(unwanted, [], "nothing but what runs");
  });

  it("depends at run time on exactly what the bundle leaves outside it", async () => {
    const files = readdirSync(join(ROOT, "dist", "bundle")).filter((f) => /\.c?js$/.test(f));
    assert.ok(files.includes("main.js"));
    const imported = bundleImports(files.map((f) => readFileSync(join(ROOT, "dist", "bundle", f), "utf8")));
    // tsx: only when the inventory reader runs from sources (isolated-read.ts), never from the bundle
    imported.delete("tsx");
    // Named inside serve.cjs, which inlines the CommonJS packages, but never loaded: ajv's are in the
    // text of the code it generates for standalone use; pg-native is pg's optional binding (required
    // in a try, for the native client only).
    for (const named of ["ajv", "ajv-formats", "pg-native"]) imported.delete(named);
    const declared = new Set(Object.keys(manifest.dependencies));
    assert.deepEqual([...imported].filter((name) => !declared.has(name)).sort(), [], "imported but not a dependency");
    // pino-pretty: kept external (scripts/bundle.mjs) for --log-format pretty, which may import it
    // only in a later version of the server: a dependency either way
    const unused = [...declared].filter((name) => !imported.has(name) && name !== "pino-pretty");
    assert.deepEqual(unused.sort(), [], "a dependency the bundle never loads (it is inlined: a devDependency)");
  });

  it("installs into an empty directory, and `npx bulwark serve` serves, signs, takes a push and stops on SIGTERM", async () => {
    mkdirSync(app);
    const installed = await run(
      "npm",
      ["install", tarball, "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"],
      { cwd: app, env },
    );
    assert.equal(installed.code, 0, installed.stderr);
    const npx = (...args: string[]) => run("npx", ["--no", "bulwark", ...args], { cwd: app, env });

    const help = await npx("serve", "--help");
    assert.equal(help.code, 0, help.stderr);
    const dataDir = join(work, "data");
    const serveArgs = ["serve", "--port", "0", "--data-dir", dataDir];
    // scratch data: no fsync needed
    serveArgs.push("--unsafe-no-fsync");
    const serving = spawn("npx", ["--no", "bulwark", ...serveArgs], {
      cwd: app,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const output = watchOutput(serving);
    let serverPid: number | undefined;
    try {
      const [ready] = await output.waitFor(/\{[^\n]*"msg":"bulwark listening on http:\/\/[^"]+"[^\n]*\}/);
      const line = JSON.parse(ready) as { pid: number; url: string; registryHost: string; codeCache?: string };
      // the build's code cache comes with the package, and the installed server reads it
      assert.equal(line.codeCache, "used");
      // npx runs the server in a child process of its own: signals go to the server's pid
      serverPid = line.pid;
      const health = await fetch(`${line.url}/healthz`);
      assert.equal(health.status, 200);
      assert.equal(((await health.json()) as { version: string }).version, manifest.version);
      // The console comes with the package: its page and the script it names.
      const consolePage = await fetch(`${line.url}/`);
      assert.equal(consolePage.status, 200);
      const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(await consolePage.text())?.[1];
      assert.ok(script, "the console's page names its script");
      assert.equal((await fetch(`${line.url}${script}`)).status, 200);

      const token = await npx("admin", "token", "--data-dir", dataDir);
      assert.equal(token.code, 0, token.stderr);
      const api = restClient(line.url, token.stdout.trim());
      const created = await api.post("/iam/v2beta1/groups", { name: "acme" });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const groups = await api.get("/iam/v2beta1/groups");
      assert.equal(groups.status, 200, JSON.stringify(groups.body));
      assert.deepEqual(
        (groups.body as { groups: { name: string }[] }).groups.map((g) => g.name),
        ["acme"],
      );

      const password = await npx("admin", "token", "--data-dir", dataDir, "--audience", line.registryHost);
      assert.equal(password.code, 0, password.stderr);
      const image = await buildImage(join(work, "image"), { layers: [{ files: { "hello.txt": "hello\n" } }] });
      const skopeo = skopeoIn(work);
      const pushed = await pushImage(skopeo, image, {
        host: line.registryHost,
        repository: "acme/hello",
        creds: `_token:${password.stdout.trim()}`,
      });
      assert.equal(pushed.code, 0, pushed.stderr);
      const inspected = await skopeo(
        "inspect",
        "--raw",
        "--tls-verify=false",
        "--creds",
        `_token:${password.stdout.trim()}`,
        `docker://${line.registryHost}/acme/hello:v1`,
      );
      assert.equal(inspected.code, 0, inspected.stderr);
      assert.equal(digestOf(inspected.stdout), image.digest, "the tag serves the pushed manifest");

      process.kill(serverPid, "SIGTERM");
      assert.equal(await withinHang(exited(serving), "npx's exit after the server's SIGTERM", HANG_MS), 0);
      assert.throws(() => process.kill(serverPid!, 0), { code: "ESRCH" }, "the server process is gone");
      assert.match(output.text(), /"msg":"shutting down"/);
    } finally {
      if (serverPid !== undefined)
        try {
          process.kill(serverPid, "SIGKILL");
        } catch {
          // already gone
        }
      serving.kill("SIGKILL");
    }
  });
});
