// PGlite's WebAssembly, compiled once per process, and its file system bundle. A module of its
// own, with nothing to load but Node's, so that `serve` can start the compile on V8's background
// threads first, while the main thread is still loading the server's modules
// (cli/commands/server.ts).
import { existsSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
import { PGLITE_V8_FLAGS } from "../core/v8-flags.js";
import { readOutsideMalloc } from "../core/outside-malloc.js";

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
      return await WebAssembly.compile(new Uint8Array(readOutsideMalloc(pgliteFile("pglite.wasm"))));
    } catch {
      return undefined;
    }
  })());
}

const pgliteFile = (name: string) => new URL(name, import.meta.resolve("@electric-sql/pglite"));

/**
 * PGlite's file system bundle (`pglite.data`, ~6 MiB), read as readOutsideMalloc reads, for its
 * `fsBundle` option (PGlite only calls its `arrayBuffer()`). Undefined (PGlite reads the file
 * itself, with fs.readFile) if the file is not where this PGlite version keeps it.
 */
export function pgliteFsBundle(): Blob | undefined {
  const file = pgliteFile("pglite.data");
  if (!existsSync(file)) return undefined;
  return { arrayBuffer: async () => readOutsideMalloc(file) } as Blob;
}
