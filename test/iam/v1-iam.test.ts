// The v1 IAM interface (package chainguard.platform.iam) as v1 clients speak it: `/iam/v1/...`
// paths, `items` envelopes, `id` for `uid`, `createdAt`/`updatedAt`/`lastSeen`, the relationship
// key `static`, capability names as strings, PUT replacing the whole resource, the v1 filters — over
// REST and gRPC, onto the same data the v2beta1 API shows. And every v1 RPC asks the same
// capabilities, scoped the same way, as the v2beta1 RPC it is adapted onto.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { getOption, hasOption } from "@bufbuild/protobuf";
import { exportJWK, generateKeyPair } from "jose";
import { iam } from "../../src/gen/annotations/auth_pb.js";
import { MODULES } from "../../src/server/modules.js";
import { backends } from "../support/db-templates.js";
import { VIEWER_ROLE_UID, createIdentity, createRole, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const ORG = "1a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
const SERVED = MODULES.flatMap((m) => m.services);

/** v1 method → the v2beta1 method it is adapted onto */
const ADAPTED_ONTO: Record<string, string> = {
  "Groups.Create": "GroupsService.CreateGroup",
  "Groups.Update": "GroupsService.UpdateGroup",
  "Groups.List": "GroupsService.ListGroups",
  "Groups.Delete": "GroupsService.DeleteGroup",
  "Groups.LookupGroup": "GroupsService.LookupGroup",
  "Groups.RequestGroupAccess": "GroupsService.RequestGroupAccess",
  "Groups.CheckEligibility": "GroupsService.CheckEligibility",
  "Identities.Create": "IdentitiesService.CreateIdentity",
  "Identities.Update": "IdentitiesService.UpdateIdentity",
  "Identities.List": "IdentitiesService.ListIdentities",
  "Identities.Lookup": "IdentitiesService.LookupIdentity",
  "Identities.Delete": "IdentitiesService.DeleteIdentity",
  "Roles.Create": "RolesService.CreateRole",
  "Roles.Update": "RolesService.UpdateRole",
  "Roles.List": "RolesService.ListRoles",
  "Roles.Delete": "RolesService.DeleteRole",
  "RoleBindings.Create": "RoleBindingsService.CreateRoleBinding",
  "RoleBindings.CreateBatch": "RoleBindingsService.BatchCreateRoleBindings",
  "RoleBindings.Update": "RoleBindingsService.UpdateRoleBinding",
  "RoleBindings.List": "RoleBindingsService.ListRoleBindings",
  "RoleBindings.Delete": "RoleBindingsService.DeleteRoleBinding",
  "IdentityProviders.Create": "IdentityProvidersService.CreateIdentityProvider",
  "IdentityProviders.Update": "IdentityProvidersService.UpdateIdentityProvider",
  "IdentityProviders.List": "IdentityProvidersService.ListIdentityProviders",
  "IdentityProviders.Delete": "IdentityProvidersService.DeleteIdentityProvider",
  "IdentityProviders.GenerateScimToken": "IdentityProvidersService.GenerateScimToken",
  "IdentityProviders.RegenerateScimToken": "IdentityProvidersService.RegenerateScimToken",
  "IdentityProviders.RevokeScimToken": "IdentityProvidersService.RevokeScimToken",
  "IdentityProviders.SetScimEnabled": "IdentityProvidersService.SetScimEnabled",
  "GroupAccountAssociations.Create": "AccountAssociationsService.CreateAccountAssociation",
  "GroupAccountAssociations.Update": "AccountAssociationsService.UpdateAccountAssociation",
  "GroupAccountAssociations.List": "AccountAssociationsService.ListAccountAssociations",
  "GroupAccountAssociations.Delete": "AccountAssociationsService.DeleteAccountAssociation",
  "GroupAccountAssociations.Check": "AccountAssociationsService.CheckAccountAssociation",
  "GroupInvites.Create": "GroupInvitesService.CreateGroupInvite",
  // unscoped in v1: the adapter requires the same capabilities on `group` itself
  "GroupInvites.CreateWithGroup": "GroupInvitesService.CreateGroupInvite",
  "GroupInvites.List": "GroupInvitesService.ListGroupInvites",
  "GroupInvites.Delete": "GroupInvitesService.DeleteGroupInvite",
};

/** A timestamp in protobuf's JSON: Connect writes 0, 3, 6 or 9 fractional digits, REST always 3. */
const RFC3339_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

/**
 * REST JSON carries fields at their zero value, Connect's JSON leaves them out: compare without
 * them (zero enums are the names ending in UNSPECIFIED), and timestamps as the instants they name
 * (Connect writes "…:29Z" where REST writes "…:29.000Z").
 */
function withoutZeros(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutZeros);
  if (value === null || typeof value !== "object") return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value)) {
    const z = withoutZeros(v);
    const empty = typeof z === "object" && z !== null && Object.keys(z).length === 0;
    if (z === "" || z === false || z === 0 || empty || (typeof z === "string" && z.endsWith("_UNSPECIFIED"))) continue;
    out[k] = typeof z === "string" && RFC3339_UTC.test(z) ? new Date(z).toISOString() : z;
  }
  return out;
}

