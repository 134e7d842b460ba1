// The console's registry pages in a real Chromium, on the embedded database (console.ts
// PAGE_SUITE_BACKENDS): images pushed with skopeo (apk packages that advisories imported into a
// public advisory group name), then the repositories list (filters, the public/private switch), a
// repository (tags, pull command, a tag's history, a tag deprecated and undeprecated), an image
// (platforms, size, the SBOM downloaded as a file, the vulnerability report with its filters and
// links to the advisory page, the comparison with another tag), and a viewer of one folder who sees
// only that folder's repositories and no switch or deprecation.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser } from "puppeteer-core";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { cgaId, fixedAdvisoriesDocument, IMPORT_PATH } from "../support/advisories.js";
import { ok } from "../support/assertions.js";
import { ConsolePage, PAGE_SUITE_BACKENDS, PHONE, launchBrowser } from "../support/console.js";
import { createGroup, VIEWER_ROLE_UID, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { apkInstalled, buildImage, osRelease, pushImage, waitForInventory } from "../support/images.js";
import { workload } from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { skopeoIn } from "../support/skopeo.js";
import { until } from "../support/wait.js";

const PACKAGE = "bulwark-console-fixture";
/** fixed in 1.1-r0: reported in v1 (1.0-r0), FIXED, no CVSS (UNKNOWN) */
const FIXED_ADVISORY = cgaId(300_001);
/** an OSV record of exactly 1.0-r0 with a CVSS 3.0 vector scoring 7.5: HIGH, NOT_FIXED */
const OSV_ID = "BULWARK-2026-0030";
const OSV_ALIAS = "CVE-2099-3030";

interface PageGlobals {
  location: { search: string };
  document: {
    body: { innerText: string };
    querySelector(s: string): { textContent: string | null } | null;
    querySelectorAll(s: string): ArrayLike<{ getAttribute(n: string): string | null; innerText: string }>;
  };
}

for (const backend of PAGE_SUITE_BACKENDS) {
  describe(`console registry pages [${backend}]`, () => {
    let server: TestServer;
    let browser: Browser;
    let work: string;
    let operator: ReturnType<typeof restClient>;
    let team: Json;
    let appUid: string;
    let registryHost: string;
    let viewerToken: string;
    const publicGroup = "3030303030303030303030303030303030303030";

    const repoUid = async (name: string) => {
      const { repos } = ok(await operator.get(`/registry/v2/repos?name=${name}`), "list repos");
      return repos[0].uid as string;
    };

    before(async () => {
      work = mkdtempSync(join(tmpdir(), "bulwark-console-registry-"));
      server = await startTestServer(backend, {
        registry: { blobDirectory: join(work, "blobs") },
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
        images: { pollIntervalMs: 100 },
      });
      operator = restClient(server.url, server.operatorToken);
      registryHost = server.tokens.urls.registryAudience;
      const acme = await createGroup(operator, undefined, "acme");
      team = await createGroup(operator, acme.uid, "team");
      const osv = {
        id: OSV_ID,
        modified: "2026-01-01T00:00:00Z",
        published: "2026-01-01T00:00:00Z",
        aliases: [OSV_ALIAS],
        summary: "The console fixture mishandles input",
        severity: [{ type: "CVSS_V3", score: "CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:H/A:N" }],
        affected: [
          { package: { ecosystem: "Wolfi", name: PACKAGE, purl: `pkg:apk/wolfi/${PACKAGE}` }, versions: ["1.0-r0"] },
        ],
      };
      const imported = ok(
        await operator.post(IMPORT_PATH, {
          parent: publicGroup,
          documents: [
            {
              name: `${PACKAGE}.advisories.yaml`,
              content: fixedAdvisoriesDocument(PACKAGE, [{ id: FIXED_ADVISORY, fixedIn: "1.1-r0" }]),
            },
            { name: `${OSV_ID}.json`, content: JSON.stringify(osv) },
          ],
        }),
        "import",
      );
      for (const r of imported.results) assert.equal(r.problem, undefined, JSON.stringify(r));

      const skopeo = skopeoIn(work);
      const creds = `_token:${await server.tokenFor(OPERATOR_SUBJECT, { audience: [registryHost] })}`;
      const host = new URL(server.url).host;
      const build = (version: string) =>
        buildImage(join(work, version), {
          created: "2026-03-04T05:06:07Z",
          layers: [
            {
              files: {
                "etc/os-release": osRelease("wolfi", "20230201"),
                "lib/apk/db/installed": apkInstalled([{ name: PACKAGE, version }]),
              },
            },
          ],
        });
      const v1 = await build("1.0-r0");
      const v2 = await build("1.1-r0");
      for (const [image, repository, tag] of [
        [v1, "acme/team/app", "v1"],
        [v1, "acme/team/app", "latest"],
        [v2, "acme/team/app", "v2"],
        [v2, "acme/team/app", "latest"],
        [v1, "acme/other", "v1"],
      ] as const) {
        const run = await pushImage(skopeo, image, { host, repository, creds, tag });
        assert.equal(run.code, 0, run.stderr);
      }
      for (const image of [v1, v2]) assert.equal((await waitForInventory(server, image.digest)).state, "done");
      appUid = await repoUid("app");
      await until(async () => {
        const { items } = ok(await operator.get(`/registry/v1/vuln_reports?repo_id=${appUid}&digest=${v1.digest}`));
        return items?.[0]?.vulnerabilities?.length === 2 ? true : undefined;
      }, "v1's report naming both advisories");

      const viewer = await workload(server, operator, team.uid, "viewer", [
        { at: team.uid, role: { uid: VIEWER_ROLE_UID, capabilities: [] } },
      ]);
      viewerToken = viewer.token;
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("an operator finds a repository, switches it public, reads its tags, history and pull command, deprecates a tag", async () => {
      const page = await ConsolePage.open(browser, server.url);
      try {
        await page.signInWithToken(server.operatorToken, "/console/repos");
        // the group picker names "acme / team" before the list has loaded: wait for the list itself
        await page.waitForText("1–2 of 2 repositories");
        const text = await page.text();
        assert.match(text, /acme \/ team/);
        assert.match(text, /\bapp\b/);
        assert.match(text, /\bother\b/);
        // each row's visibility loads after the list
        await page.waitForText("Private");
        await page.assertAccessible("the repositories");
        await page.screenshot(`${backend}-repos`);

        // exact-name filter, kept in the URL
        await page.fill("Name", "app");
        await page.waitForText("1–1 of 1 repositories");
        assert.equal(new URL(page.page.url()).searchParams.get("name"), "app");

        // public, then private again; the server agrees each time
        await page.click("Make public: app");
        await page.byName("Make private: app", "button").wait();
        const visibility = () => operator.get(`/bulwark/registry/v1/repos/${appUid}/visibility`);
        assert.equal(ok(await visibility()).public, true);
        await page.click("Make private: app");
        await page.byName("Make public: app", "button").wait();
        assert.notEqual(ok(await visibility()).public, true);

        await page.click("app", "link");
        await page.waitForText("Tags");
        await page.waitForText("latest");
        // The path names the groups once the visible groups have loaded (their uid segments until then),
        // the host once the registry has named itself.
        const expected = `^docker pull ${registryHost.replace(/\./g, "\\.")}/acme/team/app:(v1|v2|latest)$`;
        await page.page.waitForFunction(
          (source) =>
            new RegExp(source).test(
              (globalThis as unknown as PageGlobals).document.querySelector("code[aria-label='Pull command']")
                ?.textContent ?? "",
            ),
          {},
          expected,
        );
        const command = await page.page.$eval(
          "code[aria-label='Pull command']",
          (el) => (el as unknown as { textContent: string }).textContent,
        );
        assert.match(command, new RegExp(expected));
        await page.click("History of latest", "link");
        await page.waitForText("History of latest");
        // The section's title shows while the history loads: wait for its table (or its empty note).
        await page.page.waitForFunction(() => {
          const { document } = globalThis as unknown as PageGlobals;
          const section = "section[aria-label='History of latest']";
          return (
            document.querySelectorAll(`${section} tbody tr`).length > 0 ||
            (document.querySelector(section)?.textContent ?? "").includes("No moves recorded.")
          );
        });
        // latest moved from v1's image to v2's: two moves
        const moves = await page.page.evaluate(
          () =>
            Array.from(
              (globalThis as unknown as PageGlobals).document.querySelectorAll(
                "section[aria-label='History of latest'] tbody tr",
              ),
            ).length,
        );
        assert.equal(moves, 2);
        assert.equal(new URL(page.page.url()).searchParams.get("tag"), "latest");
        await page.assertAccessible("a repository");
        await page.screenshot(`${backend}-repo`);

        // v1 deprecated (after a confirmation), then undeprecated; the list and the server agree each time
        const deprecatedCell = (tag: string) =>
          page.page.evaluate((name) => {
            const { document } = globalThis as unknown as PageGlobals;
            const rows = Array.from(document.querySelectorAll("section[aria-label='Tags'] tbody tr"));
            const row = rows.find((r) => r.innerText.split("\t")[0]?.trim() === name);
            return row?.innerText.split("\t")[3]?.trim();
          }, tag);
        const v1Deprecated = async () => {
          const { tags } = ok(await operator.get(`/registry/v2/tags?uidp.childrenOf=${appUid}&name=v1`), "list v1");
          return tags[0].deprecated === true;
        };
        assert.equal(await deprecatedCell("v1"), "No");
        await page.click("Deprecate v1");
        await page.click("Yes, deprecate");
        await page.waitForText("Deprecated v1.");
        await page.byName("Undeprecate v1", "button").wait();
        assert.equal(await deprecatedCell("v1"), "Deprecated");
        assert.equal(await v1Deprecated(), true);
        await page.assertAccessible("a repository with a deprecated tag");
        await page.click("Undeprecate v1");
        await page.waitForText("v1 is no longer deprecated.");
        await page.byName("Deprecate v1", "button").wait();
        assert.equal(await deprecatedCell("v1"), "No");
        assert.equal(await v1Deprecated(), false);
        page.assertClean();
      } finally {
        await page.close();
      }
    });

    it("an image: platforms and size, the SBOM as a file, the report filtered, each finding linking to its advisory", async () => {
      const page = await ConsolePage.open(browser, server.url);
      const downloads = join(work, `downloads-${backend}`);
      mkdirSync(downloads, { recursive: true });
      try {
        await page.signInWithToken(server.operatorToken, `/console/repo?uid=${encodeURIComponent(appUid)}`);
        await page.click("v1", "link");
        await page.waitForText("linux/amd64");
        await page.waitForText(OSV_ID);
        const text = await page.text();
        assert.match(text, /\d+(\.\d)? (B|KiB)/, "a size");
        assert.match(text, /2026-03-04 05:06:07 UTC/, "the created time");
        assert.match(text, /2 findings/);

        // the SBOM, downloaded as a file by the browser
        const cdp = await page.page.createCDPSession();
        await cdp.send("Page.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
        await page.click("Download SBOM");
        await page.waitForText("Saved ");
        const file = await until(() => {
          const done = readdirSync(downloads).filter((f) => f.endsWith(".spdx.json"));
          return done.length ? done[0] : undefined;
        }, "the downloaded SBOM");
        assert.equal(file, "app-v1.spdx.json");
        const sbom = JSON.parse(readFileSync(join(downloads, file), "utf8"));
        assert.equal(sbom.spdxVersion, "SPDX-2.3");
        assert.ok(
          (sbom.packages as { name: string }[]).some((p) => p.name === PACKAGE),
          "the SBOM names the package",
        );

        // each finding links to the advisory page
        const links = await page.page.evaluate(() =>
          Array.from(
            (globalThis as unknown as PageGlobals).document.querySelectorAll(
              "section[aria-label='Vulnerabilities'] td a",
            ),
          ).map((a) => a.getAttribute("href")),
        );
        assert.deepEqual(
          links.sort(),
          [
            `/console/advisory?id=${encodeURIComponent(FIXED_ADVISORY)}`,
            `/console/advisory?id=${encodeURIComponent(OSV_ID)}`,
          ].sort(),
        );
        await page.assertAccessible("an image");
        await page.screenshot(`${backend}-image`);

        // severity narrows the report (state in the URL)
        await page.select("Severity", "High (1)");
        await page.waitForText("1 of 2 findings");
        assert.doesNotMatch(await page.text(), new RegExp(FIXED_ADVISORY));
        assert.equal(new URL(page.page.url()).searchParams.get("severity"), "HIGH");
        await page.select("Severity", "Any severity");
        await page.select("Fix state", "Fixed");
        await page.waitForText("1 of 2 findings");
        const fixedOnly = await page.text();
        assert.match(fixedOnly, new RegExp(FIXED_ADVISORY));
        assert.doesNotMatch(fixedOnly, new RegExp(OSV_ID));

        // a finding's link opens the advisory page with its id
        await page.click(FIXED_ADVISORY, "link");
        await page.page.waitForFunction(() =>
          (globalThis as unknown as PageGlobals).location.search.startsWith("?id="),
        );
        assert.equal(new URL(page.page.url()).pathname, "/console/advisory");
        assert.equal(new URL(page.page.url()).searchParams.get("id"), FIXED_ADVISORY);
        page.assertClean();
      } finally {
        await page.close();
      }
    });

    it("compares two tags on a phone: the package changed and the vulnerabilities it fixed", async () => {
      const page = await ConsolePage.open(browser, server.url, PHONE);
      try {
        await page.signInWithToken(server.operatorToken, `/console/image?repo=${encodeURIComponent(appUid)}&ref=v2`);
        await page.waitForText("linux/amd64");
        await page.waitForText("No known vulnerability.");
        await page.select("Compare with tag", "v1");
        await page.waitForText("Packages since v1");
        const text = await page.text();
        assert.equal(new URL(page.page.url()).searchParams.get("diff"), "v1");
        assert.match(text, new RegExp(PACKAGE));
        assert.match(text, /Changed/);
        assert.match(text, /1\.0-r0/);
        assert.match(text, /1\.1-r0/);
        assert.match(text, new RegExp(`${OSV_ALIAS}|${OSV_ID}`));
        // the comparison's own row says it (the "Fix state" filter also offers "Fixed")
        const compared = await page.page.$$eval("section[aria-label='Compare'] tbody tr", (trs) =>
          trs.map((tr) =>
            Array.from(
              (tr as unknown as { querySelectorAll(s: string): ArrayLike<{ textContent: string }> }).querySelectorAll(
                "td",
              ),
            ).map((td) => td.textContent),
          ),
        );
        assert.ok(
          compared.some(
            ([change, vulnerability]) =>
              change === "Fixed" && new RegExp(`${OSV_ALIAS}|${OSV_ID}`).test(vulnerability ?? ""),
          ),
          JSON.stringify(compared),
        );
        await page.assertAccessible("an image compared with another tag, on a phone");
        await page.screenshot(`${backend}-phone-image-diff`);
        page.assertClean();
      } finally {
        await page.close();
      }
    });

    it("a viewer of one folder sees its repositories only, with no switch and no deprecation", async () => {
      const page = await ConsolePage.open(browser, server.url);
      try {
        await page.signInWithToken(viewerToken, "/console/repos");
        await page.waitForText("1–1 of 1 repositories");
        const text = await page.text();
        assert.match(text, /\bapp\b/);
        assert.doesNotMatch(text, /\bother\b/);
        await page.waitForText("Private");
        const forbidden = (names: string[]) =>
          names.filter((n) => /^(Make |Delete|Deprecate|Undeprecate|Yes, )/.test(n));
        assert.deepEqual(forbidden(await page.actionNames()), []);
        await page.click("app", "link");
        await page.waitForText("latest");
        await page.waitForText("Private");
        assert.deepEqual(forbidden(await page.actionNames()), []);
        await page.click("v1", "link");
        await page.waitForText("linux/amd64");
        assert.deepEqual(forbidden(await page.actionNames()), []);
        await page.assertAccessible("an image, for a viewer");
        page.assertClean();
      } finally {
        await page.close();
      }
    });
  });
}
