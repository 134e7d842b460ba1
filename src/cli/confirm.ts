// Asking before destroying something: a question on a terminal, `--yes` otherwise.
import { createInterface } from "node:readline/promises";
import { CliError, UsageError } from "./errors.js";
import type { CliIo } from "./io.js";

export async function confirm(io: CliIo, question: string, yes: boolean | undefined): Promise<void> {
  if (yes) return;
  if (!io.stdin.isTTY) throw new UsageError(`${question} Pass --yes to confirm when not on a terminal.`);
  // readline asks on stderr and, on a terminal, edits the line there: a stream, as the process's is.
  const rl = createInterface({ input: io.stdin, output: io.stderr as NodeJS.WritableStream });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliError("cancelled");
  } finally {
    rl.close();
  }
}
