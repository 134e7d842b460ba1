// Bad input and abuse get clear AIP-193 answers on every protocol and change nothing: one rule for
// text (no NUL, valid Unicode, bounded length), undecodable bodies are INVALID_ARGUMENT (never
// INTERNAL or HTTP 500), oversized requests get a JSON body, rate limits answer 429 with
// Retry-After and RetryInfo, CORS is off unless origins are listed, and every response is nosniff.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { fromBinary } from "@bufbuild/protobuf";
import { StatusSchema } from "../../src/gen/google/rpc/status_pb.js";
import { fieldViolations } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import { createGroup, type Json } from "../support/fixtures.js";
import { grpcClient, grpcError, statusFromTrailer, unpackDetails } from "../support/grpc.js";
import { restClient } from "../support/http.js";
import { ERROR_DOMAIN, startTestServer, type TestServer } from "../support/server.js";

const GROUPS = "chainguard.platform.iam.v2beta1.GroupsService";

/** The AIP-193 body's ErrorInfo, asserting the shape on the way. */
function errorInfoOf(body: unknown): Json {
  const status = body as Json;
  assert.equal(typeof status?.code, "number", `not a google.rpc.Status: ${JSON.stringify(body)}`);
  assert.equal(typeof status.message, "string");
  const info = (status.details as Json[]).find((d) => d["@type"] === "type.googleapis.com/google.rpc.ErrorInfo");
  assert.ok(info, `no ErrorInfo in ${JSON.stringify(body)}`);
  assert.equal(info.domain, ERROR_DOMAIN);
  return info;
}

/** One unary call over raw HTTP/2 (so the body can be anything), returning status, headers and trailers. */
function rawGrpc(
  port: number,
  path: string,
  body: Uint8Array,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", reject);
    const req = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc+proto",
      te: "trailers",
      ...headers,
    });
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    req.on("response", (h) => (responseHeaders = h));
    req.on("trailers", (t) => (trailers = t));
    req.on("data", () => {});
    req.on("error", reject);
    req.on("end", () => {
      session.close();
      resolve({ status: Number(responseHeaders[":status"]), headers: responseHeaders, trailers });
    });
    req.end(body);
  });
}

/** gRPC framing: flags byte, 4-byte length, message. */
function frame(message: Uint8Array, flags = 0, declaredLength = message.length): Uint8Array {
  const out = new Uint8Array(5 + message.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, declaredLength);
  out.set(message, 5);
  return out;
}

