// Authentication, on every backend: every way a bearer credential can be wrong is 401
// UNAUTHENTICATED (REST: AIP-193 body + WWW-Authenticate; gRPC: status 16 + ErrorInfo), the
// public endpoints need none, grants are read per request (a new or deleted binding, a changed
// role or a deleted identity counts on the very next request with the same token), who may
// create root organizations and root-level identities, and token narrowing (caps, scopes).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createPublicKey } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { isMessage } from "@bufbuild/protobuf";
import { SignJWT, UnsecuredJWT, decodeJwt, decodeProtectedHeader, generateKeyPair, type JWK } from "jose";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { assertNotFound, assertPermissionDenied, assertUnauthenticated } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createRole, createRoleBinding, type Api, type Json } from "../support/fixtures.js";
import { grpcClient, grpcError, statusFromTrailer, unpackDetails } from "../support/grpc.js";
import { restClient, type JsonResponse } from "../support/http.js";
import {
  expiredToken,
  issuerAt,
  notYetValidToken,
  workload,
  wrongAudienceToken,
  wrongIssuerToken,
  type Workload,
} from "../support/principals.js";
import { ERROR_DOMAIN, claimsFor, startTestServer, type TestServer } from "../support/server.js";

const G = "/iam/v2beta1/groups";
const HEX40 = /^[0-9a-f]{40}$/;

/** An `Authorization` header value (or none) that must be refused, and why. */
interface BadCredential {
  name: string;
  header?: string;
}

