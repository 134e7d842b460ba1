// The console's Organization pages in a real Chromium, on the embedded database (console.ts
// PAGE_SUITE_BACKENDS): an operator builds an organization with a folder, renames it, is refused
// (in the server's words) when deleting an organization that still holds a folder, creates
// identities, a role, a binding, an invite (whose code is shown once) and an identity provider, and
// edits the role; an identity bound as viewer at the folder sees only that folder and no action
// that changes anything; then everything is taken down again, folder before organization. A folder
// with more children than a page shows the rest with "Show more". axe on every page; screenshots of
// the main ones.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser } from "puppeteer-core";
import { Capability } from "../../src/gen/capabilities/capabilities_pb.js";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitiesService } from "../../src/gen/chainguard/platform/iam/v2/identities_pb.js";
import { RoleBindingsService } from "../../src/gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RolesService } from "../../src/gen/chainguard/platform/iam/v2/roles_pb.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";
import { ConsolePage, PAGE_SUITE_BACKENDS, PHONE, launchBrowser } from "../support/console.js";

/** Folders per page of the group tree (TREE_PAGE_SIZE in console/src/pages/iam/groups.tsx). */
const TREE_PAGE_SIZE = 200;

/** Actions that would change something: none may be offered to a viewer. */
const CHANGING = /^(Create|Delete|Edit|Revoke|Grant|Save|Yes, )\b(?!ed$)/;

/** The page's location, inside a function run in the page (the tests are typed without the DOM). */
interface PageLocation {
  location: { pathname: string };
}

