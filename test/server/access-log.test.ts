// The access log: one line per request, successes too, naming the method, the route's template
// (never the raw path), status (and RPC code), duration, bytes in and out, request id, client
// address, the caller's identity once authenticated, and the user agent — over REST, Connect,
// gRPC, the registry and plain routes. Every answer carries its request id: the caller's when it
// is valid, else a new one; an invalid one is neither echoed nor logged. `--no-access-log` keeps
// the lines about requests that went wrong.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { backends } from "../support/db-templates.js";
import { bearer, startTestServer, type TestServer } from "../support/server.js";
import { captureLog, LEVEL, type CapturedLog, type LogLine } from "../support/logs.js";
import { OciClient, digestOf } from "../support/oci.js";
import { CliHome, runCliProcess, serveProcess } from "../support/cli.js";
import { until } from "../support/wait.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const AGENT = "access-log-test/1.0";

/** The one line about the request with this id (waits for it: it is written once the answer is out). */
async function lineOf(log: CapturedLog, requestId: string): Promise<LogLine> {
  const line = await log.waitFor((l) => l.requestId === requestId && l.status !== undefined, `request ${requestId}`);
  const all = log.lines().filter((l) => l.requestId === requestId);
  assert.equal(all.length, 1, `one line per request: ${JSON.stringify(all)}`);
  return line;
}

/** The line has these fields, and the ones every line has. */
function assertLine(line: LogLine, expected: Record<string, unknown>): void {
  const text = JSON.stringify(line);
  for (const [key, value] of Object.entries(expected)) assert.deepEqual(line[key], value, `${key}: ${text}`);
  assert.equal(typeof line.durationMs, "number", `durationMs: ${text}`);
  assert.ok((line.durationMs as number) >= 0, `durationMs: ${text}`);
  assert.equal(line.clientAddress, expected.clientAddress ?? "127.0.0.1", `clientAddress: ${text}`);
}

