// The `bulwark` command tree: the server (`serve`, `admin`, `registry gc`) and the client commands
// a chainctl user knows (`iam`, `images`, `advisories`, `auth`, `config`), which talk to the API
// through its generated Connect clients.
import { Command } from "commander";
import { registerAdvisories } from "./commands/advisories.js";
import { registerAuth } from "./commands/auth.js";
import { registerCompletion } from "./commands/completion.js";
import { registerConfig } from "./commands/config.js";
import { registerGroups } from "./commands/groups.js";
import { registerIdentities } from "./commands/identities.js";
import { registerImages } from "./commands/images.js";
import { registerInvites } from "./commands/invites.js";
import { registerOrgSettings } from "./commands/org-settings.js";
import { registerRoles } from "./commands/roles.js";
import { registerServerCommands } from "./commands/server.js";
import { registerVersion } from "./commands/version.js";
import { VERSION } from "../core/version.js";

export function buildCli(): Command {
  const program = new Command("bulwark")
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
  registerAuth(program);
  registerConfig(program);
  registerCompletion(program);
  registerVersion(program, VERSION);
  return program;
}
