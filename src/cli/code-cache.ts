// Running a CommonJS file through V8's code cache: its functions, compiled by an earlier run, are
// read back instead of compiled again. What Node 22 does for every module (module.enableCompileCache);
// Node 20 can do it only for a script it compiles itself (vm.Script's cachedData).
//
// The cache is a file beside the script, one per profile (the V8 flags it runs under: V8 refuses a
// cache made under other flags, or by another V8, or for a source of another length). The build
// makes it (scripts/build.mjs): a start in making mode writes it once it listens, when it holds
// every function the start compiled, and stops. A server never writes one: V8 hands the cache over
// in malloc'd memory (~3 MB, twice), and freeing that raised glibc's mmap threshold to 5 MiB for
// the rest of the process (core/outside-malloc.ts). For the same reason the script and its cache
// are read outside malloc: read through it, they raised the threshold to 8 MiB, and the server
// kept ~90 MiB more after the registry's load (bench/RESULTS.md, eleventh and fifteenth passes).
// No cache, or one V8 refuses (another Node), costs the start its compile, nothing else.
import { isAscii } from "node:buffer";
import { chmodSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
import { Script } from "node:vm";
import { readOutsideMalloc } from "../core/outside-malloc.js";

/** What became of the code cache of this process's program, as its log says. */
export type CodeCacheState = "used" | "none" | "refused" | "making";

interface LaunchedCodeCache {
  state: CodeCacheState;
  /** In making mode, writes the cache and stops the server (SIGTERM; exit 1 if not written). */
  started(): void;
}

// The launcher and the program it runs are separate bundles (launch.ts): a global is what they share.
const LAUNCHED = Symbol.for("bulwark.codeCache");

/** The code cache this process's program was launched with, if it was (launch.ts). */
export function launchedCodeCache(): LaunchedCodeCache | undefined {
  return (globalThis as { [LAUNCHED]?: LaunchedCodeCache })[LAUNCHED];
}

/**
 * The text of `file`, a function expression (the bundle carries its module wrapper, so no string
 * is joined to it that V8 would copy to flatten). ASCII, as the build makes it, is read as
 * Latin-1: a one-byte string, built by one copy (outside V8's heap, and kept for the life of the
 * process as the script's source, so never freed back to malloc). Anything else is decoded as
 * UTF-8, which V8 then holds as UTF-16.
 */
function scriptSource(file: string): string {
  const bytes = Buffer.from(readOutsideMalloc(file));
  return isAscii(bytes) ? bytes.toString("latin1") : new TextDecoder().decode(bytes);
}

/**
 * Runs `file`, CommonJS inside its own module wrapper (a bundle: it requires only packages), with
 * the code cache of `profile`, or, when `make`, to make that cache. ES module syntax it was built
 * from is given as the wrapper's last arguments: `import.meta.url` (the file's URL) and
 * `import.meta.resolve` (`resolve`).
 */
export function runWithCodeCache(
  file: string,
  { profile, make, resolve }: { profile: string; make: boolean; resolve: (specifier: string) => string },
): void {
  const cacheFile = `${file}.${profile}.v8cache`;
  let cachedData: Uint8Array | undefined;
  if (!make) {
    try {
      cachedData = new Uint8Array(readOutsideMalloc(cacheFile));
    } catch {
      cachedData = undefined; // none, or unreadable: compiled as usual
    }
  }
  const script = new Script(scriptSource(file), { filename: file, cachedData: cachedData as Buffer | undefined });
  const state: CodeCacheState = make ? "making" : !cachedData ? "none" : script.cachedDataRejected ? "refused" : "used";
  const launched: LaunchedCodeCache = {
    state,
    started() {
      if (!make) return;
      // A new file renamed into place: a start meanwhile never reads half of one.
      const temporary = `${cacheFile}.${process.pid}.tmp`;
      try {
        writeFileSync(temporary, script.createCachedData());
        chmodSync(temporary, 0o644); // for whoever runs the build (the embedded database opens under umask 077)
        renameSync(temporary, cacheFile);
      } catch (err) {
        rmSync(temporary, { force: true });
        console.error(`the code cache was not written: ${(err as Error).message}`);
        process.exit(1);
      }
      process.kill(process.pid, "SIGTERM");
    },
  };
  (globalThis as { [LAUNCHED]?: LaunchedCodeCache })[LAUNCHED] = launched;
  const module = { exports: {} };
  (script.runInThisContext() as (...args: unknown[]) => void).call(
    module.exports,
    module.exports,
    createRequire(file),
    module,
    file,
    dirname(file),
    pathToFileURL(file).href,
    resolve,
  );
}
