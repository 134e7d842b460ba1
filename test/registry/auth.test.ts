// The registry's authentication and authorization (distribution token spec), public repos, the
// registry's own port, online garbage collection and S3-compatible storage, on every backend.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { SignJWT, decodeJwt, generateKeyPair } from "jose";
import { sql } from "kysely";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import type { GcReport } from "../../src/registry/gc.js";
import { registryModule } from "../../src/registry/module.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createRoleBinding, type Json } from "../support/fixtures.js";
import { pullTokenIdentity } from "../support/principals.js";
import { restClient } from "../support/http.js";
import { startS3, type TestS3 } from "../support/s3.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { withinHang } from "../support/wait.js";

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";

function digestOf(bytes: Uint8Array): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

/** A small registry client over fetch for one server (credentials given per call). */
function registry(base: string) {
  const call = async (
    method: string,
    path: string,
    authorization?: string,
    body?: Uint8Array | string,
    type?: string,
  ) => {
    const headers: Record<string, string> = {};
    if (authorization) headers.authorization = authorization;
    if (type) headers["content-type"] = type;
    const res = await fetch(base + path, { method, headers, body });
    const text = method === "HEAD" ? "" : await res.text();
    return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) as Json };
  };
  return {
    call,
    async pushBlob(name: string, bytes: Uint8Array, authorization: string) {
      const digest = digestOf(bytes);
      const res = await call(
        "POST",
        `/v2/${name}/blobs/uploads/?digest=${digest}`,
        authorization,
        bytes,
        "application/octet-stream",
      );
      assert.equal(res.status, 201, res.text);
      return digest;
    },
    /** pushes a config and one layer, and a manifest under `tag`; answers the manifest's digest */
    async pushImage(name: string, tag: string, authorization: string, extra: Json = {}) {
      const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", n: Math.random() }));
      const layer = randomBytes(256);
      const configDigest = await this.pushBlob(name, config, authorization);
      const layerDigest = await this.pushBlob(name, layer, authorization);
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: configDigest, size: config.length },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: layerDigest, size: layer.length }],
        ...extra,
      });
      const res = await call("PUT", `/v2/${name}/manifests/${tag}`, authorization, manifest, OCI_MANIFEST);
      assert.equal(res.status, 201, res.text);
      return { digest: res.headers.get("docker-content-digest")!, layerDigest, configDigest };
    },
  };
}

