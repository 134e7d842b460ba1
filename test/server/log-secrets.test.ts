// No credential ever reaches the log. A server logging at debug (every line of ours and of
// Fastify's, captured as written) serves a workload over every credential path — operator tokens
// on REST and gRPC, a token exchange of an OIDC token, registry logins with Basic credentials and
// the token endpoint, a pull token, an invite created and redeemed through a browser sign-in (code
// + PKCE against an upstream that takes this server's client secret), the device flow, an
// identity provider's client secret — and refused credentials of each kind. Every secret the
// workload used or received is then looked for in the whole output: as is, its JWT signature, and
// Base64-encoded inside Basic credentials. The real `bulwark serve --upstream-client-secret` at
// debug is checked the same way.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { SignJWT } from "jose";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { atOrigin, Browser } from "../support/browser.js";
import { CliHome, runCli, serveProcess } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createRoleBinding } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { makeKey, OidcIssuer } from "../support/oidc-issuer.js";
import { bearer, startTestServer, type TestServer } from "../support/server.js";
import { UpstreamProvider } from "../support/upstream-provider.js";
import { until } from "../support/wait.js";

const VIEWER = "63921b2c44617e3f2603851537be0123af4a57d7";
const GH_SUB = "repo:acme/app:ref:refs/heads/main";
const NOWHERE = "http://127.0.0.1:9/callback";
const CLIENT_ID = "bulwark-cli";
const LAST_REQUEST = "log-secrets-last";
const s256 = (verifier: string) => createHash("sha256").update(verifier).digest("base64url");
const basic = (user: string, password: string) => Buffer.from(`${user}:${password}`).toString("base64");

/** The secrets a workload used or received, by what they are. */
class Secrets {
  readonly all = new Map<string, string>();
  add(what: string, value: string | undefined | null): void {
    assert.ok(value && value.length >= 8, `${what}: a secret was expected, got ${JSON.stringify(value)}`);
    this.all.set(`${what} #${this.all.size}`, value);
  }
  /** A username and password, and the Basic credentials they make. */
  addBasic(what: string, user: string, password: string): void {
    this.add(what, password);
    this.add(`${what} as Basic credentials`, basic(user, password));
  }
  /** Every form a secret could take in a log: itself, a JWT's signature. */
  forms(): [string, string][] {
    const out: [string, string][] = [];
    for (const [what, value] of this.all) {
      out.push([what, value]);
      const parts = value.split(".");
      if (parts.length === 3 && parts[2]!.length >= 16) out.push([`${what} (its signature)`, parts[2]!]);
    }
    return out;
  }
}

/** Asserts that `output` holds no secret and no credential header. */
function assertNoSecrets(output: string, secrets: Secrets): void {
  assert.ok(output.length > 0, "something was logged");
  for (const [what, value] of secrets.forms())
    assert.ok(!output.includes(value), `the log holds the ${what}: …${excerpt(output, value)}…`);
  assert.doesNotMatch(output, /"authorization"\s*:/i, "an Authorization header is logged");
  assert.doesNotMatch(output, /\b(Bearer|Basic) [A-Za-z0-9._~+/=-]{8,}/, "credentials are logged");
}

function excerpt(text: string, value: string): string {
  const at = text.indexOf(value);
  return text.slice(Math.max(0, at - 200), at + value.length + 50);
}

