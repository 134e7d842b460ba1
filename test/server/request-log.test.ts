// The server's log tells the truth: a client's mistake is one line at info, a refused credential
// one at warn, a server fault one at error with its stack; each line names the method, the route's
// template (never the raw path), the status and the request id, which the answer echoes — on REST,
// Connect, gRPC and the OCI /v2/ routes alike.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { backends } from "../support/db-templates.js";
import { bearer, startTestServer, type TestServer } from "../support/server.js";
import { restClient } from "../support/http.js";
import { captureLog, LEVEL, type CapturedLog, type LogLine } from "../support/logs.js";
import { OciClient, digestOf } from "../support/oci.js";

const MISSING_GROUP = "0123456789abcdef0123456789abcdef01234567";

/** The one line about the request with this id (waits for it: it is written once the answer is out). */
async function lineOf(log: CapturedLog, requestId: string): Promise<LogLine> {
  const line = await log.waitFor((l) => l.requestId === requestId && l.status !== undefined, `request ${requestId}`);
  const all = log.lines().filter((l) => l.requestId === requestId);
  assert.equal(all.length, 1, `one line per request: ${JSON.stringify(all)}`);
  return line;
}

/** No line says more than it should: no stack, nothing at error, no uid of the path. */
function assertClientLine(line: LogLine, level: number, expected: Record<string, unknown>): void {
  assert.equal(line.level, level, JSON.stringify(line));
  for (const [key, value] of Object.entries(expected))
    assert.deepEqual(line[key], value, `${key}: ${JSON.stringify(line)}`);
  assert.equal(line.err, undefined, `no stack for a client error: ${JSON.stringify(line)}`);
  assert.ok(!JSON.stringify(line.route).includes(MISSING_GROUP), `the route is a template: ${JSON.stringify(line)}`);
}

