// Registry login as a new user does it: `bulwark auth configure-docker` installs
// docker-credential-bulwark on PATH and names it in docker's config, then real skopeo and podman
// (Debian's; CI installs them: .ci/run) push and pull through the helper with no credentials of
// their own; `--pull-token` stores a pull token's login in one step. Each tool runs with HOME, its
// config and its storage in a private directory, so nothing of the machine's user takes part.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, isAbsolute, join } from "node:path";
import { CliHome, runCli, type CliOptions } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { createGroup } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { buildOciLayout, type LayoutImage } from "../support/oci-layout.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { HANG_MS } from "../support/wait.js";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function tool(file: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { env, timeout: HANG_MS + 30_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** The test process's PATH without relative entries (and without any bin dir of the CLI's home). */
const systemPath = (process.env.PATH ?? "").split(delimiter).filter((d) => isAbsolute(d));

for (const backend of backends()) {
  describe(`registry login through docker-credential-bulwark with skopeo and podman [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let work: string;
    let image: LayoutImage;
    let host: string;
    let localBin: string;
    /** what the tools run with: the CLI's home, the helper's directory first on PATH, the API and a token */
    let toolEnv: Record<string, string>;

    const cli = (args: string[], options: CliOptions = {}) =>
      runCli(home, args, {
        ...options,
        env: {
          BULWARK_API_URL: server.url,
          BULWARK_TOKEN: server.operatorToken,
          PATH: [localBin, ...systemPath].join(delimiter),
          ...options.env,
        },
      });
    const ok = async (args: string[], options: CliOptions = {}) => {
      const res = await cli(args, options);
      assert.equal(res.code, 0, `${args.join(" ")}: ${res.stderr}`);
      return res.stdout;
    };
    const skopeo = (env: Record<string, string>, ...args: string[]) =>
      tool("skopeo", ["--command-timeout", `${HANG_MS / 1000}s`, ...args], env);
    const podman = (env: Record<string, string>, ...args: string[]) =>
      tool(
        "podman",
        [
          "--root",
          join(work, "podman-root"),
          "--runroot",
          join(work, "podman-run"),
          "--storage-driver",
          "vfs",
          ...args,
        ],
        env,
      );

    before(async () => {
      work = mkdtempSync(join(tmpdir(), "bulwark-registry-login-"));
      [server, image] = await Promise.all([startTestServer(backend), buildOciLayout(join(work, "layout"))]);
      home = new CliHome();
      localBin = join(home.dir, ".local", "bin");
      host = new URL(server.url).host;
      await createGroup(restClient(server.url, server.operatorToken), undefined, "acme");
      const runtime = join(work, "runtime");
      mkdirSync(runtime, { mode: 0o700 });
      toolEnv = {
        HOME: home.dir,
        PATH: [localBin, ...systemPath].join(delimiter),
        XDG_RUNTIME_DIR: runtime,
        XDG_CONFIG_HOME: join(home.dir, ".config"),
        BULWARK_CONFIG_DIR: home.configDir,
        BULWARK_API_URL: server.url,
        BULWARK_TOKEN: server.operatorToken,
      };
    });
    after(async () => {
      home?.close();
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("configure-docker installs the helper on PATH; skopeo pushes and podman pulls through it", async () => {
      const out = await ok(["auth", "configure-docker"]);
      const helper = join(localBin, "docker-credential-bulwark");
      assert.match(out, new RegExp(`^installed ${helper}\n`));
      assert.equal(statSync(helper).mode & 0o111, 0o111, "executable");
      assert.deepEqual(JSON.parse(readFileSync(join(home.dir, ".docker", "config.json"), "utf8")), {
        credHelpers: { [host]: "bulwark" },
      });

      const ref = `docker://${host}/acme/app:v1`;
      const pushed = await skopeo(toolEnv, "copy", "--dest-tls-verify=false", `oci:${image.dir}:${image.tag}`, ref);
      assert.equal(pushed.code, 0, pushed.stderr);
      const inspected = await skopeo(toolEnv, "inspect", "--raw", "--tls-verify=false", ref);
      assert.equal(inspected.code, 0, inspected.stderr);
      assert.equal(inspected.stdout, image.manifest.toString("utf8"));
      assert.equal((await podman(toolEnv, "login", "--get-login", host)).stdout.trim(), "_token");
      const pulled = await podman(toolEnv, "pull", "--tls-verify=false", `${host}/acme/app:v1`);
      assert.equal(pulled.code, 0, pulled.stderr);

      // Without a token for the helper to exchange, the registry refuses: the helper was what logged in.
      const noToken = await skopeo({ ...toolEnv, BULWARK_TOKEN: "" }, "inspect", "--raw", "--tls-verify=false", ref);
      assert.notEqual(noToken.code, 0);

      // Run again: the helper is rewritten in place (this installation may have moved).
      assert.match(await ok(["auth", "configure-docker"]), /^installed /);
    });

    it("configure-docker says exactly what to run when no directory on PATH takes the helper", async () => {
      const bare = await ok(["auth", "configure-docker", "--registry", "registry.example.com"], {
        env: { PATH: systemPath.join(delimiter) },
      });
      const fallback = join(home.dir, ".local", "bin");
      assert.ok(
        bare.includes(`bulwark auth configure-docker --bin-dir '${fallback}'\n  export PATH='${fallback}':"$PATH"`),
        bare,
      );
      const elsewhere = join(work, "tools-bin");
      const written = await ok(["auth", "configure-docker", "--bin-dir", elsewhere], {
        env: { PATH: systemPath.join(delimiter) },
      });
      assert.ok(existsSync(join(elsewhere, "docker-credential-bulwark")));
      assert.ok(
        written.includes(`${elsewhere} is not on your PATH: run \`export PATH='${elsewhere}':"$PATH"\``),
        written,
      );

      const foreign = join(work, "foreign-bin");
      mkdirSync(foreign);
      writeFileSync(join(foreign, "docker-credential-bulwark"), "#!/bin/sh\n", { mode: 0o755 });
      const refused = await cli(["auth", "configure-docker", "--bin-dir", foreign]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /exists and was not written by bulwark/);
      assert.equal(readFileSync(join(foreign, "docker-credential-bulwark"), "utf8"), "#!/bin/sh\n", "left alone");
    });

    it("configure-docker --pull-token creates a pull token and stores its login in one step", async () => {
      const json = JSON.parse(
        await ok(["auth", "configure-docker", "--pull-token", "--parent", "acme", "--ttl", "1h", "-o", "json"]),
      );
      const config = JSON.parse(readFileSync(join(home.dir, ".docker", "config.json"), "utf8"));
      assert.equal(config.credHelpers[host], undefined, "the helper would be asked first");
      const [user] = Buffer.from(config.auths[host].auth, "base64").toString().split(":");
      assert.equal(user, json.identity);
      assert.equal(statSync(join(home.dir, ".docker", "config.json")).mode & 0o077, 0, "a password: private");

      // No token and no helper on PATH: the stored login alone pulls.
      const alone = { ...toolEnv, PATH: systemPath.join(delimiter), BULWARK_TOKEN: "" };
      const ref = `docker://${host}/acme/app:v1`;
      const inspected = await skopeo(alone, "inspect", "--raw", "--tls-verify=false", ref);
      assert.equal(inspected.code, 0, inspected.stderr);
      await ok(["auth", "pull-token", "delete", json.identity, "--yes"]);
      assert.notEqual((await skopeo(alone, "inspect", "--raw", "--tls-verify=false", ref)).code, 0, "revoked");

      // Back to the helper: the pull token's stored password goes, it would only linger.
      await ok(["auth", "configure-docker"]);
      const helped = JSON.parse(readFileSync(join(home.dir, ".docker", "config.json"), "utf8"));
      assert.equal(helped.credHelpers[host], "bulwark");
      assert.equal(helped.auths?.[host], undefined, JSON.stringify(helped));

      // A config naming a credential store: docker asks the store, not `auths`; the user is told.
      const configDir = join(work, "docker-with-store");
      mkdirSync(configDir);
      writeFileSync(join(configDir, "config.json"), JSON.stringify({ credsStore: "desktop" }));
      const stored = await cli(["auth", "configure-docker", "--pull-token", "--parent", "acme", "--ttl", "1h"], {
        env: { DOCKER_CONFIG: configDir },
      });
      assert.equal(stored.code, 0, stored.stderr);
      assert.match(stored.stderr, /names the credential store "desktop", which docker asks instead of this login/);
      assert.match(stored.stderr, new RegExp(`docker login ${host} -u [0-9a-f/]+ --password-stdin`));

      const stray = await cli(["auth", "configure-docker", "--ttl", "1h"]);
      assert.equal(stray.code, 2);
      assert.match(stray.stderr, /--ttl: only with --pull-token/);
    });
  });
}