for (const backend of backends()) {
  describe(`no secret in the log (${backend})`, () => {
    let output = "";
    const secrets = new Secrets();
    let server: TestServer;
    let upstream: UpstreamProvider;
    let github: OidcIssuer;
    let home: CliHome;

    before(async () => {
      // Every line as written, at debug: ours and Fastify's own (it logs through the same logger).
      const logger = pino({ level: "debug" }, { write: (text: string) => void (output += text) });
      upstream = await UpstreamProvider.listen({ accounts: { alice: { email: "alice@example.test" } } });
      const { clientId, clientSecret } = upstream.confidentialClient;
      secrets.add("upstream client secret", clientSecret);
      server = await startTestServer(backend, {
        logger,
        defaultUpstream: { issuer: upstream.issuer, clientId, clientSecret },
      });
      await upstream.start([`${server.tokens.urls.issuer.replace(/\/$/, "")}/oauth/callback`]);
      github = await OidcIssuer.start();
      github.defaultAudience = server.url;
      home = new CliHome();
      secrets.add("operator token", server.operatorToken);
    });
    after(async () => {
      await server?.close();
      await upstream?.close();
      await github?.close();
      home?.close();
    });

    it("serves a workload over every credential path, accepted and refused", async () => {
      const api = restClient(server.url, server.operatorToken);
      const org = await createGroup(api, undefined, `secrets-${backend}`);
      const repo = `secrets-${backend}/app`;

      // Operator tokens on REST and gRPC; forged and malformed ones refused.
      assert.equal((await api.get(`/iam/v2beta1/groups/${org.uid}`)).status, 200);
      const forgedKey = await makeKey();
      const forged = await new SignJWT({ sub: OPERATOR_SUBJECT, aud: [server.url] })
        .setProtectedHeader({ alg: forgedKey.alg, kid: forgedKey.kid })
        .setIssuer(server.tokens.urls.issuer)
        .setIssuedAt()
        .setExpirationTime("1h")
        .sign(forgedKey.privateKey);
      secrets.add("forged token", forged);
      assert.equal((await restClient(server.url, forged).get(`/iam/v2beta1/groups/${org.uid}`)).status, 401);
      const garbage = randomBytes(24).toString("base64url");
      secrets.add("malformed token", garbage);
      assert.equal((await restClient(server.url, garbage).get("/iam/v2beta1/groups")).status, 401);
      for (const token of [server.operatorToken, forged]) {
        const sessionManager = new Http2SessionManager(server.url);
        const groups = createClient(
          GroupsService,
          createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(token)], sessionManager }),
        );
        try {
          const got = await groups.getGroup({ uid: org.uid }).then(
            () => "ok",
            (err: unknown) => Code[ConnectError.from(err).code],
          );
          assert.equal(got, token === forged ? "Unauthenticated" : "ok");
        } finally {
          sessionManager.abort();
        }
      }

      // A token exchange of an OIDC token; and one from an issuer the identity does not trust.
      const deployer = await api.post(`/iam/v2beta1/identities/${org.uid}`, {
        name: "deployer",
        claimMatch: { issuer: github.url, subject: GH_SUB },
      });
      assert.equal(deployer.status, 200, JSON.stringify(deployer.body));
      await createRoleBinding(api, org.uid, deployer.body.uid);
      const oidcToken = await github.githubToken();
      secrets.add("OIDC token", oidcToken);
      const exchanged = await restClient(server.url, oidcToken).get(
        `/sts/exchange?identity=${deployer.body.uid}&aud=${encodeURIComponent(server.url)}`,
      );
      assert.equal(exchanged.status, 200, JSON.stringify(exchanged.body));
      secrets.add("exchanged token", exchanged.body.token);
      const otherToken = await github.githubToken({ sub: "repo:evil/app:ref:refs/heads/main" });
      secrets.add("refused OIDC token", otherToken);
      const refusedExchange = await restClient(server.url, otherToken).get(
        `/sts/exchange?identity=${deployer.body.uid}`,
      );
      assert.equal(refusedExchange.status, 403, JSON.stringify(refusedExchange.body));

      // Registry logins: Basic with a token as the password, on /v2/ and the token endpoint; wrong passwords.
      const registryHost = server.tokens.urls.registryAudience;
      const loginToken = exchanged.body.token as string;
      secrets.addBasic("registry password", deployer.body.uid, loginToken);
      for (const path of ["/v2/", `/token?service=${registryHost}&scope=repository:${repo}:pull`]) {
        const res = await fetch(`${server.url}${path}`, {
          headers: { authorization: `Basic ${basic(deployer.body.uid, loginToken)}` },
        });
        assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
        if (path.startsWith("/token")) {
          const body = (await res.json()) as { token: string };
          secrets.add("registry token", body.token);
          const pull = await fetch(`${server.url}/v2/${repo}/tags/list`, {
            headers: { authorization: `Bearer ${body.token}` },
          });
          assert.ok([200, 404].includes(pull.status), `registry token refused: ${pull.status}`);
        }
      }
      const wrong = `wrong-${randomBytes(16).toString("base64url")}`;
      secrets.addBasic("wrong registry password", deployer.body.uid, wrong);
      for (const path of ["/v2/", `/token?scope=repository:${repo}:pull`]) {
        const res = await fetch(`${server.url}${path}`, {
          headers: { authorization: `Basic ${basic(deployer.body.uid, wrong)}` },
        });
        assert.equal(res.status, 401, path);
      }

      // A pull token, made by the CLI, used as a docker login would.
      const created = await runCli(home, ["auth", "pull-token", "create", "--parent", org.uid, "--ttl", "1h"], {
        env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken },
      });
      assert.equal(created.code, 0, created.stderr);
      const [, username, password] = /--username (\S+) --password (\S+)/.exec(created.stdout) ?? [];
      secrets.addBasic("pull token", username!, password!);
      const pulled = await fetch(`${server.url}/token?scope=repository:${repo}:pull`, {
        headers: { authorization: `Basic ${basic(username!, password!)}` },
      });
      assert.equal(pulled.status, 200);
      secrets.add("pull token's registry token", ((await pulled.json()) as { token: string }).token);

      // An identity provider with a client secret.
      const idpSecret = `idp-${randomBytes(18).toString("base64url")}`;
      secrets.add("identity provider client secret", idpSecret);
      const idp = await api.post(`/iam/v2beta1/identityProviders/${org.uid}`, {
        name: "sso",
        defaultRole: VIEWER,
        oidc: { issuer: upstream.issuer, clientId: "sso-client", clientSecret: idpSecret },
      });
      assert.equal(idp.status, 200, JSON.stringify(idp.body));

      // An invite, redeemed by a browser sign-in (code + PKCE); then the code replayed, a wrong verifier.
      const invite = await api.post(`/iam/v2beta1/groupInvites/${org.uid}`, { roleUid: VIEWER, ttl: "3600s" });
      assert.equal(invite.status, 200, JSON.stringify(invite.body));
      secrets.add("invite code", invite.body.code);
      const verifier = randomBytes(32).toString("base64url");
      secrets.add("PKCE verifier", verifier);
      const state = randomBytes(12).toString("base64url");
      const authorize = new URL("/oauth/authorize", server.tokens.urls.issuer);
      for (const [k, v] of Object.entries({
        client_id: CLIENT_ID,
        response_type: "code",
        redirect_uri: NOWHERE,
        state,
        code_challenge: s256(verifier),
        code_challenge_method: "S256",
        invite_code: invite.body.code,
      }))
        authorize.searchParams.set(k, v);
      const browser = new Browser();
      const outcome = await browser.navigate(authorize.href, { login: "alice", until: atOrigin(NOWHERE) });
      assert.equal(outcome.kind, "stopped", JSON.stringify(outcome).slice(0, 500));
      const code = (outcome as { url: URL }).url.searchParams.get("code")!;
      secrets.add("authorization code", code);
      // The upstream's own codes and this server's session cookies crossed the browser too.
      for (const url of browser.urls) {
        const upstreamCode = new URL(url).searchParams.get("code");
        if (upstreamCode && upstreamCode !== code) secrets.add("upstream authorization code", upstreamCode);
      }
      for (const value of Object.values(browser.cookiesFor(server.tokens.urls.issuer)))
        if (value.length >= 8) secrets.add("session cookie", value);
      const token = (fields: Record<string, string>) =>
        fetch(new URL("/oauth/token", server.tokens.urls.issuer), {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ client_id: CLIENT_ID, ...fields }).toString(),
        });
      const redeemed = await token({
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: NOWHERE,
      });
      assert.equal(redeemed.status, 200);
      secrets.add("signed-in access token", ((await redeemed.json()) as { access_token: string }).access_token);
      const replayed = await token({
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: NOWHERE,
      });
      assert.equal(replayed.status, 400);
      const wrongVerifier = randomBytes(32).toString("base64url");
      secrets.add("wrong PKCE verifier", wrongVerifier);
      const refused = await token({
        grant_type: "authorization_code",
        code: `forged-${randomBytes(16).toString("base64url")}`,
        code_verifier: wrongVerifier,
        redirect_uri: NOWHERE,
      });
      assert.equal(refused.status, 400);

      // The device flow: its device code polled, its user code entered.
      const device = await fetch(new URL("/oauth/device_authorization", server.tokens.urls.issuer), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ client_id: CLIENT_ID }).toString(),
      });
      assert.equal(device.status, 200);
      const { device_code, user_code } = (await device.json()) as { device_code: string; user_code: string };
      secrets.add("device code", device_code);
      secrets.add("user code", user_code.replace(/-/g, "").length >= 8 ? user_code : `${user_code}-unused`);
      const pending = await token({ grant_type: "urn:ietf:params:oauth:grant-type:device_code", device_code });
      assert.equal(pending.status, 400);
      const entered = await fetch(
        new URL(`/device?user_code=${encodeURIComponent(user_code)}`, server.tokens.urls.issuer),
        { headers: { "x-request-id": LAST_REQUEST } },
      );
      assert.ok(entered.status < 500, `device page: ${entered.status}`);
    });

    it("the log holds none of them, nor any Authorization header", async () => {
      // The last answers' lines are written once they are out.
      await until(
        () => output.includes(`"requestId":"${LAST_REQUEST}"`) || undefined,
        () => "the last request's line",
      );
      assertNoSecrets(output, secrets);
    });
  });
}

