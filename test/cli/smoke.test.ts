// The smoke tier: the real `bulwark` binary (bin/bulwark.js over the bundle the test run built),
// one process per case, for each command group, against a server in this process. The CLI
// suites run their commands in-process (test/support/cli.ts); this proves the executable around
// them: the bundle loads every group, reads its environment and config dir, writes to real
// pipes, exits with the status main() returned, and stops quietly when its reader goes away.
// Also spawned, in their suites: on a terminal (core), the docker credential helper (images),
// `serve` (serve) and the operator's commands on the database (`admin token`, `registry gc`:
// serve, registry). One backend: what is smoked is the binary, not the server.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { VERSION } from "../../src/core/version.js";
import { BIN, CliHome, runCliProcess, type CliOptions } from "../support/cli.js";
import { startTestServer, type TestServer } from "../support/server.js";

const STACK_TRACE = /\n\s+at .+:\d+/;
const FIXTURE = join(import.meta.dirname, "..", "fixtures", "advisories", "wolfi", "brotli.advisories.yaml");

describe("bulwark binary smoke", () => {
  let server: TestServer;
  let home: CliHome;
  let org: string;
  const bulwark = (args: string[], options: CliOptions = {}) =>
    runCliProcess(home, args, {
      ...options,
      env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken, ...options.env },
    });
  /** Succeeded and said nothing on stderr; its stdout. */
  const ok = async (args: string[], options: CliOptions = {}) => {
    const r = await bulwark(args, options);
    assert.equal(r.code, 0, `bulwark ${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr, "");
    return r.stdout;
  };

  before(async () => {
    server = await startTestServer("pglite");
    home = new CliHome();
  });
  after(async () => {
    await server?.close();
    home?.close();
  });

  it("iam: creates and lists an organization; off a terminal (stdin a pipe) a delete needs --yes", async () => {
    org = (await ok(["iam", "organizations", "create", "smoke", "-o", "id"])).trim();
    assert.match(org, /^[0-9a-f]{40}$/);
    const listed = JSON.parse(await ok(["iam", "organizations", "list", "-o", "json"])) as { uid: string }[];
    assert.deepEqual(
      listed.map((g) => g.uid),
      [org],
    );
    const refused = await bulwark(["iam", "organizations", "delete", org], { input: "y\n" });
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /^bulwark: Delete the organization smoke .* Pass --yes to confirm/);
    assert.doesNotMatch(refused.stderr, STACK_TRACE);
  });

  it("images: creates a repo and lists it", async () => {
    await ok(["images", "repos", "create", "app", "--parent", org]);
    assert.match(
      await ok(["images", "repos", "list", "--parent", org]),
      /^ID\s+NAME\s+DESCRIPTION\n\S+\s+smoke\/app\n$/,
    );
  });

  it("advisories: imports a document (the summary on stdout) and lists it", async () => {
    assert.match(await ok(["advisories", "import", FIXTURE, "--group", org]), /^1 files: 1 advisories \(1 created,/);
    assert.match(await ok(["advisories", "list", "--parent", org, "-o", "terse"]), /^CGA-9mxg-j38p-8p8r\tbrotli\t/);
  });

  it("auth: status and token from BULWARK_TOKEN; no token: exit 1 in words", async () => {
    assert.equal((await ok(["auth", "status", "-o", "terse"])).trim(), OPERATOR_SUBJECT);
    assert.equal((await ok(["auth", "token"])).trim(), server.operatorToken);
    const none = await bulwark(["auth", "status"], { env: { BULWARK_TOKEN: undefined } });
    assert.equal(none.code, 1);
    assert.match(none.stderr, /^bulwark: not logged in: run `bulwark auth login`/);
  });

  it("config, completion, version: the config dir from the environment, scripts, both versions; usage errors exit 2", async () => {
    await ok(["config", "set", "output", "json"]);
    assert.deepEqual(JSON.parse(readFileSync(join(home.configDir, "config.json"), "utf8")), { output: "json" });
    assert.ok(Array.isArray(JSON.parse(await ok(["iam", "organizations", "list"]))), "the file's output setting");
    assert.match(await ok(["config", "unset", "output"]), /^output removed/);
    assert.match(await ok(["completion", "bash"]), /_bulwark\(\)/);
    assert.equal((await ok(["--version"])).trim(), VERSION);
    const both = JSON.parse(await ok(["version", "-o", "json"])) as { client: string; server: { version: string } };
    assert.deepEqual([both.client, both.server.version], [VERSION, VERSION]);
    assert.match(await ok(["iam", "--help"]), /\nCommands:\n/);
    const unknown = await bulwark(["iam", "organisations", "list"]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command 'organisations'/);
  });

  it("stops quietly (exit 0, nothing on stderr) when the reader of its output goes away", () => {
    // `true` exits without reading: the write finds the pipe closed (EPIPE).
    const piped = spawnSync(
      "bash",
      [
        "-c",
        'set -o pipefail; "$0" "$1" completion bash | true; echo "status ${PIPESTATUS[0]}"',
        process.execPath,
        BIN,
      ],
      { encoding: "utf8", env: { ...process.env, HOME: home.dir, BULWARK_CONFIG_DIR: home.configDir } },
    );
    assert.equal(piped.stdout, "status 0\n", piped.stderr);
    assert.equal(piped.stderr, "");
  });
});