for (const backend of PAGE_SUITE_BACKENDS) {
  describe(`console organization pages [${backend}]`, () => {
    let server: TestServer;
    let browser: Browser;
    let org = "";
    let folder = "";

    before(async () => {
      server = await startTestServer(backend);
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await server?.close();
    });

    const selectedGroup = (page: ConsolePage) => new URL(page.page.url()).searchParams.get("group") ?? "";
    const check = (page: ConsolePage, name: string) => page.byName(name, "checkbox").click();
    /** Chooses an option once the list behind it has loaded. */
    const choose = async (page: ConsolePage, label: string, option: string) => {
      await page.page.waitForFunction(
        (o) =>
          Array.from(
            (
              globalThis as unknown as { document: { querySelectorAll(s: string): ArrayLike<{ textContent: string }> } }
            ).document.querySelectorAll("option"),
          ).some((e) => e.textContent === o),
        {},
        option,
      );
      await page.select(label, option);
    };
    /** The text of the error note on the page. */
    const errorText = (page: ConsolePage) =>
      page.page.$eval(".note-error", (el) => (el as unknown as { innerText: string }).innerText);
    const confirm = async (page: ConsolePage, action: string, answer = "Yes, delete") => {
      await page.click(action);
      await page.click(answer);
    };

    it("an operator builds an organization: folder, identities, role, binding, invite, identity provider", async () => {
      const page = await ConsolePage.open(browser, server.url);
      try {
        await page.signInWithToken(server.operatorToken, "/console/groups");
        await page.waitForText("No organization yet.");
        await page.fill("Organization name", "acme");
        await page.fill("Organization description", "the acme company");
        await page.click("Create organization");
        await page.waitForText("Created acme.");
        await page.waitForText("acme (organization)");
        org = selectedGroup(page);
        assert.match(org, /^[0-9a-f]{40}$/);

        await page.fill("Folder name", "team");
        await page.click("Create folder");
        await page.waitForText("Created team.");
        await page.waitForText("team (folder)");
        folder = selectedGroup(page);
        assert.ok(folder.startsWith(`${org}/`), folder);

        await page.fill("Name", "ci-team");
        await page.click("Save");
        await page.waitForText("Saved ci-team.");
        await page.waitForText("ci-team (folder)");

        // The organization still holds the folder: the server refuses, and says why.
        await page.click("acme", "link");
        await page.waitForText("acme (organization)");
        await page.waitForText("Folders directly inside\n1");
        await confirm(page, "Delete organization");
        await page.page.waitForSelector("[data-testid=server-error]");
        assert.match(await page.text(), /Not deleted: Precondition failed: cannot delete group with .*group/);
        // The tree folds and unfolds (the state is in the URL).
        await page.click("Collapse acme");
        await page.click("Expand acme");
        await page.byName("ci-team", "link").wait();
        await page.assertAccessible("the groups page");
        await page.screenshot(`${backend}-groups`);

        await page.goto(`/console/identities?group=${encodeURIComponent(folder)}`);
        await page.waitForText("No identities.");
        await page.select("Assumed by", "OIDC tokens with matching claims");
        await page.fill("Identity name", "deployer");
        await page.fill("Issuer", "https://issuer.example.com");
        await page.fill("Subject", "deploy-.*");
        await check(page, "The subject is a regular expression");
        await page.fill("Claims", "environment=production");
        await page.click("Create identity");
        await page.waitForText(
          "OIDC tokens whose issuer is https://issuer.example.com, and subject matches /deploy-.*/, and claim environment is production",
        );
        await page.select("Assumed by", "GitHub Actions workflow");
        await page.fill("Identity name", "releaser");
        await page.fill("Repository", "acme/app");
        await page.fill("Git ref", "refs/heads/main");
        await page.click("Create identity");
        await page.waitForText("subject is repo:acme/app:ref:refs/heads/main");
        await page.waitForText("1–2 of 2 identities");
        // Bad input is refused in the server's words, naming the field.
        await page.select("Assumed by", "OIDC tokens with matching claims");
        await page.fill("Identity name", "broken");
        await page.fill("Issuer", "not a url");
        await page.fill("Subject", "x");
        await page.click("Create identity");
        await page.waitForText("Not created");
        assert.match(await errorText(page), /issuer/);
        await page.assertAccessible("the identities page");
        await page.screenshot(`${backend}-identities`);

        // The navigation carries the group chosen on one group-scoped page to the next.
        await page.click("Roles", "link");
        await page.page.waitForFunction(
          () => (globalThis as unknown as PageLocation).location.pathname === "/console/roles",
        );
        assert.equal(new URL(page.page.url()).searchParams.get("group"), folder);
        await page.waitForText("Viewer Role (built-in)");
        await page.fill("Role name", "auditor");
        await check(page, "groups.list");
        await check(page, "identity.list");
        await page.click("Create role");
        await page.waitForText("Created auditor.");
        await page.waitForText("1–1 of 1 custom roles");
        // Edit it: a capability more and a description (built-in roles offer no edit).
        assert.deepEqual(
          (await page.actionNames()).filter((n) => n.startsWith("Edit")),
          ["Edit auditor"],
        );
        await page.click("Edit auditor");
        await page.waitForText("Capabilities (2 chosen)");
        await check(page, "roles.list");
        await page.fill("Role description", "reads the folder");
        await page.assertAccessible("the roles page editing a role");
        await page.click("Save auditor");
        await page.waitForText("Saved auditor.");
        await page.waitForText("reads the folder");
        await page.waitForText("groups.list, identity.list, roles.list");
        await page.assertAccessible("the roles page");

        await page.goto(`/console/role-bindings?group=${encodeURIComponent(folder)}`);
        await page.waitForText("No bindings.");
        await choose(page, "Identity", "deployer");
        await choose(page, "Role", "viewer");
        await page.click("Grant");
        await page.waitForText("Granted viewer to deployer at ci-team.");
        await page.waitForText("1–1 of 1 bindings");
        await page.assertAccessible("the role bindings page");
        await page.screenshot(`${backend}-role-bindings`);

        await page.goto(`/console/invites?group=${encodeURIComponent(folder)}`);
        await choose(page, "Role to give", "auditor (custom)");
        await page.select("Valid for", "1 day");
        await page.click("Create invite");
        await page.waitForText("It is shown only now");
        const code = await page
          .byName("Invite code")
          .map((el) => (el as unknown as { textContent: string }).textContent)
          .wait();
        assert.ok(code.length >= 16, code);
        await page.waitForText("1–1 of 1 invites");
        await page.assertAccessible("the invites page with a new code");
        await page.click("I have copied it");
        await page.page.waitForFunction(
          (c) =>
            !(globalThis as unknown as { document: { body: { innerText: string } } }).document.body.innerText.includes(
              c,
            ),
          {},
          code,
        );
        await page.page.reload();
        await page.waitForText("1–1 of 1 invites");
        assert.ok(!(await page.text()).includes(code), "the code is never shown again");

        await page.goto(`/console/identity-providers?group=${encodeURIComponent(folder)}`);
        await page.fill("Provider name", "corp-sso");
        await page.fill("OIDC issuer", "https://login.example.com");
        await page.fill("Client ID", "console-client");
        await page.fill("Client secret", "s3cret-never-shown");
        await page.fill("Extra scopes", "email profile");
        await choose(page, "Default role", "viewer");
        await page.click("Create identity provider");
        await page.waitForText("Created corp-sso.");
        await page.waitForText("console-client");
        assert.ok(!(await page.text()).includes("s3cret-never-shown"));
        const secret = await page
          .byName("Client secret")
          .map((el) => [(el as unknown as { value: string }).value, (el as unknown as { type: string }).type])
          .wait();
        assert.deepEqual(secret, ["", "password"]);
        await page.assertAccessible("the identity providers page");
        page.assertClean();
      } finally {
        await page.close();
      }
    });

    it("an identity bound as viewer at the folder sees only that folder and no action that changes anything", async () => {
      const identities = operatorGrpc(server, IdentitiesService);
      const [deployer] = (await identities.client.listIdentities({ name: "deployer" })).identities;
      identities.close();
      assert.ok(deployer, "the identity the operator created");
      const page = await ConsolePage.open(browser, server.url);
      try {
        await page.signInWithToken(await server.tokenFor(deployer.uid), "/console/groups");
        await page.waitForText("ci-team");
        assert.ok(!(await page.text()).includes("acme"), "the organization above is not shown");
        assert.deepEqual(
          (await page.actionNames()).filter((n) => CHANGING.test(n)),
          [],
        );
        await page.click("ci-team", "link");
        await page.waitForText("ci-team (folder)");
        assert.deepEqual(
          (await page.actionNames()).filter((n) => CHANGING.test(n)),
          [],
        );
        assert.ok(!(await page.text()).includes("New folder"));
        await page.assertAccessible("the groups page of a viewer");

        const pages: [string, string][] = [
          ["identities", "deployer"],
          ["roles", "auditor"],
          ["role-bindings", "deployer"],
          ["invites", "auditor"],
          ["identity-providers", "corp-sso"],
        ];
        for (const [path, shown] of pages) {
          await page.goto(`/console/${path}?group=${encodeURIComponent(folder)}`);
          await page.waitForText(shown);
          assert.deepEqual(
            (await page.actionNames()).filter((n) => CHANGING.test(n)),
            [],
            path,
          );
        }
        await page.assertAccessible("the identity providers page of a viewer");

        // Creating an invite needs role_bindings.create as well (it grants a role): a role that
        // holds group_invites.create alone is not offered the form the server would refuse.
        const roles = operatorGrpc(server, RolesService);
        const bindings = operatorGrpc(server, RoleBindingsService);
        const inviter = await roles.client.createRole({
          parent: folder,
          role: { name: "inviter", capabilities: [Capability.CAP_IAM_GROUP_INVITES_CREATE] },
        });
        const binding = await bindings.client.createRoleBinding({
          parent: folder,
          roleBinding: { identityUid: deployer.uid, roleUid: inviter.uid },
        });
        try {
          await page.goto(`/console/invites?group=${encodeURIComponent(folder)}`);
          await page.waitForText("You may not invite to this group.");
        } finally {
          await bindings.client.deleteRoleBinding({ uid: binding.uid });
          await roles.client.deleteRole({ uid: inviter.uid });
          roles.close();
          bindings.close();
        }
        page.assertClean();
      } finally {
        await page.close();
      }

      const phone = await ConsolePage.open(browser, server.url, PHONE);
      try {
        await phone.signInWithToken(server.operatorToken, `/console/identities?group=${encodeURIComponent(folder)}`);
        await phone.waitForText("releaser");
        await phone.assertAccessible("the identities page on a phone");
        await phone.screenshot(`${backend}-phone-identities`);
        phone.assertClean();
      } finally {
        await phone.close();
      }
    });

    it("taking it down again: what the folder holds, then the folder, then the organization", async () => {
      const page = await ConsolePage.open(browser, server.url);
      const at = (path: string) => `/console/${path}?group=${encodeURIComponent(folder)}`;
      try {
        await page.signInWithToken(server.operatorToken, at("identities"));
        // Still bound: the server refuses and says so.
        await confirm(page, "Delete deployer");
        await page.page.waitForSelector("[data-testid=server-error]");
        assert.match(await errorText(page), /Not deleted: Precondition failed: cannot delete identity with .*binding/);

        await page.goto(at("role-bindings"));
        await confirm(page, "Revoke viewer from deployer", "Yes, revoke");
        await page.waitForText("Revoked viewer from deployer.");
        await page.goto(at("identities"));
        await confirm(page, "Delete deployer");
        await page.waitForText("Deleted deployer.");
        await confirm(page, "Delete releaser");
        await page.waitForText("Deleted releaser.");
        await page.goto(at("invites"));
        await page.waitForText("1–1 of 1 invites");
        await page.page.locator("td button.button-danger").click();
        await page.click("Yes, delete");
        await page.waitForText("Deleted the invite.");
        await page.goto(at("identity-providers"));
        await confirm(page, "Delete corp-sso");
        await page.waitForText("Deleted corp-sso.");
        await page.goto(at("roles"));
        await confirm(page, "Delete auditor");
        await page.waitForText("Deleted auditor.");

        await page.goto(`/console/groups?group=${encodeURIComponent(folder)}`);
        await page.waitForText("ci-team (folder)");
        await confirm(page, "Delete folder");
        await page.waitForText("Deleted ci-team.");
        await page.waitForText("acme (organization)");
        assert.equal(selectedGroup(page), org);
        await confirm(page, "Delete organization");
        await page.waitForText("Deleted acme.");
        await page.waitForText("No organization yet.");
        page.assertClean();
      } finally {
        await page.close();
      }
    });

    it("the tree shows a page of folders at a time; Show more appends the next", async () => {
      const grpc = operatorGrpc(server, GroupsService);
      let many = "";
      try {
        many = (await grpc.client.createGroup({ parent: "", group: { name: "many" } })).uid;
        const names = Array.from({ length: TREE_PAGE_SIZE + 1 }, (_, i) => `f${String(i).padStart(3, "0")}`);
        for (let i = 0; i < names.length; i += 20) {
          await Promise.all(
            names.slice(i, i + 20).map((name) => grpc.client.createGroup({ parent: many, group: { name } })),
          );
        }
      } finally {
        grpc.close();
      }
      const last = `f${String(TREE_PAGE_SIZE).padStart(3, "0")}`;
      const page = await ConsolePage.open(browser, server.url);
      try {
        await page.signInWithToken(server.operatorToken, `/console/groups?open=${encodeURIComponent(many)}`);
        await page.waitForText("(1 not shown yet)");
        const text = await page.text();
        assert.ok(text.includes("f199") && !text.includes(last), "the first page only");
        // The keyboard alone: focus the button, press Enter; focus lands on the first new folder.
        const more = await page.byName("Show more folders of many", "button").waitHandle();
        await more.focus();
        await page.page.keyboard.press("Enter");
        await page.byName(last, "link").wait();
        const focused = await page.page.evaluate(() =>
          (
            globalThis as unknown as { document: { activeElement: { getAttribute(n: string): string | null } } }
          ).document.activeElement.getAttribute("aria-label"),
        );
        assert.equal(focused, `Expand ${last}`);
        assert.ok(!(await page.text()).includes("not shown yet"), "the last page: no more to show");
        await page.assertAccessible("the groups page with a long folder list");
        page.assertClean();
      } finally {
        await page.close();
      }
    });
  });
}
