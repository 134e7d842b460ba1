// The client commands' settings: flags > environment (BULWARK_*) > the config file
// (<config dir>/config.json, written by `bulwark config set`) > what `auth login` stored > defaults.
// `bulwark config view` shows each value and where it came from.
import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { isValidUidp } from "../core/uidp.js";
import { configDir, loadCredentials } from "./credentials.js";
import { CliError, UsageError } from "./errors.js";

export const DEFAULT_API_URL = "http://127.0.0.1:8080";
export const OUTPUT_FORMATS = ["table", "json", "id", "wide", "terse", "tree"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

interface SettingSpec {
  env: string;
  /** the flag that sets it on a command line */
  flag: string;
  description: string;
  check?(value: string): string | undefined;
}

function checkUrl(value: string): string | undefined {
  try {
    const u = new URL(value);
    return u.protocol === "http:" || u.protocol === "https:" ? undefined : "must be an http(s) URL";
  } catch {
    return "must be a URL, e.g. https://api.example.com";
  }
}

export const SETTINGS = {
  "api-url": {
    env: "BULWARK_API_URL",
    flag: "--api-url",
    description: `the API's URL ({base_url}); default: the one you logged in to, else ${DEFAULT_API_URL}`,
    check: checkUrl,
  },
  "issuer-url": {
    env: "BULWARK_ISSUER_URL",
    flag: "--issuer-url",
    description: "the token issuer's URL ({auth_url}); default: the API's URL",
    check: checkUrl,
  },
  registry: {
    env: "BULWARK_REGISTRY",
    flag: "--registry",
    description: "the registry's host ({registry_host}); default: the API's host and port",
    check: (v) =>
      /^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/.test(v) ? undefined : "must be host[:port]",
  },
  "default-group": {
    env: "BULWARK_DEFAULT_GROUP",
    flag: "--parent",
    description: "the group `--parent` stands for when it is not given (a uid, a name, or a path like acme/team)",
    check: (v) =>
      isValidUidp(v) || v.split("/").every((s) => s.trim() !== "")
        ? undefined
        : "must be a group's uid, name, or path of names (acme/team)",
  },
  output: {
    env: "BULWARK_OUTPUT",
    flag: "-o, --output",
    description: `the default output format (${OUTPUT_FORMATS.join(", ")}); default: table`,
    check: (v) =>
      (OUTPUT_FORMATS as readonly string[]).includes(v) ? undefined : `must be one of ${OUTPUT_FORMATS.join(", ")}`,
  },
  "token-file": {
    env: "BULWARK_TOKEN_FILE",
    flag: "--token-file",
    description: "a file holding the API token to use (before BULWARK_TOKEN and stored credentials)",
  },
} satisfies Record<string, SettingSpec>;

export type SettingName = keyof typeof SETTINGS;
export const SETTING_NAMES = Object.keys(SETTINGS) as SettingName[];
export type Source = "flag" | "env" | "config" | "login" | "default";

export interface Resolved {
  value: string | undefined;
  source: Source;
  /** for env: the variable; for flags: the flag */
  from?: string;
}

export function configPath(env: NodeJS.ProcessEnv): string {
  return join(configDir(env), "config.json");
}

export function isSettingName(name: string): name is SettingName {
  return Object.hasOwn(SETTINGS, name);
}

export function checkSetting(name: SettingName, value: string): void {
  const problem = (SETTINGS[name] as SettingSpec).check?.(value);
  if (problem) throw new UsageError(`${name} ${problem} (got ${JSON.stringify(value)})`);
}

export async function readConfigFile(env: NodeJS.ProcessEnv): Promise<Partial<Record<SettingName, string>>> {
  const path = configPath(env);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new CliError(`cannot read ${path}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CliError(
      `${path} is not valid JSON (${(err as Error).message}): fix it, or remove it and use \`bulwark config set\``,
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new CliError(`${path} must hold a JSON object of settings`);
  const out: Partial<Record<SettingName, string>> = {};
  for (const [key, value] of Object.entries(parsed))
    if (isSettingName(key) && typeof value === "string") out[key] = value;
  return out;
}

export async function writeConfigFile(
  values: Partial<Record<SettingName, string>>,
  env: NodeJS.ProcessEnv,
): Promise<string> {
  const dir = configDir(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const path = configPath(env);
  const tmp = `${path}.${process.pid}.tmp`;
  const sorted = Object.fromEntries(SETTING_NAMES.filter((k) => values[k] !== undefined).map((k) => [k, values[k]]));
  await writeFile(tmp, JSON.stringify(sorted, null, 2) + "\n", { mode: 0o600 });
  await rename(tmp, path);
  await chmod(path, 0o600);
  return path;
}

/** Every setting's value and where it came from. `flags` are the command line's (undefined when absent). */
export async function resolveSettings(
  flags: Partial<Record<SettingName, string | undefined>>,
  env: NodeJS.ProcessEnv,
): Promise<Record<SettingName, Resolved>> {
  const file = await readConfigFile(env);
  const login = await loadCredentials(env);
  const out = {} as Record<SettingName, Resolved>;
  for (const name of SETTING_NAMES) {
    const spec = SETTINGS[name] as SettingSpec;
    const flag = flags[name];
    const fromEnv = env[spec.env];
    let resolved: Resolved;
    if (flag !== undefined && flag !== "") resolved = { value: flag, source: "flag", from: spec.flag };
    else if (fromEnv !== undefined && fromEnv !== "") resolved = { value: fromEnv, source: "env", from: spec.env };
    else if (file[name] !== undefined) resolved = { value: file[name], source: "config" };
    else if (name === "api-url" && login?.apiUrl) resolved = { value: login.apiUrl, source: "login" };
    else if (name === "issuer-url" && login?.issuerUrl && out["api-url"].value === login.apiUrl)
      resolved = { value: login.issuerUrl, source: "login" };
    else resolved = { value: undefined, source: "default" };
    if (resolved.value !== undefined && resolved.source !== "login") {
      const problem = spec.check?.(resolved.value);
      if (problem)
        throw new UsageError(
          `${resolved.source === "flag" ? spec.flag.replace(/^-o, /, "") : resolved.source === "env" ? spec.env : `${name} in ${configPath(env)}`} ${problem} (got ${JSON.stringify(resolved.value)})`,
        );
    }
    out[name] = resolved;
  }
  // Derived defaults, shown as such.
  out["api-url"].value ??= DEFAULT_API_URL;
  out["issuer-url"].value ??= out["api-url"].value;
  out.registry.value ??= new URL(out["api-url"].value).host;
  out.output.value ??= "table";
  return out;
}
