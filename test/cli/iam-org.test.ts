// `bulwark iam invites`, `iam identity-providers` and `iam account-associations` as a user runs
// them (in-process, test/support/cli.ts) against a real server, on every backend. Tables are
// compared to inline snapshots (uids, times, codes and key ids replaced), JSON is parsed and
// checked against what the server stored, and failures are sentences with the right exit status:
// 1 when the server refuses, 2 when the command line is wrong. An identity provider's client
// secret appears in no output.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Command } from "commander";
import { registerInvites } from "../../src/cli/commands/invites.js";
import { registerOrgSettings } from "../../src/cli/commands/org-settings.js";
import { CliHome, collapse, normalize, runCli, type CliResult } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const VIEWER_UID = "63921b2c44617e3f2603851537be0123af4a57d7";
const CODE = /^([0-9a-f]{16})\.[A-Za-z0-9_-]{43}$/;
const SECRET = "idp-client-secret-7f3a9c";
const NEW_SECRET = "idp-rotated-secret-41b2e8";
const STACK_TRACE = /^\s+at /m;

for (const backend of backends()) {
  describe(`bulwark iam invites, identity-providers, account-associations [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let api: ReturnType<typeof restClient>;
    let org: { uid: string; name: string };
    let otherOrg: { uid: string; name: string };
    let auditor: { uid: string };
    let editorUid: string;
    /** every output of an identity-provider command, to look for the client secret in */
    const idpOutputs: string[] = [];

    before(async () => {
      server = await startTestServer(backend);
      home = new CliHome();
      api = restClient(server.url, server.operatorToken);
      const group = async (path: string, name: string) => {
        const res = await api.post(path, { name });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return res.body;
      };
      org = await group("/iam/v2beta1/groups", "acme");
      otherOrg = await group("/iam/v2beta1/groups", "globex");
      // Two custom roles share a name; only the one in acme is usable from acme.
      const role = async (parent: string) => {
        const res = await api.post(`/iam/v2beta1/roles/${parent}`, {
          name: "auditor",
          capabilities: ["CAP_IAM_GROUPS_LIST"],
        });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return res.body;
      };
      auditor = await role(org.uid);
      await role(otherOrg.uid);
      const editors = await api.get("/iam/v2beta1/roles?name=editor");
      editorUid = editors.body.roles.find((r: { uid: string }) => !r.uid.includes("/")).uid;
      writeFileSync(join(home.dir, "secret"), `${SECRET}\n`);
      writeFileSync(join(home.dir, "new-secret"), NEW_SECRET);
    });
    after(async () => {
      home.close();
      await server?.close();
    });

    const env = () => ({ BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken });
    const cli = (...args: string[]) => runCli(home, args, { env: env() });
    const idp = async (...args: string[]) => {
      const r = await cli("iam", "identity-providers", ...args);
      idpOutputs.push(r.stdout, r.stderr);
      return r;
    };
    function ok(r: CliResult): string {
      assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr}`);
      // `invites create -o id` prints the uid; the code, shown only then, goes to stderr
      assert.match(r.stderr, /^(invite code \(shown only this once\): [\w.-]+\n)?$/);
      return r.stdout;
    }
    /** A failure: its exit status, one `bulwark:` sentence (or commander's usage error), no stack trace. */
    function failed(r: CliResult, code: 1 | 2, message: RegExp): void {
      assert.equal(r.code, code, `exit ${r.code}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stdout, "");
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, STACK_TRACE);
    }
    const snapshot = (text: string, known: Record<string, string> = {}) =>
      collapse(normalize(text, { [org.uid]: "acme", [otherOrg.uid]: "globex", ...known }));

    describe("invites", () => {
      let folder: { uid: string };
      before(async () => {
        folder = (await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "team" })).body;
      });

      it("create prints the invite, its code once and how to accept it; the server stored a 168h invite", async () => {
        const out = ok(await cli("iam", "invites", "create", "--parent", folder.uid, "--role", "viewer"));
        const code = /--invite-code (\S+)/.exec(out)![1]!;
        const keyId = CODE.exec(code)![1]!;
        const stored = JSON.parse(ok(await cli("iam", "invites", "list", "--parent", folder.uid, "-o", "json")));
        assert.equal(stored.length, 1);
        const [invite] = stored;
        assert.equal(invite.keyId, keyId);
        assert.equal(invite.roleUid, VIEWER_UID);
        assert.equal(invite.code, undefined, "the code is shown by create alone");
        assert.equal(Date.parse(invite.expirationTime) - Date.parse(invite.createTime), 168 * 3600_000);
        assert.equal(
          snapshot(out, { [invite.uid]: "invite", [code]: "code", [keyId]: "keyid" }),
          [
            "ID  EXPIRATION  KEYID  ROLE",
            "<invite>  <time>  <keyid>  viewer",
            "",
            "Invite code (shown only this once; anyone holding it can join):",
            "  <code>",
            "To accept it:",
            "  bulwark auth login --invite-code <code>",
            "",
          ].join("\n"),
        );
      });

      it("create -o json / id / terse: the full invite, its uid, the code alone", async () => {
        const [table, id, terse] = await Promise.all([
          cli("iam", "invites", "create", "--parent", org.uid, "--role", "auditor", "--ttl", "1h30m").then(ok),
          cli("iam", "invites", "create", "--parent", org.uid, "--role", VIEWER_UID, "-o", "id").then(ok),
          cli("iam", "invites", "create", "--parent", org.uid, "--role", "viewer", "-o", "terse").then(ok),
        ]);
        assert.match(table!, /Invite code/, "a table by default");
        const full = JSON.parse(
          ok(
            await cli(
              "iam",
              "invites",
              "create",
              "--parent",
              org.uid,
              "--role",
              "auditor",
              "--ttl",
              "1h30m",
              "--email",
              "dev@example.com",
              "--single-use",
              "-o",
              "json",
            ),
          ),
        );
        assert.equal(full.roleUid, auditor.uid, "the auditor role usable from acme, not globex's");
        assert.equal(full.role.name, "auditor");
        assert.equal(full.email, "dev@example.com");
        assert.equal(full.singleUse, true);
        assert.match(full.code, CODE);
        assert.equal(full.keyId, CODE.exec(full.code)![1]);
        assert.equal(Date.parse(full.expirationTime) - Date.parse(full.createTime), 90 * 60_000);
        assert.match(id, new RegExp(`^${org.uid}/[0-9a-f]{16}\\n$`));
        assert.match(terse.trimEnd(), CODE);
        assert.equal(terse.split("\n").length, 2, "one line");

        // describe: what the server stored, without the code
        const described = JSON.parse(ok(await cli("iam", "invites", "describe", full.uid, "-o", "json")));
        const { code: _code, ...rest } = full;
        assert.deepEqual(described, rest);
        const wide = ok(await cli("iam", "invites", "describe", full.uid, "-o", "wide"));
        assert.equal(
          snapshot(wide, { [full.uid]: "invite", [full.keyId]: "keyid" }),
          "ID  EXPIRATION  KEYID  ROLE  EMAIL  SINGLE-USE  CREATED\n" +
            "<invite>  <time>  <keyid>  auditor  dev@example.com  yes  <time>\n",
        );
      });

      it("list: table, wide, terse, id, --limit, and every invite without --parent", async () => {
        const team = (await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "list-team" })).body;
        const first = JSON.parse(
          ok(await cli("iam", "invites", "create", "--parent", team.uid, "--role", "viewer", "-o", "json")),
        );
        const second = JSON.parse(
          ok(
            await cli(
              "iam",
              "invites",
              "create",
              "--parent",
              team.uid,
              "--role",
              "auditor",
              "--email",
              "ops@example.com",
              "-o",
              "json",
            ),
          ),
        );
        const known = {
          [first.uid]: "first",
          [second.uid]: "second",
          [first.keyId]: "key1",
          [second.keyId]: "key2",
        };
        const [table, wide, terse, ids, limited, all] = await Promise.all(
          [
            ["--parent", team.uid],
            ["--parent", team.uid, "-o", "wide"],
            ["--parent", team.uid, "-o", "terse"],
            ["--parent", team.uid, "-o", "id"],
            ["--parent", team.uid, "-o", "id", "--limit", "1"],
            ["-o", "id"],
          ].map((args) => cli("iam", "invites", "list", ...args).then(ok)),
        );
        // newest first
        assert.equal(
          snapshot(table!, known),
          "ID  EXPIRATION  KEYID  ROLE\n<second>  <time>  <key2>  auditor\n<first>  <time>  <key1>  viewer\n",
        );
        assert.equal(
          snapshot(wide!, known),
          "ID  EXPIRATION  KEYID  ROLE  EMAIL  SINGLE-USE  CREATED\n" +
            "<second>  <time>  <key2>  auditor  ops@example.com  no  <time>\n" +
            "<first>  <time>  <key1>  viewer  no  <time>\n",
        );
        assert.equal(normalize(terse!, known), "<second>\t<time>\t<key2>\tauditor\n<first>\t<time>\t<key1>\tviewer\n");
        assert.equal(ids, `${second.uid}\n${first.uid}\n`);
        assert.equal(limited, `${second.uid}\n`);
        const everyone = all!.trim().split("\n");
        assert.ok(everyone.includes(first.uid) && everyone.length >= 6, "without --parent: every invite");
        const empty = (await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "empty" })).body;
        assert.equal(ok(await cli("iam", "invites", "list", "--parent", empty.uid)), "ID  EXPIRATION  KEYID  ROLE\n");
        assert.equal(ok(await cli("iam", "invites", "list", "--parent", empty.uid, "-o", "json")), "[]\n");
      });

      it("delete asks for --yes off a terminal, then deletes", async () => {
        const uid = ok(
          await cli("iam", "invites", "create", "--parent", org.uid, "--role", "viewer", "-o", "id"),
        ).trim();
        failed(await cli("iam", "invites", "delete", uid), 2, /Pass --yes to confirm/);
        ok(await cli("iam", "invites", "describe", uid));
        assert.equal(ok(await cli("iam", "invites", "delete", uid, "--yes")), `deleted invite ${uid}\n`);
        failed(await cli("iam", "invites", "describe", uid), 1, /^bulwark: Not found: group invite/);
        const other = ok(
          await cli("iam", "invites", "create", "--parent", org.uid, "--role", "viewer", "-o", "id"),
        ).trim();
        assert.equal(ok(await cli("iam", "invites", "delete", other, "-y", "-o", "id")), `${other}\n`);
      });

      it("errors: the server's refusals as sentences (exit 1), a wrong command line (exit 2)", async () => {
        const create = (...args: string[]) => cli("iam", "invites", "create", ...args);
        const [unknownName, unknownUid, tooLong, badEmail, badTtl, noRole, noParent] = await Promise.all([
          create("--parent", otherOrg.uid, "--role", "no-such-role"),
          create("--parent", org.uid, "--role", "0123456789abcdef0123456789abcdef01234567"),
          create("--parent", org.uid, "--role", "viewer", "--ttl", "1000h"),
          create("--parent", org.uid, "--role", "viewer", "--email", "not an email"),
          create("--parent", org.uid, "--role", "viewer", "--ttl", "7 days"),
          create("--parent", org.uid),
          create("--role", "viewer"),
        ]);
        failed(
          unknownName!,
          1,
          /^bulwark: no role named "no-such-role" is usable in group [0-9a-f]{40} \(`bulwark iam roles list` shows them\)\n$/,
        );
        failed(unknownUid!, 1, /^bulwark: Not found: role 0123456789abcdef0123456789abcdef01234567\.\n$/);
        failed(tooLong!, 1, /^bulwark: Invalid argument: ttl: must be at most 2592000s \(30 days\)\.\n$/);
        failed(badEmail!, 1, /email: "not an email" is not a valid email address/);
        failed(badTtl!, 2, /invalid duration "7 days": use e\.g\. 168h, 30m, 1h30m/);
        failed(noRole!, 2, /required option '--role <role>' not specified/);
        failed(noParent!, 2, /invites create needs a group: pass --parent/);
        // from globex, "auditor" is globex's own role: names resolve among the roles usable there
        const fromGlobex = await create("--parent", otherOrg.uid, "--role", "auditor", "-o", "json");
        assert.notEqual(JSON.parse(ok(fromGlobex)).roleUid, auditor.uid);
      });
    });

    describe("identity-providers", () => {
      let okta: any;

      it("create: the secret from a file, the default role viewer, what the server stored", async () => {
        const out = ok(
          await idp(
            "create",
            "okta",
            "--parent",
            org.uid,
            "--oidc-issuer",
            "https://acme.okta.com",
            "--oidc-client-id",
            "0oa1b2c3",
            "--oidc-client-secret-file",
            join(home.dir, "secret"),
            "--oidc-additional-scopes",
            "email,groups",
            "--description",
            "Okta for staff",
          ),
        );
        okta = JSON.parse(ok(await idp("describe", "okta", "-o", "json")));
        assert.equal(
          snapshot(out, { [okta.uid]: "okta" }),
          "ID  NAME  ISSUER  CLIENT ID  DEFAULT ROLE  DESCRIPTION\n" +
            "<okta>  okta  https://acme.okta.com  0oa1b2c3  viewer  Okta for staff\n",
        );
        assert.match(okta.uid, new RegExp(`^${org.uid}/[0-9a-f]{16}$`));
        assert.deepEqual(
          { ...okta, createTime: "t", updateTime: "t" },
          {
            uid: okta.uid,
            name: "okta",
            description: "Okta for staff",
            defaultRole: VIEWER_UID,
            oidc: { issuer: "https://acme.okta.com", clientId: "0oa1b2c3", additionalScopes: ["email", "groups"] },
            createTime: "t",
            updateTime: "t",
          },
        );
        // the server holds the secret (encrypted), and says so to no one
        const row = await server.db
          .selectFrom("identity_providers")
          .select("client_secret_encrypted")
          .where("uid", "=", okta.uid)
          .executeTakeFirstOrThrow();
        assert.ok(row.client_secret_encrypted, "a secret is stored");
      });

      it("create -o json / id, --oidc-client-secret, --default-role by name, PKCE, groups claim", async () => {
        const [json, id] = await Promise.all([
          idp(
            "create",
            "keycloak",
            "--parent",
            org.uid,
            "--oidc-issuer",
            "https://sso.acme.dev/realms/acme",
            "--oidc-client-id",
            "bulwark",
            "--oidc-client-secret",
            SECRET,
            "--oidc-groups-claim",
            "groups",
            "--oidc-pkce",
            "--oidc-correlation-rule",
            "sub",
            "--default-role",
            "auditor",
            "-o",
            "json",
          ).then(ok),
          idp(
            "create",
            "dex",
            "--parent",
            otherOrg.uid,
            "--oidc-issuer",
            "http://127.0.0.1:5556/dex",
            "--oidc-client-id",
            "dex-client",
            "-o",
            "id",
          ).then(ok),
        ]);
        const keycloak = JSON.parse(json!);
        assert.equal(keycloak.defaultRole, auditor.uid);
        assert.deepEqual(keycloak.oidc, {
          issuer: "https://sso.acme.dev/realms/acme",
          clientId: "bulwark",
          groupsClaim: "groups",
          pkceEnabled: true,
          correlationRule: "CORRELATION_RULE_SUB_EQUALS_EXTERNAL_ID",
        });
        assert.match(id!, new RegExp(`^${otherOrg.uid}/[0-9a-f]{16}\\n$`));
      });

      it("list: table, wide, terse, id, --parent, --limit, --name", async () => {
        const known = async () => {
          const all = JSON.parse(ok(await idp("list", "-o", "json"))) as { uid: string; name: string }[];
          return Object.fromEntries(all.map((p) => [p.uid, p.name]));
        };
        const names = await known();
        const [table, wide, terse, ids, limited, named, everywhere] = await Promise.all(
          [
            ["--parent", org.uid],
            ["--parent", org.uid, "-o", "wide"],
            ["--parent", org.uid, "-o", "terse"],
            ["--parent", org.uid, "-o", "id"],
            ["--parent", org.uid, "-o", "id", "--limit", "1"],
            ["--name", "dex", "-o", "id"],
            [],
          ].map((args) => idp("list", ...args).then(ok)),
        );
        // ordered by uid: compare as sets of rows under the exact header
        const rows = (text: string) => snapshot(text, names).split("\n");
        const tableRows = rows(table!);
        assert.equal(tableRows[0], "ID  NAME  ISSUER  CLIENT ID  DEFAULT ROLE  DESCRIPTION");
        assert.deepEqual(tableRows.slice(1).sort(), [
          "",
          "<keycloak>  keycloak  https://sso.acme.dev/realms/acme  bulwark  auditor",
          "<okta>  okta  https://acme.okta.com  0oa1b2c3  viewer  Okta for staff",
        ]);
        const wideRows = rows(wide!);
        assert.equal(
          wideRows[0],
          "ID  NAME  ISSUER  CLIENT ID  DEFAULT ROLE  DESCRIPTION  SCOPES  GROUPS CLAIM  PKCE  CREATED  UPDATED",
        );
        assert.deepEqual(wideRows.slice(1).sort(), [
          "",
          "<keycloak>  keycloak  https://sso.acme.dev/realms/acme  bulwark  auditor  groups  yes  <time>  <time>",
          "<okta>  okta  https://acme.okta.com  0oa1b2c3  viewer  Okta for staff  email,groups  no  <time>  <time>",
        ]);
        assert.ok(
          normalize(terse!, names)
            .split("\n")
            .includes("<okta>\tokta\thttps://acme.okta.com\t0oa1b2c3\tviewer\tOkta for staff"),
        );
        assert.equal(ids!.trim().split("\n").length, 2);
        assert.equal(limited!.trim().split("\n").length, 1);
        assert.ok(ids!.includes(limited!.trim()));
        assert.match(named!, new RegExp(`^${otherOrg.uid}/[0-9a-f]{16}\\n$`));
        assert.equal(snapshot(everywhere!, names).split("\n").length, 1 + 3 + 1, "header, three, final newline");
      });

      it("update changes only the fields given (update_mask), a new secret from a file", async () => {
        const out = ok(
          await idp(
            "update",
            okta.uid,
            "--description",
            "Okta, staff and contractors",
            "--default-role",
            "editor",
            "--oidc-additional-scopes",
            "email",
            "--oidc-client-secret-file",
            join(home.dir, "new-secret"),
          ),
        );
        assert.equal(
          snapshot(out, { [okta.uid]: "okta" }),
          "ID  NAME  ISSUER  CLIENT ID  DEFAULT ROLE  DESCRIPTION\n" +
            "<okta>  okta  https://acme.okta.com  0oa1b2c3  editor  Okta, staff and contractors\n",
        );
        const after = JSON.parse(ok(await idp("describe", okta.uid, "-o", "json")));
        assert.deepEqual(
          { ...after, updateTime: "t" },
          {
            ...okta,
            description: "Okta, staff and contractors",
            defaultRole: editorUid,
            oidc: { ...okta.oidc, additionalScopes: ["email"] },
            updateTime: "t",
          },
        );
        // by name, one field, -o id; then PKCE on and off
        assert.equal(ok(await idp("update", "okta", "--oidc-pkce", "-o", "id")), `${okta.uid}\n`);
        assert.equal(JSON.parse(ok(await idp("describe", "okta", "-o", "json"))).oidc.pkceEnabled, true);
        const off = JSON.parse(ok(await idp("update", "okta", "--no-oidc-pkce", "--name", "okta-sso", "-o", "json")));
        assert.equal(off.oidc.pkceEnabled, undefined);
        assert.equal(off.name, "okta-sso");
        assert.equal(off.oidc.clientId, "0oa1b2c3");
        failed(await idp("update", okta.uid), 2, /nothing to change/);
      });

      it("errors: a bad issuer and an unknown role refused (exit 1), missing or conflicting flags (exit 2)", async () => {
        const create = (...args: string[]) => idp("create", "bad", "--parent", org.uid, ...args);
        const [badIssuer, unknownRole, noClientId, bothSecrets, missingFile, roleUid] = await Promise.all([
          create(
            "--oidc-issuer",
            "http://idp.example.com/?tenant=1",
            "--oidc-client-id",
            "x",
            "--oidc-client-secret",
            SECRET,
          ),
          create("--oidc-issuer", "https://idp.example.com", "--oidc-client-id", "x", "--default-role", "no-such-role"),
          create("--oidc-issuer", "https://idp.example.com", "--oidc-client-secret", SECRET),
          create(
            "--oidc-issuer",
            "https://idp.example.com",
            "--oidc-client-id",
            "x",
            "--oidc-client-secret",
            SECRET,
            "--oidc-client-secret-file",
            join(home.dir, "secret"),
          ),
          create(
            "--oidc-issuer",
            "https://idp.example.com",
            "--oidc-client-id",
            "x",
            "--oidc-client-secret-file",
            "/nonexistent",
          ),
          create(
            "--oidc-issuer",
            "https://idp.example.com",
            "--oidc-client-id",
            "x",
            "--default-role",
            "0123456789abcdef0123456789abcdef01234567",
          ),
        ]);
        failed(
          badIssuer!,
          1,
          /^bulwark: Invalid argument: oidc\.issuer: must use https \(http is allowed only for 127\.0\.0\.1, localhost and \[::1\]\); oidc\.issuer: must not have a query\.\n$/,
        );
        failed(unknownRole!, 1, /^bulwark: no role named "no-such-role" is usable in group/);
        failed(noClientId!, 2, /required option '--oidc-client-id <id>' not specified/);
        failed(bothSecrets!, 2, /pass --oidc-client-secret or --oidc-client-secret-file, not both/);
        failed(missingFile!, 1, /cannot read the client secret file \/nonexistent: no such file/);
        failed(roleUid!, 1, /^bulwark: Not found: role 0123456789abcdef0123456789abcdef01234567\.\n$/);
        failed(await idp("describe", "no-such-idp"), 1, /no identity provider named "no-such-idp" is visible to you/);
      });

      it("delete asks for --yes off a terminal, then deletes (by uid or name)", async () => {
        failed(await idp("delete", okta.uid), 2, /Delete the identity provider okta-sso .* Pass --yes to confirm/);
        ok(await idp("describe", okta.uid));
        assert.equal(ok(await idp("delete", okta.uid, "--yes")), `deleted identity provider okta-sso (${okta.uid})\n`);
        failed(await idp("describe", okta.uid), 1, /^bulwark: Not found: identity provider/);
        const keycloak = ok(await idp("list", "--name", "keycloak", "-o", "id")).trim();
        assert.equal(ok(await idp("delete", "keycloak", "-y", "-o", "json")), "{}\n");
        failed(await idp("describe", keycloak), 1, /Not found/);
      });

      it("never shows the client secret", () => {
        assert.ok(idpOutputs.length > 20);
        for (const text of idpOutputs) {
          assert.ok(!text.includes(SECRET), `the secret in: ${text}`);
          assert.ok(!text.includes(NEW_SECRET), `the new secret in: ${text}`);
        }
      });
    });

    describe("account-associations", () => {
      const aa = (...args: string[]) => cli("iam", "account-associations", ...args);
      let folder: { uid: string; name: string };
      before(async () => {
        folder = (await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "cloud" })).body;
      });

      it("set creates the association (named after the group), then changes only what is given", async () => {
        const created = ok(await aa("set", org.uid, "--amazon", "123456789012"));
        assert.equal(
          snapshot(created),
          "ID  NAME  AMAZON  GOOGLE  AZURE  GITHUB  DESCRIPTION\n<acme>  acme  123456789012\n",
        );
        // by group name; google, github; amazon kept
        const updated = JSON.parse(
          ok(
            await aa(
              "set",
              "acme",
              "--google",
              "acme-prod",
              "--google-project-number",
              "123456789",
              "--github",
              "101:2001:acme-bot",
              "--github",
              "101:2002",
              "--description",
              "production accounts",
              "-o",
              "json",
            ),
          ),
        );
        assert.deepEqual(
          { ...updated, createTime: "t", updateTime: "t" },
          {
            uid: org.uid,
            name: "acme",
            description: "production accounts",
            amazon: { account: "123456789012" },
            google: { projectId: "acme-prod", projectNumber: "123456789" },
            github: {
              appInstallations: {
                "101": { installations: [{ installationId: "2001", name: "acme-bot" }, { installationId: "2002" }] },
              },
            },
            createTime: "t",
            updateTime: "t",
          },
        );
        // only the project id changes; the number stays
        const renamed = JSON.parse(ok(await aa("set", org.uid, "--google", "acme-prod-2", "-o", "json")));
        assert.deepEqual(renamed.google, { projectId: "acme-prod-2", projectNumber: "123456789" });
        assert.equal(renamed.description, "production accounts");

        const [azure, id] = await Promise.all([
          aa(
            "set",
            folder.uid,
            "--azure",
            "0b7a3c1e-8d2f-4a5b-9c6d-7e8f9a0b1c2d",
            "--azure-client-id",
            "registry=1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
            "--chainguard-service-binding",
            "ingester=team-a",
            "--name",
            "cloud accounts",
            "-o",
            "wide",
          ).then(ok),
          aa("set", otherOrg.uid, "--github", "7:8", "-o", "id").then(ok),
        ]);
        assert.equal(
          snapshot(azure!, { [folder.uid]: "cloud" }),
          "ID  NAME  AMAZON  GOOGLE  AZURE  GITHUB  DESCRIPTION  AZURE CLIENTS  CHAINGUARD  CREATED  UPDATED\n" +
            "<cloud>  cloud accounts  0b7a3c1e-8d2f-4a5b-9c6d-7e8f9a0b1c2d  registry=1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f  ingester=team-a  <time>  <time>\n",
        );
        assert.equal(id, `${otherOrg.uid}\n`);
      });

      it("describe and list: table, json, wide, terse, id, --parent, --limit", async () => {
        const known = { [folder.uid]: "cloud" };
        const [described, json, table, terse, ids, limited, all] = await Promise.all(
          [
            ["describe", "acme"],
            ["describe", folder.uid, "-o", "json"],
            ["list", "--parent", org.uid],
            ["list", "--parent", org.uid, "-o", "terse"],
            ["list", "--parent", org.uid, "-o", "id"],
            ["list", "--parent", org.uid, "-o", "id", "--limit", "1"],
            ["list", "-o", "id"],
          ].map((args) => aa(...args).then(ok)),
        );
        assert.equal(
          snapshot(described!),
          "ID  NAME  AMAZON  GOOGLE  AZURE  GITHUB  DESCRIPTION\n" +
            "<acme>  acme  123456789012  acme-prod-2 (123456789)  app 101: 2001,2002  production accounts\n",
        );
        assert.deepEqual(JSON.parse(json!).azure, {
          tenantId: "0b7a3c1e-8d2f-4a5b-9c6d-7e8f9a0b1c2d",
          clientIds: { registry: "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f" },
        });
        assert.deepEqual(JSON.parse(json!).chainguard, { serviceBindings: { ingester: "team-a" } });
        assert.equal(
          snapshot(table!, known),
          "ID  NAME  AMAZON  GOOGLE  AZURE  GITHUB  DESCRIPTION\n" +
            "<acme>  acme  123456789012  acme-prod-2 (123456789)  app 101: 2001,2002  production accounts\n" +
            "<cloud>  cloud accounts  0b7a3c1e-8d2f-4a5b-9c6d-7e8f9a0b1c2d\n",
        );
        assert.equal(
          normalize(terse!, { [org.uid]: "acme", ...known }),
          "<acme>\tacme\t123456789012\tacme-prod-2 (123456789)\t\tapp 101: 2001,2002\tproduction accounts\n" +
            "<cloud>\tcloud accounts\t\t\t0b7a3c1e-8d2f-4a5b-9c6d-7e8f9a0b1c2d\t\t\n",
        );
        assert.equal(ids, `${org.uid}\n${folder.uid}\n`);
        assert.equal(limited, `${org.uid}\n`);
        assert.deepEqual(all!.trim().split("\n").sort(), [org.uid, folder.uid, otherOrg.uid].sort());
      });

      it("check prints each configured provider's status, reason and message; exit 1 when not ready", async () => {
        const table = await aa("check", "acme");
        assert.equal(table.code, 1);
        assert.equal(table.stderr, "bulwark: not ready: amazon, google\n");
        assert.equal(
          collapse(table.stdout),
          "PROVIDER  STATUS  REASON  MESSAGE\n" +
            "amazon  NOT_READY  UNVERIFIABLE  the amazon configuration (account 123456789012) is present, but it cannot be verified from this server: it has no access to AWS\n" +
            "google  NOT_READY  UNVERIFIABLE  the google configuration (project acme-prod-2) is present, but it cannot be verified from this server: it has no access to Google Cloud\n",
        );
        const [json, id, nothing] = await Promise.all([
          aa("check", org.uid, "--azure", "-o", "json"),
          aa("check", folder.uid, "-o", "id"),
          aa("check", otherOrg.uid),
        ]);
        assert.equal(json!.code, 1);
        assert.deepEqual(JSON.parse(json!.stdout), [
          {
            provider: "azure",
            status: "CHECK_STATUS_NOT_READY",
            reason: "NOT_CONFIGURED",
            message: "the account association has no azure configuration",
          },
        ]);
        assert.equal(id!.stdout, "azure\n");
        failed(
          nothing!,
          1,
          /^bulwark: the account association of [0-9a-f]{40} has no amazon, google or azure account to check\n$/,
        );
      });

      it("unset removes the providers named, or the whole association (asking for --yes off a terminal)", async () => {
        const partial = JSON.parse(ok(await aa("unset", "acme", "--amazon", "--github", "--yes", "-o", "json")));
        assert.equal(partial.amazon, undefined);
        assert.equal(partial.github, undefined);
        assert.deepEqual(partial.google, { projectId: "acme-prod-2", projectNumber: "123456789" });
        failed(await aa("unset", org.uid), 2, /Delete the account association of [0-9a-f]{40}\? Pass --yes to confirm/);
        ok(await aa("describe", org.uid));
        assert.equal(ok(await aa("unset", org.uid, "--yes")), `deleted the account association of ${org.uid}\n`);
        failed(await aa("describe", org.uid), 1, /^bulwark: Not found: account association/);
        // removing the last provider removes the association
        assert.equal(ok(await aa("unset", otherOrg.uid, "--github", "-y", "-o", "id")), `${otherOrg.uid}\n`);
        failed(await aa("describe", otherOrg.uid), 1, /Not found/);
      });

      it("errors: the server's field violations (exit 1), nothing to set or a malformed flag (exit 2)", async () => {
        const [badAccount, badGoogle, nothing, badGithub, badPair, unknownGroup] = await Promise.all([
          aa("set", org.uid, "--amazon", "12345"),
          aa("set", org.uid, "--google", "Bad_Project"),
          aa("set", org.uid),
          aa("set", org.uid, "--github", "app-1"),
          aa("set", org.uid, "--azure-client-id", "no-equals"),
          aa("set", "no-such-group", "--amazon", "123456789012"),
        ]);
        failed(badAccount!, 1, /^bulwark: Invalid argument: amazon\.account: must be a 12-digit AWS account ID\.\n$/);
        failed(
          badGoogle!,
          1,
          /google\.project_id: must be 6 to 30 lowercase letters.*google\.project_number: is required/s,
        );
        failed(nothing!, 2, /nothing to set: pass --amazon/);
        failed(badGithub!, 2, /--github takes <app id>:<installation id>\[:<name>\], not "app-1"/);
        failed(badPair!, 2, /--azure-client-id takes <name>=<value>, not "no-equals"/);
        failed(unknownGroup!, 1, /no group named "no-such-group" is visible to you/);
      });
    });

    it("every command has an example in --help; check's documents its exit status", async () => {
      // In-process (no child per command): the same commander tree the binary builds.
      const program = new Command("bulwark");
      const iam = program.command("iam");
      registerInvites(iam);
      registerOrgSettings(iam);
      const leaves = iam.commands.flatMap((group) => group.commands.map((leaf) => [group, leaf] as const));
      assert.equal(leaves.length, 14);
      for (const [group, leaf] of leaves) {
        let help = "";
        leaf.configureOutput({ writeOut: (text) => (help += text) });
        leaf.outputHelp();
        assert.match(help, new RegExp(`\\nExamples:\\n  bulwark iam ${group.name()} ${leaf.name()}[ \\n]`), help);
      }
      const check = ok(await cli("iam", "account-associations", "check", "--help"));
      assert.match(check, /Exit status: 0 when every checked provider is READY, 1 otherwise/);
    });
  });
}
