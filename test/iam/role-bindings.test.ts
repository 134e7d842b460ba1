// RoleBindingsService over REST (and a gRPC smoke), on every backend.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { RoleBindingsService } from "../../src/gen/chainguard/platform/iam/v2beta1/role_bindings_pb.js";
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ListRoleBindingsRequestSchema } from "../../src/gen/chainguard/platform/iam/v2beta1/role_bindings_pb.js";
import { PageTokenCodec } from "../../src/core/page-tokens.js";
import { newChildUidp } from "../../src/core/uidp.js";
import { roleBindingsService } from "../../src/iam/role-bindings.js";
import { RoleBindingsRepository } from "../../src/iam/storage/role-bindings.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { queryCounter, startTestServer, type TestServer, bearer } from "../support/server.js";

const VIEWER = "63921b2c44617e3f2603851537be0123af4a57d7";
const ISSUER = "https://issuer.example";

for (const backend of backends()) {
  describe(`role bindings over REST [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    const ok = async (res: Promise<{ status: number; body: any }>) => {
      const r = await res;
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body;
    };
    const group = (name: string, parent = "") =>
      ok(api.post(`/iam/v2beta1/groups${parent ? "/" + parent : ""}`, { name }));
    const identity = (parent: string, name: string) =>
      ok(
        api.post(`/iam/v2beta1/identities/${parent}`, {
          name,
          description: `${name} desc`,
          claimMatch: { issuer: ISSUER, subject: `sub-${name}` },
        }),
      );
    const role = (parent: string, name: string) =>
      ok(
        api.post(`/iam/v2beta1/roles/${parent}`, {
          name,
          description: `${name} desc`,
          capabilities: ["CAP_IAM_GROUPS_LIST"],
        }),
      );
    const bind = (parent: string, identityUid: string, roleUid: string) =>
      api.post(`/iam/v2beta1/roleBindings/${parent}`, { identityUid, roleUid });

    it("returns the hydrated binding, field for field", async () => {
      const org = await group("acme");
      const id = await identity(org.uid, "deployer");
      const res = await bind(org.uid, id.uid, VIEWER);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.match(res.body.uid, new RegExp(`^${org.uid}/[0-9a-f]{16}$`));
      assert.match(res.body.createTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.deepEqual(res.body, {
        uid: res.body.uid,
        identity: {
          uid: id.uid,
          name: "deployer",
          description: "deployer desc",
          subject: "sub-deployer",
          issuer: ISSUER,
          email: "",
        },
        group: { uid: org.uid, name: "acme", description: "" },
        role: { uid: VIEWER, name: "viewer", description: "Viewer Role (built-in)" },
        createTime: res.body.createTime,
        identityUid: id.uid,
        roleUid: VIEWER,
      });
      assert.deepEqual((await api.get(`/iam/v2beta1/roleBindings/${res.body.uid}`)).body, res.body);
    });

    it("requires identity and role uids, and both must exist", async () => {
      const org = await group("refs");
      const id = await identity(org.uid, "i");
      const empty = await api.post(`/iam/v2beta1/roleBindings/${org.uid}`, {});
      assert.equal(empty.status, 400);
      assert.deepEqual(
        empty.body.details[1].fieldViolations.map((v: { field: string }) => v.field),
        ["identity_uid", "role_uid"],
      );
      const missingRole = await bind(org.uid, id.uid, "f".repeat(40));
      assert.equal(missingRole.status, 404);
      assert.equal(missingRole.body.details[1].resourceType, "role");
      const missingIdentity = await bind(org.uid, newChildUidp(org.uid), VIEWER);
      assert.equal(missingIdentity.status, 404);
      assert.equal(missingIdentity.body.details[1].resourceType, "identity");
      const missingGroup = await bind("e".repeat(40), id.uid, VIEWER);
      assert.equal(missingGroup.status, 404);
      assert.equal(missingGroup.body.details[1].resourceType, "group");
    });

    it("binds only identities and roles visible from the group", async () => {
      const org = await group("home");
      const team = await group("team", org.uid);
      const other = await group("elsewhere");
      const orgRole = await role(org.uid, "org-role");
      const teamRole = await role(team.uid, "team-role");
      const foreignRole = await role(other.uid, "foreign-role");
      const orgId = await identity(org.uid, "org-id");
      const foreignId = await identity(other.uid, "foreign-id");
      // an ancestor's role and identity are usable below it
      assert.equal((await bind(team.uid, orgId.uid, orgRole.uid)).status, 200);
      // a descendant's role is not usable above it; another org's never
      assert.equal((await bind(org.uid, orgId.uid, teamRole.uid)).status, 404);
      const foreign = await bind(org.uid, orgId.uid, foreignRole.uid);
      assert.equal(foreign.status, 404);
      assert.equal(foreign.body.details[1].resourceName, foreignRole.uid);
      assert.equal((await bind(org.uid, foreignId.uid, VIEWER)).status, 404);
      // and the database refuses it even if the service were bypassed
      await assert.rejects(
        server.db
          .insertInto("role_bindings")
          .values({
            uid: newChildUidp(org.uid),
            parent_uid: org.uid,
            identity_uid: orgId.uid,
            role_uid: foreignRole.uid,
            create_time: new Date(),
            update_time: new Date(),
          })
          .execute(),
        /check constraint/,
      );
    });

    it("rejects a duplicate binding with ALREADY_EXISTS", async () => {
      const org = await group("dup");
      const id = await identity(org.uid, "i");
      assert.equal((await bind(org.uid, id.uid, VIEWER)).status, 200);
      const again = await bind(org.uid, id.uid, VIEWER);
      assert.equal(again.status, 409);
      assert.equal(again.body.code, 6);
      assert.equal(again.body.details[0].reason, "ALREADY_EXISTS");
      const total = await api.get(`/iam/v2beta1/roleBindings?group=${org.uid}`);
      assert.equal(total.body.totalCount, "1");
    });

    it("lists by identity, group and role, hydrated, across pages", async () => {
      const org = await group("many");
      const r = await role(org.uid, "lister");
      const ids = [];
      for (let i = 0; i < 60; i++) ids.push(await identity(org.uid, `id-${String(i).padStart(2, "0")}`));
      for (const id of ids) await ok(bind(org.uid, id.uid, i2role(ids.indexOf(id))));
      function i2role(i: number) {
        return i % 2 === 0 ? VIEWER : r.uid;
      }
      const seen: string[] = [];
      let token = "";
      do {
        const page = await api.get(
          `/iam/v2beta1/roleBindings?group=${org.uid}&page_size=25${token ? `&page_token=${encodeURIComponent(token)}` : ""}`,
        );
        assert.equal(page.status, 200);
        assert.equal(page.body.totalCount, "60");
        for (const b of page.body.roleBindings) {
          assert.equal(b.group.name, "many");
          assert.ok(b.identity.name.startsWith("id-"));
          assert.equal(b.identity.subject, `sub-${b.identity.name}`);
          assert.ok(b.role.name === "viewer" || b.role.name === "lister");
          seen.push(b.uid);
        }
        token = page.body.nextPageToken ?? "";
      } while (token);
      assert.equal(new Set(seen).size, 60);
      assert.deepEqual(seen, [...seen].sort());
      const byRole = await api.get(`/iam/v2beta1/roleBindings?role=${r.uid}&page_size=200`);
      assert.equal(byRole.body.totalCount, "30");
      const byIdentity = await api.get(`/iam/v2beta1/roleBindings?identity=${ids[3].uid}`);
      assert.deepEqual(
        byIdentity.body.roleBindings.map((b: { role: { uid: string } }) => b.role.uid),
        [r.uid],
      );
      const bad = await api.get(`/iam/v2beta1/roleBindings?identity=nope`);
      assert.equal(bad.status, 400);
      assert.equal(bad.body.details[1].fieldViolations[0].field, "identity");
    });

    it("hydrates a List page with one query, however many rows it has", async () => {
      const org = await group("counted");
      for (let i = 0; i < 12; i++) await ok(bind(org.uid, (await identity(org.uid, `c-${i}`)).uid, VIEWER));
      const counter = queryCounter();
      const service = roleBindingsService({
        roleBindings: new RoleBindingsRepository(server.db.withPlugin(counter.plugin)),
        lists: { tokens: PageTokenCodec.fromSecret(randomBytes(32)) },
        now: () => new Date(),
      });
      const queriesFor = async (pageSize: number) => {
        const before = counter.count();
        const res = (await service.handlers.listRoleBindings!(
          create(ListRoleBindingsRequestSchema, { group: org.uid, pageSize }),
          { headers: new Headers(), visibility: "all" },
        )) as any;
        assert.ok(
          res.roleBindings.every((b: any) => b.identity?.name && b.role?.name && b.group?.name),
          "every row hydrated",
        );
        return { queries: counter.count() - before, rows: res.roleBindings.length as number };
      };
      const small = await queriesFor(2);
      const big = await queriesFor(12);
      assert.deepEqual([small.rows, big.rows], [2, 12]);
      assert.equal(big.queries, small.queries, `queries do not grow with rows (${small.queries} vs ${big.queries})`);
      assert.ok(big.queries <= 3, `page + count + hydration, got ${big.queries}`);
    });

    it("updates the role of a binding, re-checking visibility and duplicates", async () => {
      const org = await group("upd");
      const id = await identity(org.uid, "i");
      const custom = await role(org.uid, "custom");
      const b = await ok(bind(org.uid, id.uid, VIEWER));
      const changed = await api.patch(`/iam/v2beta1/roleBindings/${b.uid}`, { roleUid: custom.uid });
      assert.equal(changed.status, 200, JSON.stringify(changed.body));
      assert.equal(changed.body.role.name, "custom");
      assert.equal(changed.body.identity.uid, id.uid);
      await ok(bind(org.uid, id.uid, VIEWER));
      const clash = await api.patch(`/iam/v2beta1/roleBindings/${b.uid}?update_mask=role_uid`, { roleUid: VIEWER });
      assert.equal(clash.status, 409);
      const other = await group("other");
      const foreign = await role(other.uid, "foreign");
      assert.equal((await api.patch(`/iam/v2beta1/roleBindings/${b.uid}`, { roleUid: foreign.uid })).status, 404);
      assert.equal(
        (await api.get(`/iam/v2beta1/roleBindings/${b.uid}`)).body.role.uid,
        custom.uid,
        "unchanged after refusals",
      );
    });

    it("batch-creates all or nothing", async () => {
      const org = await group("batch");
      const a = await identity(org.uid, "a");
      const c = await identity(org.uid, "c");
      const custom = await role(org.uid, "batch-role");
      const res = await api.post(`/iam/v2beta1/roleBindings:batchCreate`, {
        parent: org.uid,
        roleUid: VIEWER,
        requests: [
          { roleBinding: { identityUid: a.uid } },
          { parent: org.uid, roleBinding: { identityUid: c.uid, roleUid: custom.uid } },
        ],
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(
        res.body.roleBindings.map((b: { role: { name: string } }) => b.role.name),
        ["viewer", "batch-role"],
      );
      const failing = await api.post(`/iam/v2beta1/roleBindings:batchCreate`, {
        parent: org.uid,
        requests: [
          { roleBinding: { identityUid: c.uid, roleUid: VIEWER } },
          { roleBinding: { identityUid: a.uid, roleUid: "f".repeat(40) } },
        ],
      });
      assert.equal(failing.status, 404);
      assert.equal(
        (await api.get(`/iam/v2beta1/roleBindings?group=${org.uid}`)).body.totalCount,
        "2",
        "nothing of the failed batch was created",
      );
      const mismatch = await api.post(`/iam/v2beta1/roleBindings:batchCreate`, {
        parent: org.uid,
        requests: [{ parent: "d".repeat(40), roleBinding: { identityUid: a.uid, roleUid: VIEWER } }],
      });
      assert.equal(mismatch.status, 400);
      assert.equal(mismatch.body.details[1].fieldViolations[0].field, "requests[0].parent");
      const dupInBatch = await api.post(`/iam/v2beta1/roleBindings:batchCreate`, {
        parent: org.uid,
        roleUid: custom.uid,
        requests: [{ roleBinding: { identityUid: a.uid } }, { roleBinding: { identityUid: a.uid } }],
      });
      assert.equal(dupInBatch.status, 409);
      assert.equal(
        (await api.post(`/iam/v2beta1/roleBindings:batchCreate`, { parent: org.uid, requests: [] })).status,
        400,
      );
    });

    it("deletes in reverse order of creation: binding, identity, group", async () => {
      const org = await group("teardown");
      const id = await identity(org.uid, "i");
      const b = await ok(bind(org.uid, id.uid, VIEWER));
      const blocked = await api.delete(`/iam/v2beta1/groups/${org.uid}`);
      assert.equal(blocked.status, 400);
      assert.equal(
        blocked.body.details[1].violations[0].description,
        "cannot delete group with child identities, child role bindings",
      );
      assert.equal((await api.delete(`/iam/v2beta1/roleBindings/${b.uid}`)).status, 200);
      assert.equal((await api.delete(`/iam/v2beta1/roleBindings/${b.uid}`)).status, 404);
      assert.equal((await api.delete(`/iam/v2beta1/identities/${id.uid}`)).status, 200);
      assert.equal((await api.delete(`/iam/v2beta1/groups/${org.uid}`)).status, 200);
    });

    it("serves the same binding over gRPC", async () => {
      const org = await group("grpc");
      const id = await identity(org.uid, "g");
      const client = createClient(
        RoleBindingsService,
        createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(server.operatorToken)] }),
      );
      const created = await client.createRoleBinding({
        parent: org.uid,
        roleBinding: { identityUid: id.uid, roleUid: VIEWER },
      });
      assert.equal(created.identity?.subject, "sub-g");
      assert.equal(created.role?.name, "viewer");
      const listed = await client.listRoleBindings({ group: org.uid });
      assert.equal(listed.totalCount, 1n);
      assert.equal(listed.roleBindings[0]?.uid, created.uid);
    });
  });
}
