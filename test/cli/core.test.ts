// The `bulwark` CLI as a user drives it, against a real server on both backends: organizations and
// folders in every output format, the settings and their precedence, token sources, auth status
// and capabilities, version, completion, colors, and every kind of failure with its exit status.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { readdirSync, readFileSync, writeFileSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { VERSION } from "../../src/core/version.js";
import { collapse, CliHome, normalize, runCli, runCliOnTerminal, type CliOptions } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createIdentity, createRoleBinding, VIEWER_ROLE_UID } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const STACK_TRACE = /\n\s+at .+:\d+/;

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** An unsigned JWT that expired long ago (the CLI reads exp before it sends anything). */
function expiredJwt(): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${part({ alg: "ES256", typ: "JWT" })}.${part({ sub: "x", exp: 1_000_000_000 })}.c2ln`;
}

for (const backend of backends()) {
  describe(`bulwark CLI core [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let org: string;
    let env: Record<string, string>;
    const cli = (args: string[], options: CliOptions = {}) =>
      runCli(home, args, { ...options, env: { ...env, ...options.env } });
    const ok = async (args: string[], options: CliOptions = {}) => {
      const r = await cli(args, options);
      assert.equal(r.code, 0, `bulwark ${args.join(" ")}: ${r.stderr}`);
      assert.doesNotMatch(r.stderr, STACK_TRACE);
      return r.stdout;
    };
    const fails = async (args: string[], code: number, message: RegExp, options: CliOptions = {}) => {
      const r = await cli(args, options);
      assert.equal(r.code, code, `bulwark ${args.join(" ")} exits ${code}: ${r.stdout} ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, STACK_TRACE);
      return r.stderr;
    };

    before(async () => {
      server = await startTestServer(backend);
      home = new CliHome();
      env = { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken };
    });
    after(async () => {
      await server.close();
      home.close();
    });

    it("organizations: create, list in every format, describe by name, tree with folders", async () => {
      org = (await ok(["iam", "organizations", "create", "acme", "--description", "Acme Corp", "-o", "id"])).trim();
      assert.match(org, /^[0-9a-f]{40}$/);
      const builds = (await ok(["iam", "folders", "create", "builds", "--parent", org, "-o", "id"])).trim();
      await ok(["iam", "folders", "create", "nightly", "--parent", builds, "--description", "every night"]);
      await ok(["iam", "folders", "create", "releases", "--parent", org]);
      const known = { [org]: "acme" };

      const table = await ok(["iam", "organizations", "list"]);
      assert.equal(collapse(normalize(table, known)), "ID  NAME  DESCRIPTION\n<acme>  acme  Acme Corp\n");
      const wide = await ok(["iam", "orgs", "list", "-o", "wide"]);
      assert.equal(
        collapse(normalize(wide, known)),
        "ID  NAME  DESCRIPTION  VERIFIED  CREATED\n<acme>  acme  Acme Corp  no  <time>\n",
      );
      const json = JSON.parse(await ok(["iam", "organizations", "list", "-o", "json"])) as {
        uid: string;
        name: string;
      }[];
      assert.deepEqual(
        json.map((g) => [g.uid, g.name]),
        [[org, "acme"]],
      );
      assert.equal(await ok(["iam", "organizations", "list", "-o", "id"]), `${org}\n`);
      assert.equal(await ok(["iam", "organizations", "list", "-o", "terse"]), `${org}\tacme\tAcme Corp\n`);
      const described = JSON.parse(await ok(["iam", "organizations", "describe", "acme", "-o", "json"])) as {
        uid: string;
        description: string;
      };
      assert.equal(described.uid, org);
      assert.equal(described.description, "Acme Corp");

      const tree = await ok(["iam", "organizations", "list", "-o", "tree"]);
      assert.equal(
        normalize(tree, known),
        ["acme (<acme>)", "├── builds (<uid>)", "│   └── nightly (<uid>)", "└── releases (<uid>)", ""].join("\n"),
      );
    });

    it("folders: list all levels under --parent or the configured default group, update, delete", async () => {
      const listed = collapse(normalize(await ok(["iam", "folders", "list", "--parent", org]))).split("\n");
      // rows in the API's order (by uid): compared as a set
      assert.equal(listed[0], "ID  NAME  DESCRIPTION");
      assert.deepEqual(listed.slice(1).sort(), ["", "<uid>  builds", "<uid>  nightly  every night", "<uid>  releases"]);
      // --parent defaults to the configured default group
      await ok(["config", "set", "default-group", org]);
      try {
        assert.equal((await ok(["iam", "folders", "list", "-o", "id"])).trim().split("\n").length, 3);
      } finally {
        await ok(["config", "unset", "default-group"]);
      }
      const releases = (await ok(["iam", "folders", "list", "--parent", org, "--name", "releases", "-o", "id"])).trim();
      const updated = JSON.parse(
        await ok(["iam", "folders", "update", releases, "--description", "shipped builds", "-o", "json"]),
      ) as { name: string; description: string };
      assert.deepEqual([updated.name, updated.description], ["releases", "shipped builds"]);
      await fails(["iam", "folders", "update", releases], 2, /nothing to change: pass --name and\/or --description/);
      // off a terminal a delete needs --yes; nothing is deleted without it
      await fails(["iam", "folders", "delete", releases], 2, /Pass --yes to confirm/);
      await ok(["iam", "folders", "describe", releases]);
      assert.match(await ok(["iam", "folders", "delete", releases, "--yes"]), /deleted folder acme\/releases /);
      await fails(["iam", "folders", "describe", releases], 1, /not found|does not exist|no /i);
      await fails(["iam", "folders", "delete", org, "--yes"], 2, /is an organization/);
    });

    it("lists walk every page, and --limit stops early", async () => {
      const api = restClient(server.url, server.operatorToken);
      const many = (await createGroup(api, org, "many")).uid as string;
      for (let i = 0; i < 205; i += 25)
        await Promise.all(
          Array.from({ length: Math.min(25, 205 - i) }, (_, j) =>
            createGroup(api, many, `f-${String(i + j).padStart(3, "0")}`),
          ),
        );
      const all = (await ok(["iam", "folders", "list", "--parent", many, "-o", "id"])).trim().split("\n");
      assert.equal(all.length, 205, "more than one page of 200");
      assert.equal(new Set(all).size, 205);
      const some = (await ok(["iam", "folders", "list", "--parent", many, "--limit", "7", "-o", "json"])) as string;
      assert.equal((JSON.parse(some) as unknown[]).length, 7);
      await fails(["iam", "folders", "list", "--limit", "seven"], 2, /--limit.*expected a whole number/);
    });

    it("config: set, view with where each value comes from (flag > env > file), unset; bad values refused", async () => {
      const path = join(home.configDir, "config.json");
      await ok(["config", "set", "api-url", "http://file.example:1"]);
      await ok(["config", "set", "output", "json"]);
      assert.equal(statSync(path).mode & 0o777, 0o600);
      assert.deepEqual(JSON.parse(readFileSync(path, "utf8")), { "api-url": "http://file.example:1", output: "json" });

      type Row = { name: string; value: string; source: string };
      const view = async (args: string[], extraEnv: Record<string, string | undefined>) =>
        Object.fromEntries(
          (JSON.parse(await ok(["config", "view", "-o", "json", ...args], { env: extraEnv })) as Row[]).map((r) => [
            r.name,
            r,
          ]),
        ) as Record<string, Row>;
      const fromFile = await view([], { BULWARK_API_URL: undefined });
      assert.equal(fromFile["api-url"]!.value, "http://file.example:1");
      assert.match(fromFile["api-url"]!.source, /^config .*config\.json$/);
      assert.equal(fromFile["issuer-url"]!.value, "http://file.example:1", "the issuer defaults to the API URL");
      assert.equal(fromFile.registry!.value, "file.example:1");
      const fromEnv = await view([], { BULWARK_API_URL: "http://env.example:2" });
      assert.deepEqual(
        [fromEnv["api-url"]!.value, fromEnv["api-url"]!.source],
        ["http://env.example:2", "env BULWARK_API_URL"],
      );
      const fromFlag = await view(["--api-url", "http://flag.example:3"], { BULWARK_API_URL: "http://env.example:2" });
      assert.deepEqual(
        [fromFlag["api-url"]!.value, fromFlag["api-url"]!.source],
        ["http://flag.example:3", "flag --api-url"],
      );
      const table = await ok(["config", "view", "-o", "table"], { env: { BULWARK_API_URL: undefined } });
      assert.match(table.split("\n")[0]!, /^SETTING\s+VALUE\s+FROM$/);

      // the file's output setting applies to commands (JSON here), a flag overrides it
      assert.ok(Array.isArray(JSON.parse(await ok(["iam", "organizations", "list"]))));
      assert.match(await ok(["iam", "organizations", "list", "-o", "id"]), /^[0-9a-f]{40}\n$/);

      await fails(["config", "set", "api-url", "not a url"], 2, /api-url must be a URL/);
      await fails(["config", "set", "colour", "red"], 2, /unknown setting "colour": one of api-url, /);
      await fails(["config", "set", "output", "yaml"], 2, /output must be one of table, json/);
      await fails(["iam", "organizations", "list"], 2, /BULWARK_OUTPUT must be one of/, {
        env: { BULWARK_OUTPUT: "xml" },
      });
      await ok(["config", "unset", "api-url"]);
      assert.match(await ok(["config", "unset", "output"]), /output removed/);
      assert.match(await ok(["config", "unset", "output"]), /output was not set/);
      assert.deepEqual(JSON.parse(readFileSync(path, "utf8")), {});
      writeFileSync(path, "{ not json");
      await fails(["config", "view"], 1, /config\.json is not valid JSON/);
      writeFileSync(path, "{}");
    });

    it("token sources: --token-file before BULWARK_TOKEN before the stored login; auth status and capabilities", async () => {
      const api = restClient(server.url, server.operatorToken);
      const ci = (await createIdentity(api, org, "ci", "repo:acme/app")).uid as string;
      await createRoleBinding(api, org, ci, VIEWER_ROLE_UID);
      const ciToken = await server.tokenFor(ci);
      const tokenFile = join(home.dir, "ci-token");
      writeFileSync(tokenFile, ciToken + "\n");

      assert.equal((await ok(["auth", "status", "-o", "terse"])).trim(), OPERATOR_SUBJECT);
      assert.equal((await ok(["auth", "status", "-o", "terse", "--token-file", tokenFile])).trim(), ci);
      assert.equal(
        (await ok(["auth", "status", "-o", "terse"], { env: { BULWARK_TOKEN_FILE: tokenFile } })).trim(),
        ci,
        "BULWARK_TOKEN_FILE too",
      );
      assert.equal((await ok(["auth", "token"])).trim(), server.operatorToken, "auth token prints the token in use");

      const status = JSON.parse(await ok(["auth", "status", "-o", "json", "--token-file", tokenFile])) as {
        subject: string;
        issuer: string;
        capabilities: { group: { id: string }; role: { name: string } }[];
      };
      assert.equal(status.subject, ci);
      assert.equal(status.issuer, server.urls.issuer);
      const table = await ok(["auth", "status", "--token-file", tokenFile]);
      assert.match(table, new RegExp(`subject:\\s+${ci}`));
      assert.match(table, /expires:\s+\d{4}-\d\d-\d\dT/);

      const caps = await ok(["auth", "token", "capabilities", "--token-file", tokenFile]);
      const lines = collapse(normalize(caps, { [org]: "acme" })).split("\n");
      assert.equal(lines[0], "GROUP ID  GROUP  ROLE  CAPABILITIES");
      assert.match(lines[1]!, /^<acme>  acme  viewer  \S/);
      const capsJson = JSON.parse(
        await ok(["auth", "token", "capabilities", "--token-file", tokenFile, "-o", "json"]),
      ) as {
        groupId: string;
        role: string;
        capabilities: string[];
      }[];
      assert.equal(capsJson[0]!.groupId, org);
      assert.ok(capsJson[0]!.capabilities.includes("groups.list") || capsJson[0]!.capabilities.length > 3);
    });

    it("errors a person can act on: unreachable server, expired or missing credentials, refusals as sentences", async () => {
      const port = await closedPort();
      const down = await fails(["iam", "organizations", "list"], 1, /cannot reach http:\/\/127\.0\.0\.1:\d+/, {
        env: { BULWARK_API_URL: `http://127.0.0.1:${port}` },
      });
      assert.match(down, /connection refused .*ECONNREFUSED/);
      await fails(["iam", "organizations", "list"], 1, /cannot reach http:\/\/no-such-host\.invalid:1: no such host/, {
        env: { BULWARK_API_URL: "http://no-such-host.invalid:1" },
      });

      const expired = await fails(["iam", "organizations", "list"], 1, /the token in BULWARK_TOKEN expired at 2001-/, {
        env: { BULWARK_TOKEN: expiredJwt() },
      });
      assert.match(expired, /bulwark admin token/);
      await fails(
        ["iam", "organizations", "list"],
        1,
        /not logged in: run `bulwark auth login`, or set BULWARK_TOKEN/,
        {
          env: { BULWARK_TOKEN: undefined },
        },
      );
      // a stored login whose token expired, with nothing to refresh it from
      mkdirSync(home.configDir, { recursive: true });
      writeFileSync(
        join(home.configDir, "credentials.json"),
        JSON.stringify({
          apiUrl: server.url,
          issuerUrl: server.url,
          tokens: { [server.url]: { token: expiredJwt(), expiry: "2001-09-09T01:46:40.000Z" } },
        }),
      );
      await fails(
        ["iam", "organizations", "list"],
        1,
        /the stored login's token expired at 2001-09-09T01:46:40.000Z and cannot be refreshed: run `bulwark auth login` again/,
        { env: { BULWARK_TOKEN: undefined } },
      );
      await ok(["auth", "logout"]);

      // the server's refusals: AIP-193 message (and field violations) as sentences
      await fails(
        ["iam", "folders", "create", "Not Valid!", "--parent", org],
        1,
        /^bulwark: Invalid argument: name: name must match "\^\[a-z0-9 \._-\]\{1,\}\$"\.\n$/,
      );
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.urls.registryAudience] });
      const wrongAudience = await fails(
        ["iam", "organizations", "list"],
        1,
        /token audience is not accepted: expected/,
        {
          env: { BULWARK_TOKEN: registryToken },
        },
      );
      assert.match(wrongAudience, new RegExp(`expected "${server.urls.apiAudience}"`));
      assert.match(wrongAudience, /The token came from BULWARK_TOKEN/);
      await fails(["iam", "organizations", "describe", "0".repeat(40)], 1, /^bulwark: .*(not found|does not exist)/im);
      // a caller without the capability hears what to do
      const nobody = await server.tokenFor("0123456789abcdef0123456789abcdef01234567");
      await fails(["iam", "organizations", "list"], 1, /identity no longer exists|Run `bulwark auth login`/, {
        env: { BULWARK_TOKEN: nobody },
      });
    });

    it("tokens go only where they belong: a stored login to its own API; BULWARK_TOKEN beats a config token-file", async () => {
      mkdirSync(home.configDir, { recursive: true });
      const expiry = new Date(Date.now() + 3_600_000).toISOString();
      writeFileSync(
        join(home.configDir, "credentials.json"),
        JSON.stringify({
          apiUrl: server.url,
          issuerUrl: server.url,
          tokens: { [server.url]: { token: server.operatorToken, expiry } },
        }),
      );
      try {
        assert.equal(
          (await ok(["auth", "status", "-o", "terse"], { env: { BULWARK_TOKEN: undefined } })).trim(),
          OPERATOR_SUBJECT,
        );
        const elsewhere = `http://127.0.0.1:${await closedPort()}`;
        await fails(
          ["iam", "organizations", "list", "--api-url", elsewhere],
          1,
          new RegExp(
            `the stored login is for ${server.url}, not ${elsewhere}: run \`bulwark auth login --api-url ${elsewhere}\``,
          ),
          { env: { BULWARK_TOKEN: undefined } },
        );
      } finally {
        await ok(["auth", "logout"]);
      }
      const garbage = join(home.dir, "garbage-token");
      writeFileSync(garbage, "not-a-token\n");
      await ok(["config", "set", "token-file", garbage]);
      try {
        assert.equal((await ok(["auth", "status", "-o", "terse"])).trim(), OPERATOR_SUBJECT, "the environment wins");
        await fails(["auth", "status"], 1, /token is malformed\.\nThe token came from the token file .*garbage-token/, {
          env: { BULWARK_TOKEN: undefined },
        });
        await fails(
          ["auth", "status", "--token-file", join(home.dir, "missing")],
          1,
          /cannot read the token file .*missing: no such file/,
        );
      } finally {
        await ok(["config", "unset", "token-file"]);
      }
    });

    it("a repo whose name starts like a folder is found by <org>/<name>", async () => {
      await ok(["images", "repos", "create", "tools/x", "--parent", org]);
      await ok(["iam", "folders", "create", "tools", "--parent", org]);
      assert.match(await ok(["images", "tags", "list", "acme/tools/x"]), /^ID\s+NAME\s+DIGEST/);
      await fails(["images", "tags", "list", "acme/tools/y"], 1, /no repo "y" in acme\/tools \(.*\) is visible to you/);
    });

    it("usage errors exit 2: unknown command or option, bad output format, missing argument or --parent", async () => {
      await fails(
        ["iam", "organizations", "list", "-o", "tree", "--limit", "2"],
        2,
        /--limit does not apply to -o tree/,
      );
      await fails(["iam", "organizations", "list", "--limit", "0"], 2, /--limit.*expected 1 or more/);
      await fails(
        ["auth", "login", "--identity", "x", "--identity-token", "a.b.c", "--headless"],
        2,
        /--headless: for signing in people, not with --identity/,
      );
      await fails(["auth", "login", "-o", "json"], 2, /unknown option '-o'/);
      await fails(["iam", "organisations", "list"], 2, /unknown command 'organisations'/);
      await fails(["iam", "organizations", "list", "--colour"], 2, /unknown option '--colour'/);
      await fails(
        ["iam", "organizations", "list", "-o", "yaml"],
        2,
        /argument 'yaml' is invalid.*Allowed choices are table, json/,
      );
      await fails(["iam", "organizations", "describe"], 2, /missing required argument 'organization'/);
      await fails(["iam", "folders", "create", "x"], 2, /needs a group: pass --parent <group uid>, or set a default/);
      await fails(
        ["iam", "organizations", "list", "-o", "tree", "--api-url", "ftp://x"],
        2,
        /--api-url must be an http\(s\) URL/,
      );
      await fails(["iam", "folders", "describe", "x", "-o", "tree"], 2, /-o tree is for/);
    });

    it("version: the CLI's and the server's", async () => {
      assert.equal((await ok(["--version"])).trim(), VERSION);
      const both = JSON.parse(await ok(["version", "-o", "json"])) as { client: string; server: { version: string } };
      assert.equal(both.client, VERSION);
      assert.equal(both.server.version, VERSION);
      assert.match(
        await ok(["version"]),
        new RegExp(`client: bulwark ${VERSION.replace(/\./g, "\\.")}\nserver: ${server.url} bulwark`),
      );
      assert.equal((await ok(["version", "--client", "-o", "id"])).trim(), VERSION);
      const port = await closedPort();
      assert.match(
        await ok(["version"], { env: { BULWARK_API_URL: `http://127.0.0.1:${port}` } }),
        /not reachable \(ECONNREFUSED\)/,
      );
    });

    it("on a terminal: table headers in bold unless NO_COLOR, a progress bar while importing", async () => {
      const plain = await runCliOnTerminal(home, ["iam", "organizations", "list"], { env });
      assert.equal(plain.code, 0, plain.stdout);
      assert.match(plain.stdout, /\x1b\[1mID\s+NAME\s+DESCRIPTION\x1b\[22m/);
      const noColor = await runCliOnTerminal(home, ["iam", "organizations", "list"], {
        env: { ...env, NO_COLOR: "1" },
      });
      assert.equal(noColor.code, 0, noColor.stdout);
      assert.ok(!noColor.stdout.includes("\x1b["), noColor.stdout);
      const imported = await runCliOnTerminal(
        home,
        ["advisories", "import", "test/fixtures/advisories/wolfi", "--group", org, "-o", "json"],
        { env },
      );
      assert.equal(imported.code, 0, imported.stdout);
      const files = readdirSync("test/fixtures/advisories/wolfi").filter((f) => f.endsWith(".yaml")).length;
      assert.match(imported.stdout, new RegExp(`\\r\\[#{30}\\] ${files}/${files} files`), "the bar reaches the end");
      // off a terminal: no bar
      const piped = await cli(["advisories", "import", "test/fixtures/advisories/wolfi", "--group", org]);
      assert.equal(piped.code, 0, piped.stderr);
      assert.doesNotMatch(piped.stderr, /\[#+/);
    });

    it("colors only on a terminal or with FORCE_COLOR, never with NO_COLOR", async () => {
      const bold = "\x1b[1m";
      assert.ok(!(await ok(["iam", "organizations", "list"])).includes("\x1b["), "piped: no colors");
      assert.ok((await ok(["iam", "organizations", "list"], { env: { FORCE_COLOR: "1" } })).includes(bold));
      assert.ok(
        !(await ok(["iam", "organizations", "list"], { env: { FORCE_COLOR: "1", NO_COLOR: "1" } })).includes("\x1b["),
      );
      const port = await closedPort();
      const r = await cli(["iam", "organizations", "list"], {
        env: { BULWARK_API_URL: `http://127.0.0.1:${port}`, FORCE_COLOR: "1", NO_COLOR: "1" },
      });
      assert.ok(!r.stderr.includes("\x1b["), "errors too");
    });
  });
}

describe("bulwark CLI without a server", () => {
  const home = new CliHome();
  after(() => home.close());

  /** Every command path, read from the bash completion script (made from the command tree). */
  async function commandPaths(): Promise<string[][]> {
    const script = (await runCli(home, ["completion", "bash"])).stdout;
    return [...script.matchAll(/^ {4}"([^"]*)"\) words="([^"]*)"/gm)].map((m) => (m[1] ? m[1].split(" ") : []));
  }

  it("admin token's --port and --host name the server's, not where to listen", async () => {
    const help = (await runCli(home, ["admin", "token", "--help"])).stdout;
    assert.match(help, /--port <port>\s+the server's port/);
    assert.doesNotMatch(help, /listen/i);
  });

  it("every command's --help has an example, and exits 0", async () => {
    const paths = await commandPaths();
    assert.ok(paths.length > 90, `${paths.length} commands`);
    const missing: string[] = [];
    for (let i = 0; i < paths.length; i += 12)
      await Promise.all(
        paths.slice(i, i + 12).map(async (path) => {
          const r = await runCli(home, [...path, "--help"]);
          assert.equal(r.code, 0, `${path.join(" ")} --help: ${r.stderr}`);
          if (!/Examples?:\n {2}\S/.test(r.stdout) && !/Commands:/.test(r.stdout)) missing.push(path.join(" "));
        }),
      );
    assert.deepEqual(missing, [], "commands without an example");
  });

  it("completion: bash completes commands, subcommands, options and -o values; zsh and fish scripts", async () => {
    const script = (await runCli(home, ["completion", "bash"])).stdout;
    const complete = (words: string[]) => {
      const line = words.map((w) => `'${w}'`).join(" ");
      const out = spawnSync(
        "bash",
        [
          "-c",
          `${script}\nCOMP_WORDS=(${line}); COMP_CWORD=${words.length - 1}; _bulwark; printf '%s\\n' "\${COMPREPLY[@]}"`,
        ],
        { encoding: "utf8" },
      );
      assert.equal(out.status, 0, out.stderr);
      return out.stdout.trim().split("\n").filter(Boolean).sort();
    };
    assert.deepEqual(complete(["bulwark", "ia"]), ["iam"]);
    assert.ok(complete(["bulwark", "iam", ""]).includes("organizations"));
    assert.deepEqual(complete(["bulwark", "iam", "organizations", "l"]), ["list"]);
    assert.ok(complete(["bulwark", "iam", "orgs", "list", "--"]).includes("--output"));
    assert.deepEqual(complete(["bulwark", "iam", "orgs", "list", "-o", "t"]), ["table", "terse", "tree"]);
    assert.ok(complete(["bulwark", "iam", "folders", "list", "--parent", "abc", "--l"]).includes("--limit"));

    const zsh = (await runCli(home, ["completion", "zsh"])).stdout;
    assert.match(zsh, /^#compdef bulwark/);
    assert.match(zsh, /"iam organizations list"\) cands=\(.*--output/);
    const fish = (await runCli(home, ["completion", "fish"])).stdout;
    assert.match(fish, /complete -c bulwark -n "__bulwark_path_is 'iam'" -a organizations/);
    for (const [shell, text] of [
      ["zsh", zsh],
      ["fish", fish],
    ] as const) {
      const which = spawnSync("sh", ["-c", `command -v ${shell}`]);
      if (which.status === 0) execFileSync(shell, ["-n"], { input: text });
    }
    const bad = await runCli(home, ["completion", "tcsh"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown shell "tcsh": bash, zsh or fish/);
  });
});
