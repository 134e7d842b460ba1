// The registry's Repos and Tags API (chainguard.platform.registry.v2beta1) and its documented
// extension (bulwark.registry.v1.RegistryExtensionsService) over REST, with gRPC calls, on every
// backend: the documented tutorial, each RPC's rules, list filters and paging, validation and
// AIP-193 errors, a viewer's access, repo visibility, tag deprecation, and what deletes do.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { RegistryExtensionsService } from "../../src/gen/bulwark/registry/v1/visibility_pb.js";
import { ReposService } from "../../src/gen/chainguard/platform/registry/v2beta1/repos_pb.js";
import { TagsService } from "../../src/gen/chainguard/platform/registry/v2beta1/tags_pb.js";
import { REPO_NAME_COMPONENT } from "../../src/registry/names.js";
import { backends } from "../support/db-templates.js";
import { VIEWER_ROLE_UID, createGroup, type Api, type Json } from "../support/fixtures.js";
import { query, restClient, type JsonResponse } from "../support/http.js";
import {
  assertInvalidArgument,
  assertNotFound,
  assertPermissionDenied,
  assertRpcError,
  literally,
  ok,
} from "../support/assertions.js";
import { workload } from "../support/principals.js";
import { bearer, startTestServer, type TestServer } from "../support/server.js";
import { clockPast } from "../support/wait.js";

const DIGEST_A = `sha256:${"a".repeat(64)}`;
const DIGEST_B = `sha256:${"b".repeat(64)}`;
const DIGEST_512 = `sha512:${"c".repeat(128)}`;

const REPOS = "/registry/v2beta1/repos";
const TAGS = "/registry/v2beta1/tags";
const EXT = "/bulwark/registry/v1";

const uids = (items: Json[]) => items.map((x) => x.uid as string);
const sorted = (xs: string[]) => [...xs].sort();

