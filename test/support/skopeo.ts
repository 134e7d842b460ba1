// skopeo, the registry client the suites push and pull real images with (CI installs it: .ci/run).
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { HANG_MS } from "./wait.js";

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * skopeo with a private policy and auth file, and HOME pointed at `dir`, so nothing of the
 * machine's user (credentials, registries.conf overrides) takes part. Never throws on failure.
 */
export function skopeoIn(dir: string) {
  const policy = join(dir, "policy.json");
  const authFile = join(dir, "auth.json");
  writeFileSync(policy, JSON.stringify({ default: [{ type: "insecureAcceptAnything" }] }));
  writeFileSync(authFile, "{}");
  const env = { ...process.env, HOME: dir, XDG_CONFIG_HOME: join(dir, ".config"), REGISTRY_AUTH_FILE: authFile };
  return (...args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      execFile(
        "skopeo",
        ["--policy", policy, "--command-timeout", `${HANG_MS / 1000}s`, ...args],
        { env, timeout: HANG_MS + 30_000, maxBuffer: 16 << 20 },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
    });
}
