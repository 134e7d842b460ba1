// RolesService over REST on every backend, plus a gRPC smoke test: the built-in roles (present on
// a fresh database, stable uids across installs, exactly the reference's capability sets,
// read-only), custom roles under a group (capability names, grantability, the name rule),
// Get / List / Update / Delete, and the delete preconditions (bound roles, groups holding roles).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { getOption } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { Capability, CapabilitySchema, internal_only } from "../../src/gen/capabilities/capabilities_pb.js";
import { RolesService } from "../../src/gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { BadRequestSchema, PreconditionFailureSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { BUILTIN_ROLES } from "../../src/iam/builtin-roles.js";
import { iamRepositories } from "../../src/iam/module.js";
import { assertInvalid } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import {
  VIEWER_ROLE_UID,
  createGroup,
  createIdentity,
  createIdentityProvider,
  createRole,
  createRoleBinding,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { restClient, type JsonResponse } from "../support/http.js";
import { ERROR_DOMAIN, operatorGrpc, startTestServer, type TestServer } from "../support/server.js";
import { REPO_ROOT } from "../support/paths.js";

const R = "/iam/v2beta1/roles";
const ROOT = REPO_ROOT;
const REFERENCE = JSON.parse(readFileSync(join(ROOT, "reference", "api-surface.json"), "utf8")) as {
  builtinRoles: Record<string, { expanded: string[] }>;
};
const BUILTIN_NAMES = ["viewer", "editor", "owner", "registry.pull", "registry.push", "registry.pull_token_creator"];
const HEX40 = /^[0-9a-f]{40}$/;
const MILLIS_TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const ROLE_KEYS = ["capabilities", "createTime", "description", "name", "uid", "updateTime"];
const NAME_RULE = 'name must match "^[a-z0-9 ._-]{1,}$"';
/** verbs that change something; a viewer holds none of them */
const MUTATING =
  /_(CREATE|UPDATE|DELETE|EDIT|MANAGE|PUBLISH|PUSH|ACCEPT|WRITE|SUBMIT|INVALIDATE|ADD|REMOVE|SWAP|CANCEL|CALL|ADMIN)$/;
const INTERNAL_ONLY = CapabilitySchema.values.filter((v) => getOption(v, internal_only)).map((v) => v.name);

/** Capability names in stored order (by enum number), de-duplicated. */
function normalized(names: string[]): string[] {
  return [...new Set(names)].sort(
    (a, b) => Capability[a as keyof typeof Capability] - Capability[b as keyof typeof Capability],
  );
}

function assertError(res: JsonResponse, status: number, code: number, what: string): any {
  assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
  assert.equal(res.body?.code, code, what);
  return res.body;
}

function assertPrecondition(res: JsonResponse, type: string, message: string, what: string): void {
  const body = assertError(res, 400, 9, what);
  assert.equal(body.message, `Precondition failed: ${message}`, what);
  assert.deepEqual(
    body.details[0],
    { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "FAILED_PRECONDITION", domain: ERROR_DOMAIN },
    what,
  );
  assert.equal(body.details[1]?.["@type"], "type.googleapis.com/google.rpc.PreconditionFailure", what);
  assert.deepEqual(
    body.details[1].violations.map((v: Json) => [v.type, v.description]),
    [[type, message]],
    what,
  );
}

async function listAll(api: Api, q = ""): Promise<Json[]> {
  const res = await api.get(`${R}?page_size=200${q}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.ok(!("nextPageToken" in res.body), "more than 200 roles: this helper reads one page");
  return res.body.roles;
}

for (const backend of backends()) {
  describe(`roles [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    const builtins = async (a: Api = api) => (await listAll(a, "&uidp.in_root=true")) as Json[];

    describe("built-in roles", () => {
      it("exist on a fresh database and are what GET /roles lists with no filter", async () => {
        const res = await api.get(R);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.deepEqual(res.body.roles.map((r: Json) => r.name).sort(), [...BUILTIN_NAMES].sort());
        assert.deepEqual(
          BUILTIN_ROLES.map((r) => r.name).sort(),
          [...BUILTIN_NAMES].sort(),
          "src/iam/builtin-roles.ts defines other built-ins",
        );
        assert.equal(res.body.totalCount, String(BUILTIN_NAMES.length));
        assert.ok(!("nextPageToken" in res.body));
        const uids = res.body.roles.map((r: Json) => r.uid);
        assert.deepEqual(uids, [...uids].sort(), "default order is uid");
        for (const r of res.body.roles) {
          assert.deepEqual(Object.keys(r).sort(), ROLE_KEYS);
          assert.match(r.createTime, MILLIS_TIMESTAMP);
          assert.match(r.updateTime, MILLIS_TIMESTAMP);
        }
        // uidp.in_root lists exactly the built-ins (they belong to no group)
        assert.deepEqual(
          (await builtins()).map((r) => r.uid),
          uids,
        );
      });

      it("the viewer has the well-known uid and description", async () => {
        const res = await api.get(`${R}/${VIEWER_ROLE_UID}`);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.uid, VIEWER_ROLE_UID);
        assert.equal(res.body.name, "viewer");
        assert.equal(res.body.description, "Viewer Role (built-in)");
        const byName = await api.get(`${R}?name=viewer`);
        assert.deepEqual(byName.body.roles, [res.body]);
      });

      it("each has a 40-hex uid that is the same on another fresh install, and exactly its reference capability set", async () => {
        const other = await startTestServer(backend);
        try {
          const mine = new Map((await builtins()).map((r) => [r.name as string, r]));
          const theirs = new Map(
            (await builtins(restClient(other.url, other.operatorToken))).map((r) => [r.name as string, r]),
          );
          for (const name of BUILTIN_NAMES) {
            const role = mine.get(name);
            assert.ok(role, `no built-in ${name}`);
            assert.match(role.uid, HEX40, name);
            assert.equal(theirs.get(name)?.uid, role.uid, `${name}: uid differs between installs`);
            assert.match(role.description, /\(built-in\)$/, name);
            const set = BUILTIN_ROLES.find((r) => r.name === name)!.capabilitySet;
            const reference = REFERENCE.builtinRoles[set]?.expanded;
            assert.ok(reference, `${name}: reference has no builtinRoles.${set}`);
            assert.equal(new Set(role.capabilities).size, role.capabilities.length, `${name}: duplicate capabilities`);
            assert.deepEqual(
              [...role.capabilities].sort(),
              [...new Set(reference)].sort(),
              `${name}: capabilities differ from ${set}`,
            );
            assert.deepEqual(
              role.capabilities,
              normalized(role.capabilities),
              `${name}: capabilities not in enum order`,
            );
          }
          assert.equal(new Set([...mine.values()].map((r) => r.uid)).size, BUILTIN_NAMES.length, "uids are distinct");
        } finally {
          await other.close();
        }
      });

      it("owner ⊇ editor ⊇ viewer", async () => {
        const caps = new Map((await builtins()).map((r) => [r.name as string, new Set<string>(r.capabilities)]));
        const [viewer, editor, owner] = ["viewer", "editor", "owner"].map((n) => caps.get(n)!);
        for (const c of viewer!) assert.ok(editor!.has(c), `editor lacks viewer's ${c}`);
        for (const c of editor!) assert.ok(owner!.has(c), `owner lacks editor's ${c}`);
        assert.ok(editor!.size > viewer!.size && owner!.size > editor!.size);
      });

      it("the viewer holds only read capabilities: nothing that creates, updates or deletes", async () => {
        const viewer = (await api.get(`${R}/${VIEWER_ROLE_UID}`)).body;
        const mutating = (viewer.capabilities as string[]).filter((c) => MUTATING.test(c));
        assert.deepEqual(mutating, [], "viewer holds mutating capabilities");
        // Everything is a *_LIST or *_GET, except what the reference's ViewerCaps itself grants.
        const other = (viewer.capabilities as string[]).filter((c) => !/_(LIST|GET)$/.test(c));
        for (const c of other) assert.ok(REFERENCE.builtinRoles.ViewerCaps!.expanded.includes(c), c);
        assert.deepEqual(other.sort(), ["CAP_GUARDENER_ACTIONS_MIGRATE", "CAP_GUARDENER_DFC_CONVERT"]);
      });

      it("seeding again (a restart, replicas starting together) changes nothing; a drifted definition is restored in place", async () => {
        const seeded = await builtins();
        const roles = iamRepositories(server.db).roles;
        await Promise.all([1, 2, 3].map(() => roles.ensureBuiltins(BUILTIN_ROLES, new Date())));
        assert.deepEqual(await builtins(), seeded, "re-seeding touched the built-ins");
        // an old version's definition (other description and capabilities) is brought up to date, same uid
        await server.db
          .updateTable("roles")
          .set({ description: "old", capabilities: [Capability.CAP_IAM_GROUPS_LIST] })
          .where("uid", "=", VIEWER_ROLE_UID)
          .execute();
        await roles.ensureBuiltins(BUILTIN_ROLES, new Date());
        const viewer = (await api.get(`${R}/${VIEWER_ROLE_UID}`)).body;
        const before = seeded.find((r) => r.uid === VIEWER_ROLE_UID)!;
        assert.deepEqual({ ...viewer, updateTime: before.updateTime }, before);
        assert.ok(viewer.updateTime >= before.updateTime);
        assert.equal(viewer.createTime, before.createTime);
      });

      it("cannot be updated or deleted: FAILED_PRECONDITION (9), and nothing changes", async () => {
        const before = await builtins();
        for (const role of before) {
          for (const [query, body] of [
            ["", { description: "mine now" }],
            ["", { capabilities: ["CAP_IAM_GROUPS_LIST"] }],
            ["?update_mask=name", { name: "renamed" }],
            ["?update_mask=*", { name: role.name, capabilities: role.capabilities }],
          ] as const) {
            const res = await api.patch(`${R}/${role.uid}${query}`, body);
            assertPrecondition(
              res,
              "BUILT_IN_ROLE",
              `built-in role "${role.name}" cannot be changed`,
              `update ${role.name} ${query}`,
            );
          }
          assertPrecondition(
            await api.delete(`${R}/${role.uid}`),
            "BUILT_IN_ROLE",
            `built-in role "${role.name}" cannot be deleted`,
            `delete ${role.name}`,
          );
        }
        assert.deepEqual(await builtins(), before);
      });
    });

    describe("custom roles", () => {
      let org: Json;
      let team: Json;
      before(async () => {
        org = await createGroup(api, undefined, "roles org");
        team = await createGroup(api, org.uid, "team");
      });
      const countUnder = async (g: Json) =>
        (await api.get(`${R}?uidp.descendants_of=${g.uid}&page_size=1`)).body.totalCount as string;

      it("are created under a group from capability names (or numbers), normalized, and read back by Get", async () => {
        const caps = [
          "CAP_IAM_ROLES_LIST",
          "CAP_IAM_GROUPS_LIST",
          "CAP_IAM_ROLES_LIST",
          Capability.CAP_IAM_IDENTITY_LIST,
        ];
        const role = await createRole(api, team.uid, "reader.1_x-y z", caps, "reads things");
        assert.deepEqual(Object.keys(role).sort(), ROLE_KEYS);
        assert.match(role.uid, new RegExp(`^${team.uid}/[0-9a-f]{16}$`));
        assert.equal(role.name, "reader.1_x-y z");
        assert.equal(role.description, "reads things");
        assert.deepEqual(
          role.capabilities,
          normalized(["CAP_IAM_ROLES_LIST", "CAP_IAM_GROUPS_LIST", "CAP_IAM_IDENTITY_LIST"]),
        );
        assert.match(role.createTime, MILLIS_TIMESTAMP);
        assert.equal(role.updateTime, role.createTime);
        const got = await api.get(`${R}/${role.uid}`);
        assert.equal(got.status, 200);
        assert.deepEqual(got.body, role);
        // every grantable capability can be held by a custom role
        const grantable = CapabilitySchema.values
          .filter(
            (v) =>
              v.number !== Capability.UNKNOWN && v.number !== Capability.CAP_INTERNAL && !getOption(v, internal_only),
          )
          .map((v) => v.name);
        const all = await createRole(api, team.uid, "everything", grantable);
        assert.deepEqual(all.capabilities, normalized(grantable));
      });

      it("need at least one capability: empty or missing is INVALID_ARGUMENT (capabilities)", async () => {
        const before = await countUnder(org);
        assertInvalid(await api.post(`${R}/${team.uid}`, { name: "empty", capabilities: [] }), "capabilities", "[]", {
          description: "at least one capability is required",
        });
        assertInvalid(await api.post(`${R}/${team.uid}`, { name: "missing" }), "capabilities", "missing", {
          description: "at least one capability is required",
        });
        assert.equal(await countUnder(org), before);
      });

      it("reject unknown capabilities, CAP_INTERNAL, UNKNOWN and internal-only capabilities (400), creating nothing", async () => {
        const before = await countUnder(org);
        assertInvalid(
          await api.post(`${R}/${team.uid}`, { name: "bad", capabilities: ["CAP_IAM_GROUPS_LIST", "CAP_NOPE"] }),
          "capabilities",
          "unknown name",
          { description: /CAP_NOPE/ },
        );
        assertInvalid(
          await api.post(`${R}/${team.uid}`, { name: "bad", capabilities: "CAP_IAM_GROUPS_LIST" }),
          "capabilities",
          "not a list",
        );
        assertInvalid(
          await api.post(`${R}/${team.uid}`, { name: "bad", capabilities: [999999] }),
          "capabilities",
          "unknown number",
          { description: /999999/ },
        );
        for (const cap of ["CAP_INTERNAL", "UNKNOWN", ...INTERNAL_ONLY]) {
          assertInvalid(
            await api.post(`${R}/${team.uid}`, { name: "bad", capabilities: ["CAP_IAM_GROUPS_LIST", cap] }),
            "capabilities",
            cap,
            { description: `not grantable capabilities: ${cap}` },
          );
        }
        assert.ok(INTERNAL_ONLY.length >= 5, "internal_only capabilities exist in the enum");
        assert.equal(await countUnder(org), before);
      });

      it("follow the name rule: INVALID_ARGUMENT (name)", async () => {
        for (const name of ["", "Viewer", "a/b", "ü", "x".repeat(257)]) {
          const res = await api.post(`${R}/${team.uid}`, { name, capabilities: ["CAP_IAM_GROUPS_LIST"] });
          assertInvalid(res, "name", JSON.stringify(name).slice(0, 20), {
            description: name.length > 256 ? "name must be at most 256 characters" : NAME_RULE,
          });
        }
        assertInvalid(
          await api.post(`${R}/${team.uid}`, {
            name: "ok",
            capabilities: ["CAP_IAM_GROUPS_LIST"],
            description: "d".repeat(4097),
          }),
          "description",
          "long description",
        );
      });

      it("need an existing, well-formed parent group", async () => {
        const missing = await api.post(`${R}/${"0".repeat(40)}`, {
          name: "orphan",
          capabilities: ["CAP_IAM_GROUPS_LIST"],
        });
        const body = assertError(missing, 404, 5, "missing parent");
        assert.equal(body.details[1].resourceType, "group");
        assertInvalid(
          await api.post(`${R}/nope`, { name: "x", capabilities: ["CAP_IAM_GROUPS_LIST"] }),
          "parent",
          "malformed parent",
        );
      });

      it("Get: a missing role is NOT_FOUND (role); a malformed uid INVALID_ARGUMENT (uid)", async () => {
        const missing = await api.get(`${R}/${team.uid}/0123456789abcdef`);
        const body = assertError(missing, 404, 5, "missing");
        assert.equal(body.details[1].resourceType, "role");
        assertInvalid(await api.get(`${R}/NOPE`), "uid", "malformed");
      });

      it("List: uidp.descendants_of scopes to the subtree (no built-ins); name filters exactly", async () => {
        const listOrg = await createGroup(api, undefined, "list roles org");
        const child = await createGroup(api, listOrg.uid, "child");
        const elsewhere = await createGroup(api, undefined, "elsewhere");
        const a = await createRole(api, listOrg.uid, "viewer");
        const b = await createRole(api, child.uid, "b");
        const c = await createRole(api, child.uid, "viewer");
        await createRole(api, elsewhere.uid, "viewer");
        const uidsOf = (roles: Json[]) => roles.map((r) => r.uid);
        assert.deepEqual(
          uidsOf(await listAll(api, `&uidp.descendants_of=${listOrg.uid}`)),
          [a.uid, b.uid, c.uid].sort(),
        );
        assert.deepEqual(uidsOf(await listAll(api, `&uidp.children_of=${child.uid}`)), [b.uid, c.uid].sort());
        assert.deepEqual(
          uidsOf(await listAll(api, `&uidp.descendants_of=${listOrg.uid}&name=viewer`)),
          [a.uid, c.uid].sort(),
        );
        // unscoped, the name matches the built-in too
        const named = await listAll(api, "&name=viewer");
        assert.ok(named.some((r) => r.uid === VIEWER_ROLE_UID));
        assert.ok([a.uid, c.uid].every((u) => named.some((r) => r.uid === u)));
        assert.ok(named.every((r) => r.name === "viewer"));
        assert.deepEqual(
          await listAll(api, `&uidp.descendants_of=${listOrg.uid}&name=vie`),
          [],
          "name is exact, not a prefix",
        );
        const listed = (await listAll(api, `&uidp.ids=${b.uid}`))[0];
        assert.deepEqual(listed, b, "a listed role is what Get shows");
      });

      it("Update: PATCH changes the present keys; update_mask limits; capabilities are replaced, not merged", async () => {
        const role = await createRole(
          api,
          team.uid,
          "updatable",
          ["CAP_IAM_GROUPS_LIST", "CAP_IAM_ROLES_LIST"],
          "first",
        );
        const a = await api.patch(`${R}/${role.uid}`, { description: "second" });
        assert.equal(a.status, 200, JSON.stringify(a.body));
        assert.equal(a.body.description, "second");
        assert.equal(a.body.name, "updatable");
        assert.deepEqual(a.body.capabilities, role.capabilities);
        assert.equal(a.body.createTime, role.createTime);
        assert.ok(a.body.updateTime >= role.updateTime);

        const b = await api.patch(`${R}/${role.uid}`, { capabilities: ["CAP_IAM_IDENTITY_LIST"] });
        assert.equal(b.status, 200, JSON.stringify(b.body));
        assert.deepEqual(b.body.capabilities, ["CAP_IAM_IDENTITY_LIST"], "replaced, not merged");
        assert.equal(b.body.description, "second");

        const c = await api.patch(`${R}/${role.uid}?update_mask=name`, {
          name: "renamed",
          description: "ignored",
          capabilities: ["CAP_IAM_GROUPS_LIST"],
        });
        assert.equal(c.status, 200, JSON.stringify(c.body));
        assert.equal(c.body.name, "renamed");
        assert.equal(c.body.description, "second");
        assert.deepEqual(c.body.capabilities, ["CAP_IAM_IDENTITY_LIST"]);

        const d = await api.patch(`${R}/${role.uid}?update_mask=capabilities,description`, {
          capabilities: ["CAP_IAM_ROLES_LIST", "CAP_IAM_GROUPS_LIST"],
        });
        assert.equal(d.status, 200, JSON.stringify(d.body));
        assert.deepEqual(d.body.capabilities, normalized(["CAP_IAM_ROLES_LIST", "CAP_IAM_GROUPS_LIST"]));
        assert.equal(d.body.description, "", "a masked field absent from the body is cleared");

        // a GET-shaped body: output-only fields are ignored
        const e = await api.patch(`${R}/${role.uid}`, {
          ...d.body,
          description: "third",
          createTime: "2000-01-01T00:00:00.000Z",
          uid: role.uid,
        });
        assert.equal(e.status, 200, JSON.stringify(e.body));
        assert.equal(e.body.createTime, role.createTime);
        assert.equal(e.body.description, "third");

        // the path names the role: a uid in the body does not retarget the update
        const other = await createRole(api, team.uid, "bystander");
        const f = await api.patch(`${R}/${role.uid}`, { uid: other.uid, description: "fourth" });
        assert.equal(f.status, 200, JSON.stringify(f.body));
        assert.equal(f.body.uid, role.uid);
        assert.deepEqual((await api.get(`${R}/${other.uid}`)).body, other);

        // invalid updates change nothing
        assertInvalid(
          await api.patch(`${R}/${role.uid}?update_mask=uid`, { uid: other.uid }),
          "update_mask",
          "output-only uid",
        );
        assertInvalid(
          await api.patch(`${R}/${role.uid}?update_mask=create_time`, {}),
          "update_mask",
          "output-only create_time",
        );
        assertInvalid(await api.patch(`${R}/${role.uid}?update_mask=bogus`, {}), "update_mask", "unknown path");
        const current = (await api.get(`${R}/${role.uid}`)).body;
        assertInvalid(await api.patch(`${R}/${role.uid}`, { capabilities: [] }), "capabilities", "empty capabilities");
        assertInvalid(
          await api.patch(`${R}/${role.uid}`, { capabilities: ["CAP_INTERNAL"] }),
          "capabilities",
          "CAP_INTERNAL",
        );
        assertInvalid(
          await api.patch(`${R}/${role.uid}?update_mask=capabilities`, {}),
          "capabilities",
          "masked and absent",
        );
        assertInvalid(await api.patch(`${R}/${role.uid}`, { name: "Bad" }), "name", "bad name");
        assert.deepEqual((await api.get(`${R}/${role.uid}`)).body, current);

        const missing = await api.patch(`${R}/${team.uid}/0123456789abcdef`, { description: "x" });
        assert.equal(assertError(missing, 404, 5, "missing").details[1].resourceType, "role");
      });

      it("Delete: answers {} and the role is gone; deleting again is NOT_FOUND", async () => {
        const role = await createRole(api, team.uid, "doomed");
        const res = await api.delete(`${R}/${role.uid}`);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.deepEqual(res.body, {});
        assert.equal((await api.get(`${R}/${role.uid}`)).status, 404);
        assertError(await api.delete(`${R}/${role.uid}`), 404, 5, "second delete");
        assertInvalid(await api.delete(`${R}/bad`), "uid", "malformed");
      });

      it("a role still bound cannot be deleted (RESOURCE_NOT_EMPTY); unbound, it can", async () => {
        const group = await createGroup(api, org.uid, "bound group");
        const role = await createRole(api, group.uid, "bound");
        const identity = await createIdentity(api, group.uid, "holder", "holder-1");
        const binding = await createRoleBinding(api, group.uid, identity.uid, role.uid);
        assertPrecondition(
          await api.delete(`${R}/${role.uid}`),
          "RESOURCE_NOT_EMPTY",
          "cannot delete role with role bindings",
          "bound role",
        );
        assert.equal((await api.get(`${R}/${role.uid}`)).status, 200, "still there");
        assert.equal((await api.delete(`/iam/v2beta1/roleBindings/${binding.uid}`)).status, 200);
        assert.equal((await api.delete(`${R}/${role.uid}`)).status, 200);
      });

      it("a role that is an identity provider's default role cannot be deleted", async () => {
        const group = await createGroup(api, org.uid, "idp group");
        const role = await createRole(api, group.uid, "idp default");
        const idp = await createIdentityProvider(api, group.uid, "idp", role.uid);
        assertPrecondition(
          await api.delete(`${R}/${role.uid}`),
          "RESOURCE_NOT_EMPTY",
          "cannot delete role with identity providers",
          "IdP default role",
        );
        assert.equal((await api.delete(`/iam/v2beta1/identityProviders/${idp.uid}`)).status, 200);
        assert.equal((await api.delete(`${R}/${role.uid}`)).status, 200);
      });

      it("a group holding a custom role cannot be deleted: cannot delete group with child roles", async () => {
        const group = await createGroup(api, org.uid, "holder group");
        const role = await createRole(api, group.uid, "held");
        assertPrecondition(
          await api.delete(`/iam/v2beta1/groups/${group.uid}`),
          "RESOURCE_NOT_EMPTY",
          "cannot delete group with child roles",
          "group with a role",
        );
        assert.equal((await api.delete(`${R}/${role.uid}`)).status, 200);
        assert.equal((await api.delete(`/iam/v2beta1/groups/${group.uid}`)).status, 200);
      });
    });

    it("gRPC smoke: get, list, create, update and delete; errors carry their codes and details", async () => {
      const { client, close } = operatorGrpc(server, RolesService);
      try {
        const viewer = await client.getRole({ uid: VIEWER_ROLE_UID });
        const rest = (await api.get(`${R}/${VIEWER_ROLE_UID}`)).body;
        assert.equal(viewer.name, "viewer");
        assert.deepEqual(
          viewer.capabilities.map((c) => Capability[c]),
          rest.capabilities,
        );
        const listed = await client.listRoles({ name: "viewer", uidp: { inRoot: true } });
        assert.deepEqual(
          listed.roles.map((r) => r.uid),
          [VIEWER_ROLE_UID],
        );
        assert.equal(listed.totalCount, 1n);

        const org = await createGroup(api, undefined, "grpc roles org");
        const role = await client.createRole({
          parent: org.uid,
          role: { name: "grpc role", capabilities: [Capability.CAP_IAM_ROLES_LIST, Capability.CAP_IAM_GROUPS_LIST] },
        });
        assert.deepEqual(
          role.capabilities,
          [Capability.CAP_IAM_GROUPS_LIST, Capability.CAP_IAM_ROLES_LIST].sort((a, b) => a - b),
        );
        assert.deepEqual(
          (await api.get(`${R}/${role.uid}`)).body.capabilities,
          role.capabilities.map((c) => Capability[c]),
        );
        const updated = await client.updateRole({
          role: { uid: role.uid, capabilities: [Capability.CAP_IAM_IDENTITY_LIST] },
          updateMask: { paths: ["capabilities"] },
        });
        assert.deepEqual(updated.capabilities, [Capability.CAP_IAM_IDENTITY_LIST]);

        const fail = (p: Promise<unknown>) =>
          p.then(
            () => assert.fail("expected an error"),
            (e: unknown) => ConnectError.from(e),
          );
        const internal = await fail(
          client.createRole({ parent: org.uid, role: { name: "x", capabilities: [Capability.CAP_INTERNAL] } }),
        );
        assert.equal(internal.code, Code.InvalidArgument);
        assert.deepEqual(
          internal.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field),
          ["capabilities"],
        );
        // Both calls run at once, so each gets its handler at once (a rejection left waiting
        // for the loop to reach it would be reported as unhandled).
        const refusals = await Promise.all([
          fail(client.deleteRole({ uid: VIEWER_ROLE_UID })),
          fail(
            client.updateRole({
              role: { uid: VIEWER_ROLE_UID, description: "x" },
              updateMask: { paths: ["description"] },
            }),
          ),
        ]);
        for (const err of refusals) {
          assert.equal(err.code, Code.FailedPrecondition);
          assert.equal(err.findDetails(PreconditionFailureSchema)[0]?.violations[0]?.type, "BUILT_IN_ROLE");
        }
        await client.deleteRole({ uid: role.uid });
        assert.equal((await fail(client.getRole({ uid: role.uid }))).code, Code.NotFound);
      } finally {
        close();
      }
    });
  });
}
