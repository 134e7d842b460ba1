// The v1 registry interface (chainguard.platform.registry.Registry) as v1 clients speak it:
// repos with `id` and their README inline, PUT replacing, tags with `lastUpdated`, the summary,
// end-of-life tags (none known), tag history — over REST and gRPC, onto the data v2beta1 shows.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { backends } from "../support/db-templates.js";
import { VIEWER_ROLE_UID, createIdentity, type Json } from "../support/fixtures.js";
import { assertInvalidArgument, ok } from "../support/assertions.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const ORG = "3a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
const digest = (c: string) => `sha256:${c.repeat(64)}`;

for (const backend of backends()) {
  describe(`v1 registry (${backend})`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    const connect = (method: string, body: Json) =>
      api.call("POST", `/chainguard.platform.registry.Registry/${method}`, body, { "connect-protocol-version": "1" });

    before(async () => {
      server = await startTestServer(backend, { rootGroups: [{ uid: ORG, name: "v1-registry" }] });
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server?.close());

    test("repos: create with a README, list (items, id, name), PUT replaces, prevent_existing, delete", async () => {
      const created = await api.post(`/registry/v1/repos/${ORG}`, {
        name: "app",
        description: "the app",
        readme: "# app",
        bundles: ["base"],
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.match(created.body.id, new RegExp(`^${ORG}/[0-9a-f]{16}$`));
      assert.equal(created.body.readme, "# app");
      const beta = await api.get(`/registry/v2beta1/repos/${created.body.id}`);
      assert.equal(beta.body.description, "the app");
      assert.equal((await api.get(`/registry/v2beta1/repos/${created.body.id}/readme`)).body.content, "# app");

      // Without prevent_existing the repo of that name is answered; with it, ALREADY_EXISTS.
      const again = await api.post(`/registry/v1/repos/${ORG}`, { name: "app" });
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.equal(again.body.id, created.body.id);
      assert.equal(again.body.readme, "# app");
      const refused = await connect("CreateRepo", { parentId: ORG, repo: { name: "app" }, preventExisting: true });
      assert.equal(refused.status, 409, JSON.stringify(refused.body));

      const listed = await api.get(`/registry/v1/repos?uidp.childrenOf=${ORG}`);
      assert.deepEqual(Object.keys(listed.body), ["items"]);
      assert.deepEqual(
        listed.body.items.map((r: Json) => r.id),
        [created.body.id],
      );
      assert.deepEqual((await api.get(`/registry/v1/repos?name=nope&uidp.childrenOf=${ORG}`)).body, { items: [] });
      const byId = await connect("ListRepos", { id: created.body.id });
      assert.equal(byId.body.items[0].name, "app");

      const put = await api.call("PUT", `/registry/v1/repos/${created.body.id}`, { name: "app" });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.description ?? "", "");
      assert.equal(put.body.readme ?? "", "");
      assert.deepEqual(put.body.bundles ?? [], []);
      assert.equal((await api.get(`/registry/v2beta1/repos/${created.body.id}/readme`)).body.content ?? "", "");

      const bad = await api.post(`/registry/v1/repos/${ORG}`, { name: "Bad Name" });
      const betaBad = await api.post(`/registry/v2beta1/repos/${ORG}`, { name: "Bad Name" });
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, betaBad.body);

      const synced = await api.post(`/registry/v1/repos/${ORG}`, {
        name: "mirror",
        sync_config: { source: created.body.id },
      });
      assert.equal(synced.status, 200, JSON.stringify(synced.body));
      assert.equal(synced.body.sync_config.source, created.body.id);
      const count = await api.get(`/registry/v1/repocountbysource/${created.body.id}`);
      assert.equal(count.status, 200, JSON.stringify(count.body));
      assert.equal(count.body.count, "1");
      assert.equal((await api.delete(`/registry/v1/repos/${synced.body.id}`)).status, 200);
    });

    test("overlay accounts: v1's field numbers and uint32 ids map onto v2beta1's, ids v2beta1 cannot hold are INVALID_ARGUMENT", async () => {
      const accounts = {
        run_as: "9fa7",
        users: [
          { uid: 65532, user_name: "nonroot", gid: 65533, group_name: "nonroot", shell: "/bin/sh", home_dir: "/home" },
        ],
        groups: [{ gid: 65533, group_name: "nonroot", members: ["nonroot"] }],
      };
      const created = await api.post(`/registry/v1/repos/${ORG}`, { name: "overlaid", custom_overlay: { accounts } });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.deepEqual(created.body.customOverlay.accounts, {
        runAs: "9fa7",
        users: [
          { uid: 65532, userName: "nonroot", gid: 65533, groupName: "nonroot", shell: "/bin/sh", homeDir: "/home" },
        ],
        groups: [{ gid: 65533, groupName: "nonroot", members: ["nonroot"] }],
      });
      const beta = ok(await api.get(`/registry/v2beta1/repos/${created.body.id}`));
      assert.deepEqual(beta.customOverlay.accounts, {
        runAs: "9fa7",
        users: [
          { username: "nonroot", uid: 65532, gid: 65533, groupName: "nonroot", shell: "/bin/sh", homeDir: "/home" },
        ],
        groups: [{ groupname: "nonroot", gid: 65533, members: ["nonroot"] }],
      });

      // The probe's cases: a PUT without an id, and a gid past int32 over Connect.
      const put = await api.call("PUT", `/registry/v1/repos/`, { custom_overlay: { accounts: { run_as: "9fa7" } } });
      assert.ok(put.status < 500, JSON.stringify(put.body));
      const tooBig = await connect("CreateRepo", {
        parentId: ORG,
        repo: { name: "big-gid", customOverlay: { accounts: { groups: [{ gid: 2147483648, groupName: "g" }] } } },
      });
      assert.equal(tooBig.status, 400, JSON.stringify(tooBig.body));
      assert.equal(tooBig.body.code, "invalid_argument");
      assert.deepEqual(tooBig.body.details[1].debug.fieldViolations, [
        { field: "custom_overlay.accounts.groups[0].gid", description: "must be at most 2147483647" },
      ]);
      const tooBigUser = await api.call("PUT", `/registry/v1/repos/${created.body.id}`, {
        name: "overlaid",
        custom_overlay: { accounts: { users: [{ uid: 4294967295, user_name: "u" }] } },
      });
      assertInvalidArgument(tooBigUser, "custom_overlay.accounts.users[0].uid", "uid 2^32-1", { only: true });
      const negative = await api.post(`/registry/v2beta1/repos/${ORG}`, {
        name: "negative",
        customOverlay: { accounts: { users: [{ username: "u", uid: -1 }] } },
      });
      assertInvalidArgument(negative, "custom_overlay.accounts.users[0].uid", "v2beta1 uid -1", { only: true });
    });

    test("tags: create, list with lastUpdated, deprecate by PUT, other changes refused, summary, history, EOL, delete", async () => {
      const repo = (await api.post(`/registry/v1/repos/${ORG}`, { name: "tagged" })).body;
      const make = async (name: string, d: string) => {
        const res = await api.post(`/registry/v1/tags/${repo.id}`, { name, digest: digest(d) });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return res.body;
      };
      const t1 = await make("1.2.9", "a");
      await make("1.2.10", "b");
      const latest = await make("latest", "b");
      assert.ok(latest.lastUpdated && !latest.updateTime, JSON.stringify(latest));

      const listed = await api.get(`/registry/v1/tags?uidp.childrenOf=${repo.id}`);
      assert.deepEqual(listed.body.items.map((t: Json) => t.name).sort(), ["1.2.10", "1.2.9", "latest"]);
      const byDigest = await connect("ListTags", { uidp: { childrenOf: repo.id }, digest: digest("b") });
      assert.deepEqual(byDigest.body.items.map((t: Json) => t.name).sort(), ["1.2.10", "latest"]);

      const deprecated = await api.call("PUT", `/registry/v1/tags/${t1.id}`, { ...t1, deprecated: true });
      assert.equal(deprecated.status, 200, JSON.stringify(deprecated.body));
      assert.equal(deprecated.body.deprecated, true);
      assert.equal((await api.get(`/registry/v2beta1/tags/${t1.id}`)).body.deprecated, true);
      const moved = await api.call("PUT", `/registry/v1/tags/${t1.id}`, { ...t1, digest: digest("c") });
      assert.equal(moved.status, 400, JSON.stringify(moved.body));
      assert.match(moved.body.message, /digest: cannot be changed by UpdateTag/);

      const summary = await api.get(`/registry/v1/repotagssummary/${repo.id}`);
      assert.equal(summary.status, 200, JSON.stringify(summary.body));
      assert.equal(summary.body.tagCount, "3");
      assert.equal(summary.body.latestVersion, "1.2.10");
      assert.ok(summary.body.latestTag.name);

      const history = await api.get(`/registry/v1/tags/${latest.id}/history`);
      assert.equal(history.status, 200, JSON.stringify(history.body));
      assert.deepEqual(
        history.body.items.map((h: Json) => h.digest),
        [digest("b")],
      );
      assert.ok(history.body.items[0].updateTimestamp);

      const eol = await api.get(`/registry/v1/eoltags?uidp.childrenOf=${repo.id}`);
      assert.equal(eol.status, 200, JSON.stringify(eol.body));
      assert.deepEqual(eol.body.items, []);

      assert.equal((await api.delete(`/registry/v1/tags/${t1.id}`)).status, 200);
      assert.equal((await api.get(`/registry/v2beta1/tags/${t1.id}`)).status, 404);
    });

    test("a viewer lists but cannot create; anonymous is refused", async () => {
      const viewer = await createIdentity(api, ORG, "viewer", "registry-viewer");
      await api.post(`/iam/v2beta1/roleBindings/${ORG}`, { identityUid: viewer.uid, roleUid: VIEWER_ROLE_UID });
      const as = restClient(server.url, await server.tokenFor(viewer.uid));
      assert.equal((await as.post(`/registry/v1/repos/${ORG}`, { name: "nope" })).status, 403);
      const listed = await as.get(`/registry/v1/repos?uidp.childrenOf=${ORG}`);
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      assert.ok(listed.body.items.length >= 1);
      assert.equal((await restClient(server.url).get(`/registry/v1/repos`)).status, 401);
    });
  });
}
