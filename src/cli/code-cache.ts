// Running a CommonJS file through V8's code cache: its functions, compiled by an earlier run, are
// read back instead of compiled again. What Node 22 does for every module (module.enableCompileCache);
// Node 20 can do it only for a script it compiles itself (vm.Script's cachedData).
//
// The cache is a file beside the script, one per profile (the V8 flags it runs under: V8 refuses a
// cache made under other flags, or by another V8, or for a source of another length). A run that
// found none, or one V8 refused, writes it when told the start is done (save): by then it holds
// every function the start compiled. The write is a new file renamed into place, so concurrent
// runs never read half of one; a directory it cannot write to (a read-only install) means no
// cache, nothing else.
import { accessSync, constants, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
import { Script } from "node:vm";

/** What became of the code cache of this process's program, as its log says. */
export type CodeCacheState = "used" | "none" | "refused";

interface LaunchedCodeCache {
  state: CodeCacheState;
  /** writes the cache if it was not used (once; errors ignored) */
  save(): void;
}

// The launcher and the program it runs are separate bundles (launch.ts): a global is what they share.
const LAUNCHED = Symbol.for("bulwark.codeCache");

/** The code cache this process's program was launched with, if it was (launch.ts). */
export function launchedCodeCache(): LaunchedCodeCache | undefined {
  return (globalThis as { [LAUNCHED]?: LaunchedCodeCache })[LAUNCHED];
}

/** The cache file of `file` run under `profile`. */
export function codeCacheFile(file: string, profile: string): string {
  return `${file}.${profile}.v8cache`;
}

/**
 * Runs CommonJS `file` (a bundle: it requires only packages) with the code cache of `profile`.
 * ES module syntax it was built from is given as the module wrapper's arguments: `import.meta.url`
 * (the file's URL) and `import.meta.resolve` (`resolve`).
 */
export function runWithCodeCache(
  file: string,
  { profile, resolve }: { profile: string; resolve: (specifier: string) => string },
): void {
  const cacheFile = codeCacheFile(file, profile);
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(cacheFile);
  } catch {
    cachedData = undefined; // none yet, or unreadable: compiled as usual
  }
  // One line: the file's own line numbers hold in stack traces.
  const wrapped =
    "(function (exports, require, module, __filename, __dirname, __bulwarkImportMetaUrl, __bulwarkImportMetaResolve) {" +
    readFileSync(file, "utf8") +
    "\n})";
  const script = new Script(wrapped, { filename: file, cachedData });
  const state: CodeCacheState = !cachedData ? "none" : script.cachedDataRejected ? "refused" : "used";
  let saved = state === "used";
  const launched: LaunchedCodeCache = {
    state,
    save() {
      if (saved) return;
      saved = true;
      const temporary = `${cacheFile}.${process.pid}.tmp`;
      try {
        // a read-only install: not even the cache's making (tens of milliseconds) is spent
        accessSync(dirname(cacheFile), constants.W_OK);
      } catch {
        return;
      }
      try {
        writeFileSync(temporary, script.createCachedData());
        renameSync(temporary, cacheFile);
      } catch {
        rmSync(temporary, { force: true });
      }
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
