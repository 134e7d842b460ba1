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

    it("F7: a PATCH whose Content-Range disagrees with its body is 416, and nothing of it counts", async () => {
      const started = await oci.startUpload("acme/app");
      const location = started.headers.get("location")!;
      const long = await oci.request("PATCH", location, {
        body: randomBytes(1000),
        headers: { "content-range": "0-5" },
      });
      assert.equal(long.status, 416, long.body.toString());
      assert.deepEqual(long.errorCodes(), ["BLOB_UPLOAD_INVALID"]);
      // Chunked, so no Content-Length tells up front: checked once the bytes arrived.
      const streamed = await oci.request("PATCH", location, {
        body: randomBytes(1000),
        stream: true,
        headers: { "content-range": "0-5" },
      });
      assert.equal(streamed.status, 416, streamed.body.toString());
      const short = await oci.request("PATCH", location, { body: randomBytes(3), headers: { "content-range": "0-5" } });
      assert.equal(short.status, 416, short.body.toString());
      const status = await oci.get(location);
      assert.equal(status.status, 204);
      assert.equal(status.headers.get("range"), "0-0");

      const chunk = randomBytes(6);
      const right = await oci.request("PATCH", location, {
        body: chunk,
        stream: true,
        headers: { "content-range": "0-5" },
      });
      assert.equal(right.status, 202, right.body.toString());
      assert.equal(right.headers.get("range"), "0-5");
      const done = await oci.request("PUT", withQuery(location, { digest: digestOf(chunk) }));
      assert.equal(done.status, 201, done.body.toString());
    });

    it("F7: JSON bodies that are not valid UTF-8 are INVALID_ARGUMENT on REST, Connect and the JSON plain routes, and store nothing", async () => {
      const bad = Buffer.concat([Buffer.from('{"name":"bad'), Buffer.from([0xff, 0xfe]), Buffer.from('-utf8"}')]);
      const send = (path: string, headers: Record<string, string> = {}) =>
        fetch(server.url + path, {
          method: "POST",
          headers: { authorization: `Bearer ${server.operatorToken}`, "content-type": "application/json", ...headers },
          body: bad,
        });
      const rest = await send("/iam/v2beta1/groups");
      assert.equal(rest.status, 400);
      const restBody = await rest.json();
      assert.equal(restBody.code, 3);
      assert.match(restBody.message, /body: is not valid UTF-8/);
      const connect = await send("/chainguard.platform.iam.v2beta1.GroupsService/CreateGroup", {
        "connect-protocol-version": "1",
      });
      assert.equal(connect.status, 400);
      assert.equal((await connect.json()).code, "invalid_argument");
      const groups = await restClient(server.url, server.operatorToken).get("/iam/v2beta1/groups");
      assert.ok(!JSON.stringify(groups.body).includes("bad"), JSON.stringify(groups.body));

      const imported = await fetch(server.url + "/bulwark/vulnerabilities/v1/advisories:import", {
        method: "POST",
        headers: { authorization: `Bearer ${server.operatorToken}`, "content-type": "application/json" },
        body: Buffer.concat([
          Buffer.from('{"parent":"x","documents":[{"name":"a.yaml","content":"'),
          Buffer.from([0xc3, 0x28]),
          Buffer.from('"}]}'),
        ]),
      });
      assert.equal(imported.status, 400);
      assert.match((await imported.json()).message, /not valid UTF-8/);
      const osv = await send("/v1/query");
      assert.equal(osv.status, 400);
      assert.match(await osv.text(), /not valid UTF-8/);
    });
  });
}