for (const backend of backends()) {
  describe(`one rule for text (${backend})`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let root: Json;

    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      root = await createGroup(api, undefined, "hardening-root");
    });
    after(() => server.close());

    const cases: { label: string; request: () => Promise<{ status: number; body: Json }>; field: RegExp }[] = [
      {
        label: "NUL in a description",
        request: () => api.post("/iam/v2beta1/groups", { name: "nul", description: "a\u0000b" }),
        field: /description$/,
      },
      {
        label: "an unpaired surrogate in a name",
        request: () => api.call("POST", "/iam/v2beta1/groups", '{"name":"x\\ud800y"}'),
        field: /name$/,
      },
      {
        label: "NUL in a claim value",
        request: () =>
          api.post(`/iam/v2beta1/identities/${root.uid}`, {
            name: "claims",
            claimMatch: { issuer: "https://issuer.example", subject: "s", claims: { team: "a\u0000" } },
          }),
        field: /claims/,
      },
      {
        label: "NUL in an IdP client id",
        request: () =>
          api.post(`/iam/v2beta1/identityProviders/${root.uid}`, {
            name: "idp",
            oidc: { issuer: "https://issuer.example", clientId: "id\u0000", clientSecret: "s" },
          }),
        field: /client_id$/,
      },
      { label: "NUL in the name= filter", request: () => api.get("/iam/v2beta1/groups?name=a%00b"), field: /^name$/ },
      {
        label: "NUL in the issuer= filter",
        request: () => api.get("/iam/v2beta1/identities:lookupIdentity?issuer=a%00&subject=s"),
        field: /^issuer$/,
      },
      {
        label: "NUL in the key_id= filter",
        request: () => api.get(`/iam/v2beta1/groupInvites?uidp.descendants_of=${root.uid}&key_id=%00`),
        field: /key_id$/,
      },
      { label: "NUL in a uid", request: () => api.get("/iam/v2beta1/groups/%00"), field: /uid$/ },
      {
        label: "a name over the maximum length",
        request: () => api.post("/iam/v2beta1/groups", { name: "n".repeat(1025) }),
        field: /name$/,
      },
      {
        label: "a description over 4096 characters",
        request: () => api.post("/iam/v2beta1/groups", { name: "long", description: "d".repeat(4097) }),
        field: /description$/,
      },
    ];
    for (const c of cases) {
      it(`${c.label}: INVALID_ARGUMENT naming the field, nothing written`, async () => {
        const before = await api.get("/iam/v2beta1/groups");
        const res = await c.request();
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal(errorInfoOf(res.body).reason, "INVALID_ARGUMENT");
        const fields = fieldViolations(res).map((v) => v.field);
        assert.ok(
          fields.some((f) => c.field.test(f)),
          `fields ${fields} do not name ${c.field}`,
        );
        const afterwards = await api.get("/iam/v2beta1/groups");
        assert.equal(afterwards.body.groups.length, before.body.groups.length);
      });
    }

    it("the same over gRPC (grpc-js): NUL in a description is INVALID_ARGUMENT with ErrorInfo", async () => {
      const client = grpcClient(server.port, GROUPS, server.operatorToken);
      try {
        const err = await grpcError(client.call("CreateGroup", { group: { name: "g", description: "\u0000" } }));
        assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
        const details = unpackDetails(statusFromTrailer(err));
        assert.ok(details.some((d) => d.$typeName === "google.rpc.ErrorInfo"));
      } finally {
        client.close();
      }
    });

    it("a plain route's form: NUL in an OAuth token request is INVALID_ARGUMENT", async () => {
      const res = await fetch(`${server.url}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "grant_type=authorization_code&code=a%00b",
      });
      assert.equal(res.status, 400);
      assert.equal(errorInfoOf(await res.json()).reason, "INVALID_ARGUMENT");
    });
  });
}

describe("undecodable and oversized requests", () => {
  let server: TestServer;
  const listGroups = `/${GROUPS}/ListGroups`;

  before(async () => {
    server = await startTestServer("pglite");
  });
  after(() => server.close());

  const auth = () => ({ authorization: `Bearer ${server.operatorToken}` });

  it("Connect: a malformed binary body is HTTP 400 invalid_argument with ErrorInfo, not 500", async () => {
    for (const body of [new Uint8Array([0xff, 0xff, 0xff]), new Uint8Array([0x0a, 0x05, 0x01]), new Uint8Array([7])]) {
      const res = await fetch(server.url + listGroups, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/proto" },
        body,
      });
      assert.equal(res.status, 400);
      const error = (await res.json()) as Json;
      assert.equal(error.code, "invalid_argument");
      assert.ok(error.details.some((d: Json) => d.type === "google.rpc.ErrorInfo"));
    }
  });

  it("Connect: malformed JSON and an unknown content type have AIP-193 bodies", async () => {
    const bad = await fetch(server.url + listGroups, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: "{not json",
    });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as Json).code, "invalid_argument");
    const odd = await fetch(server.url + listGroups, {
      method: "POST",
      headers: { ...auth(), "content-type": "text/plain" },
      body: "x",
    });
    assert.equal(odd.status, 415);
    assert.ok(((await odd.json()) as Json).details.some((d: Json) => d.type === "google.rpc.ErrorInfo"));
  });

  for (const [label, body] of [
    ["an illegal tag", frame(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0x0f]))],
    ["a truncated message", frame(new Uint8Array([0x0a, 0x10, 0x61]))],
    ["a frame shorter than its declared length", frame(new Uint8Array([0x0a]), 0, 100)],
    ["a compressed flag without grpc-encoding", frame(new Uint8Array([0x0a, 0x00]), 1)],
  ] as const) {
    it(`gRPC: ${label} is INVALID_ARGUMENT with grpc-status-details-bin`, async () => {
      const res = await rawGrpc(server.port, listGroups, body, auth());
      assert.equal(res.status, 200);
      const trailers = { ...res.headers, ...res.trailers };
      assert.equal(trailers["grpc-status"], "3", JSON.stringify(trailers));
      const status = fromBinary(StatusSchema, Buffer.from(String(trailers["grpc-status-details-bin"]), "base64"));
      assert.ok(status.details.some((d) => d.typeUrl.endsWith("google.rpc.ErrorInfo")));
    });
  }

  it("gRPC-Web: a malformed body is INVALID_ARGUMENT in the trailer frame", async () => {
    const res = await fetch(server.url + listGroups, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/grpc-web+proto" },
      body: frame(new Uint8Array([0xff, 0xff, 0xff])),
    });
    const text = Buffer.from(await res.arrayBuffer()).toString("latin1");
    assert.match(text, /grpc-status: ?3/);
    assert.match(text, /grpc-status-details-bin: ?\S+/);
  });

  it("gRPC: a ~1 MiB uid is INVALID_ARGUMENT (or over the limit, RESOURCE_EXHAUSTED) with a short message", async () => {
    const client = grpcClient(server.port, GROUPS, server.operatorToken);
    try {
      for (const [size, code] of [
        [1000 * 1000, grpc.status.INVALID_ARGUMENT],
        [1024 * 1024, grpc.status.RESOURCE_EXHAUSTED],
      ] as const) {
        const err = await grpcError(client.call("GetGroup", { uid: "a".repeat(size) }));
        assert.equal(err.code, code, err.details);
        assert.ok(err.details.length < 300, `message too long: ${err.details.length}`);
        assert.ok(unpackDetails(statusFromTrailer(err)).some((d) => d.$typeName === "google.rpc.ErrorInfo"));
      }
    } finally {
      client.close();
    }
  });

  it("headers or a query string over 16 KiB: 431 with an AIP-193 body", async () => {
    for (const res of [
      await fetch(`${server.url}/iam/v2beta1/groups`, { headers: { ...auth(), "x-big": "a".repeat(20_000) } }),
      await fetch(`${server.url}/iam/v2beta1/groups?name=${"a".repeat(100_000)}`, { headers: auth() }),
    ]) {
      assert.equal(res.status, 431);
      assert.equal(res.headers.get("content-type"), "application/json");
      assert.equal(errorInfoOf(await res.json()).reason, "RESOURCE_EXHAUSTED");
    }
  });

  it("HTTP/2 headers over 16 KiB (that the stack still takes): the same answer, in the request's protocol", async () => {
    const pad = { "x-pad": "p".repeat(20_000) };
    const rest = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const session = http2.connect(server.url);
      session.on("error", reject);
      const req = session.request({ ":method": "GET", ":path": "/iam/v2beta1/groups", ...auth(), ...pad });
      let status = 0;
      let body = "";
      req.on("response", (h) => (status = Number(h[":status"])));
      req.setEncoding("utf8").on("data", (c: string) => (body += c));
      req.on("error", reject);
      req.on("end", () => {
        session.close();
        resolve({ status, body });
      });
      req.end();
    });
    assert.equal(rest.status, 431);
    assert.equal(errorInfoOf(JSON.parse(rest.body)).reason, "RESOURCE_EXHAUSTED");
    const grpcRes = await rawGrpc(server.port, listGroups, frame(new Uint8Array()), { ...auth(), ...pad });
    const status = { ...grpcRes.headers, ...grpcRes.trailers };
    assert.equal(status["grpc-status"], "8", JSON.stringify(status));
    const details = fromBinary(StatusSchema, Buffer.from(String(status["grpc-status-details-bin"]), "base64"));
    assert.ok(details.details.some((d) => d.typeUrl.endsWith("google.rpc.ErrorInfo")));
  });

  it("bodies over 1 MiB: REST and Connect answer AIP-193, nothing is written", async () => {
    const big = JSON.stringify({ name: "big", description: "d".repeat(2 * 1024 * 1024) });
    const rest = await fetch(`${server.url}/iam/v2beta1/groups`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: big,
    });
    assert.ok(rest.status === 400 || rest.status === 413, String(rest.status));
    errorInfoOf(await rest.json());
    const connect = await fetch(`${server.url}/${GROUPS}/CreateGroup`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ group: { name: "big", description: "d".repeat(2 * 1024 * 1024) } }),
    });
    assert.ok(connect.status >= 400 && connect.status < 500, String(connect.status));
    assert.ok(((await connect.json()) as Json).details.some((d: Json) => d.type === "google.rpc.ErrorInfo"));
    const groups = await restClient(server.url, server.operatorToken).get("/iam/v2beta1/groups?name=big");
    assert.equal(groups.body.groups.length, 0);
  });

  it("every response says nosniff", async () => {
    const responses = [
      await fetch(`${server.url}/healthz`),
      await fetch(`${server.url}/iam/v2beta1/groups`, { headers: auth() }),
      await fetch(`${server.url}/no/such/route`),
      await fetch(`${server.url}/.well-known/openid-configuration`),
      await fetch(server.url + listGroups, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json" },
        body: "{}",
      }),
    ];
    for (const res of responses) assert.equal(res.headers.get("x-content-type-options"), "nosniff", res.url);
    const grpcRes = await rawGrpc(server.port, listGroups, frame(new Uint8Array()), auth());
    assert.equal(grpcRes.headers["x-content-type-options"], "nosniff");
  });

  it("HTTP/1.1 keeps an idle connection longer than load balancers' 60 s, and says so", async () => {
    const res = await fetch(`${server.url}/healthz`);
    await res.arrayBuffer();
    const header = res.headers.get("keep-alive") ?? "";
    const seconds = Number(/^timeout=(\d+)$/.exec(header)?.[1]);
    assert.ok(seconds > 60, `Keep-Alive: ${header}`);
  });
});

/**
 * The refill rate of the limits under test: one request an hour. The tests spend a burst and
 * expect the next request refused; at a faster rate a slow machine could earn it back meanwhile.
 */
const ONE_AN_HOUR = 1 / 3600;

describe("rate limits", () => {
  it("per client address: 429 with Retry-After and RetryInfo over REST; RESOURCE_EXHAUSTED over gRPC", async () => {
    const server = await startTestServer("pglite", { rateLimits: { address: { perSecond: ONE_AN_HOUR, burst: 3 } } });
    try {
      const anonymous = restClient(server.url);
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push(await anonymous.get("/iam/v2beta1/groups"));
      assert.deepEqual(
        statuses.map((r) => r.status),
        [401, 401, 401, 429],
      );
      const limited = statuses[3]!;
      assert.ok(Number(limited.headers.get("retry-after")) >= 1);
      assert.equal(errorInfoOf(limited.body).reason, "RESOURCE_EXHAUSTED");
      const retry = limited.body.details.find((d: Json) => d["@type"].endsWith("google.rpc.RetryInfo"));
      assert.match(retry.retryDelay, /^\d+s$/);

      const client = grpcClient(server.port, GROUPS);
      try {
        const err = await grpcError(client.call("ListGroups", {}));
        assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED);
        const details = unpackDetails(statusFromTrailer(err));
        assert.ok(details.some((d) => d.$typeName === "google.rpc.RetryInfo"));
      } finally {
        client.close();
      }
      // A token that verifies is served over the address's limit: only its identity's applies.
      assert.equal((await restClient(server.url, server.operatorToken).get("/iam/v2beta1/groups")).status, 200);
    } finally {
      await server.close();
    }
  });

  it("--trust-proxy: the client's address is X-Forwarded-For's, each with its own budget", async () => {
    const server = await startTestServer("pglite", {
      rateLimits: { address: { perSecond: ONE_AN_HOUR, burst: 1 } },
      trustProxy: true,
    });
    try {
      const from = (address: string) =>
        fetch(`${server.url}/.well-known/openid-configuration`, { headers: { "x-forwarded-for": address } });
      assert.equal((await from("198.51.100.1")).status, 200);
      assert.equal((await from("198.51.100.1")).status, 429);
      assert.equal((await from("198.51.100.2")).status, 200, "another client behind the proxy");
      // Not an address: the connection's own address stands in (one budget, not one per string).
      assert.equal((await from("x".repeat(4000))).status, 200);
      assert.equal((await from("not-an-address")).status, 429);
    } finally {
      await server.close();
    }
  });

  it("per identity", async () => {
    const server = await startTestServer("pglite", { rateLimits: { identity: { perSecond: ONE_AN_HOUR, burst: 2 } } });
    try {
      const api = restClient(server.url, server.operatorToken);
      assert.equal((await api.get("/iam/v2beta1/groups")).status, 200);
      assert.equal((await api.get("/iam/v2beta1/groups")).status, 200);
      const limited = await api.get("/iam/v2beta1/groups");
      assert.equal(limited.status, 429);
      assert.match(limited.body.message, /per identity/);
    } finally {
      await server.close();
    }
  });

  it("failed authentications: once the budget is spent, refused credentials get 429, a valid token is served", async () => {
    const server = await startTestServer("pglite", {
      rateLimits: { failedAuthentication: { perSecond: ONE_AN_HOUR, burst: 5 } },
    });
    try {
      const bad = restClient(server.url, "not-a-token");
      const statuses = [];
      for (let i = 0; i < 7; i++) statuses.push((await bad.get("/iam/v2beta1/groups")).status);
      assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429, 429]);
      const limited = await bad.get("/iam/v2beta1/groups");
      assert.ok(limited.headers.get("retry-after"));
      assert.match(limited.body.message, /failed authentications per client address/);
      const good = await restClient(server.url, server.operatorToken).get("/iam/v2beta1/groups");
      assert.equal(good.status, 200, JSON.stringify(good.body));
      // Calls without credentials are not held back by it.
      assert.equal((await fetch(`${server.url}/.well-known/jwks.json`)).status, 200);
    } finally {
      await server.close();
    }
  });

  it("the token exchange and the OAuth endpoints have the stricter limit", async () => {
    const server = await startTestServer("pglite", { rateLimits: { sensitive: { perSecond: ONE_AN_HOUR, burst: 3 } } });
    try {
      const exchange = () =>
        fetch(`${server.url}/sts/exchange`, {
          method: "POST",
          headers: { authorization: "Bearer x", "content-type": "application/json" },
          body: "{}",
        });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await exchange()).status);
      assert.equal(statuses[3], 429, String(statuses));
      const token = await fetch(`${server.url}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "grant_type=urn:ietf:params:oauth:grant-type:device_code&device_code=guess",
      });
      assert.equal(token.status, 429);
      // Ordinary API calls are not affected.
      assert.equal((await restClient(server.url, server.operatorToken).get("/iam/v2beta1/groups")).status, 200);
    } finally {
      await server.close();
    }
  });
});

