// The test run's compiled tree (`npm test`, scripts/test.mjs): src/ and test/ compiled to JavaScript
// by esbuild, one file for each TypeScript file, under .cache/test-build/. The suites then run as
// plain ESM. Through tsx's loader, which resolves and loads every module in a thread of its own,
// a test process spent ~5 s of CPU importing the server; compiled, ~2 s (measured on the 2-core
// test machine while a test run shared it), and a run starts ~140 such processes, plus the CLI
// children some suites spawn.
//
// The tree mirrors the repository: every top-level entry but src/ and test/ is a symlink to the
// real one, and every file of src/ and test/ is there too, as a hard link (fixtures, and the
// TypeScript sources themselves, for suites that read them or run them through tsx): a link to a
// file is a file to whoever lists a folder (an importer walking fixtures skips symbolic links). So a
// path a suite or the server makes from import.meta.url (the package root, dist/, fixtures)
// reaches the real file.
// esbuild reads each file's nearest tsconfig.json, as tsx does; source maps are linked, for
// `--enable-source-maps` to report the TypeScript lines.
import { copyFileSync, linkSync, mkdirSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build, stop } from "esbuild";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const TEST_BUILD = join(ROOT, ".cache", "test-build");
/** The folders compiled; everything else is linked. */
const COMPILED = ["src", "test"];
/** Not mirrored: the repository's history, and the folder the tree is in. */
const LEFT_OUT = new Set([".git", ".cache"]);

/** The compiled tree's path of a repository file (test/x.test.ts → .cache/test-build/test/x.test.js). */
export function compiledPath(file) {
  const rel = relative(ROOT, join(ROOT, file));
  return join(TEST_BUILD, rel.replace(/\.ts$/, ".js"));
}

/** A hard link, or a copy where the file system has none. */
function linkOrCopy(from, to) {
  try {
    linkSync(from, to);
  } catch {
    copyFileSync(from, to);
  }
}

const isCompiled = (name) => name.endsWith(".ts") && !name.endsWith(".d.ts");

/** Makes the tree afresh; answers the number of files compiled. */
export async function buildTestTree() {
  rmSync(TEST_BUILD, { recursive: true, force: true });
  mkdirSync(TEST_BUILD, { recursive: true });
  // dist/ is linked even before the build made it (the link then resolves once it is made).
  for (const entry of new Set([...readdirSync(ROOT), "dist"])) {
    if (LEFT_OUT.has(entry) || COMPILED.includes(entry)) continue;
    symlinkSync(join(ROOT, entry), join(TEST_BUILD, entry));
  }
  const entryPoints = [];
  for (const top of COMPILED) {
    for (const entry of readdirSync(join(ROOT, top), { recursive: true, withFileTypes: true })) {
      const from = join(entry.parentPath ?? entry.path, entry.name);
      const to = join(TEST_BUILD, relative(ROOT, from));
      if (entry.isDirectory()) mkdirSync(to, { recursive: true });
      else {
        mkdirSync(join(to, ".."), { recursive: true });
        linkOrCopy(from, to);
        if (isCompiled(entry.name)) entryPoints.push(from);
      }
    }
  }
  await build({
    entryPoints,
    outdir: TEST_BUILD,
    outbase: ROOT,
    format: "esm",
    platform: "node",
    target: "node20.19",
    sourcemap: "linked",
    logLevel: "warning",
  });
  // esbuild's service process would otherwise stay for as long as the test run (~200 MiB).
  await stop();
  return entryPoints.length;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = performance.now();
  const count = await buildTestTree();
  console.log(`${count} files compiled for the tests in ${Math.round(performance.now() - started)} ms`);
}
