// The console's shell in a real Chromium, on both backends: it is served at `/` under a strict CSP
// with nothing inline; the browser sign-in (authorization code + PKCE, client bulwark-console, at
// the test's upstream OpenID Provider) returns to the page the person asked for; an operator signs
// in with a pasted token; a token's end asks for a new sign-in; sign-out; redirects the issuer
// must refuse; a phone-sized viewport; axe on every page of the shell.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser } from "puppeteer-core";
import { backends } from "../support/db-templates.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { UpstreamProvider } from "../support/upstream-provider.js";
import { ConsolePage, PHONE, launchBrowser } from "../support/console.js";

/** The page's text, inside a function run in the page (the tests are typed without the DOM). */
interface PageText {
  document: { body: { innerText: string } };
}

for (const backend of backends()) {
  describe(`console shell [${backend}]`, () => {
    let upstream: UpstreamProvider;
    let server: TestServer;
    let browser: Browser;

    before(async () => {
      upstream = await UpstreamProvider.listen();
      server = await startTestServer(backend, {
        defaultUpstream: { issuer: upstream.issuer, clientId: upstream.publicClient.clientId },
      });
      await upstream.start([`${server.tokens.urls.issuer.replace(/\/$/, "")}/oauth/callback`]);
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await upstream?.close();
      await server?.close();
    });

    it("is served at / and under /console/ with a CSP that allows nothing inline or foreign", async () => {
      for (const path of ["/", "/console", "/console/groups?group=x"]) {
        const response = await fetch(`${server.url}${path}`);
        assert.equal(response.status, 200, path);
        assert.match(response.headers.get("content-type") ?? "", /^text\/html/);
        const csp = response.headers.get("content-security-policy") ?? "";
        assert.match(csp, /(^|; )default-src 'self'(;|$)/);
        assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/);
        assert.equal(response.headers.get("x-frame-options"), "DENY");
        const html = await response.text();
        assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, "no inline script");
        assert.doesNotMatch(html, /<style|style=/, "no inline style");
        for (const [, asset] of html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)) {
          const loaded = await fetch(`${server.url}${asset}`);
          assert.equal(loaded.status, 200, asset);
          assert.match(loaded.headers.get("cache-control") ?? "", /immutable/);
        }
      }
      assert.equal((await fetch(`${server.url}/console/assets/app-nothere.js`)).status, 404);
    });

    it("the issuer sends the console's code only to its own callback on the server's origin", async () => {
      const authorize = (redirect: string) =>
        fetch(
          `${server.url}/oauth/authorize?${new URLSearchParams({
            client_id: "bulwark-console",
            response_type: "code",
            redirect_uri: redirect,
            state: "s",
            code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGEjcbZJw4E9Melho",
            code_challenge_method: "S256",
          })}`,
          { redirect: "manual" },
        );
      for (const redirect of [
        "https://evil.example/console/callback",
        `${server.url}/console/callback?next=x`,
        `${server.url}/elsewhere`,
        "http://127.0.0.1:1/console/callback",
      ]) {
        const refused = await authorize(redirect);
        assert.equal(refused.status, 400, redirect);
        assert.equal(refused.headers.get("location"), null);
      }
      const accepted = await authorize(`${server.url}/console/callback`);
      assert.equal(accepted.status, 302);
      assert.ok(accepted.headers.get("location")?.startsWith(upstream.issuer));
    });

    it("signs in through the browser sign-in and returns to the page asked for", async () => {
      const page = await ConsolePage.open(browser, server.url);
      try {
        await page.page.goto(`${server.url}/console/nowhere?x=1`);
        await page.byName("Sign in", "button").wait();
        assert.equal(new URL(page.page.url()).pathname, "/console/sign-in");
        await page.assertAccessible("the sign-in page");
        await page.screenshot(`${backend}-sign-in`);
        await Promise.all([page.page.waitForNavigation(), page.click("Sign in")]);
        // The upstream's own login and consent pages (oidc-provider's devInteractions).
        assert.ok(page.page.url().startsWith(upstream.issuer), page.page.url());
        await page.page.type("input[name=login]", "alice");
        await page.page.type("input[name=password]", "any");
        await Promise.all([page.page.waitForNavigation(), page.page.click("button[type=submit]")]);
        if (page.page.url().startsWith(upstream.issuer)) {
          await Promise.all([page.page.waitForNavigation(), page.page.click("button[type=submit]")]);
        }
        // Back on the console, at the page first asked for (which does not exist: the shell says so).
        await page.waitForText("There is no console page at");
        assert.equal(new URL(page.page.url()).pathname + new URL(page.page.url()).search, "/console/nowhere?x=1");
        await page.click("Overview", "link");
        await page.waitForText("alice@example.test");
        await page.waitForText("No role is bound to you yet.");
        await page.assertAccessible("the overview");
        await page.screenshot(`${backend}-overview`);
        // A first day: the person who signed in creates an organization and owns it.
        await page.click("Groups", "link");
        await page.fill("Organization name", "alices-org");
        await page.click("Create organization");
        await page.waitForText("Created alices-org.");
        // Without a new token: the console asks the server again once the organization is made.
        await page.click("Overview", "link");
        await page.page.waitForFunction(() =>
          /alices-org\s+owner/.test((globalThis as unknown as PageText).document.body.innerText),
        );
        // Sign-out forgets the token in this tab.
        await page.click("Sign out");
        await page.waitForText("You signed out.");
        assert.equal(await page.page.evaluate("sessionStorage.length"), 0, "nothing of the session is kept");
        page.assertClean();
      } finally {
        await page.close();
      }
    });

    it("a code issued to the console cannot be redeemed by the CLI's client id", async () => {
      const page = await ConsolePage.open(browser, server.url);
      try {
        // The console's own token request is held back: the test takes its code and verifier.
        await page.page.setRequestInterception(true);
        let held: URLSearchParams | undefined;
        page.page.on("request", (request) => {
          if (new URL(request.url()).pathname === "/oauth/token" && request.method() === "POST") {
            held = new URLSearchParams(request.postData() ?? "");
            void request.abort();
          } else void request.continue();
        });
        await page.goto("/console/sign-in");
        await Promise.all([page.page.waitForNavigation(), page.click("Sign in")]);
        await page.page.type("input[name=login]", "carol");
        await page.page.type("input[name=password]", "any");
        await Promise.all([page.page.waitForNavigation(), page.page.click("button[type=submit]")]);
        if (page.page.url().startsWith(upstream.issuer)) {
          await Promise.all([page.page.waitForNavigation(), page.page.click("button[type=submit]")]);
        }
        // The console says its sign-in did not finish (its token request never got an answer).
        await page.waitForText("The sign-in did not finish");
        assert.equal(held?.get("client_id"), "bulwark-console");
        const pending = { verifier: held.get("code_verifier")!, redirectUri: held.get("redirect_uri")! };
        const callback = { searchParams: held };
        const asCli = await fetch(`${server.url}/oauth/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            grant_type: "authorization_code",
            client_id: "bulwark-cli",
            code: callback!.searchParams.get("code")!,
            code_verifier: pending.verifier,
            redirect_uri: pending.redirectUri,
          }),
        });
        assert.equal(asCli.status, 400);
        assert.equal(((await asCli.json()) as { error: string }).error, "invalid_grant");
      } finally {
        await page.close();
      }
    });

    it("an operator signs in with a pasted token; a wrong token is refused in the server's words", async () => {
      const page = await ConsolePage.open(browser, server.url);
      try {
        await page.goto("/console/sign-in");
        await page.fill("API token", "not-a-token");
        await page.click("Use this token");
        const error = await page.page.waitForSelector("[data-testid=server-error]");
        const shown = await error!.evaluate((el) => el.textContent);
        // Word for word what the API answers the same call over REST.
        const answer = await fetch(`${server.url}/auth/v1/ok`, { headers: { authorization: "Bearer not-a-token" } });
        assert.equal(answer.status, 401);
        assert.equal(shown, ((await answer.json()) as { message: string }).message);
        await page.signInWithToken(server.operatorToken);
        await page.waitForText("the platform operator");
        assert.ok((await page.actionNames()).includes("Sign out"));
      } finally {
        await page.close();
      }
    });

    it("when the token ends, the console asks for a new sign-in and keeps the page to return to", async () => {
      const page = await ConsolePage.open(browser, server.url);
      try {
        // Long enough to be typed in and checked on a busy machine; its end is then waited for.
        const shortLived = await server.tokenFor("bulwark:operator", { lifetimeMs: 15_000 });
        await page.signInWithToken(shortLived, "/console?tab=1");
        await page.waitForText("Session ends in");
        // The event waited on is the page's own: no clock is asserted.
        await page.waitForText("Your session has ended. Sign in again to continue.");
        const url = new URL(page.page.url());
        assert.equal(url.pathname, "/console/sign-in");
        assert.equal(url.searchParams.get("return"), "/console?tab=1");
        page.assertClean();
      } finally {
        await page.close();
      }
    });

    it("is usable from the keyboard alone: skip link, navigation, a form submitted with Enter", async () => {
      const page = await ConsolePage.open(browser, server.url);
      const focused = () =>
        page.page.evaluate(
          `(document.activeElement?.getAttribute("aria-label") ?? document.activeElement?.textContent ?? "").trim()`,
        );
      try {
        await page.signInWithToken(server.operatorToken);
        await page.page.keyboard.press("Tab");
        assert.equal(await focused(), "Skip to content");
        // Tab through the top bar and the navigation to the Groups link, then follow it.
        for (let i = 0; i < 20 && (await focused()) !== "Groups"; i++) await page.page.keyboard.press("Tab");
        assert.equal(await focused(), "Groups");
        await page.page.keyboard.press("Enter");
        await page.waitForText("New organization");
        assert.equal(new URL(page.page.url()).pathname, "/console/groups");
        // The new page's title takes the focus (not the link left behind), for screen readers.
        assert.equal(await page.page.evaluate("document.activeElement?.tagName"), "H1");
        assert.equal(await focused(), "Groups");
        await page.byName("Organization name").click();
        await page.page.keyboard.type("keyboard-org");
        await page.page.keyboard.press("Enter");
        await page.waitForText("Created keyboard-org.");
        page.assertClean();
      } finally {
        await page.close();
      }
    });

    it("works on a phone-sized screen: the navigation folds behind a menu button", async () => {
      const page = await ConsolePage.open(browser, server.url, PHONE);
      try {
        await page.signInWithToken(server.operatorToken);
        const nav = await page.page.$("nav#site-nav");
        assert.equal(await nav!.isVisible(), false);
        await page.click("Menu");
        assert.equal(await nav!.isVisible(), true);
        await page.assertAccessible("the overview on a phone");
        await page.screenshot(`${backend}-phone-overview`);
        page.assertClean();
      } finally {
        await page.close();
      }
    });
  });
}