for (const backend of backends()) {
  describe(`access log (${backend})`, () => {
    let server: TestServer;
    let log: CapturedLog;
    let n = 0;
    const nextId = () => `access-${backend}-${++n}`;

    before(async () => {
      log = captureLog("info");
      server = await startTestServer(backend, { logger: log.logger, registryPort: 0 });
    });
    after(() => server?.close());

    it("REST: a success is one info line with every field, the caller's identity and the bytes both ways", async () => {
      const id = nextId();
      const body = JSON.stringify({ name: `access-${backend}` });
      const res = await fetch(`${server.url}/iam/v2beta1/groups`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${server.operatorToken}`,
          "content-type": "application/json",
          "user-agent": AGENT,
          "x-request-id": id,
        },
        body,
      });
      const answer = Buffer.from(await res.arrayBuffer());
      assert.equal(res.status, 200, answer.toString());
      assert.equal(res.headers.get("x-request-id"), id);
      const line = await lineOf(log, id);
      assert.equal(line.level, LEVEL.info);
      assert.equal(line.msg, "request");
      assertLine(line, {
        method: "POST",
        // the transcoder's rule (its parent is optional)
        route: "/iam/v2beta1/groups/{parent=**}",
        status: 200,
        bytesIn: Buffer.byteLength(body),
        bytesOut: answer.length,
        identity: OPERATOR_SUBJECT,
        userAgent: AGENT,
      });
      assert.equal(line.code, undefined, "no RPC code on a success");
      assert.equal(line.err, undefined);
    });

    it("Connect: the RPC's path as the route, and the route template never holds the uid", async () => {
      const created = await fetch(`${server.url}/iam/v2beta1/groups`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.operatorToken}`, "content-type": "application/json" },
        body: JSON.stringify({ name: `access-connect-${backend}` }),
      });
      const { uid } = (await created.json()) as { uid: string };
      const id = nextId();
      const body = JSON.stringify({ uid });
      const res = await fetch(`${server.url}/chainguard.platform.iam.v2beta1.GroupsService/GetGroup`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${server.operatorToken}`,
          "content-type": "application/json",
          "x-request-id": id,
        },
        body,
      });
      const answer = Buffer.from(await res.arrayBuffer());
      assert.equal(res.status, 200, answer.toString());
      assert.equal(res.headers.get("x-request-id"), id);
      const line = await lineOf(log, id);
      assertLine(line, {
        level: LEVEL.info,
        method: "POST",
        route: "/chainguard.platform.iam.v2beta1.GroupsService/GetGroup",
        status: 200,
        bytesIn: Buffer.byteLength(body),
        bytesOut: answer.length,
        identity: OPERATOR_SUBJECT,
      });
      assert.ok(!JSON.stringify(line).includes(uid), `no uid in the line: ${JSON.stringify(line)}`);

      // The same group over REST: the transcoder's template, not the path.
      const restId = nextId();
      const rest = await fetch(`${server.url}/iam/v2beta1/groups/${uid}`, {
        headers: { authorization: `Bearer ${server.operatorToken}`, "x-request-id": restId },
      });
      assert.equal(rest.status, 200);
      const restLine = await lineOf(log, restId);
      assertLine(restLine, { route: "/iam/v2beta1/groups/{uid=**}", status: 200, bytesIn: 0 });
      assert.ok(!JSON.stringify(restLine).includes(uid), JSON.stringify(restLine));
    });

    it("gRPC: the id is echoed in the response metadata; body bytes are counted both ways", async () => {
      const sessionManager = new Http2SessionManager(server.url);
      const client = createClient(
        GroupsService,
        createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(server.operatorToken)], sessionManager }),
      );
      const okId = nextId();
      const missingId = nextId();
      const echoed: (string | null)[] = [];
      try {
        await client.listGroups(
          {},
          { headers: { "x-request-id": okId }, onHeader: (h) => void echoed.push(h.get("x-request-id")) },
        );
        // An error is answered trailers-only: its metadata holds the answer's headers.
        await assert.rejects(
          client.getGroup(
            { uid: "0123456789abcdef0123456789abcdef01234567" },
            { headers: { "x-request-id": missingId } },
          ),
          (err) => {
            const error = ConnectError.from(err);
            echoed.push(error.metadata.get("x-request-id"));
            return error.code === Code.NotFound;
          },
        );
      } finally {
        sessionManager.abort();
      }
      assert.deepEqual(echoed, [okId, missingId]);
      const ok = await lineOf(log, okId);
      assertLine(ok, {
        level: LEVEL.info,
        msg: "request",
        route: "/chainguard.platform.iam.v2beta1.GroupsService/ListGroups",
        status: 200,
        identity: OPERATOR_SUBJECT,
      });
      // A gRPC body has no Content-Length: the bytes are counted (an empty message is its 5-byte frame).
      assert.equal(ok.bytesIn, 5, JSON.stringify(ok));
      assert.ok((ok.bytesOut as number) >= 5, JSON.stringify(ok));
      const missing = await lineOf(log, missingId);
      assertLine(missing, { level: LEVEL.info, status: 404, code: "NotFound", identity: OPERATOR_SUBJECT });
    });

    it("registry: a chunked push and a pull name the finer route template, bytes in and out", async () => {
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, {
        audience: [server.tokens.urls.registryAudience],
      });
      const pushId = nextId();
      const oci = new OciClient(server.url, { bearer: registryToken });
      const name = `access-${backend}/app`;
      const bytes = "access log blob bytes";
      const pushed = await oci.request("POST", `/v2/${name}/blobs/uploads/?digest=${digestOf(bytes)}`, {
        body: bytes,
        stream: true,
        headers: { "content-type": "application/octet-stream", "x-request-id": pushId },
      });
      assert.equal(pushed.status, 201, pushed.body.toString());
      assertLine(await lineOf(log, pushId), {
        method: "POST",
        route: "/v2/{name}/blobs/uploads/",
        status: 201,
        bytesIn: Buffer.byteLength(bytes),
        identity: OPERATOR_SUBJECT,
      });

      const pullId = nextId();
      const pulled = await oci.request("GET", `/v2/${name}/blobs/${digestOf(bytes)}`, {
        headers: { "x-request-id": pullId },
      });
      assert.equal(pulled.status, 200);
      assert.equal(pulled.headers.get("x-request-id"), pullId);
      const line = await lineOf(log, pullId);
      assertLine(line, {
        level: LEVEL.info,
        method: "GET",
        route: "/v2/{name}/blobs/{digest}",
        status: 200,
        bytesOut: Buffer.byteLength(bytes),
        identity: OPERATOR_SUBJECT,
      });
      assert.ok(!JSON.stringify(line).includes(name), `no repository name: ${JSON.stringify(line)}`);
    });

    it("a path no route matches: route (no route), the raw path absent, the id echoed", async () => {
      const id = nextId();
      const res = await fetch(`${server.url}/nowhere/SECRET-PATH?q=SECRET-QUERY`, { headers: { "x-request-id": id } });
      assert.equal(res.status, 404);
      assert.equal(res.headers.get("x-request-id"), id);
      const line = await lineOf(log, id);
      assertLine(line, { level: LEVEL.info, method: "GET", route: "(no route)", status: 404, identity: undefined });
      assert.ok(!JSON.stringify(line).includes("SECRET"), JSON.stringify(line));
    });

    it("a 401: one warn line, without an identity", async () => {
      const id = nextId();
      const res = await fetch(`${server.url}/iam/v2beta1/groups`, {
        headers: { authorization: "Bearer forged", "x-request-id": id },
      });
      assert.equal(res.status, 401);
      assert.equal(res.headers.get("x-request-id"), id);
      const line = await lineOf(log, id);
      assertLine(line, { level: LEVEL.warn, route: "/iam/v2beta1/groups", status: 401, identity: undefined });
      assert.equal(typeof line.reason, "string");
    });

    it("invalid request ids are replaced by the server's own, never echoed or logged", async () => {
      const invalid = ["has space", "x".repeat(129), "-leading-dash", 'quote"', "newline\\n"];
      for (const given of invalid) {
        const res = await fetch(`${server.url}/healthz`, { headers: { "x-request-id": given } });
        assert.equal(res.status, 200);
        const id = res.headers.get("x-request-id") ?? "";
        assert.match(id, UUID, `replaced: ${given}`);
        assertLine(await lineOf(log, id), { route: "/healthz", status: 200 });
      }
      for (const given of invalid)
        assert.ok(!log.lines().some((l) => JSON.stringify(l).includes(given)), `${given} logged`);
      // A valid one of the longest length passes unchanged.
      const longest = "a".repeat(128);
      const res = await fetch(`${server.url}/healthz`, { headers: { "x-request-id": longest } });
      assert.equal(res.headers.get("x-request-id"), longest);
    });

    it("every answer carries an id: plain routes, a malformed URL, the registry port's 404", async () => {
      const discovery = await fetch(`${server.url}/.well-known/openid-configuration`);
      assert.equal(discovery.status, 200);
      const discoveryId = discovery.headers.get("x-request-id") ?? "";
      assert.match(discoveryId, UUID);
      assertLine(await lineOf(log, discoveryId), { route: "/.well-known/openid-configuration", status: 200 });

      const malformed = await fetch(`${server.url}/iam/v2beta1/groups/%E0%A4%A`);
      assert.equal(malformed.status, 400);
      assert.match(malformed.headers.get("x-request-id") ?? "", UUID);

      const elsewhere = await fetch(`http://127.0.0.1:${server.registryPort}/iam/v2beta1/groups`, {
        headers: { "x-request-id": "on-the-registry-port" },
      });
      assert.equal(elsewhere.status, 404);
      assert.equal(elsewhere.headers.get("x-request-id"), "on-the-registry-port");
    });
  });

  describe(`--no-access-log, behind a trusted proxy, with rate limits (${backend})`, () => {
    let server: TestServer;
    let log: CapturedLog;

    before(async () => {
      log = captureLog("info");
      server = await startTestServer(backend, {
        logger: log.logger,
        accessLog: false,
        trustProxy: true,
        rateLimits: { address: { perSecond: 0.001, burst: 2 } },
      });
    });
    after(() => server?.close());

    it("successes are not logged; failures are, with the proxy's client address; a 429 echoes its id", async () => {
      const from = (address: string, id: string) => ({ "x-forwarded-for": address, "x-request-id": id });
      const quiet = await fetch(`${server.url}/.well-known/openid-configuration`, {
        headers: from("192.0.2.10", "quiet-1"),
      });
      assert.equal(quiet.status, 200);
      assert.equal(quiet.headers.get("x-request-id"), "quiet-1");

      // The second request of this address spends its budget; the third is refused.
      await fetch(`${server.url}/.well-known/openid-configuration`, { headers: from("192.0.2.10", "quiet-2") });
      const refused = await fetch(`${server.url}/.well-known/openid-configuration`, {
        headers: from("192.0.2.10", "refused-1"),
      });
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get("x-request-id"), "refused-1");
      assertLine(await lineOf(log, "refused-1"), {
        level: LEVEL.info,
        status: 429,
        clientAddress: "192.0.2.10",
      });

      const missing = await fetch(`${server.url}/nowhere`, { headers: from("192.0.2.11", "missing-1") });
      assert.equal(missing.status, 404);
      assertLine(await lineOf(log, "missing-1"), { status: 404, clientAddress: "192.0.2.11" });
      assert.ok(
        !log.lines().some((l) => l.requestId === "quiet-1" || l.requestId === "quiet-2"),
        "no line for a success",
      );
    });
  });
}