for (const backend of backends()) {
  describe(`registry authentication and authorization [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let reg: ReturnType<typeof registry>;
    let org: Json;
    let other: Json;
    let registryHost: string;
    let operator: string; // Basic credentials of the operator, with a registry-audience token

    const tokenFor = async (authorization: string | undefined, scope: string) => {
      const res = await reg.call(
        "GET",
        `/token?service=${registryHost}&scope=${encodeURIComponent(scope)}`,
        authorization,
      );
      return res;
    };
    const grantsOf = (token: string) => decodeJwt(token).access as { type: string; name: string; actions: string[] }[];

    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      reg = registry(server.url);
      registryHost = server.tokens.urls.registryAudience;
      org = await createGroup(api, undefined, "acme");
      other = await createGroup(api, undefined, "globex");
      operator = basic("_token", await server.tokenFor(OPERATOR_SUBJECT, { audience: [registryHost] }));
      await reg.pushImage("acme/app", "v1", operator);
      await reg.pushImage("globex/secret", "v1", operator);
    });
    after(() => server.close());

    it("answers /v2/ without credentials with the token challenge", async () => {
      const res = await reg.call("GET", "/v2/");
      assert.equal(res.status, 401);
      assert.equal(res.headers.get("docker-distribution-api-version"), "registry/2.0");
      assert.equal(res.headers.get("www-authenticate"), `Bearer realm="${server.url}/token",service="${registryHost}"`);
      assert.equal(res.json().errors[0].code, "UNAUTHORIZED");
      assert.equal((await reg.call("GET", "/v2/", operator)).status, 200);
    });

    it("names the repository and actions in a repository endpoint's challenge", async () => {
      const pull = await reg.call("GET", "/v2/acme/app/manifests/v1");
      assert.equal(pull.status, 401);
      assert.match(pull.headers.get("www-authenticate")!, /,scope="repository:acme\/app:pull"$/);
      const push = await reg.call("POST", "/v2/acme/app/blobs/uploads/");
      assert.match(push.headers.get("www-authenticate")!, /,scope="repository:acme\/app:pull,push"$/);
    });

    it("issues a short registry token limited to the granted repositories and actions", async () => {
      const res = await tokenFor(operator, "repository:acme/app:pull,push");
      assert.equal(res.status, 200, res.text);
      const body = res.json();
      assert.equal(body.token, body.access_token);
      assert.equal(body.expires_in, 300);
      const claims = decodeJwt(body.token);
      assert.deepEqual(claims.aud, [registryHost]);
      assert.equal(claims.sub, OPERATOR_SUBJECT);
      assert.ok(claims.exp! - claims.iat! <= 300);
      assert.deepEqual(grantsOf(body.token), [{ type: "repository", name: "acme/app", actions: ["pull", "push"] }]);
      const bearer = `Bearer ${body.token}`;
      assert.equal((await reg.call("GET", "/v2/acme/app/manifests/v1", bearer)).status, 200);
      // Another repository than the token names: a new challenge for that one.
      const elsewhere = await reg.call("GET", "/v2/globex/secret/manifests/v1", bearer);
      assert.equal(elsewhere.status, 401);
      assert.match(elsewhere.headers.get("www-authenticate")!, /scope="repository:globex\/secret:pull"/);
      // Pull-only token: no push.
      const pullOnly = (await tokenFor(operator, "repository:acme/app:pull")).json().token;
      const push = await reg.call("POST", "/v2/acme/app/blobs/uploads/", `Bearer ${pullOnly}`);
      assert.equal(push.status, 401);
      assert.equal(push.json().errors[0].code, "UNAUTHORIZED");
    });

    it("accepts several scopes, repeated or space-separated", async () => {
      const q = `/token?service=${registryHost}&scope=repository:acme/app:pull&scope=repository:globex/secret:pull`;
      const res = await reg.call("GET", q, operator);
      assert.deepEqual(
        grantsOf(res.json().token).map((g) => g.name),
        ["acme/app", "globex/secret"],
      );
      const spaced = await tokenFor(operator, "repository:acme/app:pull repository:globex/secret:push");
      assert.deepEqual(grantsOf(spaced.json().token), [
        { type: "repository", name: "acme/app", actions: ["pull"] },
        { type: "repository", name: "globex/secret", actions: ["push"] },
      ]);
    });

    it("gives anonymous callers a token with nothing granted on private repos", async () => {
      const res = await tokenFor(undefined, "repository:acme/app:pull");
      assert.equal(res.status, 200);
      assert.deepEqual(grantsOf(res.json().token), [{ type: "repository", name: "acme/app", actions: [] }]);
      const pull = await reg.call("GET", "/v2/acme/app/manifests/v1", `Bearer ${res.json().token}`);
      assert.equal(pull.status, 401);
    });

    it("refuses wrong credentials (401), tokens for another audience (403, naming the audience) and another service (400)", async () => {
      const wrong = await tokenFor(basic("_token", "not-a-token"), "repository:acme/app:pull");
      assert.equal(wrong.status, 401);
      assert.equal(wrong.json().errors[0].code, "UNAUTHORIZED");
      const expected = new RegExp(`audience ${JSON.stringify(registryHost).replace(/[.]/g, "\\.")}`);
      // An API token is a password, not a Bearer token.
      const direct = await reg.call("GET", "/v2/acme/app/manifests/v1", `Bearer ${server.operatorToken}`);
      assert.equal(direct.status, 403);
      assert.equal(direct.json().errors[0].code, "DENIED");
      assert.match(direct.json().errors[0].message, expected);
      // Ours for another audience, and one from elsewhere: DENIED, naming what is expected, not the token.
      const otherAudience = await server.tokenFor(OPERATOR_SUBJECT, { audience: ["https://other.example"] });
      const { privateKey } = await generateKeyPair("ES256");
      const now = Math.floor(Date.now() / 1000);
      const elsewhere = await new SignJWT({})
        .setProtectedHeader({ alg: "ES256" })
        .setIssuer("https://ci.example")
        .setSubject("repo:acme/app")
        .setAudience("https://ci.example/aud")
        .setIssuedAt(now)
        .setExpirationTime(now + 600)
        .sign(privateKey);
      for (const token of [otherAudience, elsewhere]) {
        for (const res of [
          await tokenFor(basic("_token", token), "repository:acme/app:pull"),
          await reg.call("GET", "/v2/", basic("_token", token)),
          await reg.call("GET", "/v2/", `Bearer ${token}`),
        ]) {
          assert.equal(res.status, 403, res.text);
          assert.equal(res.json().errors[0].code, "DENIED");
          assert.match(res.json().errors[0].message, expected);
          assert.ok(!res.text.includes(token.split(".")[2]!), "the answer repeats no part of the token");
        }
      }
      const service = await reg.call(
        "GET",
        "/token?service=elsewhere.example&scope=repository:acme/app:pull",
        operator,
      );
      assert.equal(service.status, 400);
    });

    it("logs in with an API token of ours as the password (any user): the same identity, never wider", async () => {
      // The operator's API token, as `bulwark admin token` prints it.
      for (const user of ["_token", "anyone"]) {
        const res = await tokenFor(basic(user, server.operatorToken), "repository:acme/app:pull,push");
        assert.equal(res.status, 200, res.text);
        const claims = decodeJwt(res.json().token);
        assert.equal(claims.sub, OPERATOR_SUBJECT);
        assert.deepEqual(claims.aud, [registryHost]);
        assert.deepEqual(grantsOf(res.json().token), [
          { type: "repository", name: "acme/app", actions: ["pull", "push"] },
        ]);
      }
      assert.equal((await reg.call("GET", "/v2/", basic("_token", server.operatorToken))).status, 200);
      const direct = await reg.call("GET", "/v2/acme/app/manifests/v1", basic("_token", server.operatorToken));
      assert.equal(direct.status, 200, direct.text);
      // An identity that may only pull gets pull, whatever it asks for, and cannot push with Basic either.
      const puller = await api.post(`/iam/v2beta1/identities/${org.uid}`, {
        name: "api-token-puller",
        claimMatch: { issuer: "https://ci.example", subject: "puller" },
      });
      assert.equal(puller.status, 200, JSON.stringify(puller.body));
      await createRoleBinding(api, org.uid, puller.body.uid, builtinRoleUid("registry.pull"));
      const pullerToken = await server.tokenFor(puller.body.uid);
      const pulled = await tokenFor(basic("_token", pullerToken), "repository:acme/app:pull,push,delete");
      assert.equal(decodeJwt(pulled.json().token).sub, puller.body.uid);
      assert.deepEqual(grantsOf(pulled.json().token)[0]!.actions, ["pull"]);
      assert.equal((await reg.call("GET", "/v2/acme/app/manifests/v1", basic("_token", pullerToken))).status, 200);
      const push = await reg.call("POST", "/v2/acme/app/blobs/uploads/", basic("_token", pullerToken));
      assert.equal(push.status, 403, push.text);
      assert.equal((await tokenFor(basic("_token", pullerToken), "repository:globex/secret:pull")).status, 200);
      assert.deepEqual(
        grantsOf((await tokenFor(basic("_token", pullerToken), "repository:globex/secret:pull")).json().token)[0]!
          .actions,
        [],
      );
      // An API token narrowed to other groups stays narrowed.
      const narrowed = await server.tokenFor(OPERATOR_SUBJECT, { scopes: [other.uid] });
      const res = await tokenFor(basic("_token", narrowed), "repository:acme/app:pull");
      assert.deepEqual(grantsOf(res.json().token)[0]!.actions, []);
      assert.deepEqual(decodeJwt(res.json().token).scopes, [other.uid]);
    });

    it("grants by role: registry.pull pulls but cannot push; registry.push pushes and creates repos", async () => {
      const puller = await api.post(`/iam/v2beta1/identities/${org.uid}`, {
        name: "puller",
        claimMatch: { issuer: "https://issuer.example", subject: "puller" },
      });
      const pusher = await api.post(`/iam/v2beta1/identities/${org.uid}`, {
        name: "pusher",
        claimMatch: { issuer: "https://issuer.example", subject: "pusher" },
      });
      await createRoleBinding(api, org.uid, puller.body.uid, builtinRoleUid("registry.pull"));
      await createRoleBinding(api, org.uid, pusher.body.uid, builtinRoleUid("registry.push"));
      const credentialsOf = async (uid: string) => basic(uid, await server.tokenFor(uid, { audience: [registryHost] }));
      const pull = await credentialsOf(puller.body.uid);
      const push = await credentialsOf(pusher.body.uid);

      const granted = await tokenFor(pull, "repository:acme/app:pull,push,delete");
      assert.deepEqual(grantsOf(granted.json().token)[0]!.actions, ["pull"]);
      assert.equal((await reg.call("GET", "/v2/acme/app/manifests/v1", pull)).status, 200);
      const refused = await reg.call("POST", "/v2/acme/app/blobs/uploads/", pull);
      assert.equal(refused.status, 403);
      assert.equal(refused.json().errors[0].code, "DENIED");
      // Outside its organization, nothing exists for it.
      const hidden = await reg.call("GET", "/v2/globex/secret/manifests/v1", pull);
      assert.equal(hidden.status, 404);
      assert.equal(hidden.json().errors[0].code, "NAME_UNKNOWN");

      assert.deepEqual(grantsOf((await tokenFor(push, "repository:acme/new-app:pull,push")).json().token)[0]!.actions, [
        "pull",
        "push",
      ]);
      await reg.pushImage("acme/new-app", "latest", push);
      const repos = await api.get(`/registry/v2beta1/repos?uidp.childrenOf=${org.uid}&name=new-app`);
      assert.equal(repos.status, 200, JSON.stringify(repos.body));
      assert.equal(repos.body.repos.length, 1);
      // The pull role cannot create a repo either.
      const create = await reg.call("POST", "/v2/acme/pull-made/blobs/uploads/", pull);
      assert.equal(create.status, 403);
    });

    it("accepts an identity's pull token: a JWT signed by its static key, user = the identity's uid", async () => {
      const identity = await pullTokenIdentity(api, org.uid, "pull-token", registryHost);
      const uid = identity.uid;
      const binding = await createRoleBinding(api, org.uid, uid, builtinRoleUid("registry.pull"));
      const jwt = await identity.pullToken();
      const res = await tokenFor(basic(uid, jwt), "repository:acme/app:pull,push");
      assert.equal(res.status, 200, res.text);
      assert.equal(decodeJwt(res.json().token).sub, uid);
      assert.deepEqual(grantsOf(res.json().token)[0]!.actions, ["pull"]);
      assert.equal((await reg.call("GET", "/v2/acme/app/manifests/v1", basic(uid, jwt))).status, 200);
      // Another identity's uid with this JWT, or a forged JWT: refused.
      assert.equal((await tokenFor(basic(org.uid + "/0123456789abcdef", jwt), "repository:acme/app:pull")).status, 401);
      const forged = jwt.slice(0, jwt.lastIndexOf(".") + 1) + "AAAA";
      assert.equal((await tokenFor(basic(uid, forged), "repository:acme/app:pull")).status, 401);
      // Revoked by deleting the identity (its binding first).
      assert.equal((await api.delete(`/iam/v2beta1/roleBindings/${binding.uid}`)).status, 200);
      const unbound = await tokenFor(basic(uid, jwt), "repository:acme/app:pull");
      assert.deepEqual(grantsOf(unbound.json().token)[0]!.actions, []);
      assert.equal((await api.delete(`/iam/v2beta1/identities/${uid}`)).status, 200);
      assert.equal((await tokenFor(basic(uid, jwt), "repository:acme/app:pull")).status, 401);
    });

    it("keeps a narrowed token narrowed", async () => {
      const narrowed = await server.tokenFor(OPERATOR_SUBJECT, { audience: [registryHost], scopes: [other.uid] });
      const res = await tokenFor(basic("_token", narrowed), "repository:acme/app:pull");
      assert.deepEqual(grantsOf(res.json().token)[0]!.actions, []);
      assert.deepEqual(decodeJwt(res.json().token).scopes, [other.uid]);
      const direct = await reg.call("GET", "/v2/acme/app/manifests/v1", basic("_token", narrowed));
      assert.equal(direct.status, 404);
    });

    it("serves public repos to anyone for pull, never for push", async () => {
      await reg.pushImage("acme/public-app", "v1", operator);
      const repo = (await api.get(`/registry/v2beta1/repos?name=public-app`)).body.repos[0];
      const made = await api.patch(`/bulwark/registry/v1/repos/${repo.uid}/visibility`, { public: true });
      assert.equal(made.status, 200, JSON.stringify(made.body));
      assert.equal(made.body.public, true);
      const manifest = await reg.call("GET", "/v2/acme/public-app/manifests/v1");
      assert.equal(manifest.status, 200, manifest.text);
      const anonymous = await tokenFor(undefined, "repository:acme/public-app:pull,push");
      assert.deepEqual(grantsOf(anonymous.json().token)[0]!.actions, ["pull"]);
      // The anonymous token works where nothing is needed, and is no credential anywhere else.
      const bearer = `Bearer ${anonymous.json().token}`;
      assert.equal((await reg.call("GET", "/v2/acme/public-app/manifests/v1", bearer)).status, 200);
      assert.equal((await reg.call("GET", "/v2/", bearer)).status, 200);
      assert.equal((await reg.call("POST", "/v2/acme/public-app/blobs/uploads/", bearer)).status, 401);
      assert.equal((await reg.call("POST", "/v2/acme/public-app/blobs/uploads/")).status, 401);
      assert.equal((await reg.call("GET", "/v2/acme/app/manifests/v1", bearer)).status, 401);
    });

    it("a repo and tag made through the API, as the tutorial does: listed, and MANIFEST_UNKNOWN on pull until pushed", async () => {
      const repo = await api.post(`/registry/v2beta1/repos/${org.uid}`, { name: "tutorial" });
      assert.equal(repo.status, 200, JSON.stringify(repo.body));
      const digest = digestOf(randomBytes(32));
      const tag = await api.post(`/registry/v2beta1/tags/${repo.body.uid}`, { name: "v1", digest });
      assert.equal(tag.status, 200, JSON.stringify(tag.body));
      const tags = await reg.call("GET", "/v2/acme/tutorial/tags/list", operator);
      assert.deepEqual(tags.json().tags, ["v1"]);
      const pull = await reg.call("GET", "/v2/acme/tutorial/manifests/v1", operator);
      assert.equal(pull.status, 404);
      assert.equal(pull.json().errors[0].code, "MANIFEST_UNKNOWN");
      // A push moves the API-made tag; its history has both digests.
      const pushed = await reg.pushImage("acme/tutorial", "v1", operator);
      const history = await reg.call("GET", "/v2/acme/tutorial/_chainguard/history/v1", operator);
      assert.deepEqual(
        history.json().history.map((h: Json) => h.digest),
        [digest, pushed.digest],
      );
    });

    it("refuses (409 DENIED) to delete a blob a manifest needs, or a manifest an index names", async () => {
      const image = await reg.pushImage("acme/refs", "v1", operator);
      const blob = await reg.call("DELETE", `/v2/acme/refs/blobs/${image.layerDigest}`, operator);
      assert.equal(blob.status, 409);
      assert.equal(blob.json().errors[0].code, "DENIED");
      assert.equal(blob.json().errors[0].detail.manifest, image.digest);
      const index = JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.index.v1+json",
        manifests: [{ mediaType: OCI_MANIFEST, digest: image.digest, size: 1 }],
      });
      const put = await reg.call(
        "PUT",
        "/v2/acme/refs/manifests/all",
        operator,
        index,
        "application/vnd.oci.image.index.v1+json",
      );
      assert.equal(put.status, 201, put.text);
      const manifest = await reg.call("DELETE", `/v2/acme/refs/manifests/${image.digest}`, operator);
      assert.equal(manifest.status, 409);
      assert.equal(manifest.json().errors[0].detail.index, put.headers.get("docker-content-digest"));
      // Everything is still there; deleting from the top down works.
      assert.equal((await reg.call("HEAD", `/v2/acme/refs/blobs/${image.layerDigest}`, operator)).status, 200);
      const indexDigest = put.headers.get("docker-content-digest")!;
      assert.equal((await reg.call("DELETE", `/v2/acme/refs/manifests/${indexDigest}`, operator)).status, 202);
      assert.equal((await reg.call("DELETE", `/v2/acme/refs/manifests/${image.digest}`, operator)).status, 202);
      assert.equal((await reg.call("DELETE", `/v2/acme/refs/blobs/${image.layerDigest}`, operator)).status, 202);
    });

    it("names the resource a refused extension RPC is about (repo visibility, tag), not the service", async () => {
      const repo = (await api.get(`/registry/v2beta1/repos?name=app&uidp.childrenOf=${org.uid}`)).body.repos[0];
      const tag = (await api.get(`/registry/v2beta1/tags?uidp.childrenOf=${repo.uid}`)).body.tags[0];
      const stranger = await api.post(`/iam/v2beta1/identities/${other.uid}`, {
        name: "outsider",
        claimMatch: { issuer: "https://issuer.example", subject: "outsider" },
      });
      await createRoleBinding(api, other.uid, stranger.body.uid, builtinRoleUid("owner"));
      const theirs = restClient(server.url, await server.tokenFor(stranger.body.uid));
      const visibility = await theirs.get(`/bulwark/registry/v1/repos/${repo.uid}/visibility`);
      assert.equal(visibility.status, 404);
      assert.equal(visibility.body.message, `Not found: repo visibility ${repo.uid}`);
      const deprecate = await theirs.post(`/bulwark/registry/v1/tags/${tag.uid}:deprecate`, {});
      assert.equal(deprecate.status, 404);
      assert.equal(deprecate.body.message, `Not found: tag ${tag.uid}`);
    });

    it("lists only visible repos in the catalog", async () => {
      const all = await reg.call("GET", "/v2/_catalog", operator);
      assert.ok(all.json().repositories.includes("globex/secret"));
      const stranger = await api.post(`/iam/v2beta1/identities/${other.uid}`, {
        name: "stranger",
        claimMatch: { issuer: "https://issuer.example", subject: "stranger" },
      });
      await createRoleBinding(api, other.uid, stranger.body.uid, builtinRoleUid("registry.pull"));
      const theirs = basic(stranger.body.uid, await server.tokenFor(stranger.body.uid, { audience: [registryHost] }));
      assert.deepEqual((await reg.call("GET", "/v2/_catalog", theirs)).json().repositories, ["globex/secret"]);
    });
  });

  describe(`registry port, garbage collection and S3 storage [${backend}]`, () => {
    let server: TestServer;
    let s3: TestS3;
    let api: ReturnType<typeof restClient>;
    let operator: string;

    before(async () => {
      s3 = await startS3();
      server = await startTestServer(backend, { registry: { objectStorage: s3.settings }, registryPort: 0 });
      api = restClient(server.url, server.operatorToken);
      await createGroup(api, undefined, "acme");
      operator = basic(
        "_token",
        await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] }),
      );
    });
    after(async () => {
      await server.close();
      await s3.close();
    });

    it("serves the registry, and only the registry, on its own port (blobs in S3)", async () => {
      assert.ok(server.registryPort);
      const own = `http://127.0.0.1:${server.registryPort}`;
      assert.equal(server.tokens.urls.registryAudience, `127.0.0.1:${server.registryPort}`);
      const reg = registry(own);
      const { layerDigest } = await reg.pushImage("acme/app", "v1", operator);
      const range = await fetch(`${own}/v2/acme/app/blobs/${layerDigest}`, {
        headers: { authorization: operator, range: "bytes=0-0" },
      });
      assert.equal(range.status, 206);
      assert.equal((await range.arrayBuffer()).byteLength, 1);
      assert.equal((await reg.call("GET", "/v2/acme/app/manifests/v1", operator)).status, 200);
      assert.equal((await reg.call("GET", `/token?scope=repository:acme/app:pull`, operator)).status, 200);
      assert.equal((await fetch(`${own}/iam/v2beta1/groups`)).status, 404);
      // The main port serves the registry too.
      assert.equal((await registry(server.url).call("GET", "/v2/acme/app/manifests/v1", operator)).status, 200);
    });

    it("collects untagged manifests and unreferenced blobs past the grace window, keeping the rest", async () => {
      const reg = registry(server.url);
      const gc = server.exportsOf(registryModule).collectGarbage;
      const kept = await reg.pushImage("acme/gc", "kept", operator);
      const dropped = await reg.pushImage("acme/gc", "dropped", operator);
      // A referrer of the kept image (untagged by design) and a stray blob.
      const referrer = await reg.pushImage("acme/gc", "tmp", operator, {
        subject: { mediaType: OCI_MANIFEST, digest: kept.digest, size: 1 },
      });
      assert.equal((await reg.call("DELETE", "/v2/acme/gc/manifests/tmp", operator)).status, 202);
      const stray = await reg.pushBlob("acme/gc", randomBytes(64), operator);
      assert.equal((await reg.call("DELETE", "/v2/acme/gc/manifests/dropped", operator)).status, 202);

      // Within the grace window nothing goes.
      const early = await gc({ graceMs: 3600_000 });
      assert.deepEqual(early, { manifests: 0, blobLinks: 0, blobs: 0, bytes: 0, uploads: 0 });
      const preview = await gc({ graceMs: 0, dryRun: true });
      assert.equal(preview.manifests, 1);
      assert.ok(preview.blobLinks >= 1);
      assert.equal((await reg.call("GET", `/v2/acme/gc/manifests/${dropped.digest}`, operator)).status, 200);

      const report = await gc({ graceMs: 0 });
      assert.equal(report.manifests, 1);
      assert.ok(report.blobs >= 3, JSON.stringify(report)); // dropped's config and layer, the stray blob
      assert.equal((await reg.call("GET", `/v2/acme/gc/manifests/${dropped.digest}`, operator)).status, 404);
      assert.equal((await reg.call("HEAD", `/v2/acme/gc/blobs/${dropped.layerDigest}`, operator)).status, 404);
      assert.equal((await reg.call("HEAD", `/v2/acme/gc/blobs/${stray}`, operator)).status, 404);
      const store = server.exportsOf(registryModule).store;
      assert.equal(await store.has(dropped.layerDigest), false);
      assert.equal(await store.has(kept.layerDigest), true);
      assert.equal((await reg.call("GET", "/v2/acme/gc/manifests/kept", operator)).status, 200);
      assert.equal((await reg.call("GET", `/v2/acme/gc/manifests/${referrer.digest}`, operator)).status, 200);
      const blob = await reg.call("GET", `/v2/acme/gc/blobs/${kept.layerDigest}`, operator);
      assert.equal(blob.status, 200);
    });

    it("removes uploads abandoned for a day, with their staged bytes", async () => {
      const reg = registry(server.url);
      const gc = server.exportsOf(registryModule).collectGarbage;
      const start = await reg.call("POST", "/v2/acme/abandoned/blobs/uploads/", operator);
      const location = start.headers.get("location")!;
      assert.equal(
        (await reg.call("PATCH", location, operator, randomBytes(100), "application/octet-stream")).status,
        202,
      );
      const id = location.split("/").pop()!;
      assert.equal((await gc({ graceMs: 0 })).uploads, 0, "a fresh upload stays, whatever the grace window");
      await sql`update uploads set update_time = now() - interval '25 hours' where id = ${id}`.execute(server.db);
      assert.equal((await gc({ graceMs: 0 })).uploads, 1);
      const status = await reg.call("GET", location, operator);
      assert.equal(status.status, 404);
      assert.equal(status.json().errors[0].code, "BLOB_UPLOAD_UNKNOWN");
      const staged = [];
      for await (const u of server.exportsOf(registryModule).store.listUploads()) staged.push(u.uploadId);
      assert.ok(!staged.includes(id), "its staged bytes are gone");
    });

    it("collects on a schedule when asked to (--registry-gc-every)", async () => {
      const scheduled = await startTestServer(backend, { registry: { gcIntervalMs: 200, gcGraceMs: 0 } });
      try {
        await createGroup(restClient(scheduled.url, scheduled.operatorToken), undefined, "acme");
        const credentials = basic(
          "_token",
          await scheduled.tokenFor(OPERATOR_SUBJECT, { audience: [scheduled.tokens.urls.registryAudience] }),
        );
        const bytes = randomBytes(64);
        const store = scheduled.exportsOf(registryModule).store;
        // the schedule's collection removing the blob's bytes is the event waited for
        const deleteBlob = store.delete;
        const collected = new Promise<void>((resolve) => {
          store.delete = async (digest) => {
            await deleteBlob.call(store, digest);
            if (digest === digestOf(bytes)) resolve();
          };
        });
        try {
          const stray = await registry(scheduled.url).pushBlob("acme/app", bytes, credentials);
          await withinHang(collected, "collection of the unreferenced blob by the schedule");
          assert.equal(await store.has(stray), false, "the unreferenced blob was collected by the schedule");
        } finally {
          store.delete = deleteBlob;
        }
      } finally {
        await scheduled.close();
      }
    });

    /** Runs `during` while the next push is placing its bytes (the store's commit), then lets the push go on. */
    const duringNextCommit = (during: () => Promise<GcReport>) => {
      const store = server.exportsOf(registryModule).store;
      const commitUpload = store.commitUpload;
      let started: Promise<GcReport> | undefined;
      store.commitUpload = async (...args) => {
        store.commitUpload = commitUpload;
        await new Promise((r) => setTimeout(r, 5)); // so a collection's clock is past the push's
        started = during();
        started.catch(() => undefined); // awaited by the caller
        await new Promise((r) => setTimeout(r, 50));
        return commitUpload.apply(store, args);
      };
      return {
        /** the collection's report; fails when no push reached the store's commit */
        finished: async () => {
          store.commitUpload = commitUpload;
          assert.ok(started, "the push placed its bytes through the store's commit");
          return started;
        },
      };
    };

    /** Every recorded blob has its bytes (what a collection racing a push must never break). */
    const assertEveryBlobHasBytes = async () => {
      const store = server.exportsOf(registryModule).store;
      const rows = await sql<{ digest: string }>`select digest from blobs`.execute(server.db);
      for (const { digest } of rows.rows) assert.equal(await store.has(digest), true, `${digest} has its bytes`);
    };

    it("a collection with no grace window, started while a push places its bytes, fails neither", async () => {
      const reg = registry(server.url);
      const gc = server.exportsOf(registryModule).collectGarbage;
      for (const how of ["monolithic", "chunked"]) {
        const bytes = randomBytes(300);
        const race = duringNextCommit(() => gc({ graceMs: 0 }));
        if (how === "monolithic") await reg.pushBlob("acme/race", bytes, operator);
        else {
          const start = await reg.call("POST", "/v2/acme/race/blobs/uploads/", operator);
          const location = start.headers.get("location")!;
          assert.equal((await reg.call("PATCH", location, operator, bytes, "application/octet-stream")).status, 202);
          const put = await reg.call("PUT", `${location}?digest=${digestOf(bytes)}`, operator);
          assert.equal(put.status, 201, put.text);
        }
        assert.equal(typeof (await race.finished()).blobs, "number", how);
        await assertEveryBlobHasBytes();
      }
    });

    it("a stale unlinked blob pushed again while a collection removes it ends whole, or gone whole", async () => {
      const reg = registry(server.url);
      const gc = server.exportsOf(registryModule).collectGarbage;
      // With a grace window the push keeps the blob; with none, the collection may take it right
      // after the push (on PostgreSQL its delete waits for the push's row, then meets its link).
      for (const graceMs of [60_000, 0]) {
        const bytes = randomBytes(400);
        const digest = await reg.pushBlob("acme/stale", bytes, operator);
        assert.equal((await reg.call("DELETE", `/v2/acme/stale/blobs/${digest}`, operator)).status, 202);
        await sql`update blobs set touch_time = now() - interval '2 hours' where digest = ${digest}`.execute(server.db);
        const race = duringNextCommit(() => gc({ graceMs }));
        await reg.pushBlob("acme/stale-again", bytes, operator);
        await race.finished();
        await assertEveryBlobHasBytes();
        const pulled = await fetch(`${server.url}/v2/acme/stale-again/blobs/${digest}`, {
          headers: { authorization: operator },
        });
        if (graceMs > 0 || pulled.status === 200) {
          assert.equal(pulled.status, 200);
          assert.equal(digestOf(new Uint8Array(await pulled.arrayBuffer())), digest);
        } else assert.equal(pulled.status, 404);
      }
    });

    it("never breaks a push in progress: an open upload and fresh blobs survive a collection", async () => {
      const reg = registry(server.url);
      const gc = server.exportsOf(registryModule).collectGarbage;
      const config = Buffer.from("{}");
      const configDigest = await reg.pushBlob("acme/inflight", config, operator);
      const start = await reg.call("POST", "/v2/acme/inflight/blobs/uploads/", operator);
      const location = start.headers.get("location")!;
      const chunk = randomBytes(1000);
      assert.equal((await reg.call("PATCH", location, operator, chunk, "application/octet-stream")).status, 202);
      await gc({ graceMs: 60_000 });
      const finished = await reg.call("PUT", `${location}?digest=${digestOf(chunk)}`, operator);
      assert.equal(finished.status, 201, finished.text);
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: configDigest, size: 2 },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: digestOf(chunk), size: 1000 }],
      });
      const put = await reg.call("PUT", "/v2/acme/inflight/manifests/v1", operator, manifest, OCI_MANIFEST);
      assert.equal(put.status, 201, put.text);
    });
  });
}

describe("registry challenges and rate limits", () => {
  it("the challenge round trip (no credentials) spends nothing of the failed-authentication budget", async () => {
    const server = await startTestServer("pglite", {
      // one request an hour: however slow the machine, no refused request is earned back meanwhile
      rateLimits: { failedAuthentication: { perSecond: 1 / 3600, burst: 2 } },
    });
    try {
      const reg = registry(server.url);
      const statuses = [];
      for (let i = 0; i < 6; i++) statuses.push((await reg.call("GET", "/v2/")).status);
      assert.deepEqual(statuses, [401, 401, 401, 401, 401, 401]);
      const bad = [];
      for (let i = 0; i < 4; i++) bad.push((await reg.call("GET", "/v2/", basic("_token", "wrong"))).status);
      assert.deepEqual(bad, [401, 401, 429, 429]);
    } finally {
      await server.close();
    }
  });
});
