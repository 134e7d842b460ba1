// The `bulwark` executable: the command program (program.ts) on the real process (launch.ts runs it).
// Exit status: 0 success, 1 error, 2 usage error (unknown command or option, bad argument).
import { EXIT_OK } from "./errors.js";
import { processIo } from "./io.js";
import { main } from "./program.js";

// `bulwark ... | head`: the reader went away, so there is nobody to tell; stop quietly, as Unix tools do.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(EXIT_OK);
  throw err;
});

// Not a top-level await: this module is also built as CommonJS (serve.cjs), which has none.
void main(process.argv, processIo()).then((code) => {
  process.exitCode = code;
});
