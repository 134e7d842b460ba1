// The token exchange (SecurityTokenService.Exchange: GET/POST {auth_url}/sts/exchange and gRPC)
// against real OIDC issuers on loopback (test/support/oidc-issuer.ts), on every backend; and the
// SSRF guards of upstream discovery (src/auth/upstream.ts) on their own.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SignJWT, UnsecuredJWT, decodeJwt, exportSPKI } from "jose";
import { SecurityTokenService } from "../../src/gen/platform/oidc/v1/oidc.platform_pb.js";
import { EXCHANGE_DENIED } from "../../src/auth/token-exchange.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { DEFAULT_MAX_BODY_BYTES, UpstreamIssuers } from "../../src/auth/upstream.js";
import { addressCategory } from "../../src/platform/outbound-addresses.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createRoleBinding, type Json } from "../support/fixtures.js";
import { restClient, type JsonResponse } from "../support/http.js";
import { OidcIssuer, jwks, makeKey, nowSeconds, type IssuerKey } from "../support/oidc-issuer.js";
import { ERROR_DOMAIN, bearer, startTestServer, type TestServer } from "../support/server.js";
import { clockPast, withinHang } from "../support/wait.js";

const GH_SUB = "repo:acme/app:ref:refs/heads/main";
const K8S_SUB = "system:serviceaccount:ns:sa";
const DENIED = `Permission denied: ${EXCHANGE_DENIED}`;

type Params = Record<string, string | string[] | undefined>;

function form(params: Params): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) for (const x of [v ?? []].flat()) q.append(k, x);
  return q.toString();
}

function assertError(res: JsonResponse, status: number, code: number, reason: string): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.code, code);
  assert.equal(typeof res.body.message, "string");
  assert.deepEqual(res.body.details[0], {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    reason,
    domain: ERROR_DOMAIN,
  });
}

/** 403 with the one generic message, revealing none of `secrets` (the identity's configuration). */
function assertDenied(res: JsonResponse, secrets: string[] = []): void {
  assertError(res, 403, 7, "PERMISSION_DENIED");
  assert.equal(res.body.message, DENIED);
  const text = JSON.stringify(res.body);
  for (const s of secrets) assert.ok(!text.includes(s), `the answer reveals ${s}: ${text}`);
}

function assertUnauthenticated(res: JsonResponse): void {
  assertError(res, 401, 16, "UNAUTHENTICATED");
}

// ---------------------------------------------------------------------------------------------
// Upstream fetching on its own: schemes, addresses, redirects, sizes, time.

