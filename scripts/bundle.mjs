#!/usr/bin/env node
// The second half of `npm run build`: bundles tsc's output for the two commands (bin/bulwark.js,
// bin/docker-credential-bulwark.js) into dist/bundle/. Node 20 loads each ES module file separately
// (resolve, read, compile), and the server's graph is ~660 of them (Kysely alone is 262): about
// 230 ms of every start. One bundle, split at the CLI's dynamic imports so that a command loads
// only what it runs, is a handful of files.
//
// Kept outside the bundle: CommonJS packages (Node's require loader is cheap, and bundling them as
// ESM needs interop shims for their exports), packages that read their own files at run time, and
// the S3 SDK (loaded only when configured). The bundle sits two directories below the package root,
// as every compiled module does (dist/<folder>/<file>.js), so the paths they compute from
// import.meta.url (core/package-files.ts) hold in both.
//
// `serve` runs a second build of the same program, as one CommonJS file (serve.cjs): Node 20 keeps
// V8's code cache only for CommonJS a program compiles itself (cli/code-cache.ts, cli/launch.ts).
// There, import.meta is the module wrapper's arguments, and a dynamic import is a require (vm.Script
// code has no loader of ES modules). The CommonJS packages are inlined there (no interop to shim in
// a CommonJS file), so their code comes from the cache too: a start measured 771 -> 747 ms with
// the cache and them outside, 667 ms with them inlined. What stays outside loads as CommonJS
// (PGlite ships both forms).
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { asciiOnly } from "./ascii-only.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const OUT = `${ROOT}dist/bundle`;

// Each of these is a runtime dependency in package.json and nothing else is: everything else is
// inlined, so the package (npm pack) installs only these (test/deploy/package.test.ts checks both ways).
const EXTERNAL = [
  // CommonJS
  "fastify",
  "pino",
  "pino-pretty",
  "pg",
  "commander",
  // reads its .wasm and .data files next to its own modules
  "@electric-sql/pglite",
  // its files are served as they are (/docs)
  "swagger-ui-dist",
  // loaded only when S3 is configured
  "@aws-sdk/*",
];

const SERVE_BUNDLE = `${OUT}/serve.cjs`;

rmSync(OUT, { recursive: true, force: true });
const started = performance.now();
await build({
  absWorkingDir: ROOT,
  entryPoints: {
    // bin/bulwark.js: `serve` through serve.cjs, every other command through main.js
    launch: "dist/cli/launch.js",
    main: "dist/cli/main.js",
    "docker-credential": "dist/cli/docker-credential.js",
    // The thread that reads an image's inventory: started by URL, next to the chunk that starts it.
    "read-worker": "dist/images/inventory/read-worker.js",
  },
  outdir: OUT,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20.19",
  external: EXTERNAL,
  // Bundled CommonJS (if any dependency brings some) calls require(); ES modules have none.
  banner: {
    js: 'import { createRequire as __bulwarkRequire } from "node:module"; const require = __bulwarkRequire(import.meta.url);',
  },
  sourcemap: "linked",
  logLevel: "warning",
});
await build({
  absWorkingDir: ROOT,
  entryPoints: ["dist/cli/main.js"],
  outfile: SERVE_BUNDLE,
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20.19",
  // files read at run time (PGlite, Swagger UI), loaded only when configured (S3, pretty logs)
  external: ["@electric-sql/pglite", "swagger-ui-dist", "@aws-sdk/*", "pino-pretty"],
  supported: { "dynamic-import": false },
  define: { "import.meta.url": "__bulwarkImportMetaUrl", "import.meta.resolve": "__bulwarkImportMetaResolve" },
  // The file is the function the launcher calls (cli/code-cache.ts): compiled as it is read, with no
  // string joined around it that V8 would copy whole (6 MB) to flatten.
  banner: {
    js: "(function (exports, require, module, __filename, __dirname, __bulwarkImportMetaUrl, __bulwarkImportMetaResolve) {",
  },
  footer: { js: "})" },
  sourcemap: "linked",
  logLevel: "warning",
});
writeFileSync(SERVE_BUNDLE, asciiOnly(readFileSync(SERVE_BUNDLE, "utf8"), SERVE_BUNDLE));
console.log(`bundle written to dist/bundle in ${Math.round(performance.now() - started)} ms`);
