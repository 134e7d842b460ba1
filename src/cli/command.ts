// The shape of every client command: the same connection and output options, an example in its
// help, and an action that gets a Session (settings, token, API clients), a Printer and the io it
// runs with (io.ts).
import { Command, InvalidArgumentError, Option } from "commander";
import { UsageError } from "./errors.js";
import { ioOf, type CliIo } from "./io.js";
import { Printer } from "./output.js";
import { Session, type ClientFlags } from "./session.js";
import { OUTPUT_FORMATS, SETTINGS } from "./settings.js";

export interface ClientCommandSpec {
  description: string;
  /** shown under "Examples:" in --help (at least one) */
  examples: string[];
  /** takes --parent (defaults to the configured default group) */
  parent?: boolean;
  /** a list: takes --limit */
  list?: boolean;
  /** can print -o tree */
  tree?: boolean;
}

const treeCommands = new WeakSet<Command>();

export interface Context<O> {
  session: Session;
  print: Printer;
  opts: O & ClientFlags & { limit?: number };
  /** stderr for what is not the result, stdin for a confirmation, the exit status */
  io: CliIo;
}

/** --limit: 1 or more (leaving it out means all). */
export function parsePositiveCount(value: string): number {
  const n = parseCount(value);
  if (n < 1) throw new InvalidArgumentError("expected 1 or more (leave --limit out for all)");
  return n;
}

export function parseCount(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError("expected a whole number");
  return n;
}

/** A repeatable option's values, in order (commander's collector). */
export function repeatable(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** A repeatable option whose values may also be comma-separated ("a,b" or "a" then "b"). */
export function commaList(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(",")
      .map((v) => v.trim())
      .filter(Boolean),
  ];
}

/** Appends examples to a command's help. */
export function examples(cmd: Command, lines: string[]): Command {
  return cmd.addHelpText("after", `\nExamples:\n${lines.map((l) => `  ${l}`).join("\n")}\n`);
}

/** The options every client command takes, with their environment variables named in --help. */
export function connectionOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option("--api-url <url>", SETTINGS["api-url"].description + " [env BULWARK_API_URL]"))
    .addOption(new Option("--issuer-url <url>", SETTINGS["issuer-url"].description + " [env BULWARK_ISSUER_URL]"))
    .addOption(new Option("--token-file <path>", SETTINGS["token-file"].description + " [env BULWARK_TOKEN_FILE]"))
    .addOption(
      new Option("-o, --output <format>", `output format [env BULWARK_OUTPUT; default table]`).choices(OUTPUT_FORMATS),
    );
}

/** A client command under `parent`, with the shared options and its examples. */
export function clientCommand(parent: Command, nameAndArgs: string, spec: ClientCommandSpec): Command {
  const cmd = connectionOptions(parent.command(nameAndArgs).description(spec.description));
  if (spec.parent)
    cmd.addOption(
      new Option(
        "--parent <group>",
        "the group (uid); default: `bulwark config set default-group` [env BULWARK_DEFAULT_GROUP]",
      ),
    );
  if (spec.tree) treeCommands.add(cmd);
  if (spec.list)
    cmd.addOption(new Option("--limit <n>", "stop after this many (default: all)").argParser(parsePositiveCount));
  return examples(cmd, spec.examples);
}

/** Runs `fn` with a session and a printer made from the command's options. */
export function run<O, A extends unknown[] = string[]>(
  cmd: Command,
  fn: (ctx: Context<O>, ...args: A) => Promise<void>,
): Command {
  return cmd.action(async (...received: unknown[]) => {
    const command = received[received.length - 1] as Command;
    const args = received.slice(0, -2) as A;
    const opts = command.opts() as O & ClientFlags & { limit?: number };
    const io = ioOf(command);
    const session = await Session.open(opts, io.env);
    let format = session.output;
    if (format === "tree" && !treeCommands.has(command)) {
      // A default of "tree" (config or environment) means table where no tree can be drawn.
      if (session.settings.output.source === "flag")
        throw new UsageError("-o tree is for `iam organizations list` and `iam folders list`");
      format = "table";
    }
    await fn({ session, print: new Printer(format, io), opts, io }, ...args);
  });
}
