// Reading a large file into memory that glibc's malloc does not serve. When glibc frees a mapped
// block (128 KiB or more), it raises the size below which it serves blocks from its main arena to
// that block's (up to 32 MiB), for the life of the process. Read through malloc and freed after a
// start, PGlite's two files (9 and 6 MiB) raised it to 9 MiB, and the server's bundle and code
// cache (6 and 3 MB) to 8 MiB: every smaller buffer of the registry's and PGlite's then came from
// the main arena, which keeps what it grew to (bench/RESULTS.md, fourteenth and fifteenth passes).
// V8 maps a resizable ArrayBuffer's memory itself, and unmaps it when the buffer is collected.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";

/** A file's bytes, in an ArrayBuffer that glibc's malloc does not serve. */
export function readOutsideMalloc(path: string | URL): ArrayBuffer {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const bytes = new (ArrayBuffer as ResizableArrayBufferConstructor)(size, { maxByteLength: size });
    const view = new Uint8Array(bytes);
    for (let read = 0; read < size;) {
      const n = readSync(fd, view, read, size - read, read);
      if (n === 0) throw new Error(`${String(path)} ended after ${read} of ${size} bytes`);
      read += n;
    }
    return bytes;
  } finally {
    closeSync(fd);
  }
}

/** ES2024's resizable ArrayBuffer (this project's lib is ES2023). */
type ResizableArrayBufferConstructor = new (length: number, options: { maxByteLength: number }) => ArrayBuffer;
