#!/usr/bin/env node
// `npm run build`: tsc (src/ → dist/), then the bundle (scripts/bundle.mjs) and the embedded
// server's code cache (makeCodeCache below), then the console. With --if-changed
// (`npm start`, the test runner's preparation) it does nothing when dist/ was built from exactly the
// present inputs: a start on an unchanged tree pays for no compile. The inputs are fingerprinted by
// content, not mtime, so a checkout, a copy or a clock change cannot fool it; the fingerprint is
// written only after both steps succeeded, so an interrupted build is redone.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const STAMP = join(ROOT, "dist", ".build-fingerprint");
// Everything the output depends on besides Node itself: the sources, how they are compiled and
// bundled, and the exact dependency versions.
const FILE_INPUTS = [
  "tsconfig.json",
  "package.json",
  "package-lock.json",
  "scripts/bundle.mjs",
  "scripts/ascii-only.mjs",
  "scripts/bundle-console.mjs",
  "scripts/build.mjs",
];
/** Folders whose every file is an input: the server's sources and the console's. */
const SOURCE_DIRS = ["src", "console"];

/** The build inputs' fingerprint under `root` (a package root, ending in "/"). */
export function fingerprint(root = ROOT) {
  const hash = createHash("sha256").update(process.version);
  const sources = SOURCE_DIRS.flatMap((dir) =>
    existsSync(join(root, dir)) ? readdirSync(join(root, dir), { recursive: true, withFileTypes: true }) : [],
  )
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name).slice(root.length))
    .sort();
  for (const file of [...FILE_INPUTS, ...sources]) {
    const path = join(root, file);
    hash.update(`${file}\0`);
    hash.update(existsSync(path) ? readFileSync(path) : "(absent)");
    hash.update("\0");
  }
  return hash.digest("hex");
}

/** Builds unless dist/ already holds the build of these inputs; true when it built. */
export function build({ ifChanged = false } = {}) {
  const current = fingerprint();
  const built =
    existsSync(STAMP) &&
    existsSync(join(ROOT, "dist", "bundle", "main.js")) &&
    existsSync(join(ROOT, "dist", "bundle", "serve.cjs")) &&
    existsSync(join(ROOT, "dist", "bundle", "serve.cjs.embedded.v8cache")) &&
    existsSync(join(ROOT, "dist", "console", "index.html"));
  if (ifChanged && built && readFileSync(STAMP, "utf8").trim() === current) return false;
  const node = process.execPath;
  execFileSync(node, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", join(ROOT, "tsconfig.json")], {
    stdio: "inherit",
  });
  execFileSync(node, [join(ROOT, "scripts/bundle.mjs")], { stdio: "inherit" });
  makeCodeCache();
  // The console is type-checked by its own project (DOM, JSX) and bundled for the browser.
  execFileSync(node, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", join(ROOT, "console/tsconfig.json")], {
    stdio: "inherit",
  });
  execFileSync(node, [join(ROOT, "scripts/bundle-console.mjs")], { stdio: "inherit" });
  writeFileSync(STAMP, `${current}\n`);
  return true;
}

/**
 * V8's code cache of the embedded server (src/cli/code-cache.ts), beside its bundle: one start of
 * it on a new data directory, which writes the cache once it listens and stops. Nothing of the
 * caller's configuration reaches it (no BULWARK_* or DATABASE_URL): a port or database set there
 * is not the build's to use.
 */
function makeCodeCache() {
  const started = performance.now();
  const dataDir = mkdtempSync(join(tmpdir(), "bulwark-code-cache-"));
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith("BULWARK_") && name !== "DATABASE_URL"),
  );
  try {
    execFileSync(
      process.execPath,
      [join(ROOT, "bin", "bulwark.js"), "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir],
      { stdio: ["ignore", "ignore", "inherit"], env: { ...env, BULWARK_MAKE_CODE_CACHE: "1" } },
    );
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(`code cache written to dist/bundle in ${Math.round(performance.now() - started)} ms`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const ifChanged = process.argv.includes("--if-changed");
  if (!build({ ifChanged }) && ifChanged) console.log("build is up to date");
}
