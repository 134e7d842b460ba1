// PGlite's WebAssembly, compiled once per process, and its file system bundle. A module of its
// own, with nothing to load but Node's, so that `serve` can start the compile on V8's background
// threads first, while the main thread is still loading the server's modules
// (cli/commands/server.ts).
import { closeSync, existsSync, fstatSync, openSync, readSync } from "node:fs";
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

/**
 * A file's bytes in an ArrayBuffer that glibc's malloc does not serve. When glibc frees a mapped
 * block (128 KiB or more), it raises the size below which it serves blocks from its main arena to
 * that block's (up to 32 MiB), for the life of the process. Read as Buffers and freed after
 * start, PGlite's two files (9 and 6 MiB) raised it to 9 MiB: every smaller buffer of the
 * registry's and PGlite's then came from the main arena, which keeps what it grew to (15–22
 * against 10–14 MiB of it resident after a start, bench/RESULTS.md). V8 maps a resizable
 * ArrayBuffer's memory itself, and unmaps it when the buffer is collected.
 */
function readOutsideMalloc(url: URL): ArrayBuffer {
  const fd = openSync(url, "r");
  try {
    const size = fstatSync(fd).size;
    const bytes = new (ArrayBuffer as ResizableArrayBufferConstructor)(size, { maxByteLength: size });
    const view = new Uint8Array(bytes);
    for (let read = 0; read < size;) {
      const n = readSync(fd, view, read, size - read, read);
      if (n === 0) throw new Error(`${url.pathname} ended after ${read} of ${size} bytes`);
      read += n;
    }
    return bytes;
  } finally {
    closeSync(fd);
  }
}

/** ES2024's resizable ArrayBuffer (this project's lib is ES2023). */
type ResizableArrayBufferConstructor = new (length: number, options: { maxByteLength: number }) => ArrayBuffer;