function ruleOf(serviceName: string, methodName: string) {
  const service = SERVED.find((s) => s.typeName === serviceName);
  assert.ok(service, `${serviceName} is not served`);
  const method = service.methods.find((m) => m.name === methodName);
  assert.ok(method && hasOption(method, iam), `${serviceName}.${methodName} has no iam rule`);
  const rule = getOption(method, iam);
  assert.equal(rule.mode.case, "enabled");
  return { capabilities: [...rule.mode.value.capabilities].sort(), unscoped: rule.mode.value.unscoped };
}

test("every v1 IAM RPC is served and asks what the v2beta1 RPC it is adapted onto asks", () => {
  const v1 = SERVED.filter(
    (s) => s.typeName.startsWith("chainguard.platform.iam.") && s.typeName.split(".").length === 4,
  );
  assert.equal(v1.length, 7, v1.map((s) => s.typeName).join());
  const methods = v1.flatMap((s) => s.methods.map((m) => `${s.name}.${m.name}`)).sort();
  assert.deepEqual(methods, Object.keys(ADAPTED_ONTO).sort());
  for (const [v1Method, betaMethod] of Object.entries(ADAPTED_ONTO)) {
    const [s1, m1] = v1Method.split(".");
    const [s2, m2] = betaMethod.split(".");
    const a = ruleOf(`chainguard.platform.iam.${s1}`, m1!);
    const b = ruleOf(`chainguard.platform.iam.v2beta1.${s2}`, m2!);
    assert.deepEqual(a.capabilities, b.capabilities, v1Method);
    if (v1Method !== "GroupInvites.CreateWithGroup") assert.equal(a.unscoped, b.unscoped, v1Method);
  }
});

