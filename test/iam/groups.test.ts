// Groups over REST, black box, on every backend: CRUD, validation, update masks, delete
// preconditions, the JSON mapping and error bodies as the spec shows them.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { VERSION } from "../../src/core/version.js";
import { ERROR_DOMAIN, startTestServer, type TestServer } from "../support/server.js";

const NAME_RULE = 'name must match "^[a-z0-9 ._-]{1,}$"';
const ROOT_UID = /^[0-9a-f]{40}$/;
const MILLIS_TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

for (const backend of backends()) {
  describe(`groups over REST [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    const createOrg = async (name: string, description = "") => {
      const res = await api.post("/iam/v2beta1/groups", { name, description });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    };
    const countAll = async () => (await api.get("/iam/v2beta1/groups?page_size=1")).body.totalCount as string;

    it("creates a root organization with server-set fields", async () => {
      const org = await createOrg("acme", "Acme Corp");
      assert.match(org.uid, ROOT_UID);
      assert.equal(org.name, "acme");
      assert.equal(org.description, "Acme Corp");
      assert.equal(org.verified, false);
      assert.deepEqual(org.resourceLimits, {});
      assert.match(org.createTime, MILLIS_TIMESTAMP);
      assert.equal(org.updateTime, org.createTime);
      const got = await api.get(`/iam/v2beta1/groups/${org.uid}`);
      assert.equal(got.status, 200);
      assert.deepEqual(got.body, org);
    });

    it("creates a child under the parent in the path, with a 16-hex segment", async () => {
      const org = await createOrg("parent org");
      const res = await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "team.a_1-x" });
      assert.equal(res.status, 200);
      assert.match(res.body.uid, new RegExp(`^${org.uid}/[0-9a-f]{16}$`));
      // nested path with unencoded slashes
      const grand = await api.post(`/iam/v2beta1/groups/${res.body.uid}`, { name: "grand" });
      assert.equal(grand.status, 200);
      assert.match(grand.body.uid, new RegExp(`^${res.body.uid}/[0-9a-f]{16}$`));
      assert.equal((await api.get(`/iam/v2beta1/groups/${grand.body.uid}`)).body.name, "grand");
    });

    it("answers an empty body on create with the spec's error, field for field, and creates nothing", async () => {
      const before = await countAll();
      const res = await api.post("/iam/v2beta1/groups", {});
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, {
        code: 3,
        message: `Invalid argument: name: ${NAME_RULE}`,
        details: [
          { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "INVALID_ARGUMENT", domain: ERROR_DOMAIN },
          {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            fieldViolations: [{ field: "name", description: NAME_RULE }],
          },
        ],
      });
      assert.equal(await countAll(), before);
    });

    it("rejects names outside ^[a-z0-9 ._-]{1,}$", async () => {
      for (const name of ["", "Acme", "acme!", "ü", "a/b"]) {
        const res = await api.post("/iam/v2beta1/groups", { name });
        assert.equal(res.status, 400, name);
        assert.deepEqual(res.body.details[1].fieldViolations, [{ field: "name", description: NAME_RULE }]);
      }
    });

    it("answers NOT_FOUND with ResourceInfo for a missing parent or group", async () => {
      const missing = "0".repeat(40);
      const create = await api.post(`/iam/v2beta1/groups/${missing}`, { name: "orphan" });
      assert.equal(create.status, 404);
      assert.equal(create.body.code, 5);
      assert.deepEqual(create.body.details[0], {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        reason: "NOT_FOUND",
        domain: ERROR_DOMAIN,
      });
      assert.equal(create.body.details[1]["@type"], "type.googleapis.com/google.rpc.ResourceInfo");
      assert.equal(create.body.details[1].resourceName, missing);
      const get = await api.get(`/iam/v2beta1/groups/${missing}/0123456789abcdef`);
      assert.equal(get.status, 404);
      assert.equal(get.body.details[1].resourceType, "group");
    });

    it("rejects malformed uids in paths as INVALID_ARGUMENT", async () => {
      for (const path of [
        "/iam/v2beta1/groups/nope",
        "/iam/v2beta1/groups/ABC",
        `/iam/v2beta1/groups/${"a".repeat(40)}/short`,
      ]) {
        const res = await api.get(path);
        assert.equal(res.status, 400, path);
        assert.equal(res.body.code, 3);
        assert.equal(res.body.details[1].fieldViolations[0].field, "uid");
      }
      const res = await api.post("/iam/v2beta1/groups/xyz", { name: "a" });
      assert.equal(res.status, 400);
      assert.equal(res.body.details[1].fieldViolations[0].field, "parent");
    });

    it("PATCH without a mask changes only the keys present in the body", async () => {
      const org = await createOrg("patchme", "original");
      const a = await api.patch(`/iam/v2beta1/groups/${org.uid}`, { name: "renamed" });
      assert.equal(a.status, 200);
      assert.equal(a.body.name, "renamed");
      assert.equal(a.body.description, "original");
      // present-but-empty clears: presence, not non-default values
      const b = await api.patch(`/iam/v2beta1/groups/${org.uid}`, { description: "" });
      assert.equal(b.body.description, "");
      assert.equal(b.body.name, "renamed");
      // an empty body changes nothing
      const c = await api.patch(`/iam/v2beta1/groups/${org.uid}`, {});
      assert.equal(c.status, 200);
      assert.equal(c.body.name, "renamed");
      // a GET-shaped body with output-only fields is accepted; those are ignored
      const d = await api.patch(`/iam/v2beta1/groups/${org.uid}`, {
        ...c.body,
        description: "again",
        createTime: "2000-01-01T00:00:00Z",
        resourceLimits: { repositories: 9 },
      });
      assert.equal(d.status, 200, JSON.stringify(d.body));
      assert.equal(d.body.description, "again");
      assert.equal(d.body.createTime, org.createTime);
      assert.deepEqual(d.body.resourceLimits, {});
      assert.ok(d.body.updateTime >= org.updateTime);
    });

    it("PATCH with updateMask / update_mask changes only the listed fields", async () => {
      const org = await createOrg("masked", "keep");
      const a = await api.patch(`/iam/v2beta1/groups/${org.uid}?updateMask=name`, {
        name: "masked2",
        description: "ignored",
      });
      assert.equal(a.status, 200);
      assert.equal(a.body.name, "masked2");
      assert.equal(a.body.description, "keep");
      const b = await api.patch(`/iam/v2beta1/groups/${org.uid}?update_mask=description,name`, { description: "both" });
      assert.equal(b.status, 400, "masked name absent from the body becomes empty, which is invalid");
      assert.equal(
        (await api.get(`/iam/v2beta1/groups/${org.uid}`)).body.description,
        "keep",
        "a rejected update changes nothing",
      );
      const c = await api.patch(`/iam/v2beta1/groups/${org.uid}?update_mask=description`, {
        description: "only",
        name: "ignored",
      });
      assert.equal(c.body.description, "only");
      assert.equal(c.body.name, "masked2");
    });

    it("PATCH with mask * replaces every mutable field", async () => {
      const org = await createOrg("star", "will be cleared");
      const res = await api.patch(`/iam/v2beta1/groups/${org.uid}?update_mask=*`, { name: "star2" });
      assert.equal(res.status, 200);
      assert.equal(res.body.name, "star2");
      assert.equal(res.body.description, "");
      assert.equal(res.body.uid, org.uid);
      assert.equal(res.body.createTime, org.createTime);
    });

    it("PATCH rejects unknown and output-only mask paths, and invalid names, changing nothing", async () => {
      const org = await createOrg("strict", "same");
      for (const mask of ["bogus", "create_time", "uid", "resource_limits"]) {
        const res = await api.patch(`/iam/v2beta1/groups/${org.uid}?update_mask=${mask}`, { name: "x" });
        assert.equal(res.status, 400, mask);
        assert.equal(res.body.details[1].fieldViolations[0].field, "update_mask");
      }
      const bad = await api.patch(`/iam/v2beta1/groups/${org.uid}`, { name: "Bad Name" });
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body.details[1].fieldViolations, [{ field: "name", description: NAME_RULE }]);
      const now = await api.get(`/iam/v2beta1/groups/${org.uid}`);
      assert.deepEqual(now.body, org);
      const missing = await api.patch(`/iam/v2beta1/groups/${"1".repeat(40)}`, { name: "x" });
      assert.equal(missing.status, 404);
    });

    it("refuses to delete a group with children: the spec's error, field for field", async () => {
      const org = await createOrg("busy");
      const child = (await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "child" })).body;
      const res = await api.delete(`/iam/v2beta1/groups/${org.uid}`);
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, {
        code: 9,
        message: "Precondition failed: cannot delete group with child groups",
        details: [
          { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "FAILED_PRECONDITION", domain: ERROR_DOMAIN },
          {
            "@type": "type.googleapis.com/google.rpc.PreconditionFailure",
            violations: [{ type: "RESOURCE_NOT_EMPTY", description: "cannot delete group with child groups" }],
          },
        ],
      });
      assert.equal((await api.get(`/iam/v2beta1/groups/${org.uid}`)).status, 200);
      // reverse order of creation works
      const delChild = await api.delete(`/iam/v2beta1/groups/${child.uid}`);
      assert.equal(delChild.status, 200);
      assert.deepEqual(delChild.body, {});
      assert.equal((await api.delete(`/iam/v2beta1/groups/${org.uid}`)).status, 200);
      assert.equal((await api.get(`/iam/v2beta1/groups/${org.uid}`)).status, 404);
      assert.equal((await api.delete(`/iam/v2beta1/groups/${org.uid}`)).status, 404);
    });

    it("never leaves an orphan when a child is created while its parent is deleted", async () => {
      const org = await createOrg("race root");
      for (let round = 0; round < 15; round++) {
        const target = (await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: `target ${round}` })).body;
        const [del, create] = await Promise.all([
          api.delete(`/iam/v2beta1/groups/${target.uid}`),
          api.post(`/iam/v2beta1/groups/${target.uid}`, { name: "late child" }),
        ]);
        if (del.status === 200) {
          assert.equal(create.status, 404, `round ${round}: deleted parent but child create said ${create.status}`);
        } else {
          assert.equal(del.status, 400, `round ${round}: ${JSON.stringify(del.body)}`);
          assert.equal(del.body.code, 9);
          assert.equal(create.status, 200);
        }
      }
      const all = (await api.get(`/iam/v2beta1/groups?uidp.descendants_of=${org.uid}&page_size=200`)).body.groups as {
        uid: string;
      }[];
      const uids = new Set(all.map((g) => g.uid));
      for (const g of all) {
        const parent = g.uid.slice(0, g.uid.lastIndexOf("/"));
        if (g.uid !== org.uid) assert.ok(uids.has(parent), `orphan ${g.uid}`);
      }
    });

    it("uses the proto3 JSON mapping in list responses", async () => {
      const org = await createOrg("mapping");
      const res = await api.get(`/iam/v2beta1/groups?uidp.descendants_of=${org.uid}`);
      assert.equal(res.status, 200);
      assert.equal(res.body.totalCount, "1");
      assert.equal(res.body.skipped, 0);
      assert.equal("nextPageToken" in res.body, false);
      assert.match(res.body.groups[0].createTime, MILLIS_TIMESTAMP);
    });

    it("accepts proto and JSON names in bodies and query strings alike", async () => {
      const org = await createOrg("names");
      await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "one" });
      const snake = await api.get(`/iam/v2beta1/groups?uidp.descendants_of=${org.uid}&page_size=1&order_by=name`);
      const camel = await api.get(`/iam/v2beta1/groups?uidp.descendantsOf=${org.uid}&pageSize=1&orderBy=name`);
      assert.equal(snake.status, 200);
      assert.deepEqual(camel.body.groups, snake.body.groups);
      assert.equal(camel.body.totalCount, "2");
      const patched = await api.patch(`/iam/v2beta1/groups/${org.uid}?updateMask=description`, {
        description: "via camel",
      });
      assert.equal(patched.body.description, "via camel");
    });

    it("answers bad input with INVALID_ARGUMENT, never a 500, and changes nothing", async () => {
      const org = await createOrg("fuzz");
      const before = await countAll();
      const cases: [string, string, unknown][] = [
        ["POST", "/iam/v2beta1/groups", "{not json"],
        ["POST", "/iam/v2beta1/groups", "[1,2]"],
        ["POST", "/iam/v2beta1/groups", "null"],
        ["POST", "/iam/v2beta1/groups", { name: "ok", bogus: 1 }],
        ["POST", "/iam/v2beta1/groups", { name: 5 }],
        ["POST", "/iam/v2beta1/groups", { name: "ok", kind: "NOT_A_KIND" }],
        ["POST", "/iam/v2beta1/groups", { name: "ok", kind: 99 }],
        ["POST", `/iam/v2beta1/groups/${org.uid}`, "\u0000\u0001"],
        ["GET", "/iam/v2beta1/groups?bogus=1", undefined],
        ["GET", "/iam/v2beta1/groups?page_size=abc", undefined],
        ["GET", "/iam/v2beta1/groups?page_size=99999999999", undefined],
        ["GET", "/iam/v2beta1/groups?uidp.in_root=maybe", undefined],
        ["GET", "/iam/v2beta1/groups?uidp.descendants_of=zzz", undefined],
        ["GET", "/iam/v2beta1/groups?order_by=name%20sideways", undefined],
        ["GET", "/iam/v2beta1/groups?order_by=description", undefined],
        ["GET", "/iam/v2beta1/groups?page_token=garbage", undefined],
        ["GET", "/iam/v2beta1/groups?page_size=1&page_size=2", undefined],
        ["GET", "/iam/v2beta1/groups/%zz", undefined],
        ["PATCH", `/iam/v2beta1/groups/${org.uid}?update_mask=name`, '{"name":'],
      ];
      for (const [method, path, body] of cases) {
        const res = await api.call(method, path, body);
        assert.equal(
          res.status,
          400,
          `${method} ${path} ${JSON.stringify(body)} -> ${res.status} ${JSON.stringify(res.body)}`,
        );
        assert.equal(res.body.code, 3);
        assert.match(res.body.message, /^Invalid argument: /);
        assert.equal(res.body.details[0].reason, "INVALID_ARGUMENT");
        assert.equal(res.body.details[1]["@type"], "type.googleapis.com/google.rpc.BadRequest");
        assert.doesNotMatch(JSON.stringify(res.body), /at .*\.(ts|js):\d+/, "no stack traces");
      }
      const huge = await api.post("/iam/v2beta1/groups", { name: "big", description: "x".repeat(2 * 1024 * 1024) });
      assert.equal(huge.status, 400);
      assert.equal(await countAll(), before);
    });

    it("answers unknown routes with an AIP-193 NOT_FOUND", async () => {
      const res = await api.get("/iam/v2beta1/nothing-here");
      assert.equal(res.status, 404);
      assert.equal(res.body.code, 5);
      assert.equal(res.body.details[0].domain, ERROR_DOMAIN);
    });

    it("serves /healthz", async () => {
      const res = await api.get("/healthz");
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { status: "SERVING", version: VERSION });
    });
  });
}

for (const backend of backends()) {
  describe(`group verification [${backend}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(backend);
    });
    after(() => server.close());

    it("lets only the platform operator change verified", async () => {
      const operator = restClient(server.url, server.operatorToken);
      const org = (await operator.post("/iam/v2beta1/groups", { name: "verify-me" })).body;
      const id = (
        await operator.post(`/iam/v2beta1/identities/${org.uid}`, {
          name: "owner",
          claimMatch: { issuer: "https://issuer.example", subject: "o" },
        })
      ).body;
      const ownerRole = (await operator.get("/iam/v2beta1/roles?name=owner")).body.roles[0].uid;
      assert.equal(
        (await operator.post(`/iam/v2beta1/roleBindings/${org.uid}`, { identityUid: id.uid, roleUid: ownerRole }))
          .status,
        200,
      );
      const owner = restClient(server.url, await server.tokenFor(id.uid));
      const denied = await owner.patch(`/iam/v2beta1/groups/${org.uid}`, { verified: true });
      assert.equal(denied.status, 403);
      assert.equal(denied.body.code, 7);
      assert.equal(
        (await owner.patch(`/iam/v2beta1/groups/${org.uid}`, { description: "owners may edit this" })).status,
        200,
      );
      const byOperator = await operator.patch(`/iam/v2beta1/groups/${org.uid}`, { verified: true });
      assert.equal(byOperator.body.verified, true);
      // resending the current value is not a change
      assert.equal(
        (await owner.patch(`/iam/v2beta1/groups/${org.uid}`, { verified: true, description: "still" })).status,
        200,
      );
    });
  });
}