describe("CORS", () => {
  const preflight = (server: TestServer, origin: string) =>
    fetch(`${server.url}/iam/v2beta1/groups`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "GET", "access-control-request-headers": "authorization" },
    });

  it("is off by default: a preflight gets no CORS headers", async () => {
    const server = await startTestServer("pglite");
    try {
      const res = await preflight(server, "https://app.example");
      assert.equal(res.headers.get("access-control-allow-origin"), null);
      assert.ok(res.status >= 400);
    } finally {
      await server.close();
    }
  });

  it("--cors-origin: preflights answered for listed origins; REST, Connect and gRPC-Web expose grpc-status", async () => {
    const server = await startTestServer("pglite", { corsOrigins: ["https://app.example"] });
    try {
      const ok = await preflight(server, "https://app.example");
      assert.equal(ok.status, 204);
      assert.equal(ok.headers.get("access-control-allow-origin"), "https://app.example");
      assert.match(ok.headers.get("access-control-allow-headers") ?? "", /authorization/);
      assert.match(ok.headers.get("access-control-allow-headers") ?? "", /x-grpc-web/);
      assert.match(ok.headers.get("access-control-allow-methods") ?? "", /PATCH/);

      const other = await preflight(server, "https://evil.example");
      assert.equal(other.headers.get("access-control-allow-origin"), null);

      const auth = { authorization: `Bearer ${server.operatorToken}`, origin: "https://app.example" };
      const rest = await fetch(`${server.url}/iam/v2beta1/groups`, { headers: auth });
      assert.equal(rest.headers.get("access-control-allow-origin"), "https://app.example");
      const grpcWeb = await fetch(`${server.url}/${GROUPS}/ListGroups`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
        body: frame(new Uint8Array()),
      });
      assert.equal(grpcWeb.status, 200);
      assert.equal(grpcWeb.headers.get("access-control-allow-origin"), "https://app.example");
      assert.match(grpcWeb.headers.get("access-control-expose-headers") ?? "", /grpc-status/);
      assert.match(grpcWeb.headers.get("access-control-expose-headers") ?? "", /grpc-message/);
    } finally {
      await server.close();
    }
  });
});
