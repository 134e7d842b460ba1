// `bulwark auth login | token | status | logout` as a user runs them: a real server, a real OIDC
// issuer on loopback, the CLI's commands (in-process: test/support/cli.ts), credentials in a
// private config dir.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, statSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { decodeJwt } from "jose";
import { CliHome, runCli } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { OidcIssuer } from "../support/oidc-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";

const VIEWER = "63921b2c44617e3f2603851537be0123af4a57d7";

for (const backend of backends()) {
  describe(`bulwark auth [${backend}]`, () => {
    let server: TestServer;
    let issuer: OidcIssuer;
    let cliHome: CliHome;
    /** its directory; the config dir is <home>/config */
    let home: string;
    let identity: string;
    let org: string;
    const tokenFile = () => join(home, "oidc-token");

    const cli = async (...args: string[]) => {
      const { code, stdout, stderr } = await runCli(cliHome, ["auth", ...args], {
        env: { BULWARK_API_URL: server.url },
      });
      return { code, stdout: stdout.trim(), stderr: stderr.trim() };
    };

    before(async () => {
      server = await startTestServer(backend);
      issuer = await OidcIssuer.start();
      cliHome = new CliHome();
      home = cliHome.dir;
      const api = restClient(server.url, server.operatorToken);
      org = (await api.post("/iam/v2beta1/groups", { name: "cli" })).body.uid;
      identity = (
        await api.post(`/iam/v2beta1/identities/${org}`, {
          name: "ci",
          claimMatch: { issuer: issuer.url, subject: "repo:acme/app:ref:refs/heads/main", audience: "bulwark" },
        })
      ).body.uid;
      assert.equal(
        (await api.post(`/iam/v2beta1/roleBindings/${org}`, { identityUid: identity, roleUid: VIEWER })).status,
        200,
      );
      writeFileSync(tokenFile(), await issuer.sign({ sub: "repo:acme/app:ref:refs/heads/main" }));
    });
    after(async () => {
      await issuer.close();
      await server.close();
      cliHome.close();
    });

    it("logs in with an identity token file and keeps the credentials private", async () => {
      const login = await cli("login", "--identity", identity, "--identity-token", tokenFile());
      assert.equal(login.code, 0, login.stderr);
      assert.match(login.stdout, new RegExp(`logged in as ${identity}`));
      const creds = join(home, "config", "credentials.json");
      assert.equal(statSync(creds).mode & 0o777, 0o600);
      assert.equal(statSync(join(home, "config")).mode & 0o777, 0o700);
      assert.equal(JSON.parse(readFileSync(creds, "utf8")).identityTokenFile, tokenFile());
    });

    it("prints a token the API accepts, for the identity, at most an hour long", async () => {
      const { code, stdout, stderr } = await cli("token");
      assert.equal(code, 0, stderr);
      const claims = decodeJwt(stdout);
      assert.equal(claims.sub, identity);
      assert.ok(claims.exp! - claims.iat! <= 3600);
      const res = await restClient(server.url, stdout).get(`/iam/v2beta1/groups/${org}`);
      assert.equal(res.status, 200);
    });

    it("shows who the token belongs to", async () => {
      const { code, stdout, stderr } = await cli("status");
      assert.equal(code, 0, stderr);
      assert.match(stdout, new RegExp(`subject:\\s+${identity}`));
      assert.match(stdout, /expires:\s+\d{4}-/);
      assert.match(stdout, /^GROUP ID\s+GROUP\s+ROLE\s+CAPABILITIES$/m);
      assert.match(stdout, new RegExp(`^${org}\\s+cli\\s+viewer\\s+\\S`, "m"));
    });

    it("refreshes an expiring token through the exchange, re-reading the identity token file", async () => {
      const path = join(home, "config", "credentials.json");
      const creds = JSON.parse(readFileSync(path, "utf8"));
      const old = creds.tokens[server.url].token;
      creds.tokens[server.url].expiry = new Date(Date.now() + 60_000).toISOString(); // inside the refresh margin
      writeFileSync(path, JSON.stringify(creds));
      writeFileSync(tokenFile(), await issuer.sign({ sub: "repo:acme/app:ref:refs/heads/main" })); // the platform rotated it
      const { code, stdout, stderr } = await cli("token");
      assert.equal(code, 0, stderr);
      assert.notEqual(stdout, old);
      assert.equal(decodeJwt(stdout).sub, identity);
    });

    it("gets a registry token for the same identity", async () => {
      const registry = server.tokens.urls.registryAudience;
      const { code, stdout, stderr } = await cli("token", "--audience", registry);
      assert.equal(code, 0, stderr);
      const claims = decodeJwt(stdout);
      assert.deepEqual(claims.aud, [registry]);
      assert.equal(claims.sub, identity);
    });

    it("fails clearly for a token the identity does not accept, and forgets everything on logout", async () => {
      const wrong = await issuer.sign({ sub: "repo:someone/else" });
      const denied = await cli("login", "--identity", identity, "--identity-token", wrong);
      assert.equal(denied.code, 1);
      assert.match(denied.stderr, /^bulwark: Permission denied/);
      assert.match(denied.stderr, /Check the identity uid and that its token matches/);
      assert.doesNotMatch(denied.stderr, /\n\s+at /);
      const out = await cli("logout");
      assert.equal(out.stdout, "logged out");
      assert.equal(existsSync(join(home, "config", "credentials.json")), false);
      const after = await cli("token");
      assert.equal(after.code, 1);
      assert.match(after.stderr, /not logged in: run `bulwark auth login`/);
    });
  });
}
