// The token issuer, on every backend: OIDC discovery and the JWKS as standard clients read them
// (jose's createRemoteJWKSet + jwtVerify, openid-client v6's discovery), no private key material
// anywhere public, and key rotation driven by `now` functions over the server's own database:
// 23h55m into a key's 24 h signing window a new key is made, both are published, the old key's
// tokens verify until they expire, and a key past publish_until leaves the JWKS.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import Fastify from "fastify";
import { pino } from "pino";
import { createLocalJWKSet, createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JWK } from "jose";
import { allowInsecureRequests, discovery, fetchProtectedResource } from "openid-client";
import { registerIssuerRoutes } from "../../src/auth/issuer-routes.js";
import { KeyManager, MAX_TOKEN_LIFETIME_MS, ROTATE_BEFORE_MS, SIGNING_WINDOW_MS } from "../../src/auth/keys.js";
import { OPERATOR_SUBJECT, TokenIssuer } from "../../src/auth/tokens.js";
import { startServer, type RunningServer, type ServerConfig } from "../../src/server/start.js";
import { assertUnauthenticated } from "../support/assertions.js";
import { backends, clonePglite, clonePostgres, type Backend } from "../support/db-templates.js";
import { createGroup, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { HOUR, MINUTE, workload } from "../support/principals.js";
import { ERROR_DOMAIN, issuerOf, startTestServer, type TestServer } from "../support/server.js";
import { plainRouter, type PlainRouterDeps } from "../../src/server/plain-routes.js";

const SECOND = 1000;
/** JWK members that carry private or symmetric key material (RFC 7518 §6). */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/** Fails if any object anywhere in `value` has a private-key member. */
function assertNoPrivateMaterial(value: unknown, where: string): void {
  const walk = (v: unknown, path: string) => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`));
    else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        assert.ok(!PRIVATE_MEMBERS.includes(k), `${where}: ${path}.${k} is private key material`);
        walk(x, `${path}.${k}`);
      }
    }
  };
  walk(value, "$");
}

function assertPublicEs256(jwk: JWK, where: string): void {
  assert.equal(jwk.kty, "EC", where);
  assert.equal(jwk.crv, "P-256", where);
  assert.equal(jwk.alg, "ES256", where);
  assert.equal(jwk.use, "sig", where);
  assert.equal(typeof jwk.kid, "string", where);
  assert.ok(jwk.x && jwk.y, where);
  assertNoPrivateMaterial(jwk, where);
}

/** A server with configuration startTestServer does not take (here: the issuer URL). */
async function startWith(
  backend: Backend,
  config: Partial<ServerConfig>,
): Promise<RunningServer & { tokens: TokenIssuer }> {
  const common = {
    port: 0,
    host: "127.0.0.1",
    dataDir: "",
    errorDomain: ERROR_DOMAIN,
    logger: pino({ level: "silent" }),
    ...config,
  };
  if (backend === "pglite") {
    const server = await startServer({ ...common, pglite: await clonePglite() });
    return { ...server, tokens: issuerOf(server) };
  }
  const { url, drop } = await clonePostgres();
  const server = await startServer({ ...common, databaseUrl: url });
  return {
    ...server,
    tokens: issuerOf(server),
    close: async () => {
      await server.close();
      await drop();
    },
  };
}

/** Router dependencies for public routes only: the issuer's routes never authenticate. */
const PUBLIC_ROUTES_ONLY: PlainRouterDeps = {
  authorizer: {
    authorize: () => assert.fail("no RPCs here"),
    authorizeRoute: () => assert.fail("public routes only"),
    confirm: () => assert.fail("no RPCs here"),
  },
  wireError: (err) => assert.fail(`unexpected error: ${String(err)}`),
  sendError: (reply) => reply,
};

for (const backend of backends()) {
  describe(`token issuer [${backend}]`, () => {
    let server: TestServer;
    let started = 0;
    const anon = () => restClient(server.url);

    before(async () => {
      started = Date.now();
      server = await startTestServer(backend);
    });
    after(async () => {
      console.log(`[${backend}] token issuer: ${Date.now() - started} ms`);
      await server?.close();
    });

    it("discovery: issuer is the server's URL, jwks_uri under it, ES256; no private material", async () => {
      const res = await anon().get("/.well-known/openid-configuration");
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.headers.get("content-type")?.split(";")[0], "application/json");
      const d = res.body as Json;
      assert.equal(d.issuer, server.url);
      assert.equal(d.issuer, server.tokens.urls.issuer);
      assert.equal(d.jwks_uri, `${server.url}/.well-known/jwks.json`);
      assert.deepEqual(d.id_token_signing_alg_values_supported, ["ES256"]);
      assert.ok(
        Array.isArray(d.response_types_supported) && Array.isArray(d.subject_types_supported),
        "required OIDC discovery members",
      );
      assertNoPrivateMaterial(d, "discovery");
      assert.equal((await anon().get("/.well-known/openid-configuration/extra")).status, 404);
    });

    it("JWKS: the published ES256 public keys, and only public members", async () => {
      const res = await anon().get("/.well-known/jwks.json");
      assert.equal(res.status, 200);
      const keys = res.body.keys as JWK[];
      assert.ok(Array.isArray(keys) && keys.length >= 1);
      for (const k of keys) assertPublicEs256(k, `jwks ${k.kid}`);
      assertNoPrivateMaterial(res.body, "jwks");
      assert.equal(new Set(keys.map((k) => k.kid)).size, keys.length, "kids are unique");
      const rows = await server.db.selectFrom("signing_keys").select(["kid", "publish_until"]).execute();
      assert.deepEqual(
        new Set(keys.map((k) => k.kid)),
        new Set(rows.filter((r) => r.publish_until.getTime() > Date.now()).map((r) => r.kid)),
      );
      assert.equal(
        decodeProtectedHeader(server.operatorToken).kid,
        keys[0]!.kid,
        "the operator's token is signed with a published key",
      );
    });

    it("jose createRemoteJWKSet + jwtVerify verifies the operator's token and tokenFor tokens", async () => {
      const discoveryDoc = (await anon().get("/.well-known/openid-configuration")).body as Json;
      const jwks = createRemoteJWKSet(new URL(discoveryDoc.jwks_uri));
      const options = {
        issuer: discoveryDoc.issuer as string,
        audience: server.tokens.urls.apiAudience,
        algorithms: ["ES256"],
      };
      const operator = await jwtVerify(server.operatorToken, jwks, options);
      assert.equal(operator.payload.sub, OPERATOR_SUBJECT);
      assert.equal(operator.protectedHeader.alg, "ES256");
      const org = await createGroup(restClient(server.url, server.operatorToken), undefined, "issuer org");
      const w = await workload(server, restClient(server.url, server.operatorToken), org.uid, "verified");
      for (const token of [
        w.token,
        await server.tokenFor(w.uid, { caps: ["CAP_IAM_GROUPS_LIST"], scopes: [org.uid], lifetimeMs: 5 * MINUTE }),
      ]) {
        const { payload } = await jwtVerify(token, jwks, options);
        assert.equal(payload.sub, w.uid);
        assert.ok(payload.exp! - payload.iat! <= MAX_TOKEN_LIFETIME_MS / 1000);
        assert.ok(payload.jti && payload.nbf !== undefined);
      }
      const narrowed = decodeJwt(await server.tokenFor(w.uid, { caps: ["CAP_IAM_GROUPS_LIST"], scopes: [org.uid] }));
      assert.deepEqual([narrowed.caps, narrowed.scopes], [["CAP_IAM_GROUPS_LIST"], [org.uid]]);
      // ... and refuses a token for another audience, as a relying party should
      await assert.rejects(
        jwtVerify(await server.tokenFor(w.uid, { audience: ["https://other.example"] }), jwks, options),
      );
    });

    it("openid-client v6 discovery works unchanged; its configuration calls the API with our token", async () => {
      const config = await discovery(new URL(server.url), "client-id", undefined, undefined, {
        execute: [allowInsecureRequests],
      });
      const meta = config.serverMetadata();
      assert.equal(meta.issuer, server.url);
      assert.equal(meta.jwks_uri, `${server.url}/.well-known/jwks.json`);
      assert.deepEqual(meta.id_token_signing_alg_values_supported, ["ES256"]);
      assertNoPrivateMaterial(meta, "openid-client metadata");
      const res = await fetchProtectedResource(
        config,
        server.operatorToken,
        new URL(`${server.url}/auth/v1/ok`),
        "GET",
      );
      assert.equal(res.status, 200);
      const me = (await res.json()) as Json;
      assert.equal(me.subject, OPERATOR_SUBJECT);
      assert.equal(me.issuer, server.url);
    });

    it("an issuer URL with a path: discovery and the JWKS are served under it (OIDC Discovery §4), and its tokens verify", async () => {
      const issuerUrl = "https://auth.example/tenant";
      const other = await startWith(backend, { issuerUrl });
      try {
        const api = restClient(other.url);
        const res = await api.get("/tenant/.well-known/openid-configuration");
        assert.equal(res.status, 200, `discovery under the issuer's path: HTTP ${res.status}`);
        assert.equal(res.body.issuer, issuerUrl);
        assert.equal(res.body.jwks_uri, `${issuerUrl}/.well-known/jwks.json`);
        assertNoPrivateMaterial(res.body, "discovery under a path");
        const jwks = await api.get("/tenant/.well-known/jwks.json");
        assert.equal(jwks.status, 200, `the advertised jwks_uri: HTTP ${jwks.status}`);
        for (const k of jwks.body.keys as JWK[]) assertPublicEs256(k, `jwks under a path ${k.kid}`);
        const token = (
          await other.tokens.mint({ subject: OPERATOR_SUBJECT, audience: [other.tokens.urls.apiAudience] })
        ).token;
        const { payload } = await jwtVerify(token, createLocalJWKSet(jwks.body), {
          issuer: issuerUrl,
          audience: other.tokens.urls.apiAudience,
        });
        assert.equal(payload.iss, issuerUrl);
        assert.equal((await restClient(other.url, token).get("/auth/v1/ok")).status, 200);
        // The console does not run under a path: /console/callback of the issuer's host belongs to
        // someone else, and the issuer sends no code there.
        const consoleSignIn = await fetch(
          `${other.url}/tenant/oauth/authorize?${new URLSearchParams({
            client_id: "bulwark-console",
            response_type: "code",
            redirect_uri: "https://auth.example/console/callback",
            state: "s",
            code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGEjcbZJw4E9Melho",
            code_challenge_method: "S256",
          })}`,
          { redirect: "manual" },
        );
        assert.equal(consoleSignIn.status, 400);
        assert.equal(consoleSignIn.headers.get("location"), null);
      } finally {
        await other.close();
      }
    });

    // Last: it adds keys (dated in the future) to the server's database.
    describe("key rotation (clocks moved with `now` functions)", () => {
      let k1: { kid: string; sign_until: Date; publish_until: Date; create_time: Date };
      let edgeToken: string;
      let rotatedKid: string;
      /** a manager created before the rotation whose clock keeps running, as the server's does */
      let longRunningNow = 0;
      let longRunning: KeyManager;
      const urls = () => server.tokens.urls;
      const at = (ms: number) => () => new Date(ms);
      /** A verifier whose clock (and key manager's clock) reads `ms`. */
      const verifierAt = (ms: number) => new TokenIssuer(new KeyManager(server.db, at(ms)), urls(), at(ms));
      /** The JWKS route as served by a replica whose clock reads `ms`. */
      async function jwksAt(ms: number): Promise<JWK[]> {
        const app = Fastify();
        registerIssuerRoutes(plainRouter(app, PUBLIC_ROUTES_ONLY), urls(), new KeyManager(server.db, at(ms)));
        try {
          const res = await app.inject({ method: "GET", url: "/.well-known/jwks.json" });
          assert.equal(res.statusCode, 200);
          const body = res.json() as { keys: JWK[] };
          assertNoPrivateMaterial(body, `jwks at ${new Date(ms).toISOString()}`);
          return body.keys;
        } finally {
          await app.close();
        }
      }
      const kidsAt = async (ms: number) => (await jwksAt(ms)).map((k) => k.kid).sort();

      before(async () => {
        const rows = await server.db
          .selectFrom("signing_keys")
          .select(["kid", "sign_until", "publish_until", "create_time"])
          .execute();
        assert.equal(rows.length, 1, "a fresh server has one key");
        k1 = rows[0]!;
      });

      it("a key signs for 24 h and stays published for its tokens' lifetime after that", () => {
        assert.equal(k1.sign_until.getTime() - k1.create_time.getTime(), SIGNING_WINDOW_MS);
        // tokens signed until 15 min before sign_until live one hour at most; publish_until covers them
        assert.ok(
          k1.publish_until.getTime() >=
            k1.sign_until.getTime() - ROTATE_BEFORE_MS + MAX_TOKEN_LIFETIME_MS + 30 * SECOND,
        );
      });

      it("the last token the old key signs (15 min before its window ends) is signed by it", async () => {
        const t = k1.sign_until.getTime() - ROTATE_BEFORE_MS - SECOND;
        const issuer = new TokenIssuer(new KeyManager(server.db, at(t)), urls(), at(t));
        edgeToken = (await issuer.mint({ subject: OPERATOR_SUBJECT, audience: [urls().apiAudience] })).token;
        assert.equal(decodeProtectedHeader(edgeToken).kid, k1.kid);
        assert.equal((await server.db.selectFrom("signing_keys").select("kid").execute()).length, 1, "no new key yet");
        longRunningNow = t - MINUTE;
        longRunning = new KeyManager(server.db, () => new Date(longRunningNow));
        assert.equal((await longRunning.signingKey()).kid, k1.kid);
      });

      it("23h55m into the window a replica makes a new key; both are published", async () => {
        const t = k1.create_time.getTime() + 23 * HOUR + 55 * MINUTE;
        const km = new KeyManager(server.db, at(t));
        const key = await km.signingKey();
        assert.notEqual(key.kid, k1.kid, "a new key");
        rotatedKid = key.kid;
        assert.equal(key.signUntil.getTime(), t + SIGNING_WINDOW_MS);
        assert.equal((await km.signingKey()).kid, rotatedKid, "stable once made");
        // a second replica at the same moment finds it instead of making another
        assert.equal((await new KeyManager(server.db, at(t + SECOND)).signingKey()).kid, rotatedKid);
        assert.equal((await server.db.selectFrom("signing_keys").select("kid").execute()).length, 2);
        assert.deepEqual((await km.publishedKeys()).map((k) => k.kid).sort(), [k1.kid, rotatedKid].sort());
        assert.deepEqual(await kidsAt(t), [k1.kid, rotatedKid].sort());
        for (const k of await jwksAt(t)) assertPublicEs256(k, `rotated jwks ${k.kid}`);
        const fresh = await new TokenIssuer(km, urls(), at(t)).mint({
          subject: OPERATOR_SUBJECT,
          audience: [urls().apiAudience],
        });
        assert.equal(decodeProtectedHeader(fresh.token).kid, rotatedKid);
        assert.equal((await verifierAt(t).verify(fresh.token, urls().apiAudience)).subject, OPERATOR_SUBJECT);
        assert.equal(
          (await verifierAt(t).verify(edgeToken, urls().apiAudience)).subject,
          OPERATOR_SUBJECT,
          "old key's token after rotation",
        );
      });

      it("a long-running manager (the server's refresh) moves to the new key when its own key's window nears its end", async () => {
        longRunningNow = k1.sign_until.getTime() - ROTATE_BEFORE_MS - 30 * SECOND;
        assert.equal((await longRunning.signingKey()).kid, k1.kid, "its cached key, 15.5 min before the end");
        longRunningNow = k1.sign_until.getTime() - ROTATE_BEFORE_MS + SECOND;
        assert.equal(
          (await longRunning.signingKey()).kid,
          rotatedKid,
          "the cached old key is dropped 15 min before the end",
        );
        const token = await new TokenIssuer(longRunning, urls(), () => new Date(longRunningNow)).mint({
          subject: OPERATOR_SUBJECT,
          audience: [urls().apiAudience],
        });
        assert.equal(decodeProtectedHeader(token.token).kid, rotatedKid);
      });

      it("the old key's last token verifies until it expires, and not after", async () => {
        const exp = decodeJwt(edgeToken).exp! * 1000;
        assert.ok(
          exp < k1.publish_until.getTime() - 30 * SECOND,
          "it expires (with tolerance) before its key is unpublished",
        );
        for (const t of [exp - 10 * MINUTE, exp - SECOND]) {
          assert.ok((await kidsAt(t)).includes(k1.kid), `old key published at ${new Date(t).toISOString()}`);
          assert.equal((await verifierAt(t).verify(edgeToken, urls().apiAudience)).subject, OPERATOR_SUBJECT);
          // any relying party with the JWKS of that moment agrees
          const keys = await jwksAt(t);
          await jwtVerify(edgeToken, createLocalJWKSet({ keys }), {
            issuer: urls().issuer,
            audience: urls().apiAudience,
            currentDate: new Date(t),
          });
        }
        await assert.rejects(verifierAt(exp + 31 * SECOND).verify(edgeToken, urls().apiAudience), /expired/);
      });

      it("a key past publish_until leaves the JWKS (the new one stays)", async () => {
        const p = k1.publish_until.getTime();
        assert.deepEqual(await kidsAt(p - SECOND), [k1.kid, rotatedKid].sort());
        assert.deepEqual(await kidsAt(p + SECOND), [rotatedKid]);
        assert.deepEqual(
          (await new KeyManager(server.db, at(p + SECOND)).publishedKeys()).map((k) => k.kid),
          [rotatedKid],
        );
      });

      it("the running server accepts the other replica's new key on first sight, then publishes it", async () => {
        const km = new KeyManager(server.db, at(k1.create_time.getTime() + 23 * HOUR + 56 * MINUTE));
        const token = (
          await new TokenIssuer({ signingKey: () => km.signingKey() }, urls()).mint({
            subject: OPERATOR_SUBJECT,
            audience: [urls().apiAudience],
          })
        ).token;
        assert.equal(decodeProtectedHeader(token).kid, rotatedKid);
        const res = await restClient(server.url, token).get("/auth/v1/ok");
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const jwks = (await anon().get("/.well-known/jwks.json")).body as { keys: JWK[] };
        assert.deepEqual(jwks.keys.map((k) => k.kid).sort(), [k1.kid, rotatedKid].sort());
        assertNoPrivateMaterial(jwks, "server jwks after rotation");
        const discoveryDoc = (await anon().get("/.well-known/openid-configuration")).body;
        assertNoPrivateMaterial(discoveryDoc, "discovery after rotation");
        // its own tokens keep coming from the old key until its window is over
        assert.equal(decodeProtectedHeader(await server.tokenFor(OPERATOR_SUBJECT)).kid, k1.kid);
        // a token naming a kid no replica made is still refused
        const [, payload, signature] = token.split(".");
        const header = Buffer.from(JSON.stringify({ ...decodeProtectedHeader(token), kid: "no-such-kid" })).toString(
          "base64url",
        );
        assertUnauthenticated(
          await restClient(server.url, `${header}.${payload}.${signature}`).get("/auth/v1/ok"),
          "unknown kid",
        );
      });
    });
  });
}
