// Names wherever an id goes, as a chainctl user types them: group paths (`--parent acme/team`),
// role, identity and repo names resolved within what the caller sees; ambiguous names refused
// listing the candidates, unknown ones saying what was looked for, uids still taken. Lists show
// repos by their full name, `images repos update --public/--private`, delete prompts that say what
// will happen, and the server's refusals in its own words (here and at sign-in). A real server,
// the CLI in-process (test/support/cli.ts).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { CliHome, collapse, normalize, runCli, type CliOptions } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createGroupInvite, createIdentity, createRole, type Api } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { descriptorOf, MEDIA_TYPES, OciClient } from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";

for (const backend of backends()) {
  describe(`bulwark names, paths and refusals [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let api: Api;
    /** uids by path */
    const g: Record<string, string> = {};
    let acmeCi: string;
    let globexCi: string;
    let acmeRole: string;
    let globexRole: string;

    const cli = (args: string[], options: CliOptions = {}) =>
      runCli(home, args, {
        ...options,
        env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken, ...options.env },
      });
    const ok = async (args: string[], options: CliOptions = {}) => {
      const res = await cli(args, options);
      assert.equal(res.code, 0, `${args.join(" ")}: ${res.stderr}`);
      return res.stdout;
    };
    const fails = async (args: string[], code: number) => {
      const res = await cli(args);
      assert.equal(res.code, code, `${args.join(" ")}: exit ${res.code}, ${res.stdout}${res.stderr}`);
      return res.stderr;
    };
    /** Anonymous pull of a manifest: the registry's anonymous token, then the manifest's status. */
    const anonymousPull = async (name: string) => {
      const token = await fetch(`${server.url}/token?scope=repository:${name}:pull`);
      const bearer = ((await token.json()) as { token?: string }).token;
      const res = await fetch(`${server.url}/v2/${name}/manifests/v1`, {
        headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), accept: MEDIA_TYPES.ociManifest },
      });
      return res.status;
    };

    before(async () => {
      server = await startTestServer(backend);
      home = new CliHome();
      api = restClient(server.url, server.operatorToken);
      g.acme = (await createGroup(api, undefined, "acme")).uid;
      g.globex = (await createGroup(api, undefined, "globex")).uid;
      g["acme/team"] = (await createGroup(api, g.acme, "team")).uid;
      g["acme/team/builds"] = (await createGroup(api, g["acme/team"], "builds")).uid;
      g["globex/team"] = (await createGroup(api, g.globex, "team")).uid;
      acmeCi = (await createIdentity(api, g["acme/team"]!, "ci", "repo:acme/app")).uid;
      globexCi = (await createIdentity(api, g.globex!, "ci", "repo:globex/app")).uid;
      acmeRole = (await createRole(api, g.acme!, "deployer")).uid;
      globexRole = (await createRole(api, g.globex!, "deployer")).uid;
      // An image in acme/team/app, pushed over the registry protocol (which creates the repo).
      const registry = server.tokens.urls.registryAudience;
      const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [registry] });
      const oci = new OciClient(server.url, { credential: { username: "_token", password } });
      const config = JSON.stringify({ architecture: "amd64", os: "linux" });
      for (const blob of [config, "layer"]) assert.equal((await oci.postBlob("acme/team/app", blob)).status, 201);
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: MEDIA_TYPES.ociManifest,
        config: descriptorOf(MEDIA_TYPES.ociConfig, config),
        layers: [descriptorOf(MEDIA_TYPES.ociLayer, "layer")],
      });
      assert.equal((await oci.putManifest("acme/team/app", "v1", manifest, MEDIA_TYPES.ociManifest)).status, 201);
    });
    after(async () => {
      home?.close();
      await server?.close();
    });

    it("--parent takes a group path, a name or a uid", async () => {
      const byPath = JSON.parse(
        await ok(["iam", "folders", "create", "nightly", "--parent", "acme/team", "-o", "json"]),
      );
      assert.match(byPath.uid, new RegExp(`^${g["acme/team"]}/[0-9a-f]{16}$`));
      // the issue's example: an organization's name
      assert.equal((await ok(["iam", "folders", "list", "--parent", "globex", "-o", "id"])).trim(), g["globex/team"]);
      // a unique folder name anywhere, and a uid, as before
      assert.equal((await ok(["iam", "folders", "list", "--parent", "builds", "-o", "id"])).trim(), "");
      assert.equal(
        (await ok(["iam", "folders", "list", "--parent", g["acme/team"]!, "-o", "id"]))
          .trim()
          .split("\n")
          .sort()
          .join(),
        [g["acme/team/builds"], byPath.uid].sort().join(),
      );
      // the default group is a path too
      await ok(["config", "set", "default-group", "acme/team"]);
      try {
        assert.equal((await ok(["iam", "folders", "list", "-o", "id"])).trim().split("\n").length, 2);
      } finally {
        await ok(["config", "unset", "default-group"]);
      }
      await ok(["iam", "folders", "delete", "acme/team/nightly", "--yes"]);
    });

    it("an ambiguous name is refused listing the candidates; an unknown one says what was looked for", async () => {
      const ambiguous = await fails(["iam", "folders", "list", "--parent", "team"], 1);
      assert.match(ambiguous, /2 groups are named "team"; name one by its path or uid:/);
      assert.ok(ambiguous.includes(`  acme/team (${g["acme/team"]})`), ambiguous);
      assert.ok(ambiguous.includes(`  globex/team (${g["globex/team"]})`), ambiguous);

      const missing = await fails(["iam", "folders", "list", "--parent", "acme/nope"], 1);
      assert.match(
        missing,
        /no group at the path "acme\/nope" \(an organization "acme", then "nope"\) is visible to you/,
      );
      assert.match(
        await fails(["iam", "folders", "list", "--parent", "globex/team/builds"], 1),
        /"globex\/team\/builds"/,
      );
      assert.match(
        await fails(["iam", "organizations", "describe", "umbrella"], 1),
        /no organization named "umbrella"/,
      );
      assert.match(
        await fails(["iam", "folders", "list", "--parent", "acme//team"], 2),
        /--parent must be a group's uid, name, or path of names \(acme\/team\) \(got "acme\/\/team"\)/,
      );

      const identity = await fails(["iam", "identities", "describe", "ci"], 1);
      assert.match(identity, /2 identities named "ci" are visible to you; name one by its uid:/);
      assert.ok(identity.includes(`  acme/team/ci (${acmeCi})`), identity);
      assert.ok(identity.includes(`  globex/ci (${globexCi})`), identity);

      const role = await fails(["iam", "roles", "describe", "deployer"], 1);
      assert.ok(role.includes(`  acme/deployer (${acmeRole})`), role);
      assert.ok(role.includes(`  globex/deployer (${globexRole})`), role);
    });

    it("names resolve within where they are used: a role usable in --parent, an identity by uid", async () => {
      const binding = JSON.parse(
        await ok([
          "iam",
          "role-bindings",
          "create",
          "--identity",
          acmeCi,
          "--role",
          "deployer",
          "--parent",
          "acme/team",
          "-o",
          "json",
        ]),
      );
      assert.equal(binding.roleUid, acmeRole, "only acme's deployer is usable under acme");
      await ok(["iam", "role-bindings", "delete", binding.uid, "--yes"]);
    });

    it("advisories take their publisher group by name or path", async () => {
      assert.equal(await ok(["advisories", "list", "--parent", "acme/team", "-o", "id"]), "");
      assert.match(await fails(["advisories", "list", "--parent", "initech"], 1), /no group named "initech"/);
    });

    it("images list and repos list show each repo's full name; repo refs descend folders", async () => {
      assert.equal(
        collapse(normalize(await ok(["images", "list", "--parent", "acme"]))),
        // no report of the tag's image yet: "-"
        "REPO  TAGS  VULNS  UPDATED\nacme/team/app  v1  -  <time>\n",
      );
      assert.equal(
        collapse(normalize(await ok(["images", "repos", "list", "--parent", "acme/team"]))),
        "ID  NAME  DESCRIPTION\n<uid>  acme/team/app\n",
      );
      assert.equal(
        normalize(await ok(["images", "list", "-o", "terse"])),
        "acme/team/app\tv1\t-\t<time>\n",
        "terse: the full name too",
      );
      assert.match(await ok(["images", "tags", "list", "acme/team/app"]), /\bv1\b/);
    });

    it("images repos update --public / --private: anonymous pulls follow", async () => {
      assert.notEqual(await anonymousPull("acme/team/app"), 200);
      const shown = JSON.parse(await ok(["images", "repos", "update", "acme/team/app", "--public", "-o", "json"]));
      assert.equal(shown.public, true);
      assert.equal(await anonymousPull("acme/team/app"), 200);
      assert.equal(
        collapse(normalize(await ok(["images", "repos", "update", "acme/team/app", "--private"]))),
        "ID  NAME  PUBLIC  DESCRIPTION\n<uid>  acme/team/app  no\n",
      );
      assert.notEqual(await anonymousPull("acme/team/app"), 200);
      assert.match(
        await fails(["images", "repos", "update", "acme/team/app", "--public", "--private"], 2),
        /cannot be used with/,
      );
    });

    it("a group delete says what it holds and that the server deletes only empty groups", async () => {
      const refused = await fails(["iam", "folders", "delete", "acme/team", "--yes"], 1);
      assert.match(
        refused,
        new RegExp(
          `cannot delete the folder acme/team \\(${g["acme/team"]}\\): it holds 1 child group, 1 repo and 1 identity, ` +
            "and the server deletes only an empty group",
        ),
      );
      await ok(["iam", "folders", "describe", "acme/team"]); // still there
    });

    it("an empty group's delete prompt says so; the server's refusal arrives in its own words", async () => {
      const empty = (await createGroup(api, g.acme, "empty")).uid as string;
      const asked = await fails(["iam", "folders", "delete", "acme/empty"], 2);
      assert.match(
        asked,
        new RegExp(`Delete the folder acme/empty \\(${empty}\\)\\? It is empty; this cannot be undone\\.`),
      );
      // An invite refers to the group: not counted here, refused by the server, in its words.
      await createGroupInvite(api, empty);
      const serverSaid = await fails(["iam", "folders", "delete", "acme/empty", "--yes"], 1);
      assert.match(serverSaid, /^bulwark: Precondition failed: cannot delete group with child group invites\.\n$/);
    });

    it("a repo delete prompt names the repo by its full name and its tags", async () => {
      const asked = await fails(["images", "repos", "delete", "acme/team/app"], 2);
      assert.match(
        asked,
        /Delete the repo acme\/team\/app \([0-9a-f/]+\)\? Its tag goes with it; this cannot be undone\./,
      );
    });

    it("auth login --headless shows the sign-in service's own reason", async () => {
      const res = await cli(["auth", "login", "--headless"]);
      assert.equal(res.code, 1, res.stderr);
      assert.doesNotMatch(res.stderr, /server responded with an error/);
      assert.match(
        res.stderr,
        /^bulwark: the sign-in service refused: no sign-in provider is configured on this server/,
      );
    });
  });
}