describe("no secret in the log of `bulwark serve --log-level debug --upstream-client-secret`", () => {
  let upstream: UpstreamProvider;
  let dataDir: string;
  before(async () => {
    upstream = await UpstreamProvider.listen({ accounts: { alice: { email: "alice@example.test" } } });
    dataDir = mkdtempSync(join(tmpdir(), "bulwark-log-secrets-"));
  });
  after(async () => {
    await upstream?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("neither the secret given as a flag nor one in the environment is printed", async () => {
    const { clientId, clientSecret } = upstream.confidentialClient;
    const secrets = new Secrets();
    secrets.add("upstream client secret", clientSecret);
    const serve = await serveProcess(
      [
        "--port",
        "0",
        "--data-dir",
        dataDir,
        "--log-level",
        "debug",
        "--allow-insecure-issuers",
        "--allow-private-issuer-addresses",
        "--upstream-issuer",
        upstream.issuer,
        "--upstream-client-id",
        clientId,
        "--upstream-client-secret",
        clientSecret,
      ],
      { BULWARK_KEY_ENCRYPTION_KEY: "" },
    );
    try {
      await upstream.start([`${serve.url}/oauth/callback`]);
      const verifier = randomBytes(32).toString("base64url");
      const authorize = new URL("/oauth/authorize", serve.url);
      for (const [k, v] of Object.entries({
        client_id: CLIENT_ID,
        response_type: "code",
        redirect_uri: NOWHERE,
        state: randomBytes(12).toString("base64url"),
        code_challenge: s256(verifier),
        code_challenge_method: "S256",
      }))
        authorize.searchParams.set(k, v);
      const browser = new Browser();
      const outcome = await browser.navigate(authorize.href, { login: "alice", until: atOrigin(NOWHERE) });
      assert.equal(outcome.kind, "stopped", JSON.stringify(outcome).slice(0, 500));
      const code = (outcome as { url: URL }).url.searchParams.get("code")!;
      secrets.add("authorization code", code);
      secrets.add("PKCE verifier", verifier);
      const requestId = "serve-secrets-last";
      const redeemed = await fetch(new URL("/oauth/token", serve.url), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", "x-request-id": requestId },
        body: new URLSearchParams({
          client_id: CLIENT_ID,
          grant_type: "authorization_code",
          code,
          code_verifier: verifier,
          redirect_uri: NOWHERE,
        }).toString(),
      });
      assert.equal(redeemed.status, 200);
      secrets.add("signed-in access token", ((await redeemed.json()) as { access_token: string }).access_token);
      await until(
        () => serve.lines.some((l) => l.includes(requestId)) || undefined,
        () => serve.lines.join("\n"),
      );
    } finally {
      await serve.stop();
    }
    assertNoSecrets(serve.lines.join("\n"), secrets);
  });
});
