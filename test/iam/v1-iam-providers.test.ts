// The v1 IAM interface, continued: identity providers (OIDC settings, secrets never answered,
// PUT replaces), account associations (addressed by their group, `:check`), group invites (the
// role whole, capabilities as names; the code once; list by group) — over REST and gRPC, onto the
// same data the v2beta1 API shows.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { backends } from "../support/db-templates.js";
import { VIEWER_ROLE_UID, createGroup, createIdentity, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const ORG = "2a1b2c3d4e5f60718293a4b5c6d7e8f901234567";

for (const backend of backends()) {
  describe(`v1 IAM providers, associations, invites (${backend})`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    const connect = (service: string, method: string, body: Json) =>
      api.call("POST", `/chainguard.platform.iam.${service}/${method}`, body, { "connect-protocol-version": "1" });

    before(async () => {
      server = await startTestServer(backend, { rootGroups: [{ uid: ORG, name: "v1-providers" }] });
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server?.close());

    test("identity providers: create with OIDC settings, the secret never answered, PUT replaces, list, delete", async () => {
      const created = await api.post(`/iam/v1/identityProviders/${ORG}`, {
        name: "sso",
        description: "first",
        defaultRole: VIEWER_ROLE_UID,
        oidc: {
          issuer: "https://idp.example",
          clientId: "client",
          clientSecret: "s3cret",
          additionalScopes: ["email"],
        },
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.match(created.body.id, new RegExp(`^${ORG}/`));
      assert.equal(created.body.oidc.clientId, "client");
      assert.deepEqual(created.body.oidc.additionalScopes, ["email"]);
      assert.ok(!JSON.stringify(created.body).includes("s3cret"), "the client secret is never answered");
      const beta = await api.get(`/iam/v2beta1/identityProviders/${created.body.id}`);
      assert.equal(beta.body.oidc.issuer, "https://idp.example");

      const put = await api.call("PUT", `/iam/v1/identityProviders/${created.body.id}`, {
        name: "sso",
        defaultRole: VIEWER_ROLE_UID,
        oidc: { issuer: "https://idp.example", clientId: "client-2", clientSecret: "other" },
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.description ?? "", "");
      assert.equal(put.body.oidc.clientId, "client-2");
      assert.deepEqual(put.body.oidc.additionalScopes ?? [], []);

      const listed = await api.get(`/iam/v1/identityProviders?uidp.childrenOf=${ORG}`);
      assert.deepEqual(
        listed.body.items.map((p: Json) => p.id),
        [created.body.id],
      );
      const byName = await connect("IdentityProviders", "List", { id: created.body.id, name: "other" });
      assert.equal(byName.status, 200, JSON.stringify(byName.body));
      assert.deepEqual(byName.body.items ?? [], []);

      const bad = await api.post(`/iam/v1/identityProviders/${ORG}`, { name: "" });
      const betaBad = await api.post(`/iam/v2beta1/identityProviders/${ORG}`, { name: "" });
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, betaBad.body);
      assert.equal((await api.delete(`/iam/v1/identityProviders/${created.body.id}`)).status, 200);
      assert.equal((await api.get(`/iam/v2beta1/identityProviders/${created.body.id}`)).status, 404);
    });

    test("account associations: addressed by the group, PUT replaces, list, check, delete", async () => {
      const group = await createGroup(api, ORG, "aws-team");
      const created = await api.post(`/iam/v1/account_associations/${group.uid}`, {
        name: "aws",
        description: "prod",
        amazon: { account: "123456789012" },
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.equal(created.body.group, group.uid);
      assert.equal(created.body.amazon.account, "123456789012");
      assert.equal(
        (await api.get(`/iam/v2beta1/accountAssociations/${group.uid}`)).body.amazon.account,
        "123456789012",
      );

      const put = await api.call("PUT", `/iam/v1/account_associations/${group.uid}`, {
        name: "aws",
        google: { projectId: "project-one", projectNumber: "123456789" },
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.description ?? "", "");
      assert.equal(put.body.amazon ?? null, null, "amazon left out: removed");
      assert.equal(put.body.google.projectId, "project-one");

      const byGroup = await api.get(`/iam/v1/account_associations?group=${group.uid}`);
      assert.deepEqual(byGroup.body.items, [put.body]);
      const all = await api.get(`/iam/v1/account_associations`);
      assert.ok(all.body.items.some((a: Json) => a.group === group.uid));

      const check = await api.post(`/iam/v1/account_associations/${group.uid}:check`, { accountType: "GOOGLE" });
      const betaCheck = await api.post(`/iam/v2beta1/accountAssociations/${group.uid}:checkAccountAssociation`, {
        providerType: "ACCOUNT_PROVIDER_TYPE_GOOGLE",
      });
      assert.equal(check.status, betaCheck.status, JSON.stringify([check.body, betaCheck.body]));
      if (check.status === 200) {
        assert.equal(check.body.reason, betaCheck.body.reason);
        const statusOf: Record<string, string> = { Ready: "CHECK_STATUS_READY", NotReady: "CHECK_STATUS_NOT_READY" };
        assert.equal(statusOf[check.body.ready], betaCheck.body.status);
      }
      assert.equal((await api.delete(`/iam/v1/account_associations/${group.uid}`)).status, 200);
      assert.deepEqual((await api.get(`/iam/v1/account_associations?group=${group.uid}`)).body, { items: [] });
    });

    test("group invites: create answers the role whole and the code once; list by group; delete", async () => {
      const created = await api.post(`/iam/v1/group_invites/${ORG}`, {
        role: VIEWER_ROLE_UID,
        ttl: "3600s",
        email: "dev@example.com",
        singleUse: true,
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.ok(created.body.code, "the code is answered on create");
      assert.equal(created.body.role.id, VIEWER_ROLE_UID);
      assert.ok(created.body.role.capabilities.includes("groups.list"), JSON.stringify(created.body.role));
      assert.ok(Date.parse(created.body.expiration) > Date.now());

      const listed = await api.get(`/iam/v1/group_invites?group=${ORG}`);
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      const stored = listed.body.items.find((i: Json) => i.id === created.body.id);
      assert.ok(stored, JSON.stringify(listed.body));
      assert.equal(stored.code, undefined);
      assert.equal(stored.email, "dev@example.com");
      assert.equal(stored.singleUse, true);
      assert.equal(stored.keyId, created.body.keyId);
      assert.ok(stored.createdAt);
      const byKey = await connect("GroupInvites", "List", { group: ORG, keyId: created.body.keyId });
      assert.deepEqual(
        byKey.body.items.map((i: Json) => i.id),
        [created.body.id],
      );

      const viewer = await createIdentity(api, ORG, "viewer", "invite-viewer");
      await api.post(`/iam/v2beta1/roleBindings/${ORG}`, { identityUid: viewer.uid, roleUid: VIEWER_ROLE_UID });
      const as = restClient(server.url, await server.tokenFor(viewer.uid));
      const denied = await as.post(`/iam/v1/group_invites/${ORG}`, { role: VIEWER_ROLE_UID, ttl: "60s" });
      assert.equal(denied.status, 403, JSON.stringify(denied.body));
      const viaGrpcDenied = await as.call(
        "POST",
        "/chainguard.platform.iam.GroupInvites/CreateWithGroup",
        { group: ORG, role: VIEWER_ROLE_UID, ttl: "60s" },
        { "connect-protocol-version": "1" },
      );
      assert.equal(viaGrpcDenied.status, 403, JSON.stringify(viaGrpcDenied.body));
      const withGroup = await connect("GroupInvites", "CreateWithGroup", {
        group: ORG,
        role: VIEWER_ROLE_UID,
        ttl: "60s",
      });
      assert.equal(withGroup.status, 200, JSON.stringify(withGroup.body));
      const noGroup = await connect("GroupInvites", "CreateWithGroup", { role: VIEWER_ROLE_UID, ttl: "60s" });
      assert.equal(noGroup.status, 400, JSON.stringify(noGroup.body));

      assert.equal((await api.delete(`/iam/v1/group_invites/${created.body.id}`)).status, 200);
      assert.equal((await api.get(`/iam/v2beta1/groupInvites/${created.body.id}`)).status, 404);
    });
  });
}
