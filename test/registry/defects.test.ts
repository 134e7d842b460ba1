// Defects a probe found (issue 26): bad query text on /v2/, v1 overlays that could not be
// encoded, an upload whose bytes were moved before its commit, a body shorter than its
// Content-Length, invalid UTF-8 in JSON, a Content-Range that disagrees with the body.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { OciClient, digestOf } from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";

for (const backend of backends()) {
  describe(`registry defects [${backend}]`, () => {
    let server: TestServer;
    let oci: OciClient;
    before(async () => {
      server = await startTestServer(backend);
      const api = restClient(server.url, server.operatorToken);
      assert.equal((await api.post("/iam/v2beta1/groups", { name: "acme" })).status, 200);
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, {
        audience: [server.tokens.urls.registryAudience],
      });
      oci = new OciClient(server.url, { bearer: registryToken });
      assert.equal((await oci.postBlob("acme/app", "layer")).status, 201);
    });
    after(() => server?.close());

    it("F1: NUL or bad text in any /v2/ query parameter is a 400 in OCI's form, never a 500", async () => {
      const digest = digestOf("layer");
      const cases: [string, string][] = [
        ["GET", "/v2/acme/app/tags/list?last=%00"],
        ["GET", "/v2/acme/app/tags/list?n=%00"],
        ["GET", `/v2/acme/app/referrers/${digest}?artifactType=%00`],
        ["GET", "/v2/acme/app/_chainguard/history/latest?start=%00"],
        ["GET", "/v2/acme/app/_chainguard/history/latest?end=%00"],
        ["GET", "/v2/_catalog?last=%00"],
        ["POST", `/v2/acme/app/blobs/uploads/?mount=${digest}&from=%00`],
        ["POST", "/v2/acme/app/blobs/uploads/?digest=%00"],
      ];
      for (const [method, path] of cases) {
        const res = await oci.request(method, path);
        assert.equal(res.status, 400, `${method} ${path}: ${res.status} ${res.body.toString()}`);
        assert.deepEqual(res.errorCodes(), ["UNSUPPORTED"], path);
        assert.match(res.json().errors[0].message, /^Invalid argument: \w+: must not contain NUL/, path);
      }
    });
  });
}
