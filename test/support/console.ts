// The web console in a real browser: Debian's Chromium (/usr/bin/chromium; BULWARK_CHROMIUM to
// point elsewhere) driven by puppeteer-core, against a real server. A ConsolePage collects what a
// person would never see but a test must: uncaught page errors, failed script or style loads, and
// Content-Security-Policy refusals — `assertClean` fails on any. It signs in (a pasted token or the
// browser sign-in at the test's upstream), finds controls by their accessible names (as a screen
// reader does: a control without a name cannot be found), runs axe-core and saves screenshots
// under test-output/console/ (not committed).
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import type { Backend } from "./db-templates.js";
import { HANG_MS } from "./wait.js";

export const CHROMIUM = process.env.BULWARK_CHROMIUM ?? "/usr/bin/chromium";
/**
 * The backends the console's page suites run on: the embedded database, the one a new user starts.
 * The console is a client of the API, whose own suites run on both backends, and which one answers
 * changes nothing the browser is shown; a browser is the test run's costliest CPU (~270 s of a
 * run with every page suite on both). The shell's suite (sign-in, sessions) runs on both.
 */
export const PAGE_SUITE_BACKENDS: readonly Backend[] = ["pglite"];
export const SCREENSHOTS = join(process.cwd(), "test-output", "console");
/** A desktop and a phone. */
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844, isMobile: true, hasTouch: true, deviceScaleFactor: 2 };

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export async function launchBrowser(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Tests run as root in CI containers, where Chromium's sandbox cannot start.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"],
    protocolTimeout: HANG_MS,
  });
}

/** A failure the page reported: an exception, a failed load, a CSP refusal, a console error. */
export interface PageProblem {
  kind: "pageerror" | "requestfailed" | "console";
  text: string;
}

/** The few browser globals the page functions here use (the test project is typed for Node, without the DOM). */
interface PageElement {
  offsetParent: unknown;
  innerText: string;
  closest(selector: string): unknown;
  getAttribute(name: string): string | null;
}
interface PageGlobals {
  document: { body: { innerText: string }; querySelectorAll(selector: string): ArrayLike<PageElement> };
  sessionStorage: { length: number };
}

export class ConsolePage {
  readonly problems: PageProblem[] = [];

  private constructor(
    readonly page: Page,
    readonly baseUrl: string,
  ) {
    page.setDefaultTimeout(HANG_MS);
    // Only the console's own pages count: the upstream's sign-in pages are not ours to judge.
    const ours = (url: string) => url.startsWith(`${this.baseUrl}/`);
    page.on("pageerror", (err) => {
      if (ours(page.url())) this.problems.push({ kind: "pageerror", text: String(err) });
    });
    page.on("requestfailed", (request) => {
      // A navigation away (sign-in) aborts the page's pending calls: not a failure of the page.
      if (request.failure()?.errorText === "net::ERR_ABORTED" || !ours(page.url())) return;
      this.problems.push({ kind: "requestfailed", text: `${request.url()} ${request.failure()?.errorText}` });
    });
    page.on("console", (message) => {
      // A refused call logs "Failed to load resource: … 4xx": the page shows those in words itself.
      if (message.type() === "error" && ours(page.url()) && !/Failed to load resource/.test(message.text()))
        this.problems.push({ kind: "console", text: message.text() });
    });
  }

  static async open(browser: Browser, baseUrl: string, viewport = DESKTOP): Promise<ConsolePage> {
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await page.setViewport(viewport);
    return new ConsolePage(page, baseUrl.replace(/\/$/, ""));
  }

  /** Opens a console path and waits for the page's title (h1) to be rendered. */
  async goto(path: string): Promise<void> {
    await this.page.goto(`${this.baseUrl}${path}`, { waitUntil: "domcontentloaded" });
    await this.page.waitForSelector("h1");
  }

  /** Signs in with a pasted token (an operator's, or one minted for an identity). */
  async signInWithToken(token: string, returnTo = "/console"): Promise<void> {
    await this.goto(`/console/sign-in?return=${encodeURIComponent(returnTo)}`);
    await this.fill("API token", token);
    await this.click("Use this token");
    await this.page.waitForSelector("nav#site-nav");
  }

  /** The element whose accessible name is `name` (and role, when given). */
  byName(name: string, role?: string) {
    const escaped = name.replace(/"/g, '\\"');
    return this.page.locator(`::-p-aria([name="${escaped}"]${role ? `[role="${role}"]` : ""})`);
  }

  async click(name: string, role = "button"): Promise<void> {
    await this.byName(name, role).click();
  }

  /** Types into the field labelled `label` (its content replaced). */
  async fill(label: string, value: string): Promise<void> {
    const field = await this.byName(label).waitHandle();
    await field.evaluate((el) => {
      (el as unknown as { value: string }).value = "";
    });
    await field.type(value);
  }

  /** Chooses the option labelled `optionLabel` in the select labelled `label`. */
  async select(label: string, optionLabel: string): Promise<void> {
    const field = await this.byName(label, "combobox").waitHandle();
    const value = await field.evaluate((el, wanted) => {
      const { options } = el as unknown as { options: ArrayLike<{ label: string; text: string; value: string }> };
      return Array.from(options).find((o) => o.label === wanted || o.text === wanted)?.value;
    }, optionLabel);
    assert.ok(value !== undefined, `no option "${optionLabel}" in "${label}"`);
    await field.select(value);
  }

  /** Waits until the page's text contains `text`. */
  async waitForText(text: string): Promise<void> {
    await this.page.waitForFunction(
      (t) => (globalThis as unknown as PageGlobals).document.body.innerText.includes(t),
      {},
      text,
    );
  }

  /** The page's visible text. */
  async text(): Promise<string> {
    return this.page.evaluate(() => (globalThis as unknown as PageGlobals).document.body.innerText);
  }

  /** The accessible names of every button and link on the page. */
  async actionNames(): Promise<string[]> {
    return this.page.evaluate(() =>
      Array.from((globalThis as unknown as PageGlobals).document.querySelectorAll("button, a[href], [role=button]"))
        .filter((el) => el.offsetParent !== null || el.closest("dialog"))
        .map((el) => (el.getAttribute("aria-label") ?? el.innerText).trim()),
    );
  }

  /** Runs axe-core on the page as it is: no serious or critical violation may be found. */
  async assertAccessible(what: string): Promise<void> {
    // Evaluated through DevTools, which the page's CSP does not govern (no inline script is added).
    await this.page.evaluate(axeSource);
    const violations = await this.page.evaluate(async () => {
      const axe = (globalThis as unknown as { axe: { run(ctx: unknown): Promise<{ violations: AxeViolation[] }> } })
        .axe;
      const result = await axe.run((globalThis as unknown as PageGlobals).document);
      return result.violations
        .filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
      interface AxeViolation {
        id: string;
        impact: string;
        help: string;
        nodes: { target: string[] }[];
      }
    });
    assert.deepEqual(violations, [], `axe on ${what}`);
  }

  /** Saves a full-page screenshot as test-output/console/<name>.png. */
  async screenshot(name: string): Promise<string> {
    mkdirSync(SCREENSHOTS, { recursive: true });
    const path = join(SCREENSHOTS, `${name}.png`) as `${string}.png`;
    await this.page.screenshot({ path, fullPage: true });
    return path;
  }

  /** No uncaught error, failed load, CSP refusal or console error happened on this page. */
  assertClean(): void {
    assert.deepEqual(this.problems, [], "the page reported problems");
  }

  async close(): Promise<void> {
    await this.page.browserContext().close();
  }
}
