// `bulwark advisories`: read the advisories the server holds (list, describe) and import
// advisory documents into it.
import type { Command } from "commander";
import { importAdvisories, summaryLine } from "../advisories.js";
import { clientCommand, run } from "../command.js";

export function registerAdvisories(program: Command): void {
  const advisories = program.command("advisories").description("vulnerability advisories");

  run<{ group?: string; author?: string; origin?: string }>(
    clientCommand(advisories, "import <path...>", {
      description:
        "import advisory YAML documents and OSV JSON records (files or directories) through the running server",
      examples: [
        "BULWARK_TOKEN=$(bulwark admin token) bulwark advisories import ./advisories --group <uid>",
        "bulwark advisories import wolfi/openssl.advisories.yaml",
      ],
    })
      .option("--group <uid>", "the publisher group (default: the server's first --public-advisories group) [env BULWARK_ADVISORY_GROUP]")
      .option("--author <name>", "recorded as the author of what is imported (default: your identity)")
      .option("--origin <name>", 'recorded as the origin (default: "advisory-yaml" or "osv", by format)')
      .addHelpText(
        "after",
        "\nThe token needs advisories.create and advisories.update on the group. A progress bar is drawn on a\n" +
          "terminal. Exit status 1 when a document was skipped.\n",
      ),
    async ({ session, print, opts }, paths: string[] | string) => {
      const { token } = await session.token();
      const summary = await session.call(() =>
        importAdvisories({
          paths: Array.isArray(paths) ? paths : [paths],
          apiUrl: session.apiUrl,
          token,
          group: opts.group ?? process.env.BULWARK_ADVISORY_GROUP,
          author: opts.author,
          origin: opts.origin,
          say: (line) => process.stderr.write(line + "\n"),
          progress: process.stderr,
        }),
      );
      print.done(summaryLine(summary), { json: summary });
      if (summary.skipped > 0) process.exitCode = 1;
    },
  );
}
