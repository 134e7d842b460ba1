#!/usr/bin/env node
// The third part of `npm run build`: bundles the web console (console/src/main.tsx, React) for the
// browser into dist/console/: index.html and assets/ with content-hashed names, which the server
// serves at `/` (src/server/console-routes.ts). Minified, one script and one stylesheet: the page
// loads two files. Prints their sizes (raw and gzip) so a change that bloats them shows.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const OUT = join(ROOT, "dist", "console");

rmSync(OUT, { recursive: true, force: true });
mkdirSync(join(OUT, "assets"), { recursive: true });
const started = performance.now();
const result = await build({
  absWorkingDir: ROOT,
  entryPoints: { app: "console/src/main.tsx" },
  outdir: join(OUT, "assets"),
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["chrome120", "firefox121", "safari17"],
  jsx: "automatic",
  minify: true,
  // No source maps: the package ships what browsers run, and the sources are in the repository.
  sourcemap: false,
  metafile: true,
  define: { "process.env.NODE_ENV": '"production"' },
  tsconfig: "console/tsconfig.json",
  logLevel: "warning",
});
const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
const script = outputs.find((n) => n.endsWith(".js"));
const style = outputs.find((n) => n.endsWith(".css"));
const page = readFileSync(join(ROOT, "console", "index.html"), "utf8")
  .replace("%SCRIPT%", `/console/assets/${script}`)
  .replace("%STYLE%", `/console/assets/${style}`);
writeFileSync(join(OUT, "index.html"), page);
const size = (name) => {
  const body = readFileSync(join(OUT, "assets", name));
  return `${name} ${(body.length / 1024).toFixed(0)} KiB (gzip ${(gzipSync(body).length / 1024).toFixed(0)} KiB)`;
};
console.log(
  `console written to dist/console in ${Math.round(performance.now() - started)} ms: ${size(script)}, ${size(style)}`,
);
