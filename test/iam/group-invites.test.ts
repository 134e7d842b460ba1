// Group invites on every backend: REST black box (create/get/list/delete, validation, role
// visibility, the one-time code, ttl bounds, ordering, filters, paging, delete preconditions), a
// gRPC smoke test, query counts of List, and the invite check (findUsableInvite) with the
// repository's markUsed against the real database.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  GroupInvitesService,
  ListGroupInvitesRequestSchema,
} from "../../src/gen/chainguard/platform/iam/v2beta1/group_invites_pb.js";
import { BadRequestSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { PageTokenCodec } from "../../src/core/page-tokens.js";
import { groupInvitesService, MAX_INVITE_TTL_SECONDS } from "../../src/iam/group-invites.js";
import { findUsableInvite, parseInviteCode } from "../../src/iam/invites.js";
import { GroupInvitesRepository } from "../../src/iam/storage/group-invites.js";
import { assertInvalid, assertResourceNotFound } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createRole } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { ERROR_DOMAIN, operatorGrpc, queryCounter, startTestServer, type TestServer } from "../support/server.js";
import { clockPast } from "../support/wait.js";

const GI = "/iam/v2beta1/groupInvites";
const VIEWER_UID = "63921b2c44617e3f2603851537be0123af4a57d7";
const MILLIS_TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const CODE = /^([0-9a-f]{16})\.([A-Za-z0-9_-]{43})$/;
const INVITE_KEYS = ["code", "createTime", "email", "expirationTime", "keyId", "role", "roleUid", "singleUse", "uid"];

