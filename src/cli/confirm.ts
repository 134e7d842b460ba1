// Asking before destroying something: a question on a terminal, `--yes` otherwise.
import { createInterface } from "node:readline/promises";
import { CliError, UsageError } from "./errors.js";

export async function confirm(question: string, yes: boolean | undefined): Promise<void> {
  if (yes) return;
  if (!process.stdin.isTTY) throw new UsageError(`${question} Pass --yes to confirm when not on a terminal.`);
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliError("cancelled");
  } finally {
    rl.close();
  }
}
