// PGlite's WebAssembly, compiled once per process. A module of its own, with nothing to load
// but Node's, so that `serve` can start the compile on V8's background threads first, while the
// main thread is still loading the server's modules (cli/commands/server.ts).
import { readFileSync } from "node:fs";
import { setFlagsFromString } from "node:v8";

/**
 * How V8 compiles PGlite's WebAssembly: with its baseline compiler (Liftoff) only. By default V8
 * recompiles each hot function with its optimizing compiler (TurboFan) on background threads;
 * those compiles malloc tens of megabytes in the threads' malloc arenas, which glibc keeps
 * (fragmented) for the life of the process: ~40 MiB of resident memory at start, more as the load
 * tiers up further functions. Measured with the same queries on PGlite: ~5–10% more CPU per
 * query in PostgreSQL's own code once everything hot was tiered up, and less CPU overall for
 * a process that runs for less than a few seconds (no TurboFan compiles). The flag only
 * concerns WebAssembly compiled after it is set; nothing else in this process is WebAssembly.
 */
export const PGLITE_V8_FLAGS = "--liftoff-only";

let compiledPglite: Promise<WebAssembly.Module | undefined> | undefined;

/**
 * PGlite's WebAssembly, compiled once per process and shared by every PGlite it opens. Handing
 * PGlite a compiled module, instead of letting it instantiate from the file's bytes, measured ~80 ms
 * less per open on this stack: after instantiating from bytes, V8 kept the main thread busy
 * finishing the compile for that long before anything else could run. Undefined (PGlite loads
 * the file itself, still under PGLITE_V8_FLAGS) if the file is not where this PGlite version keeps it.
 */
export function pgliteWasmModule(): Promise<WebAssembly.Module | undefined> {
  return (compiledPglite ??= (async () => {
    setFlagsFromString(PGLITE_V8_FLAGS);
    try {
      // Read at once, not with readFile: its callback, and so the compile's start, would wait
      // until the main thread finished loading modules, which is what the compile is to overlap.
      const bytes = readFileSync(new URL("pglite.wasm", import.meta.resolve("@electric-sql/pglite")));
      return await WebAssembly.compile(bytes);
    } catch {
      return undefined;
    }
  })());
}