for (const backend of backends()) {
  describe(`request log (${backend})`, () => {
    let server: TestServer;
    let log: CapturedLog;
    let n = 0;
    const nextId = () => `test-${backend}-${++n}`;

    before(async () => {
      log = captureLog("info");
      server = await startTestServer(backend, { logger: log.logger });
    });
    after(() => server?.close());

    it("REST: a 404 is one info line with method, route template, status and the echoed request id", async () => {
      const id = nextId();
      const res = await fetch(`${server.url}/iam/v2beta1/groups/${MISSING_GROUP}`, {
        headers: { authorization: `Bearer ${server.operatorToken}`, "x-request-id": id },
      });
      assert.equal(res.status, 404);
      assert.equal(res.headers.get("x-request-id"), id, "the request id is echoed");
      assertClientLine(await lineOf(log, id), LEVEL.info, {
        method: "GET",
        route: "/iam/v2beta1/groups/{uid=**}",
        status: 404,
      });
    });

    it("a path no route matches is not logged: neither as the route nor in the reason", async () => {
      for (const path of ["/iam/v2beta1/nothere/SECRET-PATH-1", "/SECRET-PATH-2/a"]) {
        const id = nextId();
        const res = await fetch(`${server.url}${path}?q=SECRET-QUERY`, { headers: { "x-request-id": id } });
        assert.equal(res.status, 404);
        const line = await lineOf(log, id);
        assert.ok(!JSON.stringify(line).includes("SECRET"), JSON.stringify(line));
      }
    });

    it("a request without a valid id gets one of the server's, echoed and logged", async () => {
      const res = await fetch(`${server.url}/iam/v2beta1/groups/${MISSING_GROUP}`, {
        headers: { authorization: `Bearer ${server.operatorToken}`, "x-request-id": "no spaces allowed" },
      });
      assert.equal(res.status, 404);
      const id = res.headers.get("x-request-id");
      assert.match(id ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      assertClientLine(await lineOf(log, id!), LEVEL.info, { status: 404 });
    });

    it("Connect: a 404 is one info line naming the RPC's path and its code", async () => {
      const id = nextId();
      const res = await fetch(`${server.url}/chainguard.platform.iam.v2beta1.GroupsService/GetGroup`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${server.operatorToken}`,
          "content-type": "application/json",
          "x-request-id": id,
        },
        body: JSON.stringify({ uid: MISSING_GROUP }),
      });
      assert.equal(res.status, 404);
      assertClientLine(await lineOf(log, id), LEVEL.info, {
        method: "POST",
        route: "/chainguard.platform.iam.v2beta1.GroupsService/GetGroup",
        status: 404,
        code: "NotFound",
      });
    });

    it("gRPC: NOT_FOUND (HTTP 200 on the wire) is logged with the status it stands for", async () => {
      const id = nextId();
      const sessionManager = new Http2SessionManager(server.url);
      const client = createClient(
        GroupsService,
        createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(server.operatorToken)], sessionManager }),
      );
      try {
        await assert.rejects(
          client.getGroup({ uid: MISSING_GROUP }, { headers: { "x-request-id": id } }),
          (err) => ConnectError.from(err).code === Code.NotFound,
        );
      } finally {
        sessionManager.abort();
      }
      assertClientLine(await lineOf(log, id), LEVEL.info, {
        method: "POST",
        route: "/chainguard.platform.iam.v2beta1.GroupsService/GetGroup",
        status: 404,
        code: "NotFound",
      });
    });

    it("OCI: an unsatisfiable Range is an info line, not an unexpected error", async () => {
      const api = restClient(server.url, server.operatorToken);
      const created = await api.post("/iam/v2beta1/groups", { name: `logs-${backend}` });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, {
        audience: [server.tokens.urls.registryAudience],
      });
      const oci = new OciClient(server.url, { bearer: registryToken });
      const name = `logs-${backend}/app`;
      const bytes = "0123456789";
      assert.equal((await oci.postBlob(name, bytes)).status, 201);
      const id = nextId();
      const res = await oci.request("GET", `/v2/${name}/blobs/${digestOf(bytes)}`, {
        headers: { range: "bytes=5-2", "x-request-id": id },
      });
      assert.equal(res.status, 416, res.body.toString());
      assertClientLine(await lineOf(log, id), LEVEL.info, {
        method: "GET",
        route: "/v2/{name}/blobs/{digest}",
        status: 416,
      });
    });

    it("credentials refused are a warn line; a 401 challenge to a caller without credentials is info", async () => {
      const refused = nextId();
      const res = await fetch(`${server.url}/iam/v2beta1/groups`, {
        headers: { authorization: "Bearer not-a-token", "x-request-id": refused },
      });
      assert.equal(res.status, 401);
      assertClientLine(await lineOf(log, refused), LEVEL.warn, { status: 401, route: "/iam/v2beta1/groups" });

      const challenged = nextId();
      const v2 = await fetch(`${server.url}/v2/`, { headers: { "x-request-id": challenged } });
      assert.equal(v2.status, 401);
      assertClientLine(await lineOf(log, challenged), LEVEL.info, { status: 401, route: "/v2/" });
    });

    it("a server fault (a table gone from the database) is one error line with the fault's stack", async () => {
      const id = nextId();
      await sql`alter table groups rename to groups_away`.execute(server.db);
      let res: Response;
      try {
        res = await fetch(`${server.url}/iam/v2beta1/groups/${MISSING_GROUP}`, {
          headers: { authorization: `Bearer ${server.operatorToken}`, "x-request-id": id },
        });
      } finally {
        await sql`alter table groups_away rename to groups`.execute(server.db);
      }
      assert.equal(res.status, 500);
      const line = await lineOf(log, id);
      assert.equal(line.level, LEVEL.error, JSON.stringify(line));
      assert.equal(line.route, "/iam/v2beta1/groups/{uid=**}");
      assert.equal(line.status, 500);
      const err = line.err as { stack?: string; message?: string } | undefined;
      assert.match(err?.stack ?? "", /groups/, "the fault's own stack and message");
      assert.equal((JSON.stringify(line).match(/"stack"/g) ?? []).length, 1, "one stack");
    });

    it("no line so far was logged as an error but the fault's", () => {
      const errors = log.lines().filter((l) => l.level >= LEVEL.error);
      assert.equal(errors.length, 1, JSON.stringify(errors));
      assert.ok(!log.lines().some((l) => /unexpected error/.test(l.msg)), "the old false alarm is gone");
    });
  });
}
