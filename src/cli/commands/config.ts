// `bulwark config view | set | unset`: the settings file in the user's config dir, and where each
// setting in effect comes from (flags > environment > config file > the stored login > default).
import type { Command } from "commander";
import { connectionOptions, examples } from "../command.js";
import { UsageError } from "../errors.js";
import { ioOf } from "../io.js";
import { Printer } from "../output.js";
import {
  checkSetting,
  configPath,
  isSettingName,
  readConfigFile,
  resolveSettings,
  SETTING_NAMES,
  SETTINGS,
  writeConfigFile,
  type SettingName,
} from "../settings.js";

function settingName(name: string): SettingName {
  if (!isSettingName(name))
    throw new UsageError(`unknown setting ${JSON.stringify(name)}: one of ${SETTING_NAMES.join(", ")}`);
  return name;
}

interface Row {
  name: string;
  value: string;
  source: string;
}

export function registerConfig(program: Command): void {
  const config = program
    .command("config")
    .description("the CLI's settings")
    .addHelpText(
      "after",
      `\nSettings (environment variable; flag):\n${SETTING_NAMES.map(
        (n) =>
          `  ${n.padEnd(14)} ${SETTINGS[n].env}; ${SETTINGS[n].flag}\n  ${"".padEnd(14)} ${SETTINGS[n].description}`,
      ).join("\n")}\n`,
    );

  examples(
    connectionOptions(config.command("view"))
      .description("show every setting in effect and where it comes from")
      .option("--parent <group>", "as a command's --parent would set default-group")
      .option("--registry <host>", "as a command's --registry would set it"),
    ["bulwark config view", "BULWARK_OUTPUT=json bulwark config view --api-url https://api.example.com"],
  ).action(
    async (
      opts: {
        apiUrl?: string;
        issuerUrl?: string;
        tokenFile?: string;
        output?: string;
        parent?: string;
        registry?: string;
      },
      command: Command,
    ) => {
      const io = ioOf(command);
      const print = new Printer(opts.output === "json" ? "json" : opts.output === "terse" ? "terse" : "table", io);
      const resolved = await resolveSettings(
        {
          "api-url": opts.apiUrl,
          "issuer-url": opts.issuerUrl,
          "token-file": opts.tokenFile,
          output: opts.output,
          "default-group": opts.parent,
          registry: opts.registry,
        },
        io.env,
      );
      const rows: Row[] = SETTING_NAMES.map((name) => {
        const r = resolved[name];
        const source =
          r.source === "flag" || r.source === "env"
            ? `${r.source} ${r.from}`
            : r.source === "config"
              ? `config ${configPath(io.env)}`
              : r.source === "login"
                ? "login (`bulwark auth login`)"
                : r.value === undefined
                  ? "not set"
                  : "default";
        return { name, value: r.value ?? "", source };
      });
      print.list(
        {
          columns: [
            { header: "SETTING", value: (r) => r.name },
            { header: "VALUE", value: (r) => r.value },
            { header: "FROM", value: (r) => r.source },
          ],
          id: (r) => r.name,
          json: (r) => r,
        },
        rows,
      );
    },
  );

  examples(config.command("set <setting> <value>").description("keep a setting in the config file"), [
    "bulwark config set api-url https://api.example.com",
    "bulwark config set default-group <group uid>",
    "bulwark config set output json",
  ]).action(async (name: string, value: string, _opts: unknown, command: Command) => {
    const io = ioOf(command);
    const setting = settingName(name);
    checkSetting(setting, value);
    const values = await readConfigFile(io.env);
    values[setting] = value;
    const path = await writeConfigFile(values, io.env);
    io.stdout.write(`${setting} = ${value} (in ${path})\n`);
  });

  examples(config.command("unset <setting>").description("remove a setting from the config file"), [
    "bulwark config unset default-group",
  ]).action(async (name: string, _opts: unknown, command: Command) => {
    const io = ioOf(command);
    const setting = settingName(name);
    const values = await readConfigFile(io.env);
    const had = values[setting] !== undefined;
    delete values[setting];
    const path = await writeConfigFile(values, io.env);
    io.stdout.write(had ? `${setting} removed (from ${path})\n` : `${setting} was not set in ${path}\n`);
  });
}
