// Defects a probe found (issue 26): bad query text on /v2/, v1 overlays that could not be
// encoded, an upload whose bytes were moved before its commit, a body shorter than its
// Content-Length, invalid UTF-8 in JSON, a Content-Range that disagrees with the body.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { registryModule } from "../../src/registry/module.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { OciClient, digestOf, withQuery } from "../support/oci.js";
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

    it("F3: an upload whose bytes were moved into place before a crash kept the commit finishes, the digest checked again", async () => {
      const store = server.exportsOf(registryModule).store;
      for (const algorithm of ["sha256", "sha512"] as const) {
        // sha512: the running sha256 hash of the chunks is of no use, as after a restart
        const bytes = randomBytes(1000);
        const digest = digestOf(bytes, algorithm);
        const started = await oci.startUpload("acme/app");
        const location = started.headers.get("location")!;
        const id = location.split("/").at(-1)!;
        const patched = await oci.request("PATCH", location, { body: bytes, headers: { "content-range": "0-999" } });
        assert.equal(patched.status, 202, patched.body.toString());
        // What the push does before its transaction commits: the staged bytes become the blob.
        await store.commitUpload(id, digest, bytes.length);

        const status = await oci.get(location);
        assert.equal(status.status, 204);
        assert.equal(status.headers.get("range"), "0-999");
        const finished = await oci.request("PUT", withQuery(location, { digest }), {
          body: "",
          headers: { "content-type": "application/octet-stream", "content-length": "0" },
        });
        assert.equal(finished.status, 201, `${algorithm}: ${finished.body.toString()}`);
        const pulled = await oci.get(`/v2/acme/app/blobs/${digest}`);
        assert.equal(pulled.status, 200);
        assert.deepEqual(pulled.body, bytes);
      }

      // A blob another push recorded is that push's: naming it (with its size) after the staged
      // bytes are gone proves nothing, and links nothing.
      const secret = randomBytes(100);
      const secretDigest = digestOf(secret, "sha512");
      assert.equal((await oci.postBlob("acme/app", secret, secretDigest)).status, 201);
      const started = await oci.startUpload("acme/other");
      const location = started.headers.get("location")!;
      assert.equal((await oci.request("PATCH", location, { body: randomBytes(100) })).status, 202);
      await store.deleteUpload(location.split("/").at(-1)!);
      const refused = await oci.request("PUT", withQuery(location, { digest: secretDigest }));
      assert.equal(refused.status, 400, refused.body.toString());
      assert.deepEqual(refused.errorCodes(), ["BLOB_UPLOAD_INVALID"]);
      assert.equal((await oci.head(`/v2/acme/other/blobs/${secretDigest}`)).status, 404);
    });
  });
}