describe("upstream discovery guards", () => {
  let issuer: OidcIssuer;
  let raw: http.Server;
  let rawUrl: string;
  before(async () => {
    issuer = await OidcIssuer.start();
    // /hop/N redirects to /hop/N-1; /hop/0 answers; /chunked streams an oversized body without a length.
    raw = http.createServer((req, res) => {
      const hop = /^\/hop\/(\d+)$/.exec(req.url ?? "");
      if (hop) {
        const n = Number(hop[1]);
        if (n === 0) return void res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
        return void res.writeHead(302, { location: `/hop/${n - 1}` }).end();
      }
      if (req.url === "/chunked") {
        res.writeHead(200, { "content-type": "application/json" });
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        for (let i = 0; i < 8; i++) res.write(chunk);
        return void res.end("{}");
      }
      if (req.url === "/silent") return; // never answers
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    rawUrl = `http://127.0.0.1:${(raw.address() as AddressInfo).port}`;
  });
  after(async () => {
    await issuer.close();
    raw.closeAllConnections();
    await new Promise((r) => raw.close(r));
  });

  const open = { allowInsecureIssuers: true, allowPrivateIssuerAddresses: true };

  it("classifies addresses, IPv4 inside IPv6 included", () => {
    const cases: [string, string][] = [
      ["8.8.8.8", "public"],
      ["2606:4700::1111", "public"],
      ["127.0.0.1", "loopback"],
      ["::1", "loopback"],
      ["10.0.0.1", "private"],
      ["172.16.5.4", "private"],
      ["192.168.1.1", "private"],
      ["fd00::1", "private"],
      ["169.254.169.254", "link-local"],
      ["fe80::1", "link-local"],
      ["100.64.0.1", "cgnat"],
      ["224.0.0.1", "multicast"],
      ["ff02::1", "multicast"],
      ["0.0.0.0", "unspecified"],
      ["::", "unspecified"],
      ["::ffff:127.0.0.1", "loopback"],
      ["::ffff:a9fe:a9fe", "link-local"],
      ["::ffff:10.1.2.3", "private"],
      ["64:ff9b::a00:1", "private"],
      ["2002:a9fe:a9fe::", "link-local"],
      ["::ffff:8.8.8.8", "public"],
    ];
    for (const [address, category] of cases) assert.equal(addressCategory(address), category, address);
  });

  it("serves discovery and keys from a loopback issuer when both switches are on", async () => {
    const up = new UpstreamIssuers(open);
    assert.equal((await up.discover(issuer.url)).jwksUri, `${issuer.url}/keys`);
  });

  it("refuses plain http unless allowInsecureIssuers, and then only to loopback hosts", async () => {
    const before = issuer.requests.length;
    await assert.rejects(
      new UpstreamIssuers({ allowPrivateIssuerAddresses: true }).discover(issuer.url),
      /only https issuers are allowed/,
    );
    const insecure = new UpstreamIssuers(open);
    assert.match(
      insecure.urlProblem(new URL("http://example.com/")) ?? "",
      /plain http is only allowed to loopback hosts/,
    );
    assert.match(
      insecure.urlProblem(new URL("http://10.0.0.1/")) ?? "",
      /plain http is only allowed to loopback hosts/,
    );
    assert.match(insecure.urlProblem(new URL("ftp://127.0.0.1/")) ?? "", /unsupported scheme/);
    assert.match(insecure.urlProblem(new URL("https://user:pw@example.com/")) ?? "", /credentials/);
    assert.equal(issuer.requests.length, before, "nothing was fetched");
  });

  it("refuses private addresses unless allowPrivateIssuerAddresses: IP literals before connecting, names when they resolve", async () => {
    const before = issuer.requests.length;
    const closed = new UpstreamIssuers({ allowInsecureIssuers: true });
    await assert.rejects(closed.discover(issuer.url), /127\.0\.0\.1 is a loopback address/);
    // A name is checked in the socket's own lookup, so what it resolves to when connecting decides.
    const byName = issuer.url.replace("127.0.0.1", "localhost");
    await assert.rejects(
      closed.fetchJson(`${byName}/.well-known/openid-configuration`),
      /localhost resolves to a refused address/,
    );
    const resolved: string[] = [];
    const fake = new UpstreamIssuers({
      resolve: async (host) => {
        resolved.push(host);
        return [
          {
            address:
              host === "metadata.test" ? "169.254.169.254" : host === "mapped.test" ? "::ffff:10.0.0.7" : "100.64.3.4",
            family: host === "mapped.test" ? 6 : 4,
          },
        ];
      },
    });
    await assert.rejects(
      fake.fetch("https://metadata.test/latest/meta-data/"),
      /metadata\.test resolves to a refused address: 169\.254\.169\.254 is a link-local address/,
    );
    await assert.rejects(fake.fetch("https://mapped.test/"), /::ffff:10\.0\.0\.7 is a private address/);
    await assert.rejects(fake.fetch("https://cgnat.test/"), /100\.64\.3\.4 is a cgnat address/);
    await assert.rejects(fake.fetch("https://[fd00::1]/"), /fd00::1 is a private address/);
    await assert.rejects(fake.fetch("https://0.0.0.0/"), /0\.0\.0\.0 is a unspecified address/);
    assert.deepEqual(
      resolved,
      ["metadata.test", "mapped.test", "cgnat.test"],
      "each name resolved once, when connecting",
    );
    assert.equal(issuer.requests.length, before, "nothing was fetched");
    // An operator can allow one address without opening the private ranges.
    const one = new UpstreamIssuers({ allowInsecureIssuers: true, allowedPrivateAddresses: ["127.0.0.1"] });
    assert.equal((await one.discover(issuer.url)).jwksUri, `${issuer.url}/keys`);
  });

  it("re-validates every redirect hop: a redirect to a private address is refused", async () => {
    const allowOne = { allowInsecureIssuers: true, allowedPrivateAddresses: ["127.0.0.1"] };
    const redirecting = await OidcIssuer.start({
      behaviour: { redirectTo: "http://169.254.169.254/latest/meta-data/" },
    });
    try {
      await assert.rejects(
        new UpstreamIssuers(allowOne).discover(redirecting.url),
        /redirect refused: plain http is only allowed to loopback hosts/,
      );
      redirecting.behaviour.redirectTo = "https://169.254.169.254/latest/meta-data/";
      await assert.rejects(
        new UpstreamIssuers(allowOne).discover(redirecting.url),
        /redirect refused: 169\.254\.169\.254 is a link-local address/,
      );
      const fake = new UpstreamIssuers({ ...allowOne, resolve: async () => [{ address: "10.0.0.8", family: 4 }] });
      redirecting.behaviour.redirectTo = "https://internal.test/.well-known/openid-configuration";
      await assert.rejects(fake.discover(redirecting.url), /internal\.test resolves to a refused address/);
      redirecting.behaviour.redirectTo = "http://[::1]:1/.well-known/openid-configuration";
      await assert.rejects(
        new UpstreamIssuers(allowOne).discover(redirecting.url),
        /redirect refused: ::1 is a loopback address/,
      );
    } finally {
      await redirecting.close();
    }
  });

  it("follows at most 3 redirects", async () => {
    const up = new UpstreamIssuers(open);
    assert.deepEqual(await up.fetchJson(`${rawUrl}/hop/3`), { ok: true });
    await assert.rejects(up.fetchJson(`${rawUrl}/hop/4`), /more than 3 redirects/);
  });

  it("refuses oversized bodies, with or without a content-length", async () => {
    const big = await OidcIssuer.start({
      behaviour: { discoveryBody: JSON.stringify({ issuer: "x", pad: "x".repeat(300 * 1024) }) },
    });
    try {
      await assert.rejects(
        new UpstreamIssuers(open).discover(big.url),
        new RegExp(`exceeds ${DEFAULT_MAX_BODY_BYTES} bytes`),
      );
      await assert.rejects(
        new UpstreamIssuers(open).fetchJson(`${rawUrl}/chunked`),
        new RegExp(`exceeds ${DEFAULT_MAX_BODY_BYTES} bytes`),
      );
    } finally {
      await big.close();
    }
  });

  it("gives up on a slow issuer at the deadline", async () => {
    // /silent never answers: only the fetch's own deadline can end it (a hang fails the test), and
    // the error says it was that deadline.
    await assert.rejects(
      withinHang(new UpstreamIssuers({ ...open, timeoutMs: 300 }).fetchJson(`${rawUrl}/silent`), "timeout"),
      /timed out after 300 ms/,
    );
    // an issuer that answers only after the fetch has given up
    let answer = () => {};
    const slow = await OidcIssuer.start({ behaviour: { answerAfter: new Promise<void>((r) => (answer = r)) } });
    try {
      await assert.rejects(
        withinHang(new UpstreamIssuers({ ...open, timeoutMs: 300 }).discover(slow.url), "timeout"),
        /timed out/,
      );
      // It gave up while the issuer held its request, not before asking.
      assert.deepEqual(slow.requests, ["/.well-known/openid-configuration"]);
    } finally {
      answer();
      await slow.close();
    }
  });

  it("refuses a discovery document naming another issuer, and a jwks_uri on a refused host", async () => {
    const liar = await OidcIssuer.start({
      behaviour: { discoveryIssuer: "https://token.actions.githubusercontent.com" },
    });
    try {
      await assert.rejects(new UpstreamIssuers(open).discover(liar.url), /names another issuer/);
      liar.behaviour = { jwksUri: "https://169.254.169.254/keys" };
      await assert.rejects(
        new UpstreamIssuers({ allowInsecureIssuers: true, allowedPrivateAddresses: ["127.0.0.1"] }).discover(liar.url),
        /jwks_uri refused: 169\.254\.169\.254 is a link-local address/,
      );
      liar.behaviour = { jwksUri: "http://example.com/keys" };
      await assert.rejects(new UpstreamIssuers(open).discover(liar.url), /jwks_uri refused: plain http/);
    } finally {
      await liar.close();
    }
  });

  it("caches discovery per issuer and keys per jwks_uri", async () => {
    const fresh = await OidcIssuer.start();
    try {
      const up = new UpstreamIssuers(open);
      const keys1 = await up.keySet(fresh.url);
      const keys2 = await up.keySet(fresh.url);
      assert.equal(keys1, keys2);
      assert.equal(fresh.count("discovery"), 1);
    } finally {
      await fresh.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The exchange, end to end.

for (const backend of backends()) {
  describe(`token exchange [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let github: OidcIssuer;
    let k8s: OidcIssuer;
    let other: OidcIssuer;
    let org: Json;
    let child: Json;
    let deployer: Json;
    let registryHost: string;

    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      registryHost = server.tokens.urls.registryAudience;
      github = await OidcIssuer.start();
      github.defaultAudience = server.url;
      k8s = await OidcIssuer.start({ algs: ["ES256"], path: "/clusters/prod" });
      k8s.defaultAudience = "bulwark-prod";
      other = await OidcIssuer.start();
      other.defaultAudience = server.url;
      org = await createGroup(api, undefined, "acme");
      child = await createGroup(api, org.uid, "team");
      deployer = await newIdentity("deployer", { claimMatch: { issuer: github.url, subject: GH_SUB } });
      await createRoleBinding(api, org.uid, deployer.uid);
    });
    after(async () => {
      await server.close();
      await Promise.all([github.close(), k8s.close(), other.close()]);
    });

    async function newIdentity(name: string, relationship: Json, parent = org.uid): Promise<Json> {
      const res = await api.post(`/iam/v2beta1/identities/${parent}`, { name, ...relationship });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    }
    const exchange = (token: string | undefined, params: Params) =>
      restClient(server.url, token).get(`/sts/exchange?${form(params)}`);
    const exchangePostQuery = (token: string, params: Params) =>
      restClient(server.url, token).call("POST", `/sts/exchange?${form(params)}`);
    const exchangeForm = (token: string, params: Params) =>
      restClient(server.url, token).call("POST", "/sts/exchange", form(params), {
        "content-type": "application/x-www-form-urlencoded",
      });
    const grpcClient = (token: string) =>
      createClient(SecurityTokenService, createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(token)] }));

    /** A successful exchange's token: its claims, checked, and the token. */
    function minted(res: JsonResponse, subject: string, audience: string[] = [server.url]) {
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const claims = decodeJwt(res.body.token);
      assert.equal(claims.iss, server.tokens.urls.issuer);
      assert.equal(claims.sub, subject);
      assert.deepEqual(claims.aud, audience);
      assert.ok(
        claims.exp! - claims.iat! <= 3600 && claims.exp! - claims.iat! > 0,
        `lifetime ${claims.exp! - claims.iat!} s`,
      );
      assert.ok(Math.abs(claims.iat! - nowSeconds()) <= 5);
      assert.equal(new Date(res.body.expiry).getTime(), claims.exp! * 1000);
      return { token: res.body.token as string, claims };
    }

    // --- success -------------------------------------------------------------------------------

    it("GET exchanges a GitHub token for a one-hour API token of the identity that works against the API", async () => {
      const res = await exchange(await github.githubToken(), { identity: deployer.uid, aud: server.url });
      const { token, claims } = minted(res, deployer.uid);
      assert.equal(claims.exp! - claims.iat!, 3600);
      assert.equal(claims.caps, undefined);
      assert.equal(claims.scopes, undefined);
      const group = await restClient(server.url, token).get(`/iam/v2beta1/groups/${org.uid}`);
      assert.equal(group.status, 200, JSON.stringify(group.body));
      assert.equal(group.body.name, "acme");
      // aud defaults to the API
      minted(await exchange(await github.githubToken(), { identity: deployer.uid }), deployer.uid);
    });

    it("POST with query fields, POST with a form body, and gRPC exchange alike", async () => {
      const viaQuery = minted(
        await exchangePostQuery(await github.githubToken(), { identity: deployer.uid, aud: server.url }),
        deployer.uid,
      );
      const viaForm = minted(
        await exchangeForm(await github.githubToken(), { identity: deployer.uid, aud: server.url }),
        deployer.uid,
      );
      const raw = await grpcClient(await github.githubToken()).exchange({ identity: deployer.uid, aud: [server.url] });
      const viaGrpc = decodeJwt(raw.token);
      assert.equal(viaGrpc.sub, deployer.uid);
      assert.deepEqual(viaGrpc.aud, [server.url]);
      assert.equal(Number(raw.expiry!.seconds), viaGrpc.exp);
      for (const t of [viaQuery.token, viaForm.token, raw.token]) {
        assert.equal((await restClient(server.url, t).get(`/iam/v2beta1/groups/${org.uid}`)).status, 200);
      }
    });

    it("records the exchange as the identity's lastSeenTime", async () => {
      const id = await newIdentity("seen", { claimMatch: { issuer: github.url, subject: GH_SUB } });
      const beforeSeen = (await api.get(`/iam/v2beta1/identities/${id.uid}`)).body.lastSeenTime;
      await clockPast(beforeSeen);
      const exchanging = Date.now();
      minted(await exchange(await github.githubToken(), { identity: id.uid }), id.uid);
      const exchanged = Date.now();
      const afterSeen = (await api.get(`/iam/v2beta1/identities/${id.uid}`)).body.lastSeenTime;
      assert.ok(new Date(afterSeen) > new Date(beforeSeen), `${afterSeen} after ${beforeSeen}`);
      // the time of the exchange: between the request and its answer
      const seen = new Date(afterSeen).getTime();
      assert.ok(exchanging <= seen && seen <= exchanged, `${afterSeen} within the exchange`);
      // a refused exchange does not count
      assertDenied(
        await exchange(await github.githubToken({ sub: "repo:acme/other:ref:refs/heads/main" }), { identity: id.uid }),
      );
      assert.equal((await api.get(`/iam/v2beta1/identities/${id.uid}`)).body.lastSeenTime, afterSeen);
    });

    it("matches issuer, subject and audience patterns (anchored), exact claims and claim patterns", async () => {
      const port = new URL(github.url).port;
      const id = await newIdentity("pattern", {
        claimMatch: {
          issuerPattern: `http://127\\.0\\.0\\.1:${port}`,
          subjectPattern: "repo:acme/[a-z-]+:ref:refs/heads/.*",
          audiencePattern: "bulwark-(ci|cd)",
          claims: { repository_owner: "acme", workflow: "deploy" },
          claimPatterns: { ref: "refs/heads/(main|release-.+)", actor: "octo.*" },
        },
      });
      minted(await exchange(await github.githubToken({ aud: "bulwark-cd" }), { identity: id.uid }), id.uid);
      minted(
        await exchange(
          await github.githubToken({
            aud: ["sigstore", "bulwark-ci"],
            sub: "repo:acme/web:ref:refs/heads/release-2",
            claims: { ref: "refs/heads/release-2" },
          }),
          { identity: id.uid },
        ),
        id.uid,
      );
    });

    it("exchanges a Kubernetes service-account token (ES256, issuer with a path, explicit audience)", async () => {
      const id = await newIdentity("cluster", {
        claimMatch: { issuer: k8s.url, subjectPattern: "system:serviceaccount:ns:.*", audience: "bulwark-prod" },
      });
      await createRoleBinding(api, org.uid, id.uid);
      const { token } = minted(await exchange(await k8s.kubernetesToken(), { identity: id.uid }), id.uid);
      assert.equal((await restClient(server.url, token).get(`/iam/v2beta1/groups/${child.uid}`)).status, 200);
      // a nested claim is no string: a claim on it never matches
      const nested = await newIdentity("cluster-nested", {
        claimMatch: { issuer: k8s.url, subject: K8S_SUB, audience: "bulwark-prod", claims: { "kubernetes.io": "ns" } },
      });
      assertDenied(await exchange(await k8s.kubernetesToken(), { identity: nested.uid }), [K8S_SUB, k8s.url]);
    });

    it("exchanges a token signed by a static-keys identity's own JWKS (issuer/subject exact, audiences or the default rule)", async () => {
      const key = await makeKey("ES256");
      const staticToken = (opts: { aud?: string | string[]; sub?: string; iss?: string; k?: IssuerKey } = {}) => {
        const now = nowSeconds();
        return new SignJWT({
          iss: opts.iss ?? "https://static.example",
          sub: opts.sub ?? "deploy-bot",
          aud: opts.aud ?? "bulwark-static",
          iat: now,
          exp: now + 300,
        })
          .setProtectedHeader({ alg: "ES256", kid: (opts.k ?? key).kid })
          .sign((opts.k ?? key).privateKey);
      };
      const expiration = new Date(Date.now() + 10 * 60_000);
      const id = await newIdentity("static", {
        staticKeys: {
          issuer: "https://static.example",
          subject: "deploy-bot",
          issuerKeys: JSON.stringify(jwks([key])),
          audiences: ["bulwark-static"],
          expirationTime: expiration.toISOString(),
        },
      });
      const { claims } = minted(await exchange(await staticToken(), { identity: id.uid }), id.uid);
      assert.ok(claims.exp! * 1000 <= expiration.getTime(), "the token does not outlive the identity's keys");
      assertDenied(await exchange(await staticToken({ aud: server.url }), { identity: id.uid }), ["bulwark-static"]);
      assertDenied(await exchange(await staticToken({ sub: "deploy-bot2" }), { identity: id.uid }), ["deploy-bot"]);
      assertDenied(await exchange(await staticToken({ iss: "https://static.example/" }), { identity: id.uid }), [
        "static.example",
      ]);
      assertDenied(await exchange(await staticToken({ k: await makeKey("ES256", key.kid) }), { identity: id.uid }));
      // no audiences: the default rule (our own URL)
      const byDefault = await newIdentity("static-default", {
        staticKeys: {
          issuer: "https://static.example",
          subject: "deploy-bot",
          issuerKeys: JSON.stringify(jwks([key])),
        },
      });
      minted(await exchange(await staticToken({ aud: server.url }), { identity: byDefault.uid }), byDefault.uid);
      assertDenied(await exchange(await staticToken(), { identity: byDefault.uid }));
    });

    it("mints a registry token for the identity (aud = registry host), which the API does not accept", async () => {
      const { token } = minted(
        await exchange(await github.githubToken(), { identity: deployer.uid, aud: registryHost }),
        deployer.uid,
        [registryHost],
      );
      assert.equal((await server.tokens.verify(token, registryHost)).subject, deployer.uid);
      assertUnauthenticated(await restClient(server.url, token).get(`/iam/v2beta1/groups/${org.uid}`));
      minted(
        await exchange(await github.githubToken(), { identity: deployer.uid, aud: [server.url, registryHost] }),
        deployer.uid,
        [server.url, registryHost],
      );
    });

    it("re-issues an API token without identity for the same subject (operator too), never outliving it and only narrower", async () => {
      const apiToken = minted(await exchange(await github.githubToken(), { identity: deployer.uid }), deployer.uid);
      const reg = minted(await exchange(apiToken.token, { aud: registryHost }), deployer.uid, [registryHost]);
      assert.ok(reg.claims.exp! <= apiToken.claims.exp!);
      const op = minted(await exchange(server.operatorToken, { aud: registryHost }), OPERATOR_SUBJECT, [registryHost]);
      assert.ok(op.claims.exp! <= decodeJwt(server.operatorToken).exp!);
      // narrowing carries over and may only narrow further
      const narrow = minted(
        await exchange(apiToken.token, { cap: ["CAP_IAM_GROUPS_LIST", "CAP_IAM_IDENTITY_LIST"], scopes: child.uid }),
        deployer.uid,
      );
      const narrower = minted(
        await exchange(narrow.token, { aud: registryHost, cap: "CAP_IAM_GROUPS_LIST" }),
        deployer.uid,
        [registryHost],
      );
      assert.deepEqual(narrower.claims.caps, ["CAP_IAM_GROUPS_LIST"]);
      assert.deepEqual(narrower.claims.scopes, [child.uid]);
      const inherited = minted(await exchange(narrow.token, { aud: registryHost }), deployer.uid, [registryHost]);
      assert.deepEqual(inherited.claims.caps, ["CAP_IAM_GROUPS_LIST", "CAP_IAM_IDENTITY_LIST"]);
      assert.deepEqual(inherited.claims.scopes, [child.uid]);
      const wider = await exchange(narrow.token, { cap: "CAP_IAM_GROUPS_UPDATE" });
      assertError(wider, 403, 7, "PERMISSION_DENIED");
      assertError(await exchange(narrow.token, { scopes: org.uid }), 403, 7, "PERMISSION_DENIED");
      // only our API tokens: not a registry token, not a workload's OIDC token
      assertUnauthenticated(await exchange(reg.token, { aud: registryHost }));
      assertUnauthenticated(await exchange(await github.githubToken(), { aud: registryHost }));
    });

    it("narrows with cap and scopes: a viewer exchanging for CAP_IAM_GROUPS_LIST on a child group reads the child, not the parent", async () => {
      const narrow = minted(
        await exchange(await github.githubToken(), {
          identity: deployer.uid,
          cap: "CAP_IAM_GROUPS_LIST",
          scopes: child.uid,
        }),
        deployer.uid,
      );
      assert.deepEqual(narrow.claims.caps, ["CAP_IAM_GROUPS_LIST"]);
      assert.deepEqual(narrow.claims.scopes, [child.uid]);
      const as = restClient(server.url, narrow.token);
      assert.equal((await as.get(`/iam/v2beta1/groups/${child.uid}`)).status, 200);
      assert.notEqual((await as.get(`/iam/v2beta1/groups/${org.uid}`)).status, 200);
      // outside the scope the identity itself is invisible
      assert.equal((await as.get(`/iam/v2beta1/identities/${deployer.uid}`)).status, 404);
      // the viewer may read identities, but not with a token narrowed to groups.list
      const full = minted(await exchange(await github.githubToken(), { identity: deployer.uid }), deployer.uid);
      assert.equal(
        (await restClient(server.url, full.token).get(`/iam/v2beta1/identities/${deployer.uid}`)).status,
        200,
      );
      const capOnly = minted(
        await exchange(await github.githubToken(), { identity: deployer.uid, cap: "CAP_IAM_GROUPS_LIST" }),
        deployer.uid,
      );
      assert.equal((await restClient(server.url, capOnly.token).get(`/iam/v2beta1/groups/${org.uid}`)).status, 200);
      assert.equal(
        (await restClient(server.url, capOnly.token).get(`/iam/v2beta1/identities/${deployer.uid}`)).status,
        403,
      );
      // caps never add: a viewer asking for groups.update holds nothing at all with that token
      const update = minted(
        await exchange(await github.githubToken(), { identity: deployer.uid, cap: "CAP_IAM_GROUPS_UPDATE" }),
        deployer.uid,
      );
      assert.equal(
        (await restClient(server.url, update.token).patch(`/iam/v2beta1/groups/${child.uid}`, { description: "x" }))
          .status,
        404,
      );
      assert.equal((await restClient(server.url, update.token).get(`/iam/v2beta1/groups/${child.uid}`)).status, 404);
      assert.equal((await api.get(`/iam/v2beta1/groups/${child.uid}`)).body.description, "");
    });

    it("fetches discovery and keys once for many exchanges", async () => {
      const fresh = await OidcIssuer.start();
      fresh.defaultAudience = server.url;
      try {
        const id = await newIdentity("cached", { claimMatch: { issuer: fresh.url, subject: GH_SUB } });
        for (let i = 0; i < 4; i++) minted(await exchange(await fresh.githubToken(), { identity: id.uid }), id.uid);
        assert.equal(fresh.count("discovery"), 1);
        assert.equal(fresh.count("keys"), 1);
      } finally {
        await fresh.close();
      }
    });

    it("tolerates 60 s of clock skew on exp, nbf and iat", async () => {
      const now = nowSeconds();
      minted(
        await exchange(await github.githubToken({ exp: now - 30, iat: now - 300 }), { identity: deployer.uid }),
        deployer.uid,
      );
      minted(await exchange(await github.githubToken({ nbf: now + 30 }), { identity: deployer.uid }), deployer.uid);
      minted(
        await exchange(await github.githubToken({ iat: now + 30, nbf: null }), { identity: deployer.uid }),
        deployer.uid,
      );
    });

    // --- rejections ----------------------------------------------------------------------------

    const secretsOf = () => [GH_SUB, github.url, new URL(github.url).host];

    it("rejects a request without a bearer token: UNAUTHENTICATED", async () => {
      const res = await exchange(undefined, { identity: deployer.uid });
      assertUnauthenticated(res);
      assert.equal(res.headers.get("www-authenticate"), 'Bearer realm="bulwark"');
      await assert.rejects(
        createClient(SecurityTokenService, createGrpcTransport({ baseUrl: server.url })).exchange({
          identity: deployer.uid,
        }),
        (err: unknown) => {
          assert.equal(ConnectError.from(err).code, Code.Unauthenticated);
          return true;
        },
      );
    });

    it("rejects a malformed token: UNAUTHENTICATED (and a JWT without alg: PERMISSION_DENIED)", async () => {
      assertUnauthenticated(await exchange("not-a-jwt", { identity: deployer.uid }));
      assertUnauthenticated(await exchange("e30.bm90IGpzb24.c2ln", { identity: deployer.uid })); // payload is not JSON
      assertUnauthenticated(await exchange("e30.e30", { identity: deployer.uid }));
      assertDenied(await exchange("e30.e30.c2ln", { identity: deployer.uid }), secretsOf()); // {} . {} . sig
    });

    it("rejects an expired token", async () => {
      const now = nowSeconds();
      assertDenied(
        await exchange(await github.githubToken({ exp: now - 90, iat: now - 400 }), { identity: deployer.uid }),
        secretsOf(),
      );
    });

    it("rejects a token not valid yet (nbf in the future)", async () => {
      assertDenied(
        await exchange(await github.githubToken({ nbf: nowSeconds() + 120 }), { identity: deployer.uid }),
        secretsOf(),
      );
    });

    it("rejects a token issued in the future (iat)", async () => {
      const now = nowSeconds();
      assertDenied(
        await exchange(await github.githubToken({ iat: now + 120, nbf: null, exp: now + 600 }), {
          identity: deployer.uid,
        }),
        secretsOf(),
      );
    });

    it("rejects a token without exp or without iat", async () => {
      assertDenied(await exchange(await github.githubToken({ exp: null }), { identity: deployer.uid }), secretsOf());
      assertDenied(await exchange(await github.githubToken({ iat: null }), { identity: deployer.uid }), secretsOf());
    });

    it("rejects a token of another issuer", async () => {
      const before = other.requests.length;
      assertDenied(await exchange(await other.githubToken(), { identity: deployer.uid }), secretsOf());
      assert.equal(other.requests.length, before, "an issuer the identity does not name is never fetched");
      // and a token claiming the identity's issuer but signed by the other issuer's key
      assertDenied(
        await exchange(await other.githubToken({ iss: github.url }), { identity: deployer.uid }),
        secretsOf(),
      );
    });

    it("rejects a token of another subject", async () => {
      assertDenied(
        await exchange(await github.githubToken({ sub: "repo:acme/app:ref:refs/heads/feature" }), {
          identity: deployer.uid,
        }),
        secretsOf(),
      );
      assertDenied(
        await exchange(await github.githubToken({ sub: "repo:acme/app:pull_request" }), { identity: deployer.uid }),
        secretsOf(),
      );
    });

    it("matches patterns anchored: a pattern that matches a substring is no match", async () => {
      const port = new URL(github.url).port;
      const sub = await newIdentity("unanchored-sub", {
        claimMatch: { issuer: github.url, subjectPattern: "repo:acme/app" },
      });
      assert.ok(new RegExp("repo:acme/app").test(GH_SUB), "an unanchored match would accept it");
      assertDenied(await exchange(await github.githubToken(), { identity: sub.uid }), ["repo:acme/app", github.url]);
      const iss = await newIdentity("unanchored-iss", {
        claimMatch: { issuerPattern: `127\\.0\\.0\\.1:${port}`, subject: GH_SUB },
      });
      assertDenied(await exchange(await github.githubToken(), { identity: iss.uid }), [GH_SUB, port]);
      const aud = await newIdentity("unanchored-aud", {
        claimMatch: { issuer: github.url, subject: GH_SUB, audiencePattern: "bulwark" },
      });
      assertDenied(await exchange(await github.githubToken({ aud: "bulwark-prod" }), { identity: aud.uid }), [
        GH_SUB,
        github.url,
      ]);
      const claim = await newIdentity("unanchored-claim", {
        claimMatch: { issuer: github.url, subject: GH_SUB, claimPatterns: { ref: "refs/heads/ma" } },
      });
      assertDenied(await exchange(await github.githubToken(), { identity: claim.uid }), [GH_SUB, "refs/heads/ma"]);
    });

    it("rejects a token for another audience (the identity's audience rule)", async () => {
      const id = await newIdentity("audience", {
        claimMatch: { issuer: github.url, subject: GH_SUB, audience: "bulwark-ci" },
      });
      minted(await exchange(await github.githubToken({ aud: "bulwark-ci" }), { identity: id.uid }), id.uid);
      assertDenied(await exchange(await github.githubToken({ aud: "bulwark-cd" }), { identity: id.uid }), [
        "bulwark-ci",
        ...secretsOf(),
      ]);
      assertDenied(await exchange(await github.githubToken({ aud: server.url }), { identity: id.uid }), [
        "bulwark-ci",
        ...secretsOf(),
      ]);
      assertDenied(await exchange(await github.githubToken({ aud: null }), { identity: id.uid }), [
        "bulwark-ci",
        ...secretsOf(),
      ]);
    });

    it("without an audience rule, accepts only our issuer URL as audience (with or without scheme)", async () => {
      const schemeless = new URL(server.tokens.urls.issuer).host;
      minted(
        await exchange(await github.githubToken({ aud: server.tokens.urls.issuer }), { identity: deployer.uid }),
        deployer.uid,
      );
      minted(await exchange(await github.githubToken({ aud: schemeless }), { identity: deployer.uid }), deployer.uid);
      minted(
        await exchange(await github.githubToken({ aud: ["https://github.com/acme", schemeless] }), {
          identity: deployer.uid,
        }),
        deployer.uid,
      );
      assertDenied(
        await exchange(await github.githubToken({ aud: "https://github.com/acme" }), { identity: deployer.uid }),
        secretsOf(),
      );
      assertDenied(
        await exchange(await github.githubToken({ aud: `https://${schemeless}.evil.example` }), {
          identity: deployer.uid,
        }),
        secretsOf(),
      );
      assertDenied(
        await exchange(await github.githubToken({ aud: "sts.amazonaws.com" }), { identity: deployer.uid }),
        secretsOf(),
      );
    });

    it("rejects a token whose claims differ from the identity's exact claims", async () => {
      const id = await newIdentity("claims", {
        claimMatch: { issuer: github.url, subject: GH_SUB, claims: { repository: "acme/app", workflow: "deploy" } },
      });
      minted(await exchange(await github.githubToken(), { identity: id.uid }), id.uid);
      assertDenied(
        await exchange(await github.githubToken({ claims: { workflow: "deploy-staging" } }), { identity: id.uid }),
        ["deploy", "acme/app", ...secretsOf()],
      );
      assertDenied(
        await exchange(await github.githubToken({ claims: { repository: undefined } }), { identity: id.uid }),
        ["acme/app", ...secretsOf()],
      );
    });

    it("rejects a token whose claims do not match the identity's claim patterns", async () => {
      const id = await newIdentity("claim-patterns", {
        claimMatch: {
          issuer: github.url,
          subject: GH_SUB,
          claimPatterns: { actor: "octo(cat|dog)", event_name: "push|workflow_dispatch" },
        },
      });
      minted(await exchange(await github.githubToken({ claims: { actor: "octodog" } }), { identity: id.uid }), id.uid);
      assertDenied(await exchange(await github.githubToken({ claims: { actor: "mallory" } }), { identity: id.uid }), [
        "octo(cat|dog)",
        ...secretsOf(),
      ]);
      assertDenied(
        await exchange(await github.githubToken({ claims: { event_name: "pull_request_target" } }), {
          identity: id.uid,
        }),
        ["workflow_dispatch", ...secretsOf()],
      );
    });

    it("rejects a bad signature (another key with the same kid)", async () => {
      const rogue = await makeKey("RS256", github.keys[0]!.kid);
      assertDenied(await exchange(await github.githubToken({ key: rogue }), { identity: deployer.uid }), secretsOf());
    });

    it("rejects an unknown kid, and an ES256 token naming an RSA key's kid", async () => {
      const unpublished = await makeKey("RS256");
      assertDenied(
        await exchange(await github.githubToken({ key: unpublished }), { identity: deployer.uid }),
        secretsOf(),
      );
      const ec = await makeKey("ES256", github.keys[0]!.kid);
      assertDenied(await exchange(await github.githubToken({ key: ec }), { identity: deployer.uid }), secretsOf());
    });

    it("rejects alg none", async () => {
      const now = nowSeconds();
      const unsigned = new UnsecuredJWT({ repository: "acme/app" })
        .setIssuer(github.url)
        .setSubject(GH_SUB)
        .setAudience(server.url)
        .setIssuedAt(now)
        .setExpirationTime(now + 300)
        .encode();
      assertDenied(await exchange(unsigned, { identity: deployer.uid }), secretsOf());
    });

    it("rejects HS256 signed with the issuer's public key bytes (HS/RS confusion)", async () => {
      const now = nowSeconds();
      const key = github.keys[0]!;
      const pem = await exportSPKI(key.publicKey);
      for (const secret of [pem, JSON.stringify(key.publicJwk)]) {
        const forged = await new SignJWT({ iss: github.url, sub: GH_SUB, aud: server.url, iat: now, exp: now + 300 })
          .setProtectedHeader({ alg: "HS256", kid: key.kid })
          .sign(new TextEncoder().encode(secret));
        assertDenied(await exchange(forged, { identity: deployer.uid }), secretsOf());
      }
    });

    it("rejects a static-keys identity past its expirationTime", async () => {
      const key = await makeKey("RS256");
      const id = await newIdentity("static-expiring", {
        staticKeys: {
          issuer: "https://static.example",
          subject: "bot",
          issuerKeys: JSON.stringify(jwks([key])),
          expirationTime: new Date(Date.now() + 60_000).toISOString(),
        },
      });
      const token = async () => {
        const now = nowSeconds();
        return new SignJWT({ iss: "https://static.example", sub: "bot", aud: server.url, iat: now, exp: now + 300 })
          .setProtectedHeader({ alg: "RS256", kid: key.kid })
          .sign(key.privateKey);
      };
      minted(await exchange(await token(), { identity: id.uid }), id.uid);
      // Time passes (the API refuses to set a past expiration, so the stored row is aged directly).
      const row = await server.db
        .selectFrom("identities")
        .select("relationship")
        .where("uid", "=", id.uid)
        .executeTakeFirstOrThrow();
      const relationship = {
        ...(typeof row.relationship === "string" ? JSON.parse(row.relationship) : row.relationship),
        expirationTime: new Date(Date.now() - 1000).toISOString(),
      };
      await server.db
        .updateTable("identities")
        .set({ relationship: JSON.stringify(relationship) })
        .where("uid", "=", id.uid)
        .execute();
      assertDenied(await exchange(await token(), { identity: id.uid }), ["static.example", "bot"]);
    });

    it("refuses AWS and service-principal identities here", async () => {
      const aws = await newIdentity("aws", {
        awsIdentity: { awsAccount: "123456789012", arn: "arn:aws:iam::123456789012:role/deploy" },
      });
      assertDenied(await exchange(await github.githubToken(), { identity: aws.uid }), ["123456789012", "arn:aws"]);
      const sp = await newIdentity("signer", { servicePrincipal: "SERVICE_PRINCIPAL_COSIGNED" });
      assertDenied(await exchange(await github.githubToken(), { identity: sp.uid }), ["COSIGNED"]);
    });

    it("answers an unknown identity exactly like a mismatch", async () => {
      assertDenied(await exchange(await github.githubToken(), { identity: `${org.uid}/0123456789abcdef` }));
      assertDenied(await exchange(await github.githubToken(), { identity: "0".repeat(40) }));
      await assert.rejects(
        grpcClient(await github.githubToken()).exchange({ identity: `${org.uid}/0123456789abcdef` }),
        (err: unknown) => {
          const ce = ConnectError.from(err);
          assert.equal(ce.code, Code.PermissionDenied);
          assert.equal(ce.rawMessage, DENIED);
          return true;
        },
      );
    });

    it("rejects an audience that is neither the API nor the registry: INVALID_ARGUMENT", async () => {
      for (const aud of ["https://elsewhere.example", `${server.url}/`, "sts.amazonaws.com"]) {
        const res = await exchange(await github.githubToken(), { identity: deployer.uid, aud });
        assertError(res, 400, 3, "INVALID_ARGUMENT");
        assert.equal(res.body.details[1].fieldViolations[0].field, "aud");
      }
    });

    it("rejects unknown capability names and invalid scopes: INVALID_ARGUMENT", async () => {
      for (const cap of ["CAP_IAM_GROUPS_EVERYTHING", "groups.list", "UNKNOWN", "103"]) {
        const res = await exchange(await github.githubToken(), { identity: deployer.uid, cap });
        assertError(res, 400, 3, "INVALID_ARGUMENT");
        assert.equal(res.body.details[1].fieldViolations[0].field, "cap");
      }
      const scopes = await exchange(await github.githubToken(), { identity: deployer.uid, scopes: "not-a-uidp" });
      assertError(scopes, 400, 3, "INVALID_ARGUMENT");
      assert.equal(scopes.body.details[1].fieldViolations[0].field, "scopes");
      const identity = await exchange(await github.githubToken(), { identity: "x/y" });
      assertError(identity, 400, 3, "INVALID_ARGUMENT");
      const scope = await exchange(await github.githubToken(), { identity: deployer.uid, scope: org.uid });
      assertError(scope, 400, 3, "INVALID_ARGUMENT");
      assert.equal(scope.body.details[1].fieldViolations[0].field, "scope");
    });

    it("refuses a discovery document naming another issuer", async () => {
      const liar = await OidcIssuer.start({
        behaviour: { discoveryIssuer: "https://token.actions.githubusercontent.com" },
      });
      liar.defaultAudience = server.url;
      try {
        const id = await newIdentity("liar", { claimMatch: { issuer: liar.url, subject: GH_SUB } });
        assertDenied(await exchange(await liar.githubToken(), { identity: id.uid }), [liar.url, GH_SUB]);
        assert.equal(liar.count("keys"), 0);
      } finally {
        await liar.close();
      }
    });

    it("refuses an oversized discovery document", async () => {
      const big = await OidcIssuer.start();
      big.defaultAudience = server.url;
      big.behaviour = {
        discoveryBody: JSON.stringify({ issuer: big.url, jwks_uri: `${big.url}/keys`, pad: "x".repeat(300 * 1024) }),
      };
      try {
        const id = await newIdentity("big", { claimMatch: { issuer: big.url, subject: GH_SUB } });
        assertDenied(await exchange(await big.githubToken(), { identity: id.uid }), [big.url, GH_SUB]);
      } finally {
        await big.close();
      }
    });

    it("answers ExchangeRefreshToken, and exchanges through an identity provider, UNIMPLEMENTED with a reason", async () => {
      const res = await restClient(server.url, server.operatorToken).post("/sts/exchange_refresh_token", {});
      assertError(res, 501, 12, "UNIMPLEMENTED");
      assert.match(res.body.message, /refresh tokens/);
      const idp = await exchange(await github.githubToken(), { identity_provider: `${org.uid}/0123456789abcdef` });
      assertError(idp, 501, 12, "UNIMPLEMENTED");
      assert.match(idp.body.message, /identity provider/);
    });

    describe("with the upstream switches off", () => {
      let strict: TestServer;
      let lax: TestServer;
      before(async () => {
        [strict, lax] = await Promise.all([
          startTestServer(backend, { allowInsecureIssuers: false }),
          startTestServer(backend, { allowPrivateIssuerAddresses: false }),
        ]);
      });
      after(() => Promise.all([strict?.close(), lax?.close()]));

      async function attempt(target: TestServer): Promise<JsonResponse> {
        const ops = restClient(target.url, target.operatorToken);
        const group = (await ops.post("/iam/v2beta1/groups", { name: "acme" })).body;
        const id = (
          await ops.post(`/iam/v2beta1/identities/${group.uid}`, {
            name: "deployer",
            claimMatch: { issuer: github.url, subject: GH_SUB },
          })
        ).body;
        return restClient(target.url, await github.githubToken({ aud: target.url })).get(
          `/sts/exchange?identity=${id.uid}`,
        );
      }

      it("refuses an http issuer when allowInsecureIssuers is off", async () => {
        const before = github.requests.length;
        assertDenied(await attempt(strict), secretsOf());
        assert.equal(github.requests.length, before, "nothing was fetched");
      });

      it("refuses an issuer on a private address when allowPrivateIssuerAddresses is off", async () => {
        const before = github.requests.length;
        assertDenied(await attempt(lax), secretsOf());
        assert.equal(github.requests.length, before, "nothing was fetched");
      });
    });
  });
}
