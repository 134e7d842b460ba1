// The OpenAPI 3.1 document: valid by a real validator (@readme/openapi-parser), committed and
// served alike, every served RPC with an HTTP rule in it exactly once with its verb and path, and
// spot checks of parameters, bodies and the error schema; /docs renders it from same-origin assets.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { getOption, hasOption } from "@bufbuild/protobuf";
import { validate } from "@readme/openapi-parser";
import { http } from "../../src/gen/google/api/annotations_pb.js";
import { OPENAPI_FILE } from "../../src/server/docs-routes.js";
import { MODULES } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../support/server.js";

const committed = JSON.parse(readFileSync(OPENAPI_FILE, "utf8"));

describe("OpenAPI", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer("pglite");
  });
  after(() => server?.close());

  it("the committed document is valid OpenAPI 3.1, and the validator does reject a broken one", async () => {
    assert.equal(committed.openapi, "3.1.0");
    const result = await validate(structuredClone(committed));
    assert.ok(result.valid, JSON.stringify(result).slice(0, 2000));
    const broken = structuredClone(committed);
    broken.paths["/iam/v2beta1/groups/{uid}"].get.responses = "nope";
    assert.equal((await validate(broken)).valid, false);
  });

  it("is served at /openapi.json without credentials, as committed", async () => {
    const res = await fetch(`${server.url}/openapi.json`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
    assert.deepEqual(await res.json(), committed);
  });

  it("has every served RPC with an HTTP rule, once, with its verb and path", () => {
    const operations = new Map<string, string>();
    for (const [path, item] of Object.entries<Record<string, { operationId: string }>>(committed.paths))
      for (const [verb, op] of Object.entries(item)) {
        assert.ok(!operations.has(op.operationId), `${op.operationId} twice`);
        operations.set(op.operationId, `${verb.toUpperCase()} ${path}`);
      }
    let count = 0;
    for (const service of MODULES.flatMap((m) => m.services))
      for (const method of service.methods) {
        if (!hasOption(method, http)) continue;
        const rule = getOption(method, http).pattern;
        if (!rule.case || rule.case === "custom") continue;
        count++;
        const path = String(rule.value).replace(/\{([^}=]+)(?:=[^}]*)?\}/g, "{$1}");
        assert.equal(operations.get(`${service.typeName}.${method.name}`), `${rule.case.toUpperCase()} ${path}`);
      }
    assert.equal(operations.size, count);
    assert.ok(count > 150, `${count} operations`);
  });

  it("describes parameters, bodies and errors as the server takes and answers them", () => {
    const get = committed.paths["/iam/v2beta1/groups/{uid}"].get;
    assert.deepEqual(
      get.parameters.map((p: { name: string; in: string }) => [p.name, p.in]),
      [["uid", "path"]],
    );
    assert.equal(
      get.responses["200"].content["application/json"].schema.$ref,
      "#/components/schemas/chainguard.platform.iam.v2beta1.Group",
    );
    assert.equal(
      get.responses.default.content["application/json"].schema.$ref,
      "#/components/schemas/google.rpc.Status",
    );
    const list = committed.paths["/iam/v2beta1/groups"].get;
    const names = list.parameters.map((p: { name: string }) => p.name);
    for (const name of ["pageSize", "pageToken", "orderBy", "skip", "uidp.childrenOf", "uidp.ids"])
      assert.ok(names.includes(name), name);
    const create = committed.paths["/iam/v2beta1/groups/{parent}"].post;
    assert.equal(
      create.requestBody.content["application/json"].schema.$ref,
      "#/components/schemas/chainguard.platform.iam.v2beta1.Group",
    );
    const group = committed.components.schemas["chainguard.platform.iam.v2beta1.Group"];
    assert.deepEqual(group.properties.createTime, { type: "string", format: "date-time", description: "RFC 3339" });
    assert.deepEqual(committed.components.schemas["chainguard.platform.iam.v2beta1.OrgKind"].enum.slice(0, 1), [
      "ORG_KIND_UNSPECIFIED",
    ]);
    assert.ok(committed.paths["/iam/v1/groups"].get, "v1 paths are described");
    assert.ok(committed.paths["/iam/v2/groups/{uid}"].get, "v2 paths are described");
    assert.deepEqual(committed.components.securitySchemes.bearer, {
      type: "http",
      scheme: "bearer",
      bearerFormat: "JWT",
    });
  });

  it("/docs renders it with Swagger UI from this server's own assets", async () => {
    const page = await fetch(`${server.url}/docs`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type") ?? "", /^text\/html/);
    const html = await page.text();
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.ok(refs.length >= 3, html);
    for (const ref of refs) {
      assert.ok(ref.startsWith("/"), `${ref} is not same-origin`);
      const asset = await fetch(`${server.url}${ref}`);
      assert.equal(asset.status, 200, ref);
      assert.match(
        asset.headers.get("content-type") ?? "",
        ref.endsWith(".css") ? /^text\/css/ : /^text\/javascript/,
        ref,
      );
      assert.ok((await asset.text()).length > 0, ref);
    }
    assert.equal((await fetch(`${server.url}/docs/assets/nothing.js`)).status, 404);
  });
});