for (const backend of backends()) {
  describe(`authentication [${backend}]`, () => {
    let server: TestServer;
    let op: Api;
    let org: Json;
    let owner: Workload;
    let bad: BadCredential[] = [];
    let started = 0;

    before(async () => {
      started = Date.now();
      server = await startTestServer(backend);
      op = restClient(server.url, server.operatorToken);
      org = await createGroup(op, undefined, "authn org");
      const roles = (await op.get("/iam/v2beta1/roles?uidp.in_root=true")).body.roles as Json[];
      owner = await workload(server, op, org.uid, "owner", [
        { at: org.uid, role: roles.find((r) => r.name === "owner")! },
      ]);

      const jwks = (await restClient(server.url).get("/.well-known/jwks.json")).body.keys as JWK[];
      const realKid = jwks[0]!.kid!;
      const claims = claimsFor(server, owner.uid);
      const foreign = await generateKeyPair("ES256");
      const rsa = await generateKeyPair("RS256");
      const pem = createPublicKey({ key: jwks[0] as import("node:crypto").JsonWebKey, format: "jwk" }).export({
        type: "spki",
        format: "pem",
      }) as string;
      const hs = (secret: Uint8Array) =>
        new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: realKid, typ: "JWT" }).sign(secret);
      // The owner's real token with its payload swapped for the operator's: the signature no longer matches.
      const [h, , s] = owner.token.split(".");
      const forgedPayload = Buffer.from(JSON.stringify({ ...decodeJwt(owner.token), sub: OPERATOR_SUBJECT })).toString(
        "base64url",
      );

      bad = [
        { name: "no Authorization header" },
        { name: "Basic scheme", header: `Basic ${Buffer.from("operator:secret").toString("base64")}` },
        { name: "a token without a scheme", header: owner.token },
        { name: "Bearer without a token", header: "Bearer" },
        { name: "Bearer garbage", header: "Bearer garbage" },
        { name: "Bearer a.b.c", header: "Bearer a.b.c" },
        { name: "Bearer with characters outside token68", header: "Bearer {}!!" },
        { name: "truncated signature", header: `Bearer ${owner.token.slice(0, -10)}` },
        {
          name: "payload swapped for the operator's (signature of another payload)",
          header: `Bearer ${h}.${forgedPayload}.${s}`,
        },
        { name: "expired", header: `Bearer ${await expiredToken(server, owner.uid)}` },
        {
          name: "not yet valid (nbf ten minutes ahead)",
          header: `Bearer ${await notYetValidToken(server, owner.uid)}`,
        },
        { name: "wrong issuer", header: `Bearer ${await wrongIssuerToken(server, owner.uid)}` },
        { name: "wrong audience", header: `Bearer ${await wrongAudienceToken(server, owner.uid)}` },
        {
          name: "an operator token for another audience",
          header: `Bearer ${await wrongAudienceToken(server, OPERATOR_SUBJECT)}`,
        },
        {
          name: "signed by an unpublished key with a published kid",
          header: `Bearer ${await new SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: realKid, typ: "JWT" }).sign(foreign.privateKey)}`,
        },
        {
          name: "signed by an unpublished key with an unknown kid",
          header: `Bearer ${await new SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: "not-a-published-kid", typ: "JWT" }).sign(foreign.privateKey)}`,
        },
        {
          name: "an operator token signed by an unpublished key without a kid",
          header: `Bearer ${await new SignJWT(claimsFor(server, OPERATOR_SUBJECT)).setProtectedHeader({ alg: "ES256", typ: "JWT" }).sign(foreign.privateKey)}`,
        },
        {
          name: "alg none (unsecured JWT)",
          header: `Bearer ${new UnsecuredJWT(claimsFor(server, OPERATOR_SUBJECT)).encode()}`,
        },
        {
          name: "alg none with an empty signature and a real kid",
          header: `Bearer ${Buffer.from(JSON.stringify({ alg: "none", kid: realKid })).toString("base64url")}.${new UnsecuredJWT(claims).encode().split(".")[1]}.`,
        },
        {
          name: "HS256 keyed with the published key's PEM (alg confusion)",
          header: `Bearer ${await hs(new TextEncoder().encode(pem))}`,
        },
        {
          name: "HS256 keyed with the published JWK's JSON (alg confusion)",
          header: `Bearer ${await hs(new TextEncoder().encode(JSON.stringify(jwks[0])))}`,
        },
        {
          name: "RS256 signed by an unrelated RSA key",
          header: `Bearer ${await new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: realKid, typ: "JWT" }).sign(rsa.privateKey)}`,
        },
        {
          name: "a valid token for a subject that is no identity",
          header: `Bearer ${await server.tokenFor(`${org.uid}/0123456789abcdef`)}`,
        },
        { name: "a valid token for a random subject", header: `Bearer ${await server.tokenFor("someone")}` },
      ];
      console.log(`[${backend}] authn setup in ${Date.now() - started} ms`);
    });
    after(async () => {
      console.log(`[${backend}] authentication: ${Date.now() - started} ms`);
      await server?.close();
    });

    const get = (path: string, header?: string) =>
      restClient(server.url).call("GET", path, undefined, header === undefined ? {} : { authorization: header });

    it("a valid token is accepted (the baseline the refusals are measured against), also with a lower-case scheme", async () => {
      assert.equal((await get(`${G}/${org.uid}`, `Bearer ${owner.token}`)).status, 200);
      assert.equal((await get(`${G}/${org.uid}`, `bearer ${owner.token}`)).status, 200);
      assert.equal((await get(`${G}/${org.uid}`, `Bearer ${server.operatorToken}`)).status, 200);
      // and the forgeries below are not refused for a reason unrelated to them
      assert.equal(decodeProtectedHeader(owner.token).alg, "ES256");
    });

    it("REST: every bad credential is 401 UNAUTHENTICATED with an AIP-193 body and WWW-Authenticate: Bearer", async () => {
      assert.ok(bad.length >= 20);
      const failures: string[] = [];
      for (const c of bad) {
        for (const path of [`${G}/${org.uid}`, `${G}?page_size=5`, "/auth/v1/ok"]) {
          const res = await get(path, c.header);
          try {
            assertUnauthenticated(res, `${c.name}: GET ${path}`);
            assert.ok(!JSON.stringify(res.body).includes(org.uid), `${c.name}: the refusal mentions the group`);
          } catch (err) {
            failures.push((err as Error).message);
          }
        }
      }
      assert.deepEqual(failures, []);
    });

    it("gRPC: every bad credential is status 16 with ErrorInfo UNAUTHENTICATED", async () => {
      const client = grpcClient(server.port, "chainguard.platform.iam.v2beta1.GroupsService");
      try {
        const ok = new grpc.Metadata();
        ok.set("authorization", `Bearer ${owner.token}`);
        const group = await client.call<Json>("GetGroup", { uid: org.uid }, ok);
        assert.equal(group.uid, org.uid);
        const failures: string[] = [];
        for (const c of bad) {
          for (const [method, request] of [
            ["GetGroup", { uid: org.uid }],
            ["ListGroups", {}],
            ["CreateGroup", { parent: "", group: { name: "nope" } }],
          ] as const) {
            const md = new grpc.Metadata();
            if (c.header !== undefined) md.set("authorization", c.header);
            try {
              const err = await grpcError(client.call(method, request, md));
              assert.equal(err.code, grpc.status.UNAUTHENTICATED, `${c.name}: ${method}: ${err.details}`);
              const info = unpackDetails(statusFromTrailer(err))[0];
              assert.ok(
                info && isMessage(info, ErrorInfoSchema),
                `${c.name}: ${method}: first detail is not ErrorInfo`,
              );
              assert.equal(info.reason, "UNAUTHENTICATED");
              assert.equal(info.domain, ERROR_DOMAIN);
            } catch (err) {
              failures.push(`${c.name}: ${method}: ${(err as Error).message}`);
            }
          }
        }
        assert.deepEqual(failures, []);
        // nothing was created by the refused CreateGroup calls
        const roots = (await op.get(`${G}?uidp.in_root=true&name=nope`)).body.groups ?? [];
        assert.deepEqual(roots, []);
      } finally {
        client.close();
      }
    });

    it("health, OIDC discovery and the JWKS need no token (and ignore a bad one)", async () => {
      for (const header of [undefined, "Bearer garbage", "Basic Zm9vOmJhcg=="]) {
        for (const path of ["/healthz", "/.well-known/openid-configuration", "/.well-known/jwks.json"]) {
          const res = await get(path, header);
          assert.equal(res.status, 200, `${path} with ${header ?? "no header"}: ${JSON.stringify(res.body)}`);
        }
      }
    });

    describe("grants are read on every request (no stale grant)", () => {
      let w: Workload;
      let child: Json;
      let role: Json;
      const groupOf = (uid: string) => get(`${G}/${uid}`, `Bearer ${w.token}`);
      const touch = (uid: string) =>
        restClient(server.url, w.token).patch(`${G}/${uid}`, { description: `touched ${Date.now()}` });

      before(async () => {
        child = await createGroup(op, org.uid, "stale child");
        w = await workload(server, op, org.uid, "stale probe");
      });

      it("bind → allowed; delete the binding → the next request (same token) is refused", async () => {
        assertNotFound(await groupOf(org.uid), "no binding yet");
        const binding = await createRoleBinding(op, org.uid, w.uid);
        assert.equal((await groupOf(org.uid)).status, 200, "viewer binding");
        assert.equal((await groupOf(child.uid)).status, 200, "viewer binding, child");
        assertPermissionDenied(await touch(child.uid), "a viewer may not update");
        assert.equal((await op.delete(`/iam/v2beta1/roleBindings/${binding.uid}`)).status, 200);
        assertNotFound(await groupOf(org.uid), "binding deleted");
        assertNotFound(await groupOf(child.uid), "binding deleted, child");
      });

      it("changing a custom role's capabilities counts on the next request", async () => {
        role = await createRole(op, org.uid, "mutable", ["CAP_IAM_GROUPS_LIST"]);
        await createRoleBinding(op, org.uid, w.uid, role.uid);
        assert.equal((await groupOf(child.uid)).status, 200);
        assertPermissionDenied(await touch(child.uid), "GROUPS_LIST only");
        const patch = async (capabilities: string[]) => {
          const res = await op.patch(`/iam/v2beta1/roles/${role.uid}`, { capabilities });
          assert.equal(res.status, 200, JSON.stringify(res.body));
        };
        await patch(["CAP_IAM_GROUPS_LIST", "CAP_IAM_GROUPS_UPDATE"]);
        assert.equal((await touch(child.uid)).status, 200, "update granted");
        await patch(["CAP_IAM_GROUPS_UPDATE"]);
        assertPermissionDenied(await groupOf(child.uid), "list revoked, binding still covers");
        assert.equal((await touch(child.uid)).status, 200, "update still granted");
        await patch(["CAP_IAM_ROLES_LIST"]);
        assertPermissionDenied(await touch(child.uid), "update revoked");
      });

      it("deleting the identity (after its bindings) makes its token 401 on the next request", async () => {
        const bindings = (await op.get(`/iam/v2beta1/roleBindings?identity=${w.uid}`)).body.roleBindings as Json[];
        assert.equal(bindings.length, 1);
        for (const b of bindings) assert.equal((await op.delete(`/iam/v2beta1/roleBindings/${b.uid}`)).status, 200);
        assert.equal(
          (await restClient(server.url, w.token).get("/auth/v1/ok")).status,
          200,
          "still authenticated without bindings",
        );
        assert.equal((await op.delete(`/iam/v2beta1/identities/${w.uid}`)).status, 200);
        assertUnauthenticated(await groupOf(org.uid), "identity deleted");
        assertUnauthenticated(await restClient(server.url, w.token).get("/auth/v1/ok"), "identity deleted: Validate");
      });
    });

    describe("root organizations and root-level identities", () => {
      let human: Json;
      let humanApi: Api;

      before(async () => {
        const res = await op.post("/iam/v2beta1/identities/", {
          name: "a human",
          claimMatch: { issuer: "https://accounts.example", subject: `human-${Date.now()}` },
        });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        human = res.body;
        assert.match(human.uid, HEX40, "a root-level identity has a root uid");
        humanApi = restClient(server.url, await server.tokenFor(human.uid));
      });

      it("a human creates a root organization and is its owner from the same request on", async () => {
        const created = await humanApi.post(G, { name: "humans org" });
        assert.equal(created.status, 200, JSON.stringify(created.body));
        const newOrg = created.body.uid as string;
        assert.match(newOrg, HEX40);
        const mine = await humanApi.get(`/iam/v2beta1/roleBindings?identity=${human.uid}`);
        assert.equal(mine.status, 200, JSON.stringify(mine.body));
        const roles = (await op.get("/iam/v2beta1/roles?uidp.in_root=true")).body.roles as Json[];
        const ownerRole = roles.find((r) => r.name === "owner")!;
        assert.deepEqual(
          (mine.body.roleBindings as Json[]).map((b) => [b.group.uid, b.roleUid, b.identityUid]),
          [[newOrg, ownerRole.uid, human.uid]],
        );
        assert.equal(mine.body.totalCount, "1");
        const sub = await humanApi.post(`${G}/${newOrg}`, { name: "humans team" });
        assert.equal(sub.status, 200, JSON.stringify(sub.body));
        assert.equal((await humanApi.get(`${G}/${sub.body.uid}`)).status, 200);
        // ... but nothing elsewhere
        assertNotFound(await humanApi.post(`${G}/${org.uid}`, { name: "intruder" }), "human in a foreign org");
        assertNotFound(await humanApi.get(`${G}/${org.uid}`), "human reading a foreign org");
      });

      it("a refused root-organization create leaves neither a group nor a binding behind", async () => {
        const before = (await op.get(`/iam/v2beta1/roleBindings?identity=${human.uid}`)).body.totalCount;
        const res = await humanApi.post(G, { name: "NOT a valid name!" });
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal((await op.get(`/iam/v2beta1/roleBindings?identity=${human.uid}`)).body.totalCount, before);
        assert.deepEqual(
          (await op.get(`${G}?uidp.in_root=true&name=${encodeURIComponent("NOT a valid name!")}`)).body.groups ?? [],
          [],
        );
      });

      it("the operator creates a root organization (and is bound nowhere)", async () => {
        const res = await op.post(G, { name: "operators org" });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.match(res.body.uid, HEX40);
        const bindings = await op.get(`/iam/v2beta1/roleBindings?uidp.descendants_of=${res.body.uid}`);
        assert.equal(bindings.body.totalCount, "0");
      });

      it("a workload identity, even an owner, cannot create a root organization (403), over REST and gRPC", async () => {
        assertPermissionDenied(
          await restClient(server.url, owner.token).post(G, { name: "workload org" }),
          "workload root org",
        );
        const md = new grpc.Metadata();
        md.set("authorization", `Bearer ${owner.token}`);
        const client = grpcClient(server.port, "chainguard.platform.iam.v2beta1.GroupsService");
        try {
          const err = await grpcError(client.call("CreateGroup", { parent: "", group: { name: "workload org" } }, md));
          assert.equal(err.code, grpc.status.PERMISSION_DENIED, err.details);
        } finally {
          client.close();
        }
        assert.deepEqual(
          (await op.get(`${G}?uidp.in_root=true&name=${encodeURIComponent("workload org")}`)).body.groups ?? [],
          [],
        );
        // it can still create groups where it is owner
        assert.equal(
          (await restClient(server.url, owner.token).post(`${G}/${org.uid}`, { name: "workload team" })).status,
          200,
        );
      });

      it("only the operator creates root-level identities: a workload owner or a human gets 403", async () => {
        const body = { name: "self made", claimMatch: { issuer: "https://accounts.example", subject: "self-made" } };
        assertPermissionDenied(
          await restClient(server.url, owner.token).post("/iam/v2beta1/identities/", body),
          "workload",
        );
        assertPermissionDenied(await humanApi.post("/iam/v2beta1/identities/", body), "human");
        assert.equal(
          (await op.get(`/iam/v2beta1/identities?uidp.in_root=true&name=${encodeURIComponent("self made")}`)).body
            .totalCount,
          "0",
        );
      });
    });

    describe("token narrowing", () => {
      let team: Json;
      let deep: Json;
      let sibling: Json;
      let otherOrg: Json;

      before(async () => {
        team = await createGroup(op, org.uid, "narrow team");
        deep = await createGroup(op, team.uid, "narrow deep");
        sibling = await createGroup(op, org.uid, "narrow sibling");
        otherOrg = await createGroup(op, undefined, "narrow other org");
      });

      it("caps: [CAP_IAM_GROUPS_LIST] on an owner's token lists but cannot delete; the full token can", async () => {
        const victim = await createGroup(op, team.uid, "victim");
        const narrow = restClient(server.url, await server.tokenFor(owner.uid, { caps: ["CAP_IAM_GROUPS_LIST"] }));
        const list = await narrow.get(`${G}?uidp.descendants_of=${org.uid}&page_size=200`);
        assert.equal(list.status, 200);
        assert.ok((list.body.groups as Json[]).some((g) => g.uid === victim.uid));
        assert.equal((await narrow.get(`${G}/${victim.uid}`)).status, 200);
        assertPermissionDenied(await narrow.delete(`${G}/${victim.uid}`), "narrowed delete");
        assertPermissionDenied(await narrow.post(`${G}/${team.uid}`, { name: "nope" }), "narrowed create");
        assert.equal((await op.get(`${G}/${victim.uid}`)).status, 200, "still there");
        // narrowed to nothing it already lists nothing
        const none = restClient(server.url, await server.tokenFor(owner.uid, { caps: ["CAP_REPO_LIST"] }));
        const empty = await none.get(`${G}?page_size=200`);
        assert.equal(empty.status, 200);
        assert.deepEqual(empty.body.groups ?? [], []);
        assert.equal(empty.body.totalCount, "0");
        assert.equal(
          (await restClient(server.url, owner.token).delete(`${G}/${victim.uid}`)).status,
          200,
          "full token deletes",
        );
      });

      it("caps never add: a viewer's token naming CAP_IAM_GROUPS_DELETE cannot delete", async () => {
        const roles = (await op.get("/iam/v2beta1/roles?uidp.in_root=true")).body.roles as Json[];
        const viewer = await workload(server, op, org.uid, "narrow viewer", [
          { at: org.uid, role: roles.find((r) => r.name === "viewer")! },
        ]);
        const victim = await createGroup(op, team.uid, "victim 2");
        const widened = restClient(
          server.url,
          await server.tokenFor(viewer.uid, { caps: ["CAP_IAM_GROUPS_LIST", "CAP_IAM_GROUPS_DELETE"] }),
        );
        assertPermissionDenied(await widened.delete(`${G}/${victim.uid}`), "caps claim beyond the role");
        assert.equal((await op.get(`${G}/${victim.uid}`)).status, 200);
      });

      it("scopes: [child] sees only the child's subtree", async () => {
        const scoped = restClient(server.url, await server.tokenFor(owner.uid, { scopes: [team.uid] }));
        const all = await scoped.get(`${G}?page_size=200`);
        assert.equal(all.status, 200);
        const uids = (all.body.groups as Json[]).map((g) => g.uid as string);
        assert.ok(uids.length >= 2);
        for (const uid of uids)
          assert.ok(uid === team.uid || uid.startsWith(`${team.uid}/`), `${uid} is outside the token's scope`);
        assert.ok(uids.includes(team.uid) && uids.includes(deep.uid));
        assert.equal(all.body.totalCount, String(uids.length));
        assert.equal((await scoped.get(`${G}/${deep.uid}`)).status, 200);
        assertNotFound(await scoped.get(`${G}/${org.uid}`), "the org above the scope");
        assertNotFound(await scoped.get(`${G}/${sibling.uid}`), "a sibling of the scope");
        assertNotFound(await scoped.post(`${G}/${sibling.uid}`, { name: "nope" }), "create beside the scope");
        assert.equal(
          (await scoped.post(`${G}/${team.uid}`, { name: "inside" })).status,
          200,
          "create inside the scope",
        );
        const bindings = await scoped.get("/iam/v2beta1/roleBindings?page_size=200");
        assert.equal(bindings.status, 200);
        assert.deepEqual(
          bindings.body.roleBindings ?? [],
          [],
          "the owner's binding sits at the org, outside the scope",
        );
      });

      it("scopes never add: a scope outside every binding sees nothing", async () => {
        const scoped = restClient(server.url, await server.tokenFor(owner.uid, { scopes: [otherOrg.uid] }));
        assertNotFound(await scoped.get(`${G}/${otherOrg.uid}`), "other org");
        assertNotFound(await scoped.get(`${G}/${team.uid}`), "own org, outside the scope");
        const list = await scoped.get(`${G}?page_size=200`);
        assert.equal(list.status, 200);
        assert.deepEqual(list.body.groups ?? [], []);
      });

      it("scopes never add: a scope above the binding does not lift the binding to it", async () => {
        const roles = (await op.get("/iam/v2beta1/roles?uidp.in_root=true")).body.roles as Json[];
        const teamOwner = await workload(server, op, team.uid, "team owner", [
          { at: team.uid, role: roles.find((r) => r.name === "owner")! },
        ]);
        const scoped = restClient(server.url, await server.tokenFor(teamOwner.uid, { scopes: [org.uid] }));
        assertNotFound(await scoped.get(`${G}/${org.uid}`), "the org above the binding");
        assertNotFound(await scoped.get(`${G}/${sibling.uid}`), "a sibling of the binding");
        assert.equal((await scoped.get(`${G}/${deep.uid}`)).status, 200, "below the binding");
        const uids = ((await scoped.get(`${G}?page_size=200`)).body.groups as Json[]).map((g) => g.uid as string);
        for (const uid of uids)
          assert.ok(uid === team.uid || uid.startsWith(`${team.uid}/`), `${uid} is outside the binding`);
      });

      it("an operator token narrowed with caps or scopes is narrowed too", async () => {
        const victim = await createGroup(op, team.uid, "operator victim");
        const listOnly = restClient(
          server.url,
          await server.tokenFor(OPERATOR_SUBJECT, { caps: ["CAP_IAM_GROUPS_LIST"] }),
        );
        assert.equal((await listOnly.get(`${G}/${victim.uid}`)).status, 200);
        const res = await listOnly.delete(`${G}/${victim.uid}`);
        assert.equal((await op.get(`${G}/${victim.uid}`)).status, 200, "a list-only operator token deleted a group");
        assertPermissionDenied(res, "narrowed operator delete");
        const scoped = restClient(server.url, await server.tokenFor(OPERATOR_SUBJECT, { scopes: [team.uid] }));
        assertNotFound(await scoped.get(`${G}/${otherOrg.uid}`), "operator scoped to a team reading another org");
      });

      it("a narrowed human token cannot create a root organization", async () => {
        const created = await op.post("/iam/v2beta1/identities/", {
          name: "narrow human",
          claimMatch: { issuer: "https://accounts.example", subject: `narrow-human-${Date.now()}` },
        });
        assert.equal(created.status, 200, JSON.stringify(created.body));
        const failures: string[] = [];
        for (const narrowing of [{ caps: ["CAP_IAM_GROUPS_LIST"] }, { caps: [] }, { scopes: [team.uid] }]) {
          const api = restClient(server.url, await server.tokenFor(created.body.uid, narrowing));
          const res = await api.post(G, { name: "narrowed humans org" });
          if (res.status !== 403) failures.push(`${JSON.stringify(narrowing)}: HTTP ${res.status}`);
        }
        assert.deepEqual(failures, []);
      });

      it("caps and scopes together narrow both ways", async () => {
        const both = restClient(
          server.url,
          await server.tokenFor(owner.uid, { caps: ["CAP_IAM_GROUPS_LIST"], scopes: [team.uid] }),
        );
        assert.equal((await both.get(`${G}/${deep.uid}`)).status, 200);
        assertPermissionDenied(
          await both.patch(`${G}/${deep.uid}`, { description: "x" }),
          "caps narrowed inside the scope",
        );
        assertNotFound(await both.get(`${G}/${sibling.uid}`), "outside the scope");
      });
    });

    it("lifetimeMs is honoured: a token past its exp (beyond the 30 s clock tolerance) is refused", async () => {
      const short = await server.tokenFor(owner.uid, { lifetimeMs: 1000 });
      assert.equal((await get(`${G}/${org.uid}`, `Bearer ${short}`)).status, 200);
      const exp = decodeJwt(short).exp! * 1000;
      assert.ok(exp - Date.now() <= 1000 + 1000, "lifetime capped as asked");
      // the server tolerates 30 s of clock skew; a token minted 31 s+ in the past with 1 s left is past it
      const stale = await issuerAt(server, () => new Date(Date.now() - 32_000)).mint({
        subject: owner.uid,
        audience: [server.tokens.urls.apiAudience],
        lifetimeMs: 1000,
      });
      assertUnauthenticated(await get(`${G}/${org.uid}`, `Bearer ${stale.token}`), "expired beyond the tolerance");
    });
  });
}