for (const backend of backends()) {
  describe(`registry Repos and Tags API [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    let org: Json;

    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "acme");
    });
    after(() => server?.close());

    const createRepo = async (parent: string, body: Json) => ok(await api.post(`${REPOS}/${parent}`, body), "repo");
    const createTag = async (repo: string, name: string, digest = DIGEST_A, extra: Json = {}) =>
      ok(await api.post(`${TAGS}/${repo}`, { name, digest, ...extra }), `tag ${name}`);
    const listRepos = async (params: Record<string, string | number | undefined>) =>
      ok(await api.get(REPOS + query(params)), "list repos");
    const listTags = async (params: Record<string, string | number | undefined>) =>
      ok(await api.get(TAGS + query(params)), "list tags");

    it("the documented tutorial: a repo in the organization, then a tag in the repo", async () => {
      const repo = await createRepo(org.uid, { name: "tutorial/app" });
      assert.match(repo.uid, new RegExp(`^${org.uid}/[0-9a-f]{16}$`));
      assert.match(repo.createTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.deepEqual(repo, {
        uid: repo.uid,
        name: "tutorial/app",
        description: "",
        catalogTier: "CATALOG_TIER_UNSPECIFIED",
        bundles: [],
        aliases: [],
        activeTags: [],
        createTime: repo.createTime,
        updateTime: repo.createTime,
      });
      assert.deepEqual(ok(await api.get(`${REPOS}/${repo.uid}`)), repo);

      const tag = await createTag(repo.uid, "latest");
      assert.match(tag.uid, new RegExp(`^${repo.uid}/[0-9a-f]{16}$`));
      assert.deepEqual(tag, {
        uid: tag.uid,
        name: "latest",
        digest: DIGEST_A,
        updateTime: tag.updateTime,
        deprecated: false,
        bundles: [],
      });
      assert.deepEqual(ok(await api.get(`${TAGS}/${tag.uid}`)), tag);
      // the database recorded the tag's first digest
      const history = await server.db
        .selectFrom("tag_history")
        .select(["tag", "digest"])
        .where("repo_uid", "=", repo.uid)
        .execute();
      assert.deepEqual(history, [{ tag: "latest", digest: DIGEST_A }]);
    });

    it("a repo keeps every writable field; output-only ones are ignored; sync_config keeps its JSON key", async () => {
      const repo = await createRepo(org.uid, {
        uid: "ignored",
        name: "fields",
        description: "all of them",
        catalogTier: "CATALOG_TIER_BASE",
        bundles: ["base"],
        aliases: ["fields-alias"],
        activeTags: ["latest", "1.0"],
        sync_config: { source: "cgr.dev/acme/fields", google: "gcp", uniqueTags: true, gracePeriod: true },
        customOverlay: { environment: { A: "b" }, contents: { packages: ["curl"] } },
        createTime: "2001-01-01T00:00:00Z",
      });
      assert.notEqual(repo.uid, "ignored");
      assert.notEqual(repo.createTime, "2001-01-01T00:00:00.000Z");
      assert.equal(repo.catalogTier, "CATALOG_TIER_BASE");
      assert.deepEqual([repo.bundles, repo.aliases, repo.activeTags], [["base"], ["fields-alias"], ["latest", "1.0"]]);
      assert.equal(repo.sync_config.source, "cgr.dev/acme/fields");
      assert.equal(repo.sync_config.google, "gcp");
      assert.equal(repo.sync_config.uniqueTags, false, "output only");
      assert.equal(repo.sync_config.gracePeriod, false, "output only");
      assert.ok(!("syncConfig" in repo));
      assert.deepEqual(repo.customOverlay.environment, { A: "b" });
      assert.deepEqual(repo.customOverlay.contents.packages, ["curl"]);
      assert.deepEqual(ok(await api.get(`${REPOS}/${repo.uid}`)), repo);
      assertInvalidArgument(
        await api.post(`${REPOS}/${org.uid}`, { name: "nosource", sync_config: { google: "x" } }),
        "sync_config.source",
        "sync_config without source",
      );
      assertInvalidArgument(
        await api.post(`${REPOS}/${org.uid}`, { name: "tier", catalogTier: 99 }),
        "catalog_tier",
        "unknown tier",
      );
    });

    it("UpdateRepo changes the fields present (or masked), keeps the rest, and renames only to a free valid name", async () => {
      const repo = await createRepo(org.uid, { name: "upd", description: "before", bundles: ["x"] });
      await createRepo(org.uid, { name: "taken" });
      const described = ok(await api.patch(`${REPOS}/${repo.uid}`, { description: "after" }));
      assert.equal(described.description, "after");
      assert.equal(described.name, "upd");
      assert.deepEqual(described.bundles, ["x"]);
      assert.equal(described.createTime, repo.createTime);
      assert.ok(described.updateTime >= repo.updateTime);

      // with a mask, only the masked fields change; other fields of the body are ignored
      const renamed = ok(await api.patch(`${REPOS}/${repo.uid}?updateMask=name`, { name: "upd2", description: "no" }));
      assert.equal(renamed.name, "upd2");
      assert.equal(renamed.description, "after");

      const taken = await api.patch(`${REPOS}/${repo.uid}`, { name: "taken" });
      const body = assertRpcError(taken, 409, 6, "rename onto a taken name");
      assert.equal(body.message, 'Already exists: a repo named "taken" already exists in this group');
      assertInvalidArgument(await api.patch(`${REPOS}/${repo.uid}`, { name: "Bad Name" }), "name", "invalid rename");
      assertInvalidArgument(
        await api.patch(`${REPOS}/${repo.uid}?updateMask=bogus`, { name: "x" }),
        "update_mask",
        "unknown mask path",
      );
      assertNotFound(await api.patch(`${REPOS}/${org.uid}/0123456789abcdef`, { description: "x" }), "update missing");
      assert.equal(ok(await api.get(`${REPOS}/${repo.uid}`)).name, "upd2");
    });

    it("repo names follow the OCI path grammar; tag names and digests theirs (AIP-193 bodies)", async () => {
      for (const name of [
        "",
        "Upper",
        "a//b",
        "/lead",
        "trail/",
        "-dash",
        "dash-",
        "a..b",
        "sp ace",
        "a".repeat(256),
      ]) {
        assertInvalidArgument(
          await api.post(`${REPOS}/${org.uid}`, { name }),
          "name",
          `repo name ${JSON.stringify(name)}`,
          { description: literally(name === "" ? "is required" : `^${REPO_NAME_COMPONENT}$`) },
        );
      }
      for (const name of ["a", "a.b-c__d/e--f/g_h", "x".repeat(255)]) await createRepo(org.uid, { name });

      const repo = await createRepo(org.uid, { name: "grammar" });
      for (const name of ["", ".dot", "-dash", "has space", "t".repeat(129), "ümlaut"]) {
        assertInvalidArgument(await api.post(`${TAGS}/${repo.uid}`, { name, digest: DIGEST_A }), "name", `tag ${name}`);
      }
      for (const digest of [
        "",
        "sha256:abc",
        `sha256:${"A".repeat(64)}`,
        `md5:${"a".repeat(32)}`,
        `sha512:${"a".repeat(64)}`,
      ]) {
        assertInvalidArgument(
          await api.post(`${TAGS}/${repo.uid}`, { name: "ok", digest }),
          "digest",
          `digest ${digest}`,
        );
      }
      // both rules at once: both named
      const both = await api.post(`${TAGS}/${repo.uid}`, { name: ".x", digest: "nope" });
      assertInvalidArgument(both, "name", "both");
      assert.match(both.body.message, /digest: /);
      await createTag(repo.uid, "_ok.1-2", DIGEST_512);
      await createTag(repo.uid, "T".repeat(128));
    });

    it("ALREADY_EXISTS for a repo name taken in the group or a tag name taken in the repo; NOT_FOUND for missing parents", async () => {
      const dup = await createRepo(org.uid, { name: "dup" });
      const again = await api.post(`${REPOS}/${org.uid}`, { name: "dup" });
      const body = assertRpcError(again, 409, 6, "same repo name");
      assert.equal(body.details[0].reason, "ALREADY_EXISTS");
      assert.equal(body.message, 'Already exists: a repo named "dup" already exists in this group');
      // the same name in another group is another repo
      const team = await createGroup(api, org.uid, "team");
      await createRepo(team.uid, { name: "dup" });

      await createTag(dup.uid, "v1");
      const tagAgain = await api.post(`${TAGS}/${dup.uid}`, { name: "v1", digest: DIGEST_B });
      assert.equal(
        assertRpcError(tagAgain, 409, 6, "same tag").message,
        'Already exists: a tag named "v1" already exists in this repo',
      );

      const missingGroup = `${org.uid}/0123456789abcdef`;
      assertNotFound(await api.post(`${REPOS}/${missingGroup}`, { name: "x" }), "repo in a missing group");
      assertNotFound(
        await api.post(`${TAGS}/${missingGroup}`, { name: "x", digest: DIGEST_A }),
        "tag in a missing repo",
      );
      // a group is not a repo
      assertNotFound(await api.post(`${TAGS}/${team.uid}`, { name: "x", digest: DIGEST_A }), "tag in a group");
      assertNotFound(await api.get(`${REPOS}/${missingGroup}`), "get missing repo");
      assertNotFound(await api.get(`${TAGS}/${dup.uid}/0123456789abcdef`), "get missing tag");
      assertNotFound(await api.delete(`${TAGS}/${dup.uid}/0123456789abcdef`), "delete missing tag");
      assertInvalidArgument(await api.get(`${REPOS}/not-a-uid`), "uid", "malformed uid");
    });

    it("README: get and patch (the repo counts as updated)", async () => {
      const repo = await createRepo(org.uid, { name: "readme" });
      assert.deepEqual(ok(await api.get(`${REPOS}/${repo.uid}/readme`)), { uid: repo.uid, content: "" });
      const text = "# Readme\n\nUse it `like this`.\n".repeat(20);
      assert.deepEqual(ok(await api.patch(`${REPOS}/${repo.uid}/readme`, { content: text })), {
        uid: repo.uid,
        content: text,
      });
      assert.deepEqual(ok(await api.get(`${REPOS}/${repo.uid}/readme`)), { uid: repo.uid, content: text });
      // nothing present: nothing changes
      assert.equal(ok(await api.patch(`${REPOS}/${repo.uid}/readme`, {})).content, text);
      // the README is not part of the repo
      const after = ok(await api.get(`${REPOS}/${repo.uid}`));
      assert.ok(!("readme" in after) && !("content" in after));
      assert.ok(after.updateTime >= repo.updateTime);
      assertNotFound(await api.get(`${REPOS}/${org.uid}/0123456789abcdef/readme`), "missing repo's readme");
    });

    it("ListRepos: uidp, name, paging, order, skip, totalCount", async () => {
      const group = await createGroup(api, org.uid, "listing");
      const other = await createGroup(api, org.uid, "listing other");
      const names = ["delta", "alpha", "charlie", "bravo", "echo"];
      const made: Json[] = [];
      for (const name of names) made.push(await createRepo(group.uid, { name }));
      await createRepo(other.uid, { name: "alpha" });

      const all = await listRepos({ "uidp.childrenOf": group.uid });
      assert.deepEqual(uids(all.repos), sorted(uids(made)));
      assert.equal(all.totalCount, "5");
      assert.equal(all.skipped, 0);
      assert.ok(!("nextPageToken" in all));

      const byName = await listRepos({ "uidp.descendants_of": org.uid, name: "alpha" });
      assert.equal(byName.repos.length, 2);
      assert.ok(byName.repos.every((r: Json) => r.name === "alpha"));
      assert.deepEqual((await listRepos({ "uidp.childrenOf": group.uid, name: "alph" })).repos, []);

      const ordered = await listRepos({ "uidp.childrenOf": group.uid, orderBy: "name desc" });
      assert.deepEqual(
        ordered.repos.map((r: Json) => r.name),
        [...names].sort().reverse(),
      );

      const walked: string[] = [];
      let token: string | undefined;
      let pages = 0;
      do {
        const page = await listRepos({ "uidp.childrenOf": group.uid, orderBy: "name", pageSize: 2, pageToken: token });
        assert.equal(page.totalCount, "5");
        walked.push(...page.repos.map((r: Json) => r.name));
        token = page.nextPageToken;
        pages++;
      } while (token);
      assert.equal(pages, 3);
      assert.deepEqual(walked, [...names].sort());

      const skipped = await listRepos({ "uidp.childrenOf": group.uid, orderBy: "name", skip: 3 });
      assert.deepEqual(
        skipped.repos.map((r: Json) => r.name),
        ["delta", "echo"],
      );
      assert.equal(skipped.skipped, 3);
      assertInvalidArgument(await api.get(REPOS + query({ orderBy: "description" })), "order_by", "unsortable");
    });

    it("ListTags: children of a repo, descendants of a group, name, digest, updatedSince, paging, order, skip", async () => {
      const group = await createGroup(api, org.uid, "tagging");
      const repo = await createRepo(group.uid, { name: "tagged" });
      const sibling = await createRepo(group.uid, { name: "sibling" });
      const early = [await createTag(repo.uid, "v1", DIGEST_A), await createTag(repo.uid, "v2", DIGEST_B)];
      await clockPast(early[1]!.updateTime); // the later tags are updated after these
      const late = [await createTag(repo.uid, "latest", DIGEST_B), await createTag(repo.uid, "v3", DIGEST_512)];
      const elsewhere = await createTag(sibling.uid, "v1", DIGEST_A);
      const mine = [...early, ...late];

      const children = await listTags({ "uidp.childrenOf": repo.uid });
      assert.deepEqual(uids(children.tags), sorted(uids(mine)));
      assert.equal(children.totalCount, "4");
      const below = await listTags({ "uidp.descendantsOf": group.uid });
      assert.deepEqual(uids(below.tags), sorted(uids([...mine, elsewhere])));
      // a group has no tags as children
      assert.deepEqual((await listTags({ "uidp.childrenOf": group.uid })).tags, []);

      assert.deepEqual(
        uids((await listTags({ "uidp.descendantsOf": group.uid, name: "v1" })).tags),
        sorted([early[0]!.uid, elsewhere.uid]),
      );
      assert.deepEqual(
        uids((await listTags({ "uidp.childrenOf": repo.uid, digest: DIGEST_B })).tags),
        sorted([early[1]!.uid, late[0]!.uid]),
      );
      assertInvalidArgument(await api.get(TAGS + query({ digest: "sha256:short" })), "digest", "digest filter");
      const since = await listTags({ "uidp.childrenOf": repo.uid, updatedSince: late[0]!.updateTime });
      assert.deepEqual(uids(since.tags), sorted(uids(late)));
      assert.equal(since.totalCount, "2");

      const byName = await listTags({ "uidp.childrenOf": repo.uid, orderBy: "name desc" });
      assert.deepEqual(
        byName.tags.map((t: Json) => t.name),
        ["v3", "v2", "v1", "latest"],
      );
      const byTime = await listTags({ "uidp.childrenOf": repo.uid, orderBy: "update_time desc", pageSize: 3 });
      assert.deepEqual(
        byTime.tags
          .map((t: Json) => t.name)
          .slice(0, 2)
          .sort(),
        ["latest", "v3"],
      );
      const rest = await listTags({
        "uidp.childrenOf": repo.uid,
        orderBy: "update_time desc",
        pageSize: 3,
        pageToken: byTime.nextPageToken,
      });
      assert.equal(rest.tags.length, 1);
      assert.ok(!("nextPageToken" in rest));
      const skipped = await listTags({ "uidp.childrenOf": repo.uid, orderBy: "name", skip: 1, pageSize: 2 });
      assert.deepEqual(
        skipped.tags.map((t: Json) => t.name),
        ["v1", "v2"],
      );
      assert.equal(skipped.skipped, 1);
      assert.equal(skipped.totalCount, "4");
      // accepted and ignored
      assert.equal(
        (await listTags({ "uidp.childrenOf": repo.uid, includeReferrers: "true", includeDates: "true" })).tags.length,
        4,
      );
      assertInvalidArgument(
        await api.get(TAGS + query({ orderBy: "create_time" })),
        "order_by",
        "tags have no create_time",
      );
    });

    it("a viewer lists and reads but cannot create, update or delete; other organizations see nothing", async () => {
      const repo = await createRepo(org.uid, { name: "viewed" });
      const tag = await createTag(repo.uid, "v1");
      const viewer = await workload(server, api, org.uid, "viewer", [
        { at: org.uid, role: { uid: VIEWER_ROLE_UID, capabilities: [] } },
      ]);
      const v = restClient(server.url, viewer.token);
      const listed = ok(await v.get(REPOS + query({ "uidp.descendantsOf": org.uid })));
      assert.ok(uids(listed.repos).includes(repo.uid));
      assert.ok(uids(ok(await v.get(TAGS + query({ "uidp.childrenOf": repo.uid }))).tags).includes(tag.uid));
      // unfiltered, a viewer sees its organization's repos only
      assert.ok(ok(await v.get(REPOS)).repos.every((r: Json) => r.uid.startsWith(`${org.uid}/`)));
      assert.equal(ok(await v.get(`${REPOS}/${repo.uid}`)).name, "viewed");
      assert.equal(ok(await v.get(`${EXT}/repos/${repo.uid}/visibility`)).public, false);

      assertPermissionDenied(await v.post(`${REPOS}/${org.uid}`, { name: "nope" }), "viewer creates a repo");
      assertPermissionDenied(await v.post(`${TAGS}/${repo.uid}`, { name: "nope", digest: DIGEST_A }), "viewer tags");
      assertPermissionDenied(await v.patch(`${REPOS}/${repo.uid}`, { description: "x" }), "viewer updates");
      assertPermissionDenied(await v.delete(`${REPOS}/${repo.uid}`), "viewer deletes a repo");
      assertPermissionDenied(await v.delete(`${TAGS}/${tag.uid}`), "viewer deletes a tag");
      assertPermissionDenied(
        await v.patch(`${EXT}/repos/${repo.uid}/visibility`, { public: true }),
        "viewer publishes",
      );
      assertPermissionDenied(await v.post(`${EXT}/tags/${tag.uid}:deprecate`, {}), "viewer deprecates");

      const stranger = await createGroup(api, undefined, "stranger org");
      const outsider = await workload(server, api, stranger.uid, "outsider", [
        { at: stranger.uid, role: { uid: VIEWER_ROLE_UID, capabilities: [] } },
      ]);
      const o = restClient(server.url, outsider.token);
      const theirs = ok(await o.get(REPOS + query({ "uidp.descendantsOf": org.uid })));
      assert.deepEqual(theirs.repos, []);
      assert.equal(theirs.totalCount, "0");
      assertNotFound(await o.get(`${REPOS}/${repo.uid}`), "another organization's repo");
      assertNotFound(await o.get(`${TAGS}/${tag.uid}`), "another organization's tag");
    });

    it("visibility: private by default; public repos are pulled without credentials", async () => {
      const repo = await createRepo(org.uid, { name: "shown" });
      await createTag(repo.uid, "latest");
      const path = `${EXT}/repos/${repo.uid}/visibility`;
      assert.deepEqual(ok(await api.get(path)), { uid: repo.uid, public: false });
      const anonymous = `${server.url}/v2/${org.uid}/shown/tags/list`;
      assert.equal((await fetch(anonymous)).status, 401);

      assert.deepEqual(ok(await api.patch(path, { public: true })), { uid: repo.uid, public: true });
      assert.deepEqual(ok(await api.get(path)), { uid: repo.uid, public: true });
      const pulled = await fetch(anonymous);
      assert.equal(pulled.status, 200);
      assert.deepEqual(((await pulled.json()) as Json).tags, ["latest"]);

      // nothing present: nothing changes; an explicit false makes it private again
      assert.deepEqual(ok(await api.patch(path, {})), { uid: repo.uid, public: true });
      assert.deepEqual(ok(await api.patch(path, { public: false })), { uid: repo.uid, public: false });
      assert.equal((await fetch(anonymous)).status, 401);
      assertNotFound(await api.get(`${EXT}/repos/${org.uid}/0123456789abcdef/visibility`), "missing repo");
      assertInvalidArgument(
        await api.patch(`${path}?updateMask=uid`, { public: true }),
        "update_mask",
        "output-only mask",
      );
    });

    it("tags are deprecated at creation or later, and undeprecated", async () => {
      const repo = await createRepo(org.uid, { name: "deprecations" });
      const born = await createTag(repo.uid, "old", DIGEST_A, { deprecated: true, bundles: ["legacy"] });
      assert.equal(born.deprecated, true);
      assert.deepEqual(born.bundles, ["legacy"]);
      const tag = await createTag(repo.uid, "current");
      const deprecated = ok(await api.post(`${EXT}/tags/${tag.uid}:deprecate`, {}));
      assert.deepEqual({ ...deprecated, updateTime: tag.updateTime }, { ...tag, deprecated: true });
      assert.equal(ok(await api.get(`${TAGS}/${tag.uid}`)).deprecated, true);
      // again: no change
      assert.equal(ok(await api.post(`${EXT}/tags/${tag.uid}:deprecate`)).updateTime, deprecated.updateTime);
      assert.equal(ok(await api.post(`${EXT}/tags/${tag.uid}:undeprecate`, {})).deprecated, false);
      assert.equal(ok(await api.get(`${TAGS}/${tag.uid}`)).deprecated, false);
      assertNotFound(await api.post(`${EXT}/tags/${repo.uid}/0123456789abcdef:deprecate`, {}), "missing tag");
    });

    it("a group with repos cannot be deleted; deleting a repo removes its tags", async () => {
      const group = await createGroup(api, org.uid, "holder");
      const repo = await createRepo(group.uid, { name: "held" });
      const tags = [await createTag(repo.uid, "a"), await createTag(repo.uid, "b", DIGEST_B)];
      const refused = await api.delete(`/iam/v2beta1/groups/${group.uid}`);
      const body = assertRpcError(refused, 400, 9, "delete a group with repos");
      assert.equal(body.details[0].reason, "FAILED_PRECONDITION");
      assert.equal(body.message, "Precondition failed: cannot delete group with child repos");
      const precondition = body.details.find(
        (d: Json) => d["@type"] === "type.googleapis.com/google.rpc.PreconditionFailure",
      );
      assert.deepEqual(precondition.violations, [
        { type: "RESOURCE_NOT_EMPTY", description: "cannot delete group with child repos" },
      ]);

      assert.deepEqual(ok(await api.delete(`${REPOS}/${repo.uid}`)), {});
      assertNotFound(await api.get(`${REPOS}/${repo.uid}`), "deleted repo");
      for (const t of tags) assertNotFound(await api.get(`${TAGS}/${t.uid}`), "tag of a deleted repo");
      assert.deepEqual((await listTags({ "uidp.descendantsOf": group.uid })).tags, []);
      assertNotFound(await api.delete(`${REPOS}/${repo.uid}`), "deleted twice");
      assert.deepEqual(ok(await api.delete(`/iam/v2beta1/groups/${group.uid}`)), {});
    });

    it("serves the same over gRPC", async () => {
      const transport = createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(server.operatorToken)] });
      const repos = createClient(ReposService, transport);
      const tags = createClient(TagsService, transport);
      const ext = createClient(RegistryExtensionsService, transport);
      const group = await createGroup(api, org.uid, "grpc");
      const repo = await repos.createRepo({
        parent: group.uid,
        repo: { name: "grpc/app", syncConfig: { source: "s" } },
      });
      assert.equal(repo.syncConfig?.source, "s");
      const tag = await tags.createTag({ parent: repo.uid, tag: { name: "latest", digest: DIGEST_A } });
      const listed = await repos.listRepos({ uidp: { childrenOf: group.uid } });
      assert.equal(listed.totalCount, 1n);
      assert.equal(listed.repos[0]?.uid, repo.uid);
      const listedTags = await tags.listTags({ uidp: { childrenOf: repo.uid }, digest: DIGEST_A });
      assert.deepEqual(
        listedTags.tags.map((t) => t.uid),
        [tag.uid],
      );
      assert.equal(
        (
          await ext.updateRepoVisibility({
            visibility: { uid: repo.uid, public: true },
            updateMask: { paths: ["public"] },
          })
        ).public,
        true,
      );
      assert.equal((await ext.getRepoVisibility({ uid: repo.uid })).public, true);
      assert.equal((await ext.deprecateTag({ uid: tag.uid })).deprecated, true);
      const err = await repos.createRepo({ parent: group.uid, repo: { name: "Bad" } }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      assert.equal(err?.code, Code.InvalidArgument);
      assert.match(err!.rawMessage, /^Invalid argument: name: /);
      await repos.deleteRepo({ uid: repo.uid });
      assert.equal((await repos.listRepos({ uidp: { childrenOf: group.uid } })).totalCount, 0n);
    });
  });
}
