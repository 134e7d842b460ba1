// The `bulwark` command tree: the server (`serve`, `admin`, `registry gc`) and the client commands
// a chainctl user knows (`iam`, `images`, `advisories`, `events`, `audit`, `auth`, `config`), which talk to the API
// through its generated Connect clients. `main` runs it on an io (io.ts): the real process in
// bin/, a test's own in-process.
import { Command, CommanderError } from "commander";
import { registerAdvisories } from "./commands/advisories.js";
import { registerAudit } from "./commands/audit.js";
import { registerAuth } from "./commands/auth.js";
import { registerCompletion } from "./commands/completion.js";
import { registerConfig } from "./commands/config.js";
import { registerEvents } from "./commands/events.js";
import { registerGroups } from "./commands/groups.js";
import { registerIdentities } from "./commands/identities.js";
import { registerImages } from "./commands/images.js";
import { registerInvites } from "./commands/invites.js";
import { registerOrgSettings } from "./commands/org-settings.js";
import { registerRoles } from "./commands/roles.js";
import { registerServerCommands } from "./commands/server.js";
import { registerVersion } from "./commands/version.js";
import { CliError, EXIT_ERROR, EXIT_OK, EXIT_USAGE } from "./errors.js";
import { attachIo, commanderOutput, processIo, type CliIo } from "./io.js";
import { styles, useColor } from "./output.js";
import { VERSION } from "../core/version.js";

export function buildCli(io: CliIo = processIo()): Command {
  const program = new Command("bulwark")
    // before any subcommand is made: each copies its parent's output configuration
    .configureOutput(commanderOutput(io))
    .description("Bulwark: the Identity, Registry and Vulnerability Management API, its server and its CLI")
    .version(VERSION, "-v, --version", "print the CLI's version")
    .exitOverride()
    // A command's options come before its subcommands (`auth token --audience x` vs
    // `auth token capabilities --token-file f`); inherited by every command.
    .enablePositionalOptions()
    .showHelpAfterError("(add --help for usage)")
    .addHelpText(
      "after",
      "\nExit status: 0 success, 1 error, 2 usage error.\n" +
        "Settings: flags > environment (BULWARK_*) > config file (`bulwark config view`).\n\n" +
        "Examples:\n" +
        "  bulwark serve\n" +
        "  BULWARK_TOKEN=$(bulwark admin token) bulwark iam organizations list\n" +
        "  bulwark auth login && bulwark images repos list --parent <group uid>\n",
    );
  registerServerCommands(program);
  const iam = program.command("iam").description("organizations, folders, identities, roles and who holds them");
  registerGroups(iam);
  registerIdentities(iam);
  registerRoles(iam);
  registerInvites(iam);
  registerOrgSettings(iam);
  registerImages(program);
  registerAdvisories(program);
  registerEvents(program);
  registerAudit(program);
  registerAuth(program);
  registerConfig(program);
  registerCompletion(program);
  registerVersion(program, VERSION);
  attachIo(program, io);
  return program;
}

/**
 * Runs the CLI (`argv` as process.argv: node, the script, then the arguments) and turns failures
 * into one line on stderr; returns the exit status: 0 success, 1 error, 2 usage error (unknown
 * command or option, bad argument).
 */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  const program = buildCli(io);
  try {
    await program.parseAsync(argv);
    return io.exitCode ?? EXIT_OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and --version end here too; commander printed what it had to.
      if (err.exitCode === 0 || err.code === "commander.helpDisplayed" || err.code === "commander.version")
        return EXIT_OK;
      return EXIT_USAGE;
    }
    const style = styles(useColor(io.stderr, io.env));
    const message = err instanceof CliError || err instanceof Error ? err.message : String(err);
    io.stderr.write(`${style.red("bulwark:")} ${message}\n`);
    return err instanceof CliError ? err.exitCode : EXIT_ERROR;
  }
}
