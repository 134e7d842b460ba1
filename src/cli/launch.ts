// The `bulwark` executable's first module (bin/bulwark.js). `serve` runs the CommonJS build of the
// program (dist/bundle/serve.cjs, scripts/bundle.mjs) through V8's code cache (code-cache.ts):
// 100–225 ms less of a 1–2 s start (bench/RESULTS.md), for functions not compiled again. Its V8
// flags are set first, since the cache holds only under the flags it was made with. Every other
// command runs the ES module bundle, which loads only what the command needs.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runWithCodeCache } from "./code-cache.js";
import { serveV8Flags } from "./serve-flags.js";

// Beside this module in the bundle; not beside tsc's output, which runs the program as it is.
const serveBundle = fileURLToPath(new URL("./serve.cjs", import.meta.url));

/** Set by the build (scripts/build.mjs) for the one start that makes the code cache. */
const MAKE_CODE_CACHE_ENV = "BULWARK_MAKE_CODE_CACHE";

if (process.argv[2] === "serve" && existsSync(serveBundle)) {
  const { flags, profile } = serveV8Flags(process.argv.slice(3), process.env);
  for (const flag of flags) setFlagsFromString(flag);
  runWithCodeCache(serveBundle, {
    profile,
    make: process.env[MAKE_CODE_CACHE_ENV] === "1",
    resolve: (specifier) => import.meta.resolve(specifier),
  });
} else await import("./main.js");
