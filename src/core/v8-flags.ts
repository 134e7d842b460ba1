// A V8 flag of the embedded database, set by the storage that opens it (storage/pglite-wasm.ts) and,
// before anything is compiled, by the launcher of `serve` (cli/launch.ts): in core, which both may import.

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
