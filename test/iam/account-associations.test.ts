// AccountAssociations over REST (and a gRPC smoke), black box, on every backend: one per group
// (uid = the group's uid), the provider blocks' rules, canonical JSON at rest, PATCH semantics,
// the honest CheckAccountAssociation, listing and delete preconditions.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  AccountAssociationsService,
  AccountProviderType,
  CheckStatus,
} from "../../src/gen/chainguard/platform/iam/v2beta1/account_associations_pb.js";
import { BadRequestSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { assertInvalid, assertResourceNotFound, fieldViolations } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import { createGroup } from "../support/fixtures.js";
import { restClient, type JsonResponse } from "../support/http.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";

const AA = "/iam/v2beta1/accountAssociations";
const TENANT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const CLIENT = "11111111-2222-3333-4444-555555555555";

for (const backend of backends()) {
  describe(`account associations [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let org: any;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "aa org");
    });
    after(() => server.close());

    const amazon = { account: "123456789012" };
    const google = { projectId: "my-project-1", projectNumber: "987654321098" };
    const azure = { tenantId: TENANT, clientIds: { registry: CLIENT } };
    const github = { appInstallations: { "123456": { installations: [{ installationId: "42", name: "acme-org" }] } } };
    const chainguard = { serviceBindings: { INGESTER: "b3f0c1d2e4a5968778695a4b3c2d1e0f9a8b7c6d" } };
    async function createAA(group: string, body: Record<string, unknown> = { name: "links", amazon }) {
      const res = await api.post(`${AA}/${group}`, body);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    }
    const countAll = async () => (await api.get(`${AA}?page_size=1`)).body.totalCount as string;
    const row = (uid: string) =>
      server.db.selectFrom("account_associations").selectAll().where("uid", "=", uid).executeTakeFirstOrThrow();
    let n = 0;
    const freshGroup = async (parent = org.uid) => createGroup(api, parent, `g${n++}`);

    it("creates the group's association: uid = group uid, parent_uid = the group's parent, blocks echoed", async () => {
      const group = await freshGroup();
      const res = await api.post(`${AA}/${group.uid}`, {
        name: "all clouds",
        description: "every block",
        amazon,
        google,
        azure,
        github,
        chainguard,
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const aa = res.body;
      assert.equal(aa.uid, group.uid);
      assert.equal(aa.name, "all clouds");
      assert.equal(aa.description, "every block");
      assert.deepEqual(aa.amazon, amazon);
      assert.deepEqual(aa.google, google);
      assert.deepEqual(aa.azure, azure);
      assert.deepEqual(aa.github, github);
      assert.deepEqual(aa.chainguard, chainguard);
      assert.equal(aa.updateTime, aa.createTime);
      assert.deepEqual((await api.get(`${AA}/${group.uid}`)).body, aa);
      assert.equal((await row(group.uid)).parent_uid, org.uid);

      const root = await createAA(org.uid, { name: "root links", amazon });
      assert.equal(root.uid, org.uid);
      assert.equal((await row(org.uid)).parent_uid, null, "an organization's association has no parent");
    });

    it("stores the provider blocks as canonical JSON, only those present", async () => {
      const group = await freshGroup();
      await createAA(group.uid, { name: "stored", google, github });
      assert.deepEqual((await row(group.uid)).providers, { google, github });
      const got = (await api.get(`${AA}/${group.uid}`)).body;
      assert.equal("amazon" in got, false);
      assert.equal("azure" in got, false);
    });

    it("a second association for the same group is ALREADY_EXISTS", async () => {
      const group = await freshGroup();
      const first = await createAA(group.uid);
      const again = await api.post(`${AA}/${group.uid}`, { name: "again", google });
      assert.equal(again.status, 409, JSON.stringify(again.body));
      assert.equal(again.body.code, 6);
      assert.equal(again.body.details[0].reason, "ALREADY_EXISTS");
      assert.deepEqual((await api.get(`${AA}/${group.uid}`)).body, first);
      // concurrent creates: exactly one wins
      const other = await freshGroup();
      const results = await Promise.all(
        [1, 2, 3, 4].map((i) => api.post(`${AA}/${other.uid}`, { name: `racer ${i}`, amazon })),
      );
      assert.deepEqual(results.map((r) => r.status).sort(), [200, 409, 409, 409]);
    });

    it("requires a valid, existing group", async () => {
      const before = await countAll();
      assertInvalid(await api.post(AA, { name: "x", amazon }), "parent", "no parent");
      assertInvalid(await api.post(`${AA}/NOPE`, { name: "x", amazon }), "parent", "malformed");
      const missing = "0".repeat(40);
      assertResourceNotFound(await api.post(`${AA}/${missing}`, { name: "x", amazon }), "group", missing);
      assertResourceNotFound(
        await api.post(`${AA}/${org.uid}/0123456789abcdef`, { name: "x", amazon }),
        "group",
        `${org.uid}/0123456789abcdef`,
      );
      assert.equal(await countAll(), before);
    });

    it("applies the name rule", async () => {
      const group = await freshGroup();
      for (const name of ["", "Links", "links!"]) {
        const res = await api.post(`${AA}/${group.uid}`, { name, amazon });
        assertInvalid(res, "name", JSON.stringify(name));
      }
      assertResourceNotFound(await api.get(`${AA}/${group.uid}`), "account association", group.uid);
    });

    it("requires at least one provider block", async () => {
      const group = await freshGroup();
      const res = await api.post(`${AA}/${group.uid}`, { name: "empty" });
      assert.deepEqual(
        fieldViolations(res).map((v) => v.field),
        ["account_association"],
      );
      assertResourceNotFound(await api.get(`${AA}/${group.uid}`), "account association", group.uid);
    });

    it("amazon.account: required, exactly 12 digits", async () => {
      const group = await freshGroup();
      for (const account of ["", "12345678901", "1234567890123", "12345678901a", " 123456789012", "١٢٣٤٥٦٧٨٩٠١٢"]) {
        assertInvalid(
          await api.post(`${AA}/${group.uid}`, { name: "aws", amazon: { account } }),
          "amazon.account",
          JSON.stringify(account),
        );
      }
      assertInvalid(await api.post(`${AA}/${group.uid}`, { name: "aws", amazon: {} }), "amazon.account", "empty block");
      assert.equal((await api.get(`${AA}/${group.uid}`)).status, 404);
      assert.deepEqual((await createAA(group.uid, { name: "aws", amazon: { account: "000000000001" } })).amazon, {
        account: "000000000001",
      });
    });

    it("google: project_id 6-30 lowercase letters/digits/hyphens starting with a letter; project_number digits; both required", async () => {
      const group = await freshGroup();
      for (const projectId of ["", "abcde", "a".repeat(31), "1abcdef", "Abcdef", "abc_def", "-abcdef", "abc def"]) {
        assertInvalid(
          await api.post(`${AA}/${group.uid}`, { name: "gcp", google: { ...google, projectId } }),
          "google.project_id",
          JSON.stringify(projectId),
        );
      }
      for (const projectNumber of ["", "12a", "-1", "1.5", " 1"]) {
        assertInvalid(
          await api.post(`${AA}/${group.uid}`, { name: "gcp", google: { ...google, projectNumber } }),
          "google.project_number",
          JSON.stringify(projectNumber),
        );
      }
      const both = await api.post(`${AA}/${group.uid}`, { name: "gcp", google: {} });
      assert.deepEqual(
        fieldViolations(both).map((v) => v.field),
        ["google.project_id", "google.project_number"],
      );
      assert.equal((await api.get(`${AA}/${group.uid}`)).status, 404);
      for (const projectId of ["abcdef", "a".repeat(30), "x-1-y-2"]) {
        const g = await freshGroup();
        assert.equal(
          (await createAA(g.uid, { name: "gcp", google: { ...google, projectId } })).google.projectId,
          projectId,
        );
      }
    });

    it("azure: tenant_id a UUID; client_ids a non-empty map of name -> UUID", async () => {
      const group = await freshGroup();
      for (const tenantId of ["", "not-a-uuid", "0f1e2d3c4b5a69788796a5b4c3d2e1f0", `${TENANT}0`]) {
        assertInvalid(
          await api.post(`${AA}/${group.uid}`, { name: "az", azure: { ...azure, tenantId } }),
          "azure.tenant_id",
          tenantId,
        );
      }
      assertInvalid(
        await api.post(`${AA}/${group.uid}`, { name: "az", azure: { tenantId: TENANT } }),
        "azure.client_ids",
        "no clients",
      );
      assertInvalid(
        await api.post(`${AA}/${group.uid}`, { name: "az", azure: { tenantId: TENANT, clientIds: { app: "nope" } } }),
        'azure.client_ids["app"]',
      );
      assertInvalid(
        await api.post(`${AA}/${group.uid}`, { name: "az", azure: { tenantId: TENANT, clientIds: { "": CLIENT } } }),
        'azure.client_ids[""]',
      );
      assert.equal((await api.get(`${AA}/${group.uid}`)).status, 404);
      const upper = { tenantId: TENANT.toUpperCase(), clientIds: { a: CLIENT, b: CLIENT.toUpperCase() } };
      assert.deepEqual((await createAA(group.uid, { name: "az", azure: upper })).azure, upper);
    });

    it("github: installations need a positive installation_id; app ids are positive", async () => {
      const group = await freshGroup();
      const bad = (installationId: string) => ({
        name: "gh",
        github: { appInstallations: { "77": { installations: [{ installationId: "5" }, { installationId }] } } },
      });
      for (const id of ["0", "-3"]) {
        assertInvalid(
          await api.post(`${AA}/${group.uid}`, bad(id)),
          "github.app_installations[77].installations[1].installation_id",
          id,
        );
      }
      assertInvalid(
        await api.post(`${AA}/${group.uid}`, bad("5")),
        "github.app_installations[77].installations[1].installation_id",
        "duplicate",
      );
      assertInvalid(
        await api.post(`${AA}/${group.uid}`, {
          name: "gh",
          github: { appInstallations: { "0": { installations: [] } } },
        }),
        "github.app_installations[0]",
      );
      const notInt = await api.post(`${AA}/${group.uid}`, {
        name: "gh",
        github: { appInstallations: { x: { installations: [] } } },
      });
      assert.equal(notInt.status, 400, "a non-integer app id does not decode");
      assert.equal(notInt.body.code, 3);
      assert.equal((await api.get(`${AA}/${group.uid}`)).status, 404);
      const big = {
        appInstallations: {
          "9007199254740993": {
            installations: [
              { installationId: "9223372036854775807", name: "" },
              { installationId: "1", name: "second" },
            ],
          },
        },
      };
      const made = await createAA(group.uid, { name: "gh", github: big });
      assert.deepEqual(
        made.github.appInstallations["9007199254740993"].installations.map((i: any) => i.installationId),
        ["9223372036854775807", "1"],
      );
    });

    it("chainguard: service_bindings is a required, non-empty map", async () => {
      const group = await freshGroup();
      assertInvalid(
        await api.post(`${AA}/${group.uid}`, { name: "cg", chainguard: {} }),
        "chainguard.service_bindings",
      );
      assertInvalid(
        await api.post(`${AA}/${group.uid}`, { name: "cg", chainguard: { serviceBindings: { INGESTER: "" } } }),
        'chainguard.service_bindings["INGESTER"]',
      );
      assert.equal((await api.get(`${AA}/${group.uid}`)).status, 404);
      assert.deepEqual((await createAA(group.uid, { name: "cg", chainguard })).chainguard, chainguard);
    });

    it("PATCH: nested paths, adding and removing blocks, masks; bad input changes nothing", async () => {
      const group = await freshGroup();
      const aa = await createAA(group.uid, { name: "patchable", amazon });
      const a = await api.patch(`${AA}/${group.uid}`, { amazon: { account: "210987654321" } });
      assert.equal(a.status, 200, JSON.stringify(a.body));
      assert.deepEqual(a.body.amazon, { account: "210987654321" });
      assert.equal(a.body.name, "patchable");
      const b = await api.patch(`${AA}/${group.uid}`, { google, description: "now with gcp" });
      assert.deepEqual(b.body.google, google);
      assert.deepEqual(b.body.amazon, { account: "210987654321" });
      assert.equal(b.body.description, "now with gcp");
      const c = await api.patch(`${AA}/${group.uid}`, { amazon: null });
      assert.equal(c.status, 200);
      assert.equal("amazon" in c.body, false);
      assert.deepEqual((await row(group.uid)).providers, { google });
      const d = await api.patch(`${AA}/${group.uid}?update_mask=azure`, { azure, google: { projectId: "ignored" } });
      assert.deepEqual(d.body.azure, azure);
      assert.deepEqual(d.body.google, google);
      const e = await api.patch(`${AA}/${group.uid}?update_mask=azure.client_ids`, {
        azure: { clientIds: { other: CLIENT } },
      });
      assert.deepEqual(
        e.body.azure,
        { tenantId: TENANT, clientIds: { other: CLIENT } },
        "a map is replaced as a whole",
      );
      assert.equal(e.body.createTime, aa.createTime);

      const current = (await api.get(`${AA}/${group.uid}`)).body;
      assertInvalid(await api.patch(`${AA}/${group.uid}`, { amazon: { account: "12" } }), "amazon.account");
      assertInvalid(await api.patch(`${AA}/${group.uid}`, { google: { projectNumber: "x" } }), "google.project_number");
      assertInvalid(
        await api.patch(`${AA}/${group.uid}?update_mask=google,azure`, {}),
        "account_association",
        "removing every block",
      );
      assertInvalid(await api.patch(`${AA}/${group.uid}`, { name: "Bad" }), "name");
      assertInvalid(await api.patch(`${AA}/${group.uid}?update_mask=uid`, {}), "update_mask");
      assert.deepEqual((await api.get(`${AA}/${group.uid}`)).body, current);
      const missing = (await freshGroup()).uid;
      assertResourceNotFound(await api.patch(`${AA}/${missing}`, { name: "x" }), "account association", missing);
    });

    it("CheckAccountAssociation is honest: never READY; UNVERIFIABLE when configured, NOT_CONFIGURED otherwise", async () => {
      const group = await freshGroup();
      await createAA(group.uid, { name: "checkable", amazon, google });
      const check = (uid: string, providerType: unknown) =>
        api.post(`${AA}/${uid}:checkAccountAssociation`, { providerType });
      for (const type of ["ACCOUNT_PROVIDER_TYPE_AMAZON", "ACCOUNT_PROVIDER_TYPE_GOOGLE"]) {
        const res = await check(group.uid, type);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.status, "CHECK_STATUS_NOT_READY");
        assert.equal(res.body.reason, "UNVERIFIABLE");
        assert.match(res.body.message, /is present, but it cannot be verified from this server/);
      }
      assert.match((await check(group.uid, "ACCOUNT_PROVIDER_TYPE_AMAZON")).body.message, /account 123456789012/);
      const azureCheck = await check(group.uid, "ACCOUNT_PROVIDER_TYPE_AZURE");
      assert.deepEqual(azureCheck.body, {
        status: "CHECK_STATUS_NOT_READY",
        reason: "NOT_CONFIGURED",
        message: "the account association has no azure configuration",
      });

      assertInvalid(await check(group.uid, "ACCOUNT_PROVIDER_TYPE_UNSPECIFIED"), "provider_type");
      assertInvalid(await api.post(`${AA}/${group.uid}:checkAccountAssociation`, {}), "provider_type", "absent");
      const missing = (await freshGroup()).uid;
      assertResourceNotFound(await check(missing, "ACCOUNT_PROVIDER_TYPE_AMAZON"), "account association", missing);
      assertInvalid(await check("nope", "ACCOUNT_PROVIDER_TYPE_AMAZON"), "uid");
    });

    it("lists with uidp and name filters, order_by, paging, skip and totalCount", async () => {
      const root = await createGroup(api, undefined, "aa list root");
      const a = await createGroup(api, root.uid, "a");
      const b = await createGroup(api, root.uid, "b");
      const a1 = await createGroup(api, a.uid, "a1");
      for (const [group, name] of [
        [root, "echo"],
        [a, "delta"],
        [b, "alpha"],
        [a1, "charlie"],
      ] as const) {
        await createAA(group.uid, { name, amazon });
      }
      const list = async (q: string) => {
        const res = await api.get(`${AA}?${q}`);
        assert.equal(res.status, 200, `${q}: ${JSON.stringify(res.body)}`);
        return res.body;
      };
      const names = (r: any) => (r.accountAssociations ?? []).map((i: any) => i.name);
      const all = await list(`uidp.descendants_of=${root.uid}&order_by=name`);
      assert.deepEqual(names(all), ["alpha", "charlie", "delta", "echo"]);
      assert.equal(all.totalCount, "4");
      assert.deepEqual(names(await list(`uidp.children_of=${root.uid}&order_by=name desc`)), ["delta", "alpha"]);
      assert.deepEqual(names(await list(`uidp.descendants_of=${a.uid}&order_by=name`)), ["charlie", "delta"]);
      assert.deepEqual(names(await list(`uidp.ancestors_of=${a1.uid}&order_by=name`)), ["charlie", "delta", "echo"]);
      assert.deepEqual(names(await list(`uidp.descendants_of=${root.uid}&name=alpha`)), ["alpha"]);
      assert.deepEqual(names(await list(`uidp.descendants_of=${root.uid}&order_by=create_time desc`)), [
        "charlie",
        "alpha",
        "delta",
        "echo",
      ]);
      const page1 = await list(`uidp.descendants_of=${root.uid}&order_by=name&page_size=3`);
      assert.deepEqual(names(page1), ["alpha", "charlie", "delta"]);
      const page2 = await list(
        `uidp.descendants_of=${root.uid}&order_by=name&page_size=3&page_token=${encodeURIComponent(page1.nextPageToken)}`,
      );
      assert.deepEqual(names(page2), ["echo"]);
      assert.equal(page2.nextPageToken ?? "", "", "the last page has no next token");
      const skipped = await list(`uidp.descendants_of=${root.uid}&order_by=name&skip=2`);
      assert.deepEqual(names(skipped), ["delta", "echo"]);
      assert.equal(skipped.skipped, 2);
      assertInvalid(await api.get(`${AA}?order_by=amazon`), "order_by");
    });

    it("deletes; the group then deletes too; while it exists the group cannot be deleted", async () => {
      const group = await freshGroup();
      await createAA(group.uid);
      const blocked = await api.delete(`/iam/v2beta1/groups/${group.uid}`);
      assert.equal(blocked.status, 400);
      assert.equal(blocked.body.code, 9);
      assert.equal(blocked.body.message, "Precondition failed: cannot delete group with account associations");
      const pf = blocked.body.details.find(
        (d: any) => d["@type"] === "type.googleapis.com/google.rpc.PreconditionFailure",
      );
      assert.deepEqual(pf.violations, [
        { type: "RESOURCE_NOT_EMPTY", description: "cannot delete group with account associations" },
      ]);

      const del = await api.delete(`${AA}/${group.uid}`);
      assert.equal(del.status, 200);
      assert.deepEqual(del.body, {});
      assertResourceNotFound(await api.get(`${AA}/${group.uid}`), "account association", group.uid);
      assertResourceNotFound(await api.delete(`${AA}/${group.uid}`), "account association", group.uid);
      assert.equal((await api.delete(`/iam/v2beta1/groups/${group.uid}`)).status, 200);
      // and the group's uid can carry a new association once recreated? no: uids are never reused
      assertResourceNotFound(await api.post(`${AA}/${group.uid}`, { name: "late", amazon }), "group", group.uid);
    });

    it("gRPC smoke: create, get, list, update, check, errors, delete", async () => {
      const group = await freshGroup();
      const { client, close } = operatorGrpc(server, AccountAssociationsService);
      try {
        const created = await client.createAccountAssociation({
          parent: group.uid,
          accountAssociation: {
            name: "grpc links",
            amazon: { account: "123456789012" },
            github: { appInstallations: { "5": { installations: [{ installationId: 6n }] } } },
          },
        });
        assert.equal(created.uid, group.uid);
        assert.equal(created.github?.appInstallations["5"]?.installations[0]?.installationId, 6n);
        assert.equal((await client.getAccountAssociation({ uid: group.uid })).name, "grpc links");
        const list = await client.listAccountAssociations({ uidp: { ids: [group.uid] } });
        assert.deepEqual(
          list.accountAssociations.map((a) => a.uid),
          [group.uid],
        );
        assert.equal(list.totalCount, 1n);
        const updated = await client.updateAccountAssociation({
          accountAssociation: { uid: group.uid, google: { projectId: "grpc-project", projectNumber: "1" } },
        });
        assert.equal(updated.google?.projectId, "grpc-project");
        assert.equal(updated.amazon?.account, "123456789012");
        const check = await client.checkAccountAssociation({
          uid: group.uid,
          providerType: AccountProviderType.GOOGLE,
        });
        assert.equal(check.status, CheckStatus.NOT_READY);
        assert.equal(check.reason, "UNVERIFIABLE");

        const fail = (p: Promise<unknown>) =>
          p.then(
            () => assert.fail("succeeded"),
            (e: unknown) => ConnectError.from(e),
          );
        const dup = await fail(
          client.createAccountAssociation({
            parent: group.uid,
            accountAssociation: { name: "dup", amazon: { account: "123456789012" } },
          }),
        );
        assert.equal(dup.code, Code.AlreadyExists);
        const invalid = await fail(
          client.updateAccountAssociation({ accountAssociation: { uid: group.uid, amazon: { account: "1" } } }),
        );
        assert.equal(invalid.code, Code.InvalidArgument);
        assert.deepEqual(
          invalid.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field),
          ["amazon.account"],
        );
        const unspecified = await fail(client.checkAccountAssociation({ uid: group.uid }));
        assert.equal(unspecified.code, Code.InvalidArgument);

        await client.deleteAccountAssociation({ uid: group.uid });
        assert.equal((await fail(client.getAccountAssociation({ uid: group.uid }))).code, Code.NotFound);
      } finally {
        close();
      }
    });
  });
}
