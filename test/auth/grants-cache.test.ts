// Cached grants never outlive a change: servers keep each identity's grants and the
// authorization change counter they were read at, and answer from them only while the database
// shows the same counter (before a write; in the same statement as a read's data). A revoked
// binding, a changed role or a deleted identity must count on the very next request — on the
// server that made the change and on another replica of the same database.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { assertNotFound, assertPermissionDenied, assertUnauthenticated } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import {
  createAccountAssociation,
  createGroup,
  createGroupInvite,
  createIdentityProvider,
  createRole,
  createRoleBinding,
  type Json,
} from "../support/fixtures.js";
import { grpcClient, grpcError } from "../support/grpc.js";
import { restClient } from "../support/http.js";
import { workload, type Workload } from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";

const G = "/iam/v2beta1/groups";
const PUBLIC_URLS = { issuerUrl: "https://issuer.replicas.test", apiUrl: "https://api.replicas.test" };

for (const backend of backends()) {
  // PGlite is one process's database: the second "replica" is the same server there.
  const replicated = backend === "postgres";
  describe(`cached grants [${backend}]${replicated ? " on two replicas of one database" : ""}`, () => {
    let a: TestServer;
    let b: TestServer;
    let org: Json;
    let child: Json;

    before(async () => {
      a = await startTestServer(backend, { publicUrls: PUBLIC_URLS });
      b = replicated ? await startTestServer(backend, { publicUrls: PUBLIC_URLS, replicaOf: a }) : a;
      org = await createGroup(restClient(a.url, a.operatorToken), undefined, "cache-org");
      child = await createGroup(restClient(a.url, a.operatorToken), org.uid, "cache-child");
    });
    after(async () => {
      if (b !== a) await b?.close();
      await a?.close();
    });

    const opA = () => restClient(a.url, a.operatorToken);
    const as = (server: TestServer, w: Workload) => restClient(server.url, w.token);
    const newWorkload = (name: string) => workload(a, opA(), org.uid, `${name}-${Date.now()}`);

    /** Reads on `server` until its cache surely holds the workload's grants. */
    async function warm(server: TestServer, w: Workload, status: number) {
      for (let i = 0; i < 3; i++) {
        assert.equal((await as(server, w).get(`${G}/${child.uid}`)).status, status, `warm-up ${i}`);
        assert.equal(
          (await as(server, w).get(`${G}?uidp.children_of=${org.uid}`)).status,
          status === 404 ? 200 : status,
        );
      }
    }

    it("a binding made on one replica counts on the other's very next request (Get, List, write)", async () => {
      const w = await newWorkload("grant");
      await warm(b, w, 404);
      const binding = await createRoleBinding(opA(), org.uid, w.uid);
      assert.equal((await as(b, w).get(`${G}/${child.uid}`)).status, 200, "Get right after the binding");
      const list = await as(b, w).get(`${G}?uidp.children_of=${org.uid}`);
      assert.equal(list.status, 200);
      assert.deepEqual(
        list.body.groups.map((g: Json) => g.uid),
        [child.uid],
        "List sees the subtree",
      );
      assertPermissionDenied(await as(b, w).patch(`${G}/${child.uid}`, { description: "x" }), "viewer cannot update");
      assert.equal((await opA().delete(`/iam/v2beta1/roleBindings/${binding.uid}`)).status, 200);
      assertNotFound(await as(b, w).get(`${G}/${child.uid}`), "Get right after the revocation");
      const after = await as(b, w).get(`${G}?uidp.children_of=${org.uid}`);
      assert.equal(after.status, 200);
      assert.deepEqual(after.body.groups, [], "List right after the revocation");
      assert.equal(after.body.totalCount, "0");
    });

    it("a revoked binding stops the next write and the next gRPC call", async () => {
      const editor = await createRole(opA(), org.uid, `updater-${Date.now()}`, [
        "CAP_IAM_GROUPS_LIST",
        "CAP_IAM_GROUPS_UPDATE",
      ]);
      const w = await newWorkload("writer");
      const binding = await createRoleBinding(opA(), org.uid, w.uid, editor.uid);
      const grpc = grpcClient(b.port, "chainguard.platform.iam.v2beta1.GroupsService", w.token);
      try {
        for (let i = 0; i < 3; i++) {
          assert.equal((await as(b, w).patch(`${G}/${child.uid}`, { description: `w${i}` })).status, 200);
          assert.equal((await grpc.call<Json>("GetGroup", { uid: child.uid })).uid, child.uid);
        }
        assert.equal((await opA().delete(`/iam/v2beta1/roleBindings/${binding.uid}`)).status, 200);
        assertNotFound(await as(b, w).patch(`${G}/${child.uid}`, { description: "late" }), "write after revocation");
        assert.equal((await grpcError(grpc.call("GetGroup", { uid: child.uid }))).code, 5, "gRPC after revocation");
      } finally {
        grpc.close();
      }
    });

    it("a role's capabilities changed on one replica count on the other's next request", async () => {
      const role = await createRole(opA(), org.uid, `mutable-${Date.now()}`, ["CAP_IAM_GROUPS_LIST"]);
      const w = await newWorkload("role");
      await createRoleBinding(opA(), org.uid, w.uid, role.uid);
      await warm(b, w, 200);
      assert.equal(
        (await opA().patch(`/iam/v2beta1/roles/${role.uid}`, { capabilities: ["CAP_IAM_ROLES_LIST"] })).status,
        200,
      );
      assertPermissionDenied(await as(b, w).get(`${G}/${child.uid}`), "list capability removed");
      assert.equal(
        (await opA().patch(`/iam/v2beta1/roles/${role.uid}`, { capabilities: ["CAP_IAM_GROUPS_LIST"] })).status,
        200,
      );
      assert.equal((await as(b, w).get(`${G}/${child.uid}`)).status, 200, "list capability back");
    });

    it("an identity deleted on one replica is refused by the other's next request", async () => {
      const w = await newWorkload("doomed");
      const binding = await createRoleBinding(opA(), org.uid, w.uid);
      await warm(b, w, 200);
      assert.equal((await opA().delete(`/iam/v2beta1/roleBindings/${binding.uid}`)).status, 200);
      assert.equal((await opA().delete(`/iam/v2beta1/identities/${w.uid}`)).status, 200);
      assertUnauthenticated(await as(b, w).get(`${G}/${child.uid}`), "Get after the identity is gone");
      assertUnauthenticated(await as(b, w).get(`${G}?uidp.children_of=${org.uid}`), "List after it");
      assertUnauthenticated(await as(b, w).get("/auth/v1/ok"), "token check after it");
    });

    it("every Get answered from cached grants sees a revocation on the very next request", async () => {
      // Each of these Gets reads the authorization counter in the statement that reads its row
      // (or, without it, asks once more): a binding revoked on one replica must count either way.
      const reader = await createRole(opA(), org.uid, `get-reader-${Date.now()}`, [
        "CAP_IAM_ROLE_BINDINGS_LIST",
        "CAP_IAM_IDENTITY_PROVIDERS_LIST",
        "CAP_IAM_GROUP_INVITES_LIST",
        "CAP_IAM_ACCOUNT_ASSOCIATIONS_LIST",
        "CAP_REPO_LIST",
      ]);
      const bindingToRead = await createRoleBinding(opA(), org.uid, (await newWorkload("read-me")).uid);
      const idp = await createIdentityProvider(opA(), org.uid, `idp-${Date.now()}`);
      const invite = await createGroupInvite(opA(), org.uid);
      const association = await createAccountAssociation(opA(), child.uid, `assoc-${Date.now()}`);
      const repo = await opA().post(`/registry/v2beta1/repos/${org.uid}`, { name: `cached-${Date.now()}` });
      assert.equal(repo.status, 200, JSON.stringify(repo.body));
      const paths = [
        `/iam/v2beta1/roleBindings/${bindingToRead.uid}`,
        `/iam/v2beta1/identityProviders/${idp.uid}`,
        `/iam/v2beta1/groupInvites/${invite.uid}`,
        `/iam/v2beta1/accountAssociations/${association.uid}`,
        `/registry/v2beta1/repos/${repo.body.uid}`,
        `/registry/v2beta1/repos/${repo.body.uid}/readme`,
        `/bulwark/registry/v1/repos/${repo.body.uid}/visibility`,
      ];
      for (const path of paths) {
        const w = await newWorkload("getter");
        const binding = await createRoleBinding(opA(), org.uid, w.uid, reader.uid);
        for (let i = 0; i < 3; i++) assert.equal((await as(b, w).get(path)).status, 200, `${path}: warm-up ${i}`);
        assert.equal((await opA().delete(`/iam/v2beta1/roleBindings/${binding.uid}`)).status, 200);
        assertNotFound(await as(b, w).get(path), `${path} right after the revocation`);
      }
    });

    it("alternating grants and revocations across replicas: every next request sees the last change", async () => {
      const w = await newWorkload("flip");
      const servers = [a, b];
      let binding: Json | undefined;
      for (let i = 0; i < 12; i++) {
        const writer = restClient(servers[i % 2]!.url, servers[i % 2]!.operatorToken);
        const reader = servers[(i + 1) % 2]!;
        if (binding) {
          assert.equal((await writer.delete(`/iam/v2beta1/roleBindings/${binding.uid}`)).status, 200);
          binding = undefined;
          assertNotFound(await as(reader, w).get(`${G}/${child.uid}`), `round ${i}: revoked`);
        } else {
          binding = await createRoleBinding(writer, org.uid, w.uid);
          assert.equal((await as(reader, w).get(`${G}/${child.uid}`)).status, 200, `round ${i}: granted`);
        }
      }
    });
  });
}
