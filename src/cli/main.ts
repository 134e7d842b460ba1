// The `bulwark` executable: runs the command tree and turns failures into one line on stderr.
// Exit status: 0 success, 1 error, 2 usage error (unknown command or option, bad argument).
import { CommanderError } from "commander";
import { CliError, EXIT_ERROR, EXIT_OK, EXIT_USAGE } from "./errors.js";
import { styles, useColor } from "./output.js";
import { buildCli } from "./program.js";

/** Runs the CLI; returns the exit status. */
export async function main(argv: string[]): Promise<number> {
  const program = buildCli();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === "number" ? process.exitCode : EXIT_OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and --version end here too; commander printed what it had to.
      if (err.exitCode === 0 || err.code === "commander.helpDisplayed" || err.code === "commander.version")
        return EXIT_OK;
      return EXIT_USAGE;
    }
    const style = styles(useColor(process.stderr));
    const message = err instanceof CliError || err instanceof Error ? err.message : String(err);
    process.stderr.write(`${style.red("bulwark:")} ${message}\n`);
    return err instanceof CliError ? err.exitCode : EXIT_ERROR;
  }
}

// `bulwark ... | head`: the reader went away, so there is nobody to tell; stop quietly, as Unix tools do.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(EXIT_OK);
  throw err;
});

process.exitCode = await main(process.argv);