describe("bulwark serve --log-format", () => {
  let dataDir: string;
  let home: CliHome;
  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), "bulwark-log-format-"));
    home = new CliHome();
  });
  after(() => {
    rmSync(dataDir, { recursive: true, force: true });
    home.close();
  });

  it("pretty: one readable line per request, from the bundled binary", async () => {
    const serve = await serveProcess(["--port", "0", "--data-dir", dataDir, "--log-format", "pretty"], {
      BULWARK_KEY_ENCRYPTION_KEY: "",
    });
    try {
      assert.ok(
        serve.lines.some((l) => /^\[.+\] INFO \(\d+\): bulwark listening on http/.test(l)),
        serve.lines.join("\n"),
      );
      const res = await fetch(`${serve.url}/healthz`, { headers: { "x-request-id": "pretty-1", "user-agent": AGENT } });
      assert.equal(res.status, 200);
      const line = await until(
        () => serve.lines.find((l) => l.includes("pretty-1")),
        () => serve.lines.join("\n"),
      );
      assert.match(line, /^\[.+\] INFO \(\d+\): request \{.*"route":"\/healthz".*"status":200.*\}$/);
      assert.ok(line.includes(AGENT), line);
    } finally {
      assert.equal(await serve.stop(), 0);
    }
  });

  it("another format is a usage error naming the choices, from the flag and from the environment", async () => {
    // The real binary: commander reads the environment of the process.
    const flag = await runCliProcess(home, ["serve", "--port", "0", "--data-dir", dataDir, "--log-format", "xml"]);
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /--log-format .*'xml' is invalid\. Allowed choices are json, pretty/);
    const env = await runCliProcess(home, ["serve", "--port", "0", "--data-dir", dataDir], {
      env: { BULWARK_LOG_FORMAT: "yaml" },
    });
    assert.equal(env.code, 2);
    assert.match(env.stderr, /'yaml' from env 'BULWARK_LOG_FORMAT' is invalid/);
  });
});
