// Where the CLI keeps what `bulwark auth login` obtained: one JSON file in the user's config dir
// ($BULWARK_CONFIG_DIR, else $XDG_CONFIG_HOME/bulwark, else ~/.config/bulwark), mode 0600 in a
// 0700 directory. It holds short-lived tokens and, for refresh, where the identity token comes from.
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

export interface StoredToken {
  token: string;
  /** ISO time */
  expiry: string;
}

export interface Credentials {
  apiUrl: string;
  issuerUrl: string;
  /** the identity the tokens are for */
  identity?: string;
  /** a file holding the workload's OIDC token (re-read on refresh: platforms rotate it) */
  identityTokenFile?: string;
  /** the workload's OIDC token itself, when it was given literally */
  identityToken?: string;
  /** tokens by audience */
  tokens: Record<string, StoredToken>;
}

/** The user's home: $HOME as `env` has it (os.homedir() reads the process's), else the account's. */
export function homeDir(env: NodeJS.ProcessEnv): string {
  return env.HOME ?? homedir();
}

export function configDir(env: NodeJS.ProcessEnv): string {
  if (env.BULWARK_CONFIG_DIR) return env.BULWARK_CONFIG_DIR;
  return join(env.XDG_CONFIG_HOME || join(homeDir(env), ".config"), "bulwark");
}

export function credentialsPath(env: NodeJS.ProcessEnv): string {
  return join(configDir(env), "credentials.json");
}

export async function loadCredentials(env: NodeJS.ProcessEnv): Promise<Credentials | undefined> {
  try {
    return JSON.parse(await readFile(credentialsPath(env), "utf8")) as Credentials;
  } catch {
    return undefined;
  }
}

export async function saveCredentials(creds: Credentials, env: NodeJS.ProcessEnv): Promise<void> {
  const dir = configDir(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  const path = credentialsPath(env);
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(creds, null, 2) + "\n", { mode: 0o600 });
  await rename(tmp, path);
  await chmod(path, 0o600);
}

export async function forgetCredentials(env: NodeJS.ProcessEnv): Promise<boolean> {
  const existed = (await loadCredentials(env)) !== undefined;
  await rm(credentialsPath(env), { force: true });
  return existed;
}
