// The REST conventions documented clients rely on, to the letter: the documented error texts, a
// JSON body sent without a Content-Type or as a form (`curl -d`), list parameters in both
// spellings, and an unimplemented RPC (501) told apart from a path no route serves (404).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const ORG = "4a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
const NAME_TEXT = 'Invalid argument: name: name must match "^[a-z0-9 ._-]{1,}$"';

/** A raw request, so the Content-Type is exactly what the test says (or absent). */
function raw(server: TestServer, method: string, path: string, body: string, headers: Record<string, string>) {
  return new Promise<{ status: number; body: any }>((resolve, reject) => {
    const url = new URL(server.url + path);
    const req = http.request(
      { method, host: url.hostname, port: url.port, path: url.pathname + url.search, headers },
      (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

for (const backend of backends()) {
  describe(`REST conventions (${backend})`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let auth: Record<string, string>;

    before(async () => {
      server = await startTestServer(backend, { rootGroups: [{ uid: ORG, name: "conventions" }] });
      api = restClient(server.url, server.operatorToken);
      auth = { authorization: `Bearer ${server.operatorToken}` };
    });
    after(() => server?.close());

    test("the documented name error, verbatim, in the message and the field violation, on v1 and v2beta1, REST and gRPC", async () => {
      for (const path of [`/iam/v2beta1/groups/${ORG}`, `/iam/v1/groups/${ORG}`, `/iam/v2/groups/${ORG}`]) {
        const res = await api.post(path, { name: "Bad Name!" });
        assert.equal(res.status, 400, path);
        assert.equal(res.body.message, NAME_TEXT, path);
        const bad = res.body.details.find((d: any) => d["@type"].endsWith("BadRequest"));
        assert.deepEqual(bad.fieldViolations, [{ field: "name", description: 'name must match "^[a-z0-9 ._-]{1,}$"' }]);
      }
      const grpc = await api.call(
        "POST",
        "/chainguard.platform.iam.v2beta1.GroupsService/CreateGroup",
        { parent: ORG, group: { name: "Bad Name!" } },
        { "connect-protocol-version": "1" },
      );
      assert.equal(grpc.status, 400);
      assert.equal(grpc.body.message, NAME_TEXT);
    });

    test("a JSON body without a Content-Type, as a form (curl -d) or as text is JSON; a real form is a clear 400", async () => {
      const body = (name: string) => JSON.stringify({ name });
      for (const [what, headers] of [
        ["no content type", {}],
        ["form", { "content-type": "application/x-www-form-urlencoded" }],
        ["text", { "content-type": "text/plain" }],
      ] as const) {
        const res = await raw(server, "POST", `/iam/v2beta1/groups/${ORG}`, body(`json ${what}`), {
          ...auth,
          ...headers,
        });
        assert.equal(res.status, 200, `${what}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.name, `json ${what}`);
      }
      const v1 = await raw(server, "POST", `/iam/v1/groups/${ORG}`, body("json v1"), {
        ...auth,
        "content-type": "application/x-www-form-urlencoded",
      });
      assert.equal(v1.status, 200, JSON.stringify(v1.body));
      const form = await raw(server, "POST", `/iam/v2beta1/groups/${ORG}`, "name=x&y=z", {
        ...auth,
        "content-type": "application/x-www-form-urlencoded",
      });
      assert.equal(form.status, 400, JSON.stringify(form.body));
      assert.equal(form.body.code, 3);
      const listed = await api.get(`/iam/v2beta1/groups?uidp.childrenOf=${ORG}&pageSize=100`);
      assert.ok(!listed.body.groups.some((g: any) => g.name === "x"), "a refused body changes nothing");
    });

    test("every List parameter in both spellings", async () => {
      for (const name of ["a", "b", "c"])
        assert.equal((await api.post(`/iam/v2beta1/groups/${ORG}`, { name })).status, 200);
      const walk = async (spell: (snake: string, camel: string) => string) => {
        const names: string[] = [];
        let token = "";
        do {
          const q = [
            `${spell("page_size", "pageSize")}=1`,
            `${spell("order_by", "orderBy")}=name desc`,
            `${spell("uidp.children_of", "uidp.childrenOf")}=${ORG}`,
            `${spell("skip", "skip")}=0`,
            ...(token ? [`${spell("page_token", "pageToken")}=${encodeURIComponent(token)}`] : []),
          ].join("&");
          const res = await api.get(`/iam/v2beta1/groups?${q}`);
          assert.equal(res.status, 200, JSON.stringify(res.body));
          names.push(...res.body.groups.map((g: any) => g.name));
          token = res.body.nextPageToken ?? "";
        } while (token);
        return names;
      };
      const snake = await walk((s) => s);
      const camel = await walk((_s, c) => c);
      assert.deepEqual(camel, snake);
      assert.ok(snake.length >= 3 && snake[0]! >= snake.at(-1)!, snake.join());
    });

    test("an unimplemented RPC answers 501 UNIMPLEMENTED; a path no route serves 404 NOT_FOUND naming it", async () => {
      const unimplemented = await api.get("/iam/v2beta1/groups:lookupGroup");
      assert.equal(unimplemented.status, 501);
      assert.equal(unimplemented.body.code, 12);
      const v1 = await api.get("/iam/v1/groups:lookupGroup");
      assert.equal(v1.status, 501);
      const missing = await api.get("/iam/v1/nothing-here");
      assert.equal(missing.status, 404);
      assert.equal(missing.body.code, 5);
      assert.equal(missing.body.message, "Not found: no route for GET /iam/v1/nothing-here");
    });
  });
}