for (const backend of backends()) {
  describe(`v1 IAM (${backend})`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    const connect = (service: string, method: string, body: Json) =>
      api.call("POST", `/chainguard.platform.iam.${service}/${method}`, body, { "connect-protocol-version": "1" });

    before(async () => {
      server = await startTestServer(backend, { rootGroups: [{ uid: ORG, name: "v1-org" }] });
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server?.close());

    test("groups: create, list with items and filters, PUT replaces, delete; same data as v2beta1", async () => {
      const created = await api.post(`/iam/v1/groups/${ORG}`, { name: "team", description: "first" });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.equal(created.body.uid, undefined);
      assert.match(created.body.id, new RegExp(`^${ORG}/[0-9a-f]{16}$`));
      assert.equal(created.body.description, "first");
      const beta = await api.get(`/iam/v2beta1/groups/${created.body.id}`);
      assert.equal(beta.body.name, "team");

      const listed = await api.get(`/iam/v1/groups?uidp.childrenOf=${ORG}`);
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      assert.deepEqual(Object.keys(listed.body), ["items"]);
      assert.deepEqual(
        listed.body.items.map((g: Json) => g.id),
        [created.body.id],
      );
      const byId = await api.get(`/iam/v1/groups?id=${created.body.id}`);
      assert.deepEqual(byId.body.items, [created.body]);
      const none = await api.get(`/iam/v1/groups?id=${ORG}/ffffffffffffffff`);
      assert.deepEqual(none.body, { items: [] });

      // PUT: the whole resource; the description left out is reset.
      const put = await api.call("PUT", `/iam/v1/groups/${created.body.id}`, { name: "renamed" });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.name, "renamed");
      assert.equal(put.body.description ?? "", "");
      assert.equal((await api.get(`/iam/v2beta1/groups/${created.body.id}`)).body.description ?? "", "");

      const viaGrpc = await connect("Groups", "List", { uidp: { childrenOf: ORG } });
      assert.equal(viaGrpc.status, 200, JSON.stringify(viaGrpc.body));
      assert.deepEqual(withoutZeros(viaGrpc.body.items), withoutZeros([put.body]));

      const bad = await api.post(`/iam/v1/groups/${ORG}`, { name: "Bad Name!" });
      const betaBad = await api.post(`/iam/v2beta1/groups/${ORG}`, { name: "Bad Name!" });
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, betaBad.body);

      assert.equal((await api.delete(`/iam/v1/groups/${created.body.id}`)).status, 200);
      assert.equal((await api.get(`/iam/v2beta1/groups/${created.body.id}`)).status, 404);
      assert.equal((await api.delete(`/iam/v1/groups/${created.body.id}`)).status, 404);
    });

    test("roles: capabilities as names, unknown name refused, PUT replaces", async () => {
      const created = await api.post(`/iam/v1/roles/${ORG}`, {
        name: "v1-reader",
        description: "d",
        capabilities: ["groups.list", "repo.list"],
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.deepEqual(created.body.capabilities.sort(), ["groups.list", "repo.list"]);
      const beta = await api.get(`/iam/v2beta1/roles/${created.body.id}`);
      assert.deepEqual(beta.body.capabilities.sort(), ["CAP_IAM_GROUPS_LIST", "CAP_REPO_LIST"]);

      const unknown = await api.post(`/iam/v1/roles/${ORG}`, { name: "x", capabilities: ["groups.list", "nope"] });
      assert.equal(unknown.status, 400);
      assert.match(unknown.body.message, /capabilities\[1\]: unknown capability "nope"/);

      const put = await api.call("PUT", `/iam/v1/roles/${created.body.id}`, {
        name: "v1-reader",
        capabilities: ["groups.list"],
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.deepEqual(put.body.capabilities, ["groups.list"]);
      assert.equal(put.body.description ?? "", "");

      const byParent = await api.get(`/iam/v1/roles?parent=${ORG}`);
      assert.deepEqual(
        byParent.body.items.map((r: Json) => r.name),
        ["v1-reader"],
      );
      const viewer = await api.get(`/iam/v1/roles?id=${VIEWER_ROLE_UID}`);
      assert.equal(viewer.body.items.length, 1);
      assert.ok(viewer.body.items[0].capabilities.includes("groups.list"));
      const grpcList = await connect("Roles", "List", { id: created.body.id });
      assert.deepEqual(withoutZeros(grpcList.body.items), withoutZeros([put.body]));
    });

    test("identities: static keys as `static` with `expiration`, timestamps as createdAt/updatedAt, lookup", async () => {
      const expiration = new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d+Z$/, "Z");
      const { publicKey } = await generateKeyPair("ES256");
      const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256", use: "sig" }] });
      const created = await api.post(`/iam/v1/identities/${ORG}`, {
        name: "ci",
        static: { issuer: "https://ci.example", subject: "job", issuerKeys: jwks, expiration },
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.equal(Date.parse(created.body.static.expiration), Date.parse(expiration));
      assert.equal(created.body.static.subject, "job");
      const staticBeta = await api.get(`/iam/v2beta1/identities/${created.body.id}`);
      assert.equal(Date.parse(staticBeta.body.staticKeys.expirationTime), Date.parse(expiration));

      const claim = await api.post(`/iam/v1/identities/${ORG}`, {
        name: "robot",
        description: "d",
        claimMatch: { issuer: "https://issuer.example", subject: "robot-1" },
      });
      assert.equal(claim.status, 200, JSON.stringify(claim.body));
      assert.ok(claim.body.createdAt && claim.body.updatedAt, JSON.stringify(claim.body));
      assert.equal(claim.body.createTime, undefined);
      const beta = await api.get(`/iam/v2beta1/identities/${claim.body.id}`);
      assert.equal(beta.body.claimMatch.subject, "robot-1");
      assert.equal(Date.parse(beta.body.createTime), Date.parse(claim.body.createdAt));

      // Further claims travel both ways, as v2beta1 keeps them.
      const extra = await api.post(`/iam/v1/identities/${ORG}`, {
        name: "x",
        claimMatch: {
          issuer: "https://i.example",
          subject: "s",
          claims: { team: "a" },
          claimPatterns: { ref: "refs/heads/.*" },
        },
      });
      assert.equal(extra.status, 200, JSON.stringify(extra.body));
      assert.deepEqual(extra.body.claimMatch.claims, { team: "a" });
      assert.deepEqual(extra.body.claimMatch.claimPatterns, { ref: "refs/heads/.*" });
      const extraBeta = await api.get(`/iam/v2beta1/identities/${extra.body.id}`);
      assert.deepEqual(extraBeta.body.claimMatch.claims, { team: "a" });
      assert.deepEqual(extraBeta.body.claimMatch.claimPatterns, { ref: "refs/heads/.*" });
      const badPattern = await api.post(`/iam/v1/identities/${ORG}`, {
        name: "y",
        claimMatch: { issuer: "https://i.example", subject: "s", claimPatterns: { ref: "(" } },
      });
      assert.equal(badPattern.status, 400, JSON.stringify(badPattern.body));

      const looked = await api.get(`/iam/v1/identities/lookup?issuer=https://issuer.example&subject=robot-1`);
      assert.equal(looked.status, 200, JSON.stringify(looked.body));
      assert.equal(looked.body.id, claim.body.id);
      assert.equal(looked.body.name, "robot");

      const put = await api.call("PUT", `/iam/v1/identities/${claim.body.id}`, {
        name: "robot",
        claimMatch: { issuer: "https://issuer.example", subject: "robot-2" },
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.description ?? "", "");
      assert.equal(put.body.claimMatch.subject, "robot-2");

      const listed = await api.get(`/iam/v1/identities?uidp.childrenOf=${ORG}`);
      assert.ok(listed.body.items.some((i: Json) => i.id === claim.body.id && i.claimMatch.subject === "robot-2"));
      const grpc = await connect("Identities", "List", { id: claim.body.id });
      assert.deepEqual(withoutZeros(grpc.body.items), withoutZeros([put.body]));
      assert.equal((await api.delete(`/iam/v1/identities/${claim.body.id}`)).status, 200);
      assert.deepEqual((await api.get(`/iam/v1/identities?id=${claim.body.id}`)).body, { items: [] });
    });

    test("role bindings: create, batch, list items with group/role/identity details, PUT, delete", async () => {
      const role = await createRole(api, ORG, "binder", ["CAP_IAM_GROUPS_LIST"]);
      const one = await createIdentity(api, ORG, "one", "subject-one");
      const two = await createIdentity(api, ORG, "two", "subject-two");
      const created = await api.post(`/iam/v1/rolebindings/${ORG}`, { identity: one.uid, role: role.uid });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.deepEqual(
        { identity: created.body.identity, role: created.body.role, group: created.body.group },
        { identity: one.uid, role: role.uid, group: ORG },
      );
      const batch = await api.post(`/iam/v1/rolebindings/batch/${ORG}`, [{ identity: two.uid, role: VIEWER_ROLE_UID }]);
      assert.equal(batch.status, 200, JSON.stringify(batch.body));
      assert.equal(batch.body.roleBindings.length, 1);

      const listed = await api.get(`/iam/v1/rolebindings?uidp.childrenOf=${ORG}`);
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      const mine = listed.body.items.find((b: Json) => b.id === created.body.id);
      assert.ok(mine, JSON.stringify(listed.body));
      assert.equal(mine.group.id, ORG);
      assert.equal(mine.role.name, "binder");
      assert.deepEqual(mine.role.capabilities, ["groups.list"]);
      assert.equal(mine.identity, one.uid);
      assert.equal(mine.claimMatchSubject, "subject-one");
      assert.ok(mine.createdAt);

      const put = await api.call("PUT", `/iam/v1/rolebindings/${created.body.id}`, {
        identity: one.uid,
        role: VIEWER_ROLE_UID,
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.role, VIEWER_ROLE_UID);
      assert.equal((await api.get(`/iam/v2beta1/roleBindings/${created.body.id}`)).body.roleUid, VIEWER_ROLE_UID);
      const grpc = await connect("RoleBindings", "List", { id: created.body.id });
      assert.equal(grpc.body.items[0].role.id, VIEWER_ROLE_UID);
      assert.equal((await api.delete(`/iam/v1/rolebindings/${created.body.id}`)).status, 200);
      assert.equal((await api.get(`/iam/v2beta1/roleBindings/${created.body.id}`)).status, 404);
    });

    test("a viewer is refused writes and sees only what v2beta1 shows it", async () => {
      const viewer = await createIdentity(api, ORG, "viewer", "viewer-subject");
      const bound = await api.post(`/iam/v2beta1/roleBindings/${ORG}`, {
        identityUid: viewer.uid,
        roleUid: VIEWER_ROLE_UID,
      });
      assert.equal(bound.status, 200, JSON.stringify(bound.body));
      const as = restClient(server.url, await server.tokenFor(viewer.uid));
      const denied = await as.post(`/iam/v1/groups/${ORG}`, { name: "nope" });
      assert.equal(denied.status, 403, JSON.stringify(denied.body));
      const v1 = await as.get(`/iam/v1/groups?uidp.descendantsOf=${ORG}`);
      const beta = await as.get(`/iam/v2beta1/groups?uidp.descendantsOf=${ORG}&pageSize=1000`);
      assert.deepEqual(v1.body.items.map((g: Json) => g.id).sort(), beta.body.groups.map((g: Json) => g.uid).sort());
      const anonymous = await restClient(server.url).get(`/iam/v1/groups`);
      assert.equal(anonymous.status, 401);
    });
  });
}
