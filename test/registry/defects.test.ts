// Defects a probe found (issue 26): bad query text on /v2/, v1 overlays that could not be
// encoded, an upload whose bytes were moved before its commit, a body shorter than its
// Content-Length, invalid UTF-8 in JSON, a Content-Range that disagrees with the body.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readlinkSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import http2 from "node:http2";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { registryModule } from "../../src/registry/module.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { backends } from "../support/db-templates.js";
import { ok } from "../support/assertions.js";
import { VIEWER_ROLE_UID, createIdentity, createRoleBinding, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { OciClient, digestOf, withQuery } from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { until, withinHang } from "../support/wait.js";
import { OidcIssuer } from "../support/oidc-issuer.js";

for (const backend of backends()) {
  describe(`registry defects [${backend}]`, () => {
    let server: TestServer;
    let oci: OciClient;
    let acme: Json;
    before(async () => {
      server = await startTestServer(backend);
      const api = restClient(server.url, server.operatorToken);
      acme = ok(await api.post("/iam/v2beta1/groups", { name: "acme" }));
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
      const restBody = (await rest.json()) as { code: number; message: string };
      assert.equal(restBody.code, 3);
      assert.match(restBody.message, /body: is not valid UTF-8/);
      const connect = await send("/chainguard.platform.iam.v2beta1.GroupsService/CreateGroup", {
        "connect-protocol-version": "1",
      });
      assert.equal(connect.status, 400);
      assert.equal(((await connect.json()) as { code: string }).code, "invalid_argument");
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
      assert.match(((await imported.json()) as { message: string }).message, /not valid UTF-8/);
      const osv = await send("/v1/query");
      assert.equal(osv.status, 400);
      assert.match(await osv.text(), /not valid UTF-8/);
    });

    it("not found never names a uid: an invisible org or group answers as a missing one, byte for byte", async () => {
      const api = restClient(server.url, server.operatorToken);
      const viewer = await createIdentity(api, acme.uid, "not-found-viewer", "not-found-viewer");
      await createRoleBinding(api, acme.uid, viewer.uid, VIEWER_ROLE_UID);
      const registryToken = await server.tokenFor(viewer.uid, { audience: [server.tokens.urls.registryAudience] });
      const asViewer = new OciClient(server.url, { bearer: registryToken });
      const push = () => asViewer.postBlob("initech/app", "bytes");

      const missing = await push();
      assert.equal(missing.status, 404, missing.body.toString());
      const initech = ok(await api.post("/iam/v2beta1/groups", { name: "initech" }));
      const invisible = await push();
      assert.equal(invisible.status, 404);
      assert.equal(invisible.body.toString(), missing.body.toString());
      assert.ok(!invisible.body.toString().includes(initech.uid), invisible.body.toString());

      // The API: a group the caller cannot see, then the same uid once it is gone.
      const asApi = restClient(server.url, await server.tokenFor(viewer.uid));
      const hidden = await asApi.get(`/iam/v2beta1/groups/${initech.uid}`);
      assert.equal(hidden.status, 404, JSON.stringify(hidden.body));
      ok(await api.delete(`/iam/v2beta1/groups/${initech.uid}`));
      const gone = await asApi.get(`/iam/v2beta1/groups/${initech.uid}`);
      assert.equal(JSON.stringify(gone.body), JSON.stringify(hidden.body));
    });

    it("F4: HEAD answers what GET does when the store lacks a recorded blob's bytes (404 BLOB_UNKNOWN both)", async () => {
      const bytes = randomBytes(64);
      const digest = digestOf(bytes);
      assert.equal((await oci.postBlob("acme/app", bytes)).status, 201);
      assert.equal((await oci.head(`/v2/acme/app/blobs/${digest}`)).status, 200);
      await server.exportsOf(registryModule).store.delete(digest);
      const get = await oci.get(`/v2/acme/app/blobs/${digest}`);
      assert.equal(get.status, 404);
      assert.deepEqual(get.errorCodes(), ["BLOB_UNKNOWN"]);
      assert.equal((await oci.head(`/v2/acme/app/blobs/${digest}`)).status, 404);
    });

    if (backend === "postgres")
      it("F4: a replica whose blob directory is not the shared one answers 404 for HEAD and GET, and is refused at its next start", async () => {
        // Replicas of one platform share its public URLs (the tokens' issuer and audiences).
        const publicUrls = { issuerUrl: "https://issuer.replicas.test", apiUrl: "https://api.replicas.test" };
        const shared = await mkdtemp(join(tmpdir(), "bulwark-shared-blobs-"));
        const own = await mkdtemp(join(tmpdir(), "bulwark-own-blobs-"));
        const primary = await startTestServer(backend, { publicUrls, registry: { blobDirectory: shared } });
        const replicas: TestServer[] = [];
        try {
          const api = restClient(primary.url, primary.operatorToken);
          ok(await api.post("/iam/v2beta1/groups", { name: "replicated" }));
          // A database with no blobs yet cannot tell a wrong directory: this one starts.
          const stray = await startTestServer(backend, {
            publicUrls,
            replicaOf: primary,
            registry: { blobDirectory: own },
          });
          replicas.push(stray);
          const token = await primary.tokenFor(OPERATOR_SUBJECT, { audience: [primary.tokens.urls.registryAudience] });
          const bytes = randomBytes(64);
          const digest = digestOf(bytes);
          assert.equal(
            (await new OciClient(primary.url, { bearer: token }).postBlob("replicated/app", bytes)).status,
            201,
          );

          // Each replica's registry audience is its own host: a token for it.
          const registryTokenAt = (r: TestServer) =>
            r.tokenFor(OPERATOR_SUBJECT, { audience: [r.tokens.urls.registryAudience] });
          const atStray = new OciClient(stray.url, { bearer: await registryTokenAt(stray) });
          const head = await atStray.head(`/v2/replicated/app/blobs/${digest}`);
          const get = await atStray.get(`/v2/replicated/app/blobs/${digest}`);
          assert.deepEqual([head.status, get.status], [404, 404]);

          const sharing = await startTestServer(backend, {
            publicUrls,
            replicaOf: primary,
            registry: { blobDirectory: shared },
          });
          replicas.push(sharing);
          const atSharing = new OciClient(sharing.url, { bearer: await registryTokenAt(sharing) });
          assert.equal((await atSharing.head(`/v2/replicated/app/blobs/${digest}`)).status, 200);
          assert.deepEqual((await atSharing.get(`/v2/replicated/app/blobs/${digest}`)).body, bytes);

          await assert.rejects(
            startTestServer(backend, { publicUrls, replicaOf: primary, registry: { blobDirectory: own } }),
            /holds none of the 1 blobs this database recorded last: every replica on one database must use the same blob store/,
          );
        } finally {
          for (const r of replicas) await r.close();
          await primary.close();
          await rm(shared, { recursive: true, force: true });
          await rm(own, { recursive: true, force: true });
        }
      });

    describe("F6: a body shorter than its Content-Length", () => {
      let slow: TestServer;
      before(async () => {
        slow = await startTestServer(backend, { bodyTimeoutMs: 300 });
        assert.equal(
          (await restClient(slow.url, slow.operatorToken).post("/iam/v2beta1/groups", { name: "acme" })).status,
          200,
        );
      });
      after(() => slow?.close());

      /** An HTTP/2 request's answer; `partial` is written and the stream left open (a stalled body). */
      const h2Answer = (
        session: http2.ClientHttp2Session,
        headers: http2.OutgoingHttpHeaders,
        partial: string | undefined,
        what: string,
      ) =>
        withinHang(
          new Promise<{ status: number; body: string }>((resolve, reject) => {
            const req = session.request(headers, { endStream: partial === undefined });
            let status = 0;
            let body = "";
            req.on("response", (h) => (status = Number(h[":status"])));
            req.on("data", (chunk: Buffer) => (body += chunk.toString()));
            req.on("end", () => resolve({ status, body }));
            req.on("error", reject);
            if (partial !== undefined) req.write(partial);
          }),
          what,
        );

      /** Sends a head promising 100 bytes and 10 of them, then waits for whatever answer comes. */
      const stalled = (path: string, headers: Record<string, string>, method = "POST") =>
        withinHang(
          new Promise<string>((resolve, reject) => {
            const port = Number(new URL(slow.url).port);
            const socket = connect(port, "127.0.0.1", () => {
              const head = Object.entries({ host: "localhost", "content-length": "100", ...headers })
                .map(([k, v]) => `${k}: ${v}\r\n`)
                .join("");
              socket.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n0123456789`);
            });
            let answer = "";
            // Done once the head and as many body bytes as it announces are in.
            const whole = () => {
              const end = answer.indexOf("\r\n\r\n");
              const length = /\r\ncontent-length: *(\d+)/i.exec(answer)?.[1];
              return end >= 0 && length !== undefined && answer.length >= end + 4 + Number(length);
            };
            socket.on("data", (chunk) => {
              answer += chunk.toString("latin1");
              if (whole()) {
                socket.destroy();
                resolve(answer);
              }
            });
            socket.on("close", () => resolve(answer));
            socket.on("error", reject);
          }),
          "an answer to a stalled body",
        );

      it("is answered 400 once the body stops arriving, on REST, Connect and an upload", async () => {
        const auth = { authorization: `Bearer ${slow.operatorToken}` };
        const rest = await stalled("/iam/v2beta1/groups", { ...auth, "content-type": "application/json" });
        assert.match(rest, /^HTTP\/1\.1 400 /);
        assert.match(rest, /no byte of the request body arrived/);
        const rpc = await stalled("/chainguard.platform.iam.v2beta1.GroupsService/CreateGroup", {
          ...auth,
          "content-type": "application/json",
          "connect-protocol-version": "1",
        });
        assert.match(rpc, /^HTTP\/1\.1 400 /);
        assert.match(rpc, /"code":"invalid_argument"/);
        const registry = await slow.tokenFor(OPERATOR_SUBJECT, { audience: [slow.tokens.urls.registryAudience] });
        const upload = await stalled("/v2/acme/app/blobs/uploads/?digest=sha256:" + "0".repeat(64), {
          authorization: `Bearer ${registry}`,
          "content-type": "application/octet-stream",
        });
        assert.match(upload, /^HTTP\/1\.1 400 /);
        assert.match(upload, /no byte of the request body arrived/);
      });

      it("releases the handler that waited on the body: an upload's staged file is closed", async () => {
        // Files this process (the server runs in it) holds open under an upload's staging.
        const openUploads = () =>
          readdirSync("/proc/self/fd").filter((fd) => {
            try {
              return readlinkSync(`/proc/self/fd/${fd}`).includes("/uploads/");
            } catch {
              return false; // closed while listed
            }
          });
        const registry = await slow.tokenFor(OPERATOR_SUBJECT, { audience: [slow.tokens.urls.registryAudience] });
        const oci = new OciClient(slow.url, { bearer: registry });
        const started = await oci.request("POST", "/v2/acme/staged/blobs/uploads/");
        assert.equal(started.status, 202, started.body.toString());
        const location = new URL(started.headers.get("location")!, slow.url).pathname;
        const answer = await stalled(
          location,
          {
            authorization: `Bearer ${registry}`,
            "content-type": "application/octet-stream",
          },
          "PATCH",
        );
        assert.match(answer, /^HTTP\/1\.1 400 /);
        await until(() => openUploads().length === 0, "the stalled chunk's staged file closed");
      });

      it("never cuts off an HTTP/2 request without a body, however long its handler takes", async () => {
        // A token exchange whose issuer holds its discovery until the idle limit has long passed.
        let answer = () => {};
        const issuer = await OidcIssuer.start({ behaviour: { answerAfter: new Promise<void>((r) => (answer = r)) } });
        const session = http2.connect(slow.url);
        try {
          const api = restClient(slow.url, slow.operatorToken);
          const org = (await api.get("/iam/v2beta1/groups?name=acme")).body.groups[0].uid as string;
          const identity = await api.post(`/iam/v2beta1/identities/${org}`, {
            name: "held",
            claimMatch: { issuer: issuer.url, subject: "held-subject" },
          });
          assert.equal(identity.status, 200, JSON.stringify(identity.body));
          const token = await issuer.sign({ sub: "held-subject", aud: slow.tokens.urls.apiAudience });
          const exchanged = h2Answer(
            session,
            {
              ":method": "GET",
              ":path": `/sts/exchange?identity=${identity.body.uid}&aud=${encodeURIComponent(slow.tokens.urls.apiAudience)}`,
              authorization: `Bearer ${token}`,
            },
            undefined,
            "the held exchange's answer",
          );
          await until(() => issuer.requests.length > 0, "the exchange asking the issuer");
          // Ten idle limits' time with the request unanswered (ordering only: nothing is measured).
          await new Promise((r) => setTimeout(r, 3_000));
          answer();
          const result = await exchanged;
          assert.equal(result.status, 200, result.body);
          assert.ok(JSON.parse(result.body).token, result.body);
        } finally {
          answer();
          session.destroy();
          await issuer.close();
        }
      });

      it("is answered 400 over HTTP/2 too", async () => {
        const session = http2.connect(slow.url);
        try {
          const answer = await h2Answer(
            session,
            {
              ":method": "POST",
              ":path": "/iam/v2beta1/groups",
              authorization: `Bearer ${slow.operatorToken}`,
              "content-type": "application/json",
              "content-length": "100",
            },
            '{"name":"',
            "an HTTP/2 answer to a stalled body",
          );
          assert.equal(answer.status, 400, answer.body);
          assert.match(answer.body, /no byte of the request body arrived/);
        } finally {
          session.destroy();
        }
      });
    });
  });
}
