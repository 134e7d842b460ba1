// The console's advisories, event subscriptions, deliveries and audit trail in a real Chromium, on
// the embedded database (console.ts PAGE_SUITE_BACKENDS): the advisory fixtures imported, searched
// and filtered (the counts the API answers), an advisory's timeline in time order, one opened by
// its alias and an unknown id said so; a subscription made in the console to a local receiver, an
// event caused, its delivery seen, sent again and received again; the audit trail filtered to that
// change; a viewer of one folder sees only that folder's part and no action that changes anything;
// axe on every page.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser } from "puppeteer-core";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2/groups_pb.js";
import { fixtureDocument, fixtureFiles, IMPORT_PATH, listAllAdvisories } from "../support/advisories.js";
import { ok } from "../support/assertions.js";
import { ConsolePage, PAGE_SUITE_BACKENDS, PHONE, launchBrowser } from "../support/console.js";
import { startEventReceiver, type EventReceiver } from "../support/event-receiver.js";
import {
  createGroup,
  createIdentity,
  createRoleBinding,
  createSubscription,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { query, restClient } from "../support/http.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";
import { until } from "../support/wait.js";

const GROUP_CREATED = "dev.chainguard.api.iam.group.created.v1";

/** The few browser globals the page functions here use (the test project is typed for Node, without the DOM). */
interface PageGlobals {
  location: { search: string };
  document: {
    body: { innerText: string };
    querySelector(s: string): { textContent: string | null } | null;
  };
}

/** The filters of a ListAdvisories call, as the console sends them (Connect's JSON). */
interface ListAdvisoriesBody {
  query?: string;
  latestEventType?: string;
  aliases?: string[];
}

/**
 * Resolves when the console's ListAdvisories call asking exactly what `wanted` accepts has been
 * answered: set up before the change that makes the page ask it.
 */
function advisoriesAnswered(page: ConsolePage, wanted: (body: ListAdvisoriesBody) => boolean) {
  return page.page.waitForResponse((response) => {
    if (!response.url().endsWith("/ListAdvisories")) return false;
    try {
      return wanted(JSON.parse(response.request().postData() ?? "{}") as ListAdvisoriesBody);
    } catch {
      return false;
    }
  });
}

/**
 * Waits until the URL carries `param=value` and the page says `text`, together: the list answered
 * for the filter in the URL, not the one before it (whose count may happen to be the same).
 */
async function shownFor(page: ConsolePage, param: string, value: string, text: string): Promise<void> {
  await page.page.waitForFunction(
    (p, v, t) => {
      const { location, document } = globalThis as unknown as PageGlobals;
      return new URLSearchParams(location.search).get(p) === v && document.body.innerText.includes(t);
    },
    {},
    param,
    value,
    text,
  );
}

/** Chooses `option` in the select labelled `label` once that select has it (its options load after the page). */
async function choose(page: ConsolePage, label: string, option: string): Promise<void> {
  const field = await page.byName(label, "combobox").waitHandle();
  await page.page.waitForFunction(
    (el, o) =>
      Array.from((el as unknown as { options: ArrayLike<{ textContent: string }> }).options).some(
        (e) => e.textContent === o,
      ),
    {},
    field,
    option,
  );
  await page.select(label, option);
}

for (const backend of PAGE_SUITE_BACKENDS) {
  describe(`console security and events [${backend}]`, () => {
    let server: TestServer;
    let browser: Browser;
    let api: Api;
    let org: Json;
    let receiver: EventReceiver;
    let advisories: Json[];
    /** the group the subscription journey creates (its event is delivered, then audited) */
    let causedGroup = "";

    before(async () => {
      server = await startTestServer(backend, {
        events: { allowInsecureSinks: true, deliveryBackoffMinMs: 5, deliveryBackoffMaxMs: 40, deliveryPollMs: 20 },
      });
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "console-sec");
      ok(await api.post(IMPORT_PATH, { parent: org.uid, documents: fixtureFiles().map(fixtureDocument) }), "import");
      advisories = (await listAllAdvisories(api)).items;
      receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await receiver?.close();
      await server?.close();
    });

    /** The pager's words for a list of `n` (its first page of 25). */
    const pagerOf = (n: number, noun: string) => (n === 0 ? `No ${noun}` : `1–${Math.min(n, 25)} of ${n} ${noun}`);

    it("searches and filters advisories, shows one's timeline, and opens one by its alias", async () => {
      // An advisory with several events and an alias no other advisory has.
      const aliasCount = new Map<string, number>();
      for (const a of advisories) for (const x of a.aliases ?? []) aliasCount.set(x, (aliasCount.get(x) ?? 0) + 1);
      const target = advisories.find(
        (a) =>
          a.events?.length >= 2 && (a.aliases ?? []).some((x: string) => /^CVE-/.test(x) && aliasCount.get(x) === 1),
      );
      assert.ok(target, "the fixtures hold an advisory with a unique CVE alias and two events");
      const alias = (target.aliases as string[]).find((x) => /^CVE-/.test(x) && aliasCount.get(x) === 1)!;
      const count = async (params: Record<string, string>) =>
        Number(
          ok(await api.get(`/vulnerabilities/v2/advisories${query({ ...params, page_size: 1 })}`), "count")
            .totalCount ?? 0,
        );

      const page = await ConsolePage.open(browser, server.url);
      try {
        await page.signInWithToken(server.operatorToken, "/console/advisories");
        await page.waitForText(pagerOf(advisories.length, "advisories"));
        await page.assertAccessible("the advisories page");
        await page.screenshot(`${backend}-advisories`);

        // A search by text: the package's name.
        const searched = advisoriesAnswered(
          page,
          (b) => b.query === target.artifactName && !b.latestEventType && !b.aliases?.length,
        );
        await page.fill("Search", target.artifactName);
        const byQuery = await count({ query: target.artifactName });
        await searched;
        await shownFor(page, "q", target.artifactName, pagerOf(byQuery, "advisories"));
        assert.equal(new URL(page.page.url()).searchParams.get("q"), target.artifactName);
        // A filter on top of it: the status (the newest event's kind).
        const filtered = advisoriesAnswered(
          page,
          (b) =>
            b.query === target.artifactName && b.latestEventType === "EVENT_TYPE_FILTER_FIXED" && !b.aliases?.length,
        );
        await page.select("Status (newest event)", "Fixed");
        const fixed = await count({ query: target.artifactName, latest_event_type: "EVENT_TYPE_FILTER_FIXED" });
        await filtered;
        await shownFor(page, "latest_event_type", "fixed", pagerOf(fixed, "advisories"));
        assert.equal(new URL(page.page.url()).searchParams.get("latest_event_type"), "fixed");
        // A list filter behind "More filters": the alias.
        const byAlias = advisoriesAnswered(
          page,
          (b) =>
            b.query === target.artifactName && !b.latestEventType && b.aliases?.length === 1 && b.aliases[0] === alias,
        );
        await page.select("Status (newest event)", "Any");
        await page.page.click("details.more-filters > summary");
        await page.fill("Aliases (CVE, GHSA, …)", alias);
        await byAlias;
        await shownFor(page, "aliases", alias, pagerOf(1, "advisories"));

        // The advisory: its events in time order.
        await page.click(target.advisoryId, "link");
        await page.waitForText("Timeline");
        assert.equal(new URL(page.page.url()).searchParams.get("id"), target.uid);
        const times = await page.page.$$eval(".timeline li > time", (els) =>
          els.map((e) => (e as unknown as { getAttribute(n: string): string }).getAttribute("datetime")!),
        );
        assert.equal(times.length, target.events.length);
        assert.deepEqual(times, [...times].sort(), "oldest first");
        assert.match(await page.text(), new RegExp(alias));
        await page.assertAccessible("the advisory page");
        await page.screenshot(`${backend}-advisory`);

        // By its alias, as the image pages link to it; an id no advisory has is said so.
        await page.goto(`/console/advisory?id=${encodeURIComponent(alias)}`);
        await page.waitForText(`Found by its alias ${alias}`);
        assert.equal(
          await page.page.$eval("h1", (h) => (h as unknown as { textContent: string }).textContent),
          target.advisoryId,
        );
        await page.goto("/console/advisory?id=CVE-1999-99999");
        await page.waitForText("No advisory has the id CVE-1999-99999");
        await page.assertAccessible("an unknown advisory");
        page.assertClean();
      } finally {
        await page.close();
      }

      // The busiest page on a phone.
      const phone = await ConsolePage.open(browser, server.url, PHONE);
      try {
        await phone.signInWithToken(server.operatorToken, "/console/advisories");
        await phone.waitForText(pagerOf(advisories.length, "advisories"));
        await phone.assertAccessible("the advisories page on a phone");
        await phone.screenshot(`${backend}-phone-advisories`);
        phone.assertClean();
      } finally {
        await phone.close();
      }
    });

    it("subscribes a receiver, shows the delivery of an event, redelivers it; the audit trail has the change", async () => {
      const page = await ConsolePage.open(browser, server.url);
      const grpc = operatorGrpc(server, GroupsService);
      try {
        await page.signInWithToken(server.operatorToken, "/console/subscriptions");
        await page.waitForText("No subscription here.");
        await choose(page, "Group", "console-sec");
        await page.fill("Sink URL", receiver.url);
        await page.fill("Event types", "dev.chainguard.api.iam.group.");
        await page.click("Create subscription");
        await page.waitForText(`Subscription created for ${receiver.url}`);
        await page.waitForText("dev.chainguard.api.iam.group.");
        await page.assertAccessible("the subscriptions page");
        await page.screenshot(`${backend}-subscriptions`);

        // An event: a group created through the API.
        const created = await grpc.client.createGroup({ parent: org.uid, group: { name: "console-caused" } });
        causedGroup = created.uid;
        const first = await until(
          () => receiver.accepted().find((d) => d.event.type === GROUP_CREATED && d.event.subject === causedGroup),
          "the group's creation delivered",
        );

        await page.click("Deliveries", "link");
        await page.waitForText(causedGroup);
        await until(async () => {
          if ((await page.text()).includes("HTTP 200")) return true;
          await page.click("Refresh");
          return false;
        }, "the delivery shown as delivered");
        await page.assertAccessible("the deliveries page");
        await page.screenshot(`${backend}-deliveries`);

        // Sent again: the receiver gets it a second time, with its original id.
        await page.click("Redeliver");
        await page.waitForText("1 delivery queued again.");
        await until(
          () => receiver.accepted().filter((d) => d.event.id === first.event.id).length >= 2,
          "the event received again",
        );
        // The state filter.
        await page.click("Failed", "checkbox");
        await page.waitForText("No delivery yet.");
        assert.equal(new URL(page.page.url()).searchParams.get("states"), "failed");

        // The audit trail: the change is there; filtered by type and subject.
        await page.click("Audit trail", "link");
        await page.waitForText(GROUP_CREATED);
        await page.fill("Event types", GROUP_CREATED);
        await page.fill("Subject", causedGroup);
        await page.waitForText(pagerOf(1, "events"));
        const url = new URL(page.page.url());
        assert.equal(url.searchParams.get("types"), GROUP_CREATED);
        assert.equal(url.searchParams.get("subject"), causedGroup);
        await page.assertAccessible("the audit trail");
        await page.screenshot(`${backend}-audit`);

        // Deleted behind a confirmation.
        await page.goto("/console/subscriptions");
        await page.waitForText(receiver.url);
        await page.click("Delete");
        await page.click("Delete subscription");
        await page.waitForText("No subscription here.");
        page.assertClean();
      } finally {
        grpc.close();
        await page.close();
      }
    });

    it("a viewer of one folder sees only that folder's subscriptions and events, and no action that changes them", async () => {
      const folder = await createGroup(api, org.uid, "viewer-folder");
      const identity = await createIdentity(api, org.uid, "console-viewer", "console-viewer-sub");
      await createRoleBinding(api, folder.uid, identity.uid);
      const mine = await createSubscription(api, folder.uid, `${receiver.url}/folder`);
      const theirs = await createSubscription(api, org.uid, `${receiver.url}/org`);
      const page = await ConsolePage.open(browser, server.url);
      try {
        await page.signInWithToken(await server.tokenFor(identity.uid), "/console/subscriptions");
        await page.waitForText(`${receiver.url}/folder`);
        let text = await page.text();
        assert.doesNotMatch(text, /\/org\b/, "the organization's subscription is not the viewer's to see");
        assert.doesNotMatch(text, /New subscription/);
        let actions = await page.actionNames();
        assert.ok(actions.includes("Deliveries"));
        assert.ok(!actions.some((a) => /Delete|Create/.test(a)), actions.join(", "));

        await page.click("Deliveries", "link");
        // Loaded: the subscription (its sink among its facts, which the subscriptions page has not)
        // and its deliveries (a row, or the note that there is none).
        await page.page.waitForFunction(
          (sink) => {
            const { document } = globalThis as unknown as PageGlobals;
            return (
              (document.querySelector("dl.facts")?.textContent ?? "").includes(sink) &&
              (document.querySelector("[role=region][aria-label='Deliveries'] tbody tr") !== null ||
                document.body.innerText.includes("No delivery yet."))
            );
          },
          {},
          `${receiver.url}/folder`,
        );
        actions = await page.actionNames();
        assert.ok(!actions.some((a) => /Redeliver/.test(a)), actions.join(", "));
        assert.doesNotMatch(await page.text(), /Redeliver a time range/);
        await page.assertAccessible("the deliveries page of a viewer");

        await page.goto("/console/audit");
        await page.waitForText(mine.uid);
        text = await page.text();
        assert.ok(!text.includes(theirs.uid), "an event of the organization");
        assert.ok(!text.includes(causedGroup), "an event of the organization");

        await page.goto("/console/advisories");
        await page.waitForText("No advisory matches.");
        page.assertClean();
      } finally {
        await page.close();
      }
    });
  });
}