for (const backend of backends()) {
  describe(`group invites [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let org: any;
    let team: any;
    let squad: any;
    let sibling: any;
    let orgRole: any;
    let siblingRole: any;
    let viewer: any;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "invite org");
      team = await createGroup(api, org.uid, "team");
      squad = await createGroup(api, team.uid, "squad");
      sibling = await createGroup(api, org.uid, "sibling");
      orgRole = await createRole(api, org.uid, "org reader", ["CAP_IAM_GROUPS_LIST", "CAP_IAM_ROLES_LIST"]);
      siblingRole = await createRole(api, sibling.uid, "sibling reader", ["CAP_IAM_GROUPS_LIST"]);
      viewer = (await api.get(`/iam/v2beta1/roles/${VIEWER_UID}`)).body;
      assert.equal(viewer.name, "viewer");
    });
    after(() => server.close());

    async function invite(parent: string, body: Record<string, unknown> = {}) {
      const res = await api.post(`${GI}/${parent}`, { roleUid: VIEWER_UID, ttl: "3600s", ...body });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    }
    const countAll = async () => (await api.get(`${GI}?page_size=1`)).body.totalCount as string;
    const listUnder = async (group: string, query = "") => {
      const res = await api.get(`${GI}?uidp.children_of=${group}&page_size=200${query}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.groupInvites as any[];
    };

    it("creates an invite with a built-in role: server-set fields, hydrated role, the code once", async () => {
      const inv = await invite(team.uid);
      assert.deepEqual(Object.keys(inv).sort(), INVITE_KEYS, "no ttl (input only), nothing else");
      assert.match(inv.uid, new RegExp(`^${team.uid}/[0-9a-f]{16}$`));
      assert.equal(inv.roleUid, VIEWER_UID);
      assert.deepEqual(inv.role, {
        uid: VIEWER_UID,
        name: "viewer",
        description: viewer.description,
        capabilities: viewer.capabilities,
      });
      assert.equal(inv.email, "");
      assert.equal(inv.singleUse, false);
      const m = CODE.exec(inv.code);
      assert.ok(m, `code ${inv.code}`);
      assert.equal(inv.keyId, m[1]);
      assert.match(inv.createTime, MILLIS_TIMESTAMP);
      assert.match(inv.expirationTime, MILLIS_TIMESTAMP);
      assert.equal(Date.parse(inv.expirationTime) - Date.parse(inv.createTime), 3600_000, "expiration = create + ttl");
      assert.ok(Math.abs(Date.parse(inv.createTime) - Date.now()) < 60_000);
    });

    it("returns the code only on create: Get and List show the key id, never the code", async () => {
      const inv = await invite(team.uid, { email: "someone@example.com", singleUse: true });
      const { code, ...rest } = inv;
      assert.notEqual(code, "");
      const got = await api.get(`${GI}/${inv.uid}`);
      assert.equal(got.status, 200);
      assert.deepEqual(got.body, { ...rest, code: "" });
      const listed = (await listUnder(team.uid)).find((i) => i.uid === inv.uid);
      assert.deepEqual(listed, { ...rest, code: "" });
      const byKey = await api.get(`${GI}?keyId=${inv.keyId}`);
      assert.deepEqual(byKey.body.groupInvites, [{ ...rest, code: "" }]);
      assert.ok(
        !JSON.stringify((await api.get(`${GI}?page_size=200`)).body).includes(code.split(".")[1]),
        "the secret appears in no listing",
      );
    });

    it("stores only sha256(secret), never the code or the secret", async () => {
      const inv = await invite(team.uid);
      const [, keyId, secret] = CODE.exec(inv.code)!;
      const row = await server.db
        .selectFrom("group_invites")
        .selectAll()
        .where("uid", "=", inv.uid)
        .executeTakeFirstOrThrow();
      assert.equal(row.key_id, keyId);
      const hash = Buffer.from(row.code_hash);
      assert.equal(hash.length, 32);
      assert.notDeepEqual(hash, Buffer.from(inv.code));
      assert.notDeepEqual(hash, Buffer.from(secret!));
      assert.deepEqual(hash, createHash("sha256").update(secret!).digest());
      const stored = JSON.stringify(row, (_k, v) =>
        v && v.type === "Buffer" ? Buffer.from(v.data).toString("hex") : v,
      );
      assert.ok(!stored.includes(secret!), "the secret is in no column");
      assert.ok(!stored.includes(Buffer.from(secret!).toString("hex")), "not even as bytes");
    });

    it("keeps optional fields and makes fresh codes and key ids for each invite", async () => {
      const a = await invite(team.uid, { email: "First.Last+tag@sub.example.co.uk", singleUse: true });
      const b = await invite(team.uid);
      assert.equal(a.email, "First.Last+tag@sub.example.co.uk");
      assert.equal(a.singleUse, true);
      assert.notEqual(a.keyId, b.keyId);
      assert.notEqual(a.code.split(".")[1], b.code.split(".")[1]);
      // output-only fields in the body are ignored
      const c = await invite(team.uid, {
        uid: `${team.uid}/0123456789abcdef`,
        code: "x.y",
        keyId: "0000000000000000",
        createTime: "2000-01-01T00:00:00Z",
      });
      assert.notEqual(c.uid, `${team.uid}/0123456789abcdef`);
      assert.notEqual(c.keyId, "0000000000000000");
      assert.match(c.code, CODE);
      assert.notEqual(c.createTime, "2000-01-01T00:00:00.000Z");
    });

    it("accepts custom roles of the group and of its ancestors, hydrated", async () => {
      const teamRole = await createRole(api, team.uid, "team role", ["CAP_IAM_GROUPS_LIST"], "for the team");
      const own = await invite(team.uid, { roleUid: teamRole.uid });
      assert.deepEqual(own.role, {
        uid: teamRole.uid,
        name: "team role",
        description: "for the team",
        capabilities: ["CAP_IAM_GROUPS_LIST"],
      });
      const fromOrg = await invite(squad.uid, { roleUid: orgRole.uid });
      assert.deepEqual(fromOrg.role, {
        uid: orgRole.uid,
        name: orgRole.name,
        description: "",
        capabilities: orgRole.capabilities,
      });
      const fromTeam = await invite(squad.uid, { roleUid: teamRole.uid });
      assert.equal(fromTeam.role.name, "team role");
      assert.equal((await api.get(`${GI}/${fromOrg.uid}`)).body.role.name, orgRole.name);
    });

    it("answers NOT_FOUND role for a missing or invisible role, NOT_FOUND group for a missing group, creating nothing", async () => {
      const before = await countAll();
      const squadRole = await createRole(api, squad.uid, "squad only", ["CAP_IAM_GROUPS_LIST"]);
      const cases: [string, string][] = [
        [team.uid, siblingRole.uid], // a sibling's role
        [team.uid, squadRole.uid], // a descendant's role
        [org.uid, squadRole.uid],
        [team.uid, "f".repeat(40)], // no such built-in role
        [team.uid, `${org.uid}/0123456789abcdef`], // no such role, in a visible place
        [team.uid, team.uid], // a group, not a role
      ];
      for (const [parent, roleUid] of cases) {
        const res = await api.post(`${GI}/${parent}`, { roleUid, ttl: "60s" });
        assertResourceNotFound(res, "role", roleUid);
      }
      const missingGroup = `${org.uid}/fedcba9876543210`;
      assertResourceNotFound(
        await api.post(`${GI}/${missingGroup}`, { roleUid: VIEWER_UID, ttl: "60s" }),
        "group",
        missingGroup,
      );
      assertResourceNotFound(
        await api.post(`${GI}/${"e".repeat(40)}`, { roleUid: VIEWER_UID, ttl: "60s" }),
        "group",
        "e".repeat(40),
      );
      assert.equal(await countAll(), before);
    });

    it("answers bad input with INVALID_ARGUMENT naming the field, never a 500, and creates nothing", async () => {
      const before = await countAll();
      const cases: [string, unknown, string][] = [
        ["empty body", {}, "role_uid"],
        ["no role", { ttl: "60s" }, "role_uid"],
        ["empty role", { roleUid: "", ttl: "60s" }, "role_uid"],
        ["malformed role", { roleUid: "viewer", ttl: "60s" }, "role_uid"],
        ["upper-case role", { roleUid: VIEWER_UID.toUpperCase(), ttl: "60s" }, "role_uid"],
        ["no ttl", { roleUid: VIEWER_UID }, "ttl"],
        ["zero ttl", { roleUid: VIEWER_UID, ttl: "0s" }, "ttl"],
        ["negative ttl", { roleUid: VIEWER_UID, ttl: "-5s" }, "ttl"],
        ["negative fraction", { roleUid: VIEWER_UID, ttl: "-0.5s" }, "ttl"],
        ["30 days + 1s", { roleUid: VIEWER_UID, ttl: `${MAX_INVITE_TTL_SECONDS + 1}s` }, "ttl"],
        ["30 days + 1ns", { roleUid: VIEWER_UID, ttl: `${MAX_INVITE_TTL_SECONDS}.000000001s` }, "ttl"],
        ["huge ttl", { roleUid: VIEWER_UID, ttl: "315576000000s" }, "ttl"],
        ["ttl out of the Duration range", { roleUid: VIEWER_UID, ttl: "315576000001s" }, "ttl"],
        ["ttl not a duration", { roleUid: VIEWER_UID, ttl: "1 hour" }, "ttl"],
        ["ttl as number", { roleUid: VIEWER_UID, ttl: 3600 }, "ttl"],
        ["email", { roleUid: VIEWER_UID, ttl: "60s", email: "not-an-email" }, "email"],
        ["email without domain", { roleUid: VIEWER_UID, ttl: "60s", email: "a@" }, "email"],
        ["email without local part", { roleUid: VIEWER_UID, ttl: "60s", email: "@example.com" }, "email"],
        ["email with space", { roleUid: VIEWER_UID, ttl: "60s", email: "a b@example.com" }, "email"],
        ["email with two @", { roleUid: VIEWER_UID, ttl: "60s", email: "a@b@example.com" }, "email"],
        ["email with bad label", { roleUid: VIEWER_UID, ttl: "60s", email: "a@-example.com" }, "email"],
        [
          "email local part too long",
          { roleUid: VIEWER_UID, ttl: "60s", email: `${"a".repeat(65)}@example.com` },
          "email",
        ],
        [
          "email too long",
          {
            roleUid: VIEWER_UID,
            ttl: "60s",
            email: `a@${["b", "c", "d", "e", "f"].map((l) => l.repeat(61)).join(".")}.com`,
          },
          "email",
        ],
        ["unknown field", { roleUid: VIEWER_UID, ttl: "60s", bogus: 1 }, "bogus"],
        ["single_use not a bool", { roleUid: VIEWER_UID, ttl: "60s", singleUse: "yes" }, "single_use"],
      ];
      for (const [what, body, field] of cases) {
        assertInvalid(await api.post(`${GI}/${team.uid}`, body), field, what, { only: true });
      }
      assertInvalid(await api.post(`${GI}/not-a-uid`, { roleUid: VIEWER_UID, ttl: "60s" }), "parent", "bad parent", {
        only: true,
      });
      for (const raw of ["{not json", "[1]", "null", '"x"']) {
        const res = await api.post(`${GI}/${team.uid}`, raw);
        assert.equal(res.status, 400, raw);
        assert.equal(res.body.code, 3, raw);
      }
      assert.equal(await countAll(), before);
    });

    // A well-known type that fails to parse ("cannot decode message google.protobuf.Duration from
    // JSON: ...") is located by the transcoder, so the violation names ttl, not "body".
    it("names ttl when its JSON is not a Duration", async () => {
      for (const ttl of ["1 hour", 3600, "315576000001s"]) {
        assertInvalid(await api.post(`${GI}/${team.uid}`, { roleUid: VIEWER_UID, ttl }), "ttl", JSON.stringify(ttl), {
          only: true,
        });
      }
    });

    it("ttl bounds: the 30-day cap itself and the smallest ttls are accepted; expiration = create + ttl", async () => {
      const max = await invite(team.uid, { ttl: `${MAX_INVITE_TTL_SECONDS}s` });
      assert.equal(Date.parse(max.expirationTime) - Date.parse(max.createTime), MAX_INVITE_TTL_SECONDS * 1000);
      const oneSecond = await invite(team.uid, { ttl: "1s" });
      assert.equal(Date.parse(oneSecond.expirationTime) - Date.parse(oneSecond.createTime), 1000);
      const fractional = await invite(team.uid, { ttl: "1.5s" });
      assert.equal(Date.parse(fractional.expirationTime) - Date.parse(fractional.createTime), 1500);
      // below the millisecond precision of timestamps: rounded up, never to zero
      const tiny = await invite(team.uid, { ttl: "0.000000001s" });
      assert.equal(Date.parse(tiny.expirationTime) - Date.parse(tiny.createTime), 1);
      const got = (await api.get(`${GI}/${max.uid}`)).body;
      assert.equal(got.expirationTime, max.expirationTime);
      assert.equal(got.createTime, max.createTime);
    });

    it("gets and deletes; missing invites are NOT_FOUND", async () => {
      const inv = await invite(squad.uid);
      const del = await api.delete(`${GI}/${inv.uid}`);
      assert.equal(del.status, 200);
      assert.deepEqual(del.body, {});
      assertResourceNotFound(await api.get(`${GI}/${inv.uid}`), "group invite", inv.uid);
      assertResourceNotFound(await api.delete(`${GI}/${inv.uid}`), "group invite", inv.uid);
      assertInvalid(await api.get(`${GI}/nope`), "uid", "bad uid", { only: true });
      assertInvalid(await api.delete(`${GI}/nope`), "uid", "bad uid", { only: true });
    });

    it("refuses to delete a group with invites, and a role an invite names", async () => {
      const g = await createGroup(api, org.uid, "invited");
      const role = await createRole(api, org.uid, "invite role", ["CAP_IAM_GROUPS_LIST"]);
      const inv = await invite(g.uid, { roleUid: role.uid });
      const delGroup = await api.delete(`/iam/v2beta1/groups/${g.uid}`);
      assert.equal(delGroup.status, 400);
      assert.deepEqual(delGroup.body, {
        code: 9,
        message: "Precondition failed: cannot delete group with child group invites",
        details: [
          { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "FAILED_PRECONDITION", domain: ERROR_DOMAIN },
          {
            "@type": "type.googleapis.com/google.rpc.PreconditionFailure",
            violations: [{ type: "RESOURCE_NOT_EMPTY", description: "cannot delete group with child group invites" }],
          },
        ],
      });
      const delRole = await api.delete(`/iam/v2beta1/roles/${role.uid}`);
      assert.equal(delRole.status, 400);
      assert.equal(delRole.body.code, 9);
      assert.equal(delRole.body.details[1].violations[0].description, "cannot delete role with group invites");
      assert.equal((await api.get(`/iam/v2beta1/roles/${role.uid}`)).status, 200);
      assert.equal((await api.get(`${GI}/${inv.uid}`)).status, 200);
      assert.equal((await api.delete(`${GI}/${inv.uid}`)).status, 200);
      assert.equal((await api.delete(`/iam/v2beta1/groups/${g.uid}`)).status, 200);
      assert.equal((await api.delete(`/iam/v2beta1/roles/${role.uid}`)).status, 200);
    });

    it("lists newest first by default; order_by create_time / expiration_time; filters by uidp and keyId", async () => {
      const g = await createGroup(api, org.uid, "ordered");
      const made: any[] = [];
      for (const ttl of ["300s", "100s", "200s", "400s"]) {
        made.push(await invite(g.uid, { ttl }));
        await clockPast(made.at(-1).createTime); // distinct create times
      }
      const newestFirst = [...made].reverse().map((i) => i.uid);
      assert.deepEqual(
        (await listUnder(g.uid)).map((i) => i.uid),
        newestFirst,
      );
      assert.deepEqual(
        (await listUnder(g.uid, "&order_by=created_at desc")).map((i) => i.uid),
        newestFirst,
      );
      assert.deepEqual(
        (await listUnder(g.uid, "&order_by=create_time")).map((i) => i.uid),
        made.map((i) => i.uid),
      );
      assert.deepEqual(
        (await listUnder(g.uid, "&orderBy=expirationTime")).map((i) => i.uid),
        [1, 2, 0, 3].map((n) => made[n].uid),
      );
      const badOrder = await api.get(`${GI}?order_by=email`);
      assertInvalid(badOrder, "order_by", "unsortable field", { only: true });

      for (const i of await listUnder(g.uid)) assert.equal(i.code, "");

      const target = made[2];
      for (const param of ["keyId", "key_id"]) {
        const res = await api.get(`${GI}?${param}=${target.keyId}`);
        assert.equal(res.status, 200);
        assert.equal(res.body.totalCount, "1");
        assert.deepEqual(
          res.body.groupInvites.map((i: any) => i.uid),
          [target.uid],
        );
      }
      const none = await api.get(`${GI}?keyId=0000000000000000`);
      assert.deepEqual(none.body.groupInvites, []);
      assert.equal(none.body.totalCount, "0");
      // keyId combines with uidp
      assert.equal((await api.get(`${GI}?keyId=${target.keyId}&uidp.children_of=${team.uid}`)).body.totalCount, "0");
      // descendants_of sees invites of the whole subtree; children_of only the group's own
      const subtree = (await api.get(`${GI}?uidp.descendants_of=${org.uid}&page_size=200`)).body.groupInvites as any[];
      assert.ok(made.every((m) => subtree.some((s) => s.uid === m.uid)));
      assert.ok(subtree.some((s) => s.uid.startsWith(team.uid + "/")));
      assertInvalid(await api.get(`${GI}?uidp.children_of=bad`), "uidp.children_of", "bad uidp", { only: true });
    });

    it("pages through a listing with tokens, totalCount on every page, and skip", async () => {
      const g = await createGroup(api, org.uid, "paged");
      const made: any[] = [];
      for (let i = 0; i < 7; i++) made.push(await invite(g.uid, { roleUid: i % 2 ? orgRole.uid : VIEWER_UID }));
      const all = (await listUnder(g.uid)).map((i) => i.uid);
      assert.equal(all.length, 7);
      const walked: string[] = [];
      let token = "";
      let pages = 0;
      do {
        const res = await api.get(
          `${GI}?uidp.children_of=${g.uid}&page_size=3${token ? `&page_token=${encodeURIComponent(token)}` : ""}`,
        );
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.totalCount, "7");
        for (const i of res.body.groupInvites) {
          assert.equal(i.code, "");
          assert.equal(i.role.uid, i.roleUid, "hydrated on every page");
          assert.equal(i.role.name, i.roleUid === VIEWER_UID ? "viewer" : orgRole.name);
        }
        walked.push(...res.body.groupInvites.map((i: any) => i.uid));
        token = res.body.nextPageToken ?? "";
        assert.ok(++pages <= 5, "walk does not end");
      } while (token);
      assert.equal(pages, 3);
      assert.deepEqual(walked, all);
      const skipped = await api.get(`${GI}?uidp.children_of=${g.uid}&page_size=2&skip=3`);
      assert.deepEqual(
        skipped.body.groupInvites.map((i: any) => i.uid),
        all.slice(3, 5),
      );
      assert.equal(skipped.body.skipped, 3);
      // a token for another filter is refused
      const first = await api.get(`${GI}?uidp.children_of=${g.uid}&page_size=3`);
      const other = await api.get(
        `${GI}?uidp.children_of=${team.uid}&page_size=3&page_token=${encodeURIComponent(first.body.nextPageToken)}`,
      );
      assertInvalid(other, "page_token", "token for another filter", { only: true });
    });

    it("List reads roles with one query per page, however many rows", async () => {
      const counter = queryCounter();
      const service = groupInvitesService({
        invites: new GroupInvitesRepository(server.db.withPlugin(counter.plugin)),
        lists: { tokens: PageTokenCodec.fromSecret(randomBytes(32)) },
        now: () => new Date(),
      });
      const list = service.handlers.listGroupInvites!;
      const g = await createGroup(api, org.uid, "counted");
      const queriesFor = async (pageSize: number) => {
        const before = counter.count();
        const res = (await list(create(ListGroupInvitesRequestSchema, { uidp: { childrenOf: g.uid }, pageSize }), {
          headers: new Headers(),
          visibility: "all",
        })) as any;
        return {
          queries: counter.count() - before,
          rows: res.groupInvites.length as number,
          named: res.groupInvites.every((i: any) => i.role?.name),
        };
      };
      for (let i = 0; i < 12; i++) await invite(g.uid, { roleUid: [VIEWER_UID, orgRole.uid][i % 2] });
      const small = await queriesFor(2);
      const big = await queriesFor(12);
      assert.equal(small.rows, 2);
      assert.equal(big.rows, 12);
      assert.ok(small.named && big.named, "every invite has its role");
      assert.equal(big.queries, small.queries, `queries do not grow with rows (${small.queries} vs ${big.queries})`);
      assert.ok(big.queries <= 3, `page + count + roles, got ${big.queries}`);
    });

    it("findUsableInvite: matching secret, unexpired, single-use unused; markUsed is atomic", async () => {
      const repo = new GroupInvitesRepository(server.db);
      const multi = await invite(team.uid, { ttl: "600s" });
      const single = await invite(team.uid, { ttl: "600s", singleUse: true });
      const m = parseInviteCode(multi.code)!;
      const s = parseInviteCode(single.code)!;
      assert.equal(m.keyId, multi.keyId);
      assert.equal(parseInviteCode("nope"), undefined);
      const created = new Date(Date.parse(multi.createTime));
      const now = new Date(created.getTime() + 1000);

      const found = await findUsableInvite(repo, m.keyId, m.secret, now);
      assert.equal(found?.uid, multi.uid);
      assert.equal(await findUsableInvite(repo, m.keyId, s.secret, now), undefined, "another invite's secret");
      assert.equal(await findUsableInvite(repo, m.keyId, m.secret.slice(0, -1), now), undefined, "truncated secret");
      assert.equal(await findUsableInvite(repo, m.keyId, "", now), undefined, "empty secret");
      assert.equal(await findUsableInvite(repo, "0000000000000000", m.secret, now), undefined, "unknown key id");

      // expiry: usable up to, not at, the expiration time
      const expires = Date.parse(multi.expirationTime);
      assert.equal((await findUsableInvite(repo, m.keyId, m.secret, new Date(expires - 1)))?.uid, multi.uid);
      assert.equal(await findUsableInvite(repo, m.keyId, m.secret, new Date(expires)), undefined);
      assert.equal(await findUsableInvite(repo, m.keyId, m.secret, new Date(expires + 86_400_000)), undefined);

      // single use: usable until marked; marking is first-wins
      assert.equal((await findUsableInvite(repo, s.keyId, s.secret, now))?.uid, single.uid);
      const marks = await Promise.all(Array.from({ length: 6 }, () => repo.markUsed(single.uid, now)));
      const winners = marks.filter((r) => r !== undefined);
      assert.equal(winners.length, 1, "exactly one concurrent markUsed wins");
      assert.equal(winners[0]!.used_time?.getTime(), now.getTime());
      assert.equal(await repo.markUsed(single.uid, new Date(now.getTime() + 5)), undefined, "already used");
      assert.equal(
        await findUsableInvite(repo, s.keyId, s.secret, now),
        undefined,
        "a used single-use invite is not usable",
      );
      const stored = await server.db
        .selectFrom("group_invites")
        .select("used_time")
        .where("uid", "=", single.uid)
        .executeTakeFirstOrThrow();
      assert.equal(stored.used_time?.getTime(), now.getTime(), "the first use is kept");

      // multi use: stays usable after use
      assert.ok(await repo.markUsed(multi.uid, now));
      assert.equal((await findUsableInvite(repo, m.keyId, m.secret, now))?.uid, multi.uid);
      assert.equal(await repo.markUsed(`${team.uid}/0123456789abcdef`, now), undefined, "no such invite");

      // reads still never show a code, used or not
      assert.equal((await api.get(`${GI}/${single.uid}`)).body.code, "");
    });

    it("gRPC: create returns the code once; get, list, delete; errors carry the field", async () => {
      const { client, close } = operatorGrpc(server, GroupInvitesService);
      try {
        const inv = await client.createGroupInvite({
          parent: squad.uid,
          groupInvite: { roleUid: orgRole.uid, ttl: { seconds: 90n }, email: "grpc@example.com" },
        });
        assert.match(inv.code, CODE);
        assert.equal(inv.ttl, undefined);
        assert.equal(inv.role?.name, orgRole.name);
        assert.equal(inv.expirationTime!.seconds - inv.createTime!.seconds, 90n);
        assert.equal(inv.expirationTime!.nanos, inv.createTime!.nanos);
        const got = await client.getGroupInvite({ uid: inv.uid });
        assert.equal(got.code, "");
        assert.equal(got.keyId, inv.keyId);
        assert.equal(got.email, "grpc@example.com");
        const rest = (await api.get(`${GI}/${inv.uid}`)).body;
        assert.equal(rest.keyId, got.keyId);
        assert.equal(
          Date.parse(rest.expirationTime),
          Number(got.expirationTime!.seconds) * 1000 + got.expirationTime!.nanos / 1e6,
        );
        const listed = await client.listGroupInvites({ keyId: inv.keyId });
        assert.equal(listed.totalCount, 1n);
        assert.equal(listed.groupInvites[0]!.code, "");

        for (const [ttl, what] of [
          [{ seconds: 1n, nanos: -1 }, "mixed signs"],
          [{ seconds: 0n, nanos: 1_000_000_000 }, "nanos out of range"],
          [{ seconds: -1n }, "negative"],
        ] as const) {
          const err = await client
            .createGroupInvite({ parent: squad.uid, groupInvite: { roleUid: VIEWER_UID, ttl } })
            .then(
              () => assert.fail(`${what}: expected an error`),
              (e: unknown) => ConnectError.from(e),
            );
          assert.equal(err.code, Code.InvalidArgument, what);
          assert.deepEqual(
            err.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field),
            ["ttl"],
            what,
          );
        }
        const missing = await client
          .getGroupInvite({ uid: `${squad.uid}/0123456789abcdef` })
          .catch((e: unknown) => ConnectError.from(e));
        assert.ok(missing instanceof ConnectError);
        assert.equal(missing.code, Code.NotFound);

        await client.deleteGroupInvite({ uid: inv.uid });
        assert.equal((await api.get(`${GI}/${inv.uid}`)).status, 404);
      } finally {
        close();
      }
    });
  });
}
