// Plain (non-RPC) routes of a module are first-class: a probe module added to the real server
// declares each route's access, and the server's router authenticates for the route's audience,
// authorizes with the same authorizer as RPCs (404 without any covering binding, 403 with one but
// without the capability) and renders errors as the same google.rpc.Status (or the route's own
// format), on every backend.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { FastifyRequest } from "fastify";
import { Capability } from "../../src/gen/capabilities/capabilities_pb.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { invalidArgument } from "../../src/core/errors.js";
import type { FeatureModule } from "../../src/platform/module.js";
import { MODULES } from "../../src/server/modules.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createIdentity, createRole, createRoleBinding, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const probeModule: FeatureModule<Record<string, never>, Record<string, never>> = {
  name: "probe",
  migrations: {},
  services: [],
  listings: {},
  repositories: () => ({}),
  async start() {
    return {
      bindings: [],
      exports: {},
      routes(router) {
        router.route({ method: "GET", url: "/probe/public", access: "public", handler: () => ({ public: true }) });
        router.route({
          method: "GET",
          url: "/probe/groups/*",
          access: (request: FastifyRequest) => ({
            audience: "api",
            capabilities: [Capability.CAP_IAM_GROUPS_LIST],
            scope: (request.params as Record<string, string>)["*"],
            resourceType: "group",
          }),
          handler: (_request, _reply, call) => ({ caller: call.principal?.uid }),
        });
        router.route({
          method: "GET",
          url: "/probe/registry",
          access: () => ({ audience: "registry", capabilities: [Capability.CAP_IAM_GROUPS_LIST] }),
          handler: (_request, _reply, call) => ({ visibility: call.visibility }),
        });
        router.route({
          method: "GET",
          url: "/probe/fails",
          access: "public",
          handler: () => {
            throw invalidArgument({ field: "x", description: "is wrong" });
          },
        });
        router.route({
          method: "GET",
          url: "/probe/own-errors",
          access: () => ({ audience: "registry", capabilities: [] }),
          handler: () => ({}),
          renderError: (error, reply) =>
            reply.code(401).send({ errors: [{ code: "UNAUTHORIZED", message: error.rawMessage }] }),
        });
      },
    };
  },
};

for (const backend of backends()) {
  describe(`plain routes of a module [${backend}]`, () => {
    let server: TestServer;
    let org: Json;
    let viewerUid: string;
    let viewerToken: string;
    let strangerToken: string;
    let noCapabilityToken: string;
    const get = (path: string, token?: string) => restClient(server.url, token).get(path);

    before(async () => {
      server = await startTestServer(backend, { modules: [...MODULES, probeModule] });
      const api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "plain-routes");
      const viewer = await createIdentity(api, org.uid, "viewer", "viewer");
      await createRoleBinding(api, org.uid, viewer.uid);
      viewerUid = viewer.uid;
      viewerToken = await server.tokenFor(viewer.uid);
      const other = await createGroup(api, undefined, "elsewhere");
      const stranger = await createIdentity(api, other.uid, "stranger", "stranger");
      await createRoleBinding(api, other.uid, stranger.uid);
      strangerToken = await server.tokenFor(stranger.uid);
      const role = await createRole(api, org.uid, "roles only", ["CAP_IAM_ROLES_LIST"]);
      const limited = await createIdentity(api, org.uid, "limited", "limited");
      await createRoleBinding(api, org.uid, limited.uid, role.uid);
      noCapabilityToken = await server.tokenFor(limited.uid);
    });
    after(() => server?.close());

    it("a public route needs no token", async () => {
      const res = await get("/probe/public");
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { public: true });
    });

    it("without a token, an authorized route answers 401 as google.rpc.Status with a challenge", async () => {
      const res = await get(`/probe/groups/${org.uid}`);
      assert.equal(res.status, 401);
      assert.equal(res.body.code, 16);
      assert.equal(res.body.details[0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
      assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer /);
    });

    it("the caller with the capability on the scope is let through, and the handler sees who it is", async () => {
      assert.deepEqual((await get(`/probe/groups/${org.uid}`, viewerToken)).body, { caller: viewerUid });
      assert.equal((await get(`/probe/groups/${org.uid}`, server.operatorToken)).status, 200);
    });

    it("no binding covering the scope: 404 (nothing revealed); a binding without the capability: 403", async () => {
      const hidden = await get(`/probe/groups/${org.uid}`, strangerToken);
      assert.equal(hidden.status, 404, JSON.stringify(hidden.body));
      assert.equal(hidden.body.code, 5);
      const denied = await get(`/probe/groups/${org.uid}`, noCapabilityToken);
      assert.equal(denied.status, 403, JSON.stringify(denied.body));
      assert.equal(denied.body.code, 7);
    });

    it("a token is accepted only for the route's audience", async () => {
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, {
        audience: [server.tokens.urls.registryAudience],
      });
      assert.equal(
        (await get(`/probe/groups/${org.uid}`, registryToken)).status,
        401,
        "registry token on an API route",
      );
      // One of our tokens for the API, on a registry route: refused as the hosted registry does (403).
      assert.equal((await get("/probe/registry", server.operatorToken)).status, 403, "API token on a registry route");
      const viewerRegistry = await server.tokenFor(viewerUid, { audience: [server.tokens.urls.registryAudience] });
      const res = await get("/probe/registry", viewerRegistry);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(
        res.body,
        { visibility: [org.uid] },
        "unscoped: the subtrees where the caller holds the capabilities",
      );
    });

    it("errors use the server's mapping, or the route's own renderer", async () => {
      const res = await get("/probe/fails");
      assert.equal(res.status, 400);
      assert.equal(res.body.code, 3);
      assert.equal(res.body.details[1].fieldViolations[0].field, "x");
      const own = await get("/probe/own-errors");
      assert.equal(own.status, 401);
      assert.equal(own.body.errors[0].code, "UNAUTHORIZED");
    });

    it("query parameters pass the string rule on every plain route: a NUL is refused before anything runs", async () => {
      const probe = await get("/probe/public?x=%00");
      assert.equal(probe.status, 400, JSON.stringify(probe.body));
      assert.equal(probe.body.code, 3);
      assert.equal(probe.body.details[1].fieldViolations[0].field, "x");
      // The server's own plain routes: discovery, the feeds, sign-in, the OCI API (in its own error form).
      for (const path of [
        "/.well-known/openid-configuration?x=%00",
        "/vulnerabilities/secdb.json?x=%00",
        "/v1/vulns/CGA-0000-0000-0000?x=%00",
      ]) {
        const res = await get(path);
        assert.equal(res.status, 400, `${path}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.code, 3, path);
      }
      const oci = await get("/v2/acme/app/tags/list?last=%00");
      assert.equal(oci.status, 400, JSON.stringify(oci.body));
      assert.match(oci.body.errors[0].message, /last/, "the OCI error names the parameter");
      const long = await get(`/probe/public?${"k".repeat(65)}=1`);
      assert.equal(long.status, 400, "a parameter name over 64 characters");
    });
  });
}
