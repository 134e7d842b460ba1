// The OCI distribution v1.1 registry at /v2/, black box, on every backend: the conformance
// workflows (pull, push, content discovery, content management), data cases, the distribution
// token flow, repository names over nested groups, tag history, and the registry API's view.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { blobBufferPool } from "../../src/registry/storage/blob-file-stream.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import {
  MEDIA_TYPES as MT,
  OciClient,
  descriptorOf,
  digestOf,
  nextLink,
  parseChallenge,
  withQuery,
  type Descriptor,
  type OciResponse,
} from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";

const API_VERSION = "registry/2.0";
const FOUR_MIB = 4 * 1024 * 1024;
const EMPTY_SHA256 = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const SBOM_TYPE = "application/vnd.example.sbom.v1+json";
const SIG_CONFIG_TYPE = "application/vnd.example.signature.config.v1+json";

/** Asserts an error answer: status, the API version header, and (when there is a body) the code. */
function assertError(res: OciResponse, status: number, code: string | string[]) {
  const codes = Array.isArray(code) ? code : [code];
  assert.equal(res.status, status, `${res.method} ${res.url}: ${res.body.toString("utf8").slice(0, 300)}`);
  if (res.method === "HEAD") return;
  const body = res.json<{ errors?: { code: string; message: unknown }[] }>();
  assert.ok(Array.isArray(body?.errors) && body.errors.length > 0, `error body: ${res.body.toString("utf8")}`);
  assert.ok(
    res.errorCodes().some((c) => codes.includes(c)),
    `expected ${codes.join("|")}, got ${res.errorCodes().join(",")}`,
  );
  for (const e of body.errors) assert.equal(typeof e.message, "string");
}

function assertStatus(res: OciResponse, status: number) {
  assert.equal(res.status, status, `${res.method} ${res.url}: ${res.body.toString("utf8").slice(0, 300)}`);
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/** An OCI (or Docker schema 2) image manifest's bytes. */
function imageManifest(
  config: Descriptor,
  layers: Descriptor[],
  extra: Record<string, unknown> = {},
  mediaType: string = MT.ociManifest,
) {
  return json({ schemaVersion: 2, mediaType, config, layers, ...extra });
}

function indexManifest(manifests: Descriptor[], extra: Record<string, unknown> = {}, mediaType: string = MT.ociIndex) {
  return json({ schemaVersion: 2, mediaType, manifests, ...extra });
}

for (const backend of backends()) {
  describe(`OCI distribution conformance [${backend}]`, () => {
    let server: TestServer;
    let oci: OciClient;
    let registryToken: string;
    let org: { uid: string; name: string };
    const missingApiVersion: string[] = [];
    let counter = 0;
    /** a fresh repository name under the org */
    const repo = (label: string) => `acme/${label}-${++counter}`;

    before(async () => {
      server = await startTestServer(backend);
      const api = restClient(server.url, server.operatorToken);
      const created = await api.post("/iam/v2beta1/groups", { name: "acme" });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      org = created.body;
      registryToken = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      oci = new OciClient(server.url, {
        credential: { username: "_token", password: registryToken },
        onResponse: (res, redirected) => {
          if (!redirected && new URL(res.url).pathname.startsWith("/v2/")) {
            if (res.headers.get("docker-distribution-api-version") !== API_VERSION) {
              missingApiVersion.push(`${res.method} ${res.url} -> ${res.status}`);
            }
          }
        },
      });
    });
    after(() => server?.close());

    /** Pushes a blob (POST with digest) and asserts 201. */
    const blob = async (name: string, bytes: Uint8Array | string, algorithm: "sha256" | "sha512" = "sha256") => {
      const digest = digestOf(bytes, algorithm);
      const res = await oci.postBlob(name, bytes, digest);
      assertStatus(res, 201);
      return digest;
    };

    /** Pushes a config and a layer plus an image manifest; answers the pieces. */
    const pushImage = async (name: string, reference?: string, extra: Record<string, unknown> = {}) => {
      const configBytes = json({ architecture: "amd64", os: "linux", rootfs: { type: "layers", diff_ids: [] }, n: 1 });
      const layerBytes = randomBytes(64);
      await blob(name, configBytes);
      await blob(name, layerBytes);
      const config = descriptorOf(MT.ociConfig, configBytes);
      const layer = descriptorOf(MT.ociLayer, layerBytes);
      const bytes = imageManifest(config, [layer], extra);
      const digest = digestOf(bytes);
      const res = await oci.putManifest(name, reference ?? digest, bytes, MT.ociManifest);
      assertStatus(res, 201);
      return { bytes, digest, config, layer, configBytes, layerBytes, descriptor: descriptorOf(MT.ociManifest, bytes) };
    };

    describe("auth", () => {
      it("GET /v2/ without credentials: 401 with a Bearer challenge naming realm and service", async () => {
        const res = await fetch(`${server.url}/v2/`);
        assert.equal(res.status, 401);
        assert.equal(res.headers.get("docker-distribution-api-version"), API_VERSION);
        const ch = parseChallenge(res.headers.get("www-authenticate"));
        assert.equal(ch?.scheme, "bearer");
        assert.equal(ch.params.realm, `${server.url}/token`);
        assert.equal(ch.params.service, new URL(server.url).host);
      });

      it("repository endpoints without credentials name the pull or pull,push scope", async () => {
        const name = repo("auth-scope");
        const pull = await fetch(`${server.url}/v2/${name}/manifests/latest`);
        assert.equal(pull.status, 401);
        assert.equal(parseChallenge(pull.headers.get("www-authenticate"))?.params.scope, `repository:${name}:pull`);
        const push = await fetch(`${server.url}/v2/${name}/blobs/uploads/`, { method: "POST" });
        assert.equal(push.status, 401);
        const ch = parseChallenge(push.headers.get("www-authenticate"));
        assert.equal(ch?.params.realm, `${server.url}/token`);
        assert.equal(ch?.params.scope, `repository:${name}:pull,push`);
      });

      it("the token endpoint trades Basic _token:<registry token> for a Bearer token /v2/ accepts", async () => {
        const name = repo("auth-token");
        const service = new URL(server.url).host;
        const url = `${server.url}/token?service=${encodeURIComponent(service)}&scope=${encodeURIComponent(`repository:${name}:pull,push`)}`;
        const res = await fetch(url, {
          headers: { authorization: `Basic ${Buffer.from(`_token:${registryToken}`).toString("base64")}` },
        });
        assert.equal(res.status, 200);
        const body = (await res.json()) as Record<string, unknown>;
        assert.equal(typeof body.token, "string");
        assert.equal(typeof body.access_token, "string");
        assert.equal(typeof body.expires_in, "number");
        assert.ok((body.expires_in as number) > 0);
        assert.equal(typeof body.issued_at, "string");
        assert.ok(!Number.isNaN(Date.parse(body.issued_at as string)), String(body.issued_at));
        const base = await fetch(`${server.url}/v2/`, { headers: { authorization: `Bearer ${body.token}` } });
        assert.equal(base.status, 200);
        assert.equal(base.headers.get("docker-distribution-api-version"), API_VERSION);
        const upload = await fetch(`${server.url}/v2/${name}/blobs/uploads/`, {
          method: "POST",
          headers: { authorization: `Bearer ${body.token}` },
        });
        assert.equal(upload.status, 202);
      });

      it("a token for repository A cannot push to repository B", async () => {
        const a = repo("auth-a");
        const b = repo("auth-b");
        const got = await oci.fetchToken(
          {
            scheme: "bearer",
            params: { realm: `${server.url}/token`, service: new URL(server.url).host },
          },
          [`repository:${a}:pull,push`],
        );
        assert.equal(got.status, 200, JSON.stringify(got.body));
        const scoped = new OciClient(server.url, { bearer: got.token! });
        assertStatus(await scoped.startUpload(a), 202);
        const res = await scoped.startUpload(b);
        assert.ok([401, 403].includes(res.status), `status ${res.status}`);
        assertError(res, res.status, ["UNAUTHORIZED", "DENIED"]);
        assertError(await scoped.postBlob(b, randomBytes(8)), res.status, ["UNAUTHORIZED", "DENIED"]);
      });

      it("an API-audience token presented as Bearer is 403 DENIED", async () => {
        const apiToken = await server.tokenFor(OPERATOR_SUBJECT);
        const wrong = new OciClient(server.url, { bearer: apiToken });
        assertError(await wrong.get("/v2/"), 403, "DENIED");
        assertError(await wrong.startUpload(repo("auth-api")), 403, "DENIED");
      });
    });

    describe("pull", () => {
      const name = `acme/pull`;
      let image: Awaited<ReturnType<typeof pushImage>>;
      before(async () => {
        image = await pushImage(name, "v1");
      });

      it("GET manifest by tag: 200, stored media type, digest, length, identical bytes", async () => {
        const res = await oci.getManifest(name, "v1");
        assertStatus(res, 200);
        assert.equal(res.headers.get("content-type"), MT.ociManifest);
        assert.equal(res.headers.get("docker-content-digest"), image.digest);
        assert.equal(res.headers.get("content-length"), String(image.bytes.length));
        assert.ok(res.body.equals(image.bytes));
      });

      it("GET manifest by digest", async () => {
        const res = await oci.getManifest(name, image.digest);
        assertStatus(res, 200);
        assert.equal(res.headers.get("content-type"), MT.ociManifest);
        assert.equal(res.headers.get("docker-content-digest"), image.digest);
        assert.ok(res.body.equals(image.bytes));
      });

      it("HEAD manifest by tag and by digest: the GET's headers, no body", async () => {
        for (const ref of ["v1", image.digest]) {
          const res = await oci.getManifest(name, ref, "HEAD");
          assertStatus(res, 200);
          assert.equal(res.headers.get("content-type"), MT.ociManifest);
          assert.equal(res.headers.get("docker-content-digest"), image.digest);
          assert.equal(res.headers.get("content-length"), String(image.bytes.length));
          assert.equal(res.body.length, 0);
        }
      });

      it("GET blob: 200, bytes, Content-Length and Docker-Content-Digest", async () => {
        const sends = blobBufferPool().sends;
        const res = await oci.get(`/v2/${name}/blobs/${image.layer.digest}`);
        assertStatus(res, 200);
        // the bytes came through the reused read buffers (the server runs in this process)
        assert.equal(blobBufferPool().sends, sends + 1);
        assert.ok(res.body.equals(image.layerBytes));
        assert.equal(res.headers.get("content-length"), String(image.layerBytes.length));
        assert.equal(res.headers.get("docker-content-digest"), image.layer.digest);
      });

      it("HEAD blob: 200 with Content-Length and Docker-Content-Digest, no body", async () => {
        const res = await oci.head(`/v2/${name}/blobs/${image.config.digest}`);
        assertStatus(res, 200);
        assert.equal(res.headers.get("content-length"), String(image.configBytes.length));
        assert.equal(res.headers.get("docker-content-digest"), image.config.digest);
        assert.equal(res.body.length, 0);
      });

      it("GET blob with Range: 206 and Content-Range", async () => {
        const res = await oci.get(`/v2/${name}/blobs/${image.layer.digest}`, { range: "bytes=10-19" });
        assertStatus(res, 206);
        assert.equal(res.headers.get("content-range"), `bytes 10-19/${image.layerBytes.length}`);
        assert.ok(res.body.equals(image.layerBytes.subarray(10, 20)));
        assert.equal(res.headers.get("content-length"), "10");
      });

      it("GET blob with an unsatisfiable Range: 416", async () => {
        const res = await oci.get(`/v2/${name}/blobs/${image.layer.digest}`, { range: "bytes=1000-2000" });
        assertStatus(res, 416);
      });

      it("unknown blob: GET and HEAD 404 BLOB_UNKNOWN", async () => {
        const unknown = digestOf(randomBytes(16));
        assertError(await oci.get(`/v2/${name}/blobs/${unknown}`), 404, "BLOB_UNKNOWN");
        assertError(await oci.head(`/v2/${name}/blobs/${unknown}`), 404, "BLOB_UNKNOWN");
      });

      it("unknown manifest by tag or digest: 404 MANIFEST_UNKNOWN (HEAD too)", async () => {
        assertError(await oci.getManifest(name, "nope"), 404, "MANIFEST_UNKNOWN");
        assertError(await oci.getManifest(name, digestOf(randomBytes(16))), 404, "MANIFEST_UNKNOWN");
        assertError(await oci.getManifest(name, "nope", "HEAD"), 404, "MANIFEST_UNKNOWN");
      });

      it("unknown repository: 404 NAME_UNKNOWN", async () => {
        assertError(await oci.getManifest("acme/never-pushed", "latest"), 404, "NAME_UNKNOWN");
        assertError(await oci.get("/v2/acme/never-pushed/tags/list"), 404, "NAME_UNKNOWN");
      });
    });

    describe("push", () => {
      it("monolithic: POST opens a session (202, Location, Docker-Upload-UUID), PUT ?digest= with the body: 201", async () => {
        const name = repo("push-mono");
        const bytes = randomBytes(100);
        const digest = digestOf(bytes);
        const started = await oci.startUpload(name);
        assertStatus(started, 202);
        const location = started.headers.get("location");
        assert.ok(location, "Location");
        assert.match(oci.resolve(location).pathname, new RegExp(`^/v2/${name}/blobs/uploads/[^/]+$`));
        assert.ok(started.headers.get("docker-upload-uuid"));
        const put = await oci.request("PUT", withQuery(location, { digest }), {
          body: bytes,
          headers: { "content-type": "application/octet-stream" },
        });
        assertStatus(put, 201);
        assert.equal(oci.resolve(put.headers.get("location")!).pathname, `/v2/${name}/blobs/${digest}`);
        assert.equal(put.headers.get("docker-content-digest"), digest);
        const got = await oci.get(`/v2/${name}/blobs/${digest}`);
        assertStatus(got, 200);
        assert.ok(got.body.equals(bytes));
      });

      it("single POST ?digest= with the body: 201, Location and Docker-Content-Digest", async () => {
        const name = repo("push-post");
        const bytes = randomBytes(77);
        const digest = digestOf(bytes);
        const res = await oci.postBlob(name, bytes);
        assertStatus(res, 201);
        assert.equal(oci.resolve(res.headers.get("location")!).pathname, `/v2/${name}/blobs/${digest}`);
        assert.equal(res.headers.get("docker-content-digest"), digest);
        assertStatus(await oci.head(`/v2/${name}/blobs/${digest}`), 200);
      });

      it("streamed PATCH (no Content-Range): 202 with Location and Range, then PUT ?digest=", async () => {
        const name = repo("push-stream");
        const bytes = randomBytes(300);
        const digest = digestOf(bytes);
        let location = (await oci.startUpload(name)).headers.get("location")!;
        const first = await oci.request("PATCH", location, {
          body: bytes.subarray(0, 120),
          stream: true,
          headers: { "content-type": "application/octet-stream" },
        });
        assertStatus(first, 202);
        assert.equal(first.headers.get("range"), "0-119");
        location = first.headers.get("location")!;
        assert.ok(location);
        const second = await oci.request("PATCH", location, {
          body: bytes.subarray(120),
          stream: true,
          headers: { "content-type": "application/octet-stream" },
        });
        assertStatus(second, 202);
        assert.equal(second.headers.get("range"), "0-299");
        const put = await oci.request("PUT", withQuery(second.headers.get("location")!, { digest }));
        assertStatus(put, 201);
        assert.equal(put.headers.get("docker-content-digest"), digest);
        assert.ok((await oci.get(`/v2/${name}/blobs/${digest}`)).body.equals(bytes));
      });

      it("chunked PATCH with Content-Range: in-order chunks accepted, a chunk off the offset is 416", async () => {
        const name = repo("push-chunks");
        const bytes = randomBytes(250);
        const digest = digestOf(bytes);
        const chunk = (location: string, start: number, end: number) =>
          oci.request("PATCH", location, {
            body: bytes.subarray(start, end + 1),
            headers: { "content-type": "application/octet-stream", "content-range": `${start}-${end}` },
          });
        const started = await oci.startUpload(name);
        const first = await chunk(started.headers.get("location")!, 0, 99);
        assertStatus(first, 202);
        assert.equal(first.headers.get("range"), "0-99");
        const location = first.headers.get("location")!;
        // a gap (starts past the current offset) and an overlap (before it)
        assertStatus(await chunk(location, 150, 249), 416);
        assertStatus(await chunk(location, 50, 149), 416);
        const second = await chunk(location, 100, 199);
        assertStatus(second, 202);
        assert.equal(second.headers.get("range"), "0-199");
        // the final chunk goes with the closing PUT
        const put = await oci.request("PUT", withQuery(second.headers.get("location")!, { digest }), {
          body: bytes.subarray(200),
          headers: { "content-type": "application/octet-stream", "content-range": "200-249" },
        });
        assertStatus(put, 201);
        assert.equal(put.headers.get("docker-content-digest"), digest);
        assert.ok((await oci.get(`/v2/${name}/blobs/${digest}`)).body.equals(bytes));
      });

      it("upload status: GET <location> is 204 with Range, 0-(N-1) after N bytes", async () => {
        const name = repo("push-status");
        const started = await oci.startUpload(name);
        const location = started.headers.get("location")!;
        const empty = await oci.get(location);
        assertStatus(empty, 204);
        assert.match(empty.headers.get("range") ?? "", /^0-\d+$/);
        assert.ok(empty.headers.get("location"));
        const patched = await oci.request("PATCH", location, {
          body: randomBytes(42),
          headers: { "content-type": "application/octet-stream" },
        });
        assertStatus(patched, 202);
        const status = await oci.get(patched.headers.get("location")!);
        assertStatus(status, 204);
        assert.equal(status.headers.get("range"), "0-41");
        assert.equal(status.headers.get("docker-upload-uuid"), started.headers.get("docker-upload-uuid"));
      });

      it("cancel: DELETE <location> is 204, then the session is 404 BLOB_UPLOAD_UNKNOWN", async () => {
        const name = repo("push-cancel");
        const location = (await oci.startUpload(name)).headers.get("location")!;
        assertStatus(await oci.delete(location), 204);
        assertError(await oci.get(location), 404, "BLOB_UPLOAD_UNKNOWN");
        assertError(
          await oci.request("PATCH", location, {
            body: randomBytes(4),
            headers: { "content-type": "application/octet-stream" },
          }),
          404,
          "BLOB_UPLOAD_UNKNOWN",
        );
      });

      it("PUT with a digest that does not match: 400 DIGEST_INVALID, and no blob", async () => {
        const name = repo("push-mismatch");
        const bytes = randomBytes(40);
        const wrong = digestOf(randomBytes(40));
        const res = await oci.pushBlob(name, bytes, wrong);
        assertError(res, 400, "DIGEST_INVALID");
        assertError(await oci.head(`/v2/${name}/blobs/${wrong}`), 404, "BLOB_UNKNOWN");
        assertError(await oci.head(`/v2/${name}/blobs/${digestOf(bytes)}`), 404, "BLOB_UNKNOWN");
      });

      it("mount from another repository: 201 and the blob is in the target", async () => {
        const from = repo("mount-src");
        const to = repo("mount-dst");
        const bytes = randomBytes(90);
        const digest = await blob(from, bytes);
        const res = await oci.request(
          "POST",
          `/v2/${to}/blobs/uploads/?mount=${encodeURIComponent(digest)}&from=${encodeURIComponent(from)}`,
          { extraScopes: [`repository:${from}:pull`] },
        );
        assertStatus(res, 201);
        assert.equal(oci.resolve(res.headers.get("location")!).pathname, `/v2/${to}/blobs/${digest}`);
        assert.equal(res.headers.get("docker-content-digest"), digest);
        const got = await oci.get(`/v2/${to}/blobs/${digest}`);
        assertStatus(got, 200);
        assert.ok(got.body.equals(bytes));
      });

      it("mount of a blob the source lacks: 202, an ordinary upload session", async () => {
        const from = repo("mount-empty-src");
        await blob(from, randomBytes(5));
        const to = repo("mount-fallback");
        const bytes = randomBytes(33);
        const digest = digestOf(bytes);
        const res = await oci.request(
          "POST",
          `/v2/${to}/blobs/uploads/?mount=${encodeURIComponent(digest)}&from=${encodeURIComponent(from)}`,
          { extraScopes: [`repository:${from}:pull`] },
        );
        assertStatus(res, 202);
        const location = res.headers.get("location")!;
        assert.match(oci.resolve(location).pathname, new RegExp(`^/v2/${to}/blobs/uploads/[^/]+$`));
        const put = await oci.request("PUT", withQuery(location, { digest }), {
          body: bytes,
          headers: { "content-type": "application/octet-stream" },
        });
        assertStatus(put, 201);
      });

      it("manifest PUT by tag: 201, Location, Docker-Content-Digest = sha256 of the bytes", async () => {
        const name = repo("push-manifest-tag");
        const configBytes = json({ a: 1 });
        await blob(name, configBytes);
        const bytes = imageManifest(descriptorOf(MT.ociConfig, configBytes), []);
        const res = await oci.putManifest(name, "latest", bytes, MT.ociManifest);
        assertStatus(res, 201);
        assert.equal(res.headers.get("docker-content-digest"), digestOf(bytes));
        assert.ok(res.headers.get("location"));
        assert.match(oci.resolve(res.headers.get("location")!).pathname, new RegExp(`^/v2/${name}/manifests/`));
        assert.ok((await oci.getManifest(name, "latest")).body.equals(bytes));
      });

      it("manifest PUT by digest: 201 with that digest; no tag is made", async () => {
        const name = repo("push-manifest-digest");
        const image = await pushImage(name, "keep");
        const other = imageManifest(image.config, [image.layer], { annotations: { n: "2" } });
        const digest = digestOf(other);
        const res = await oci.putManifest(name, digest, other, MT.ociManifest);
        assertStatus(res, 201);
        assert.equal(res.headers.get("docker-content-digest"), digest);
        assert.equal(oci.resolve(res.headers.get("location")!).pathname, `/v2/${name}/manifests/${digest}`);
        assert.ok((await oci.getManifest(name, digest)).body.equals(other));
        assert.deepEqual((await oci.get(`/v2/${name}/tags/list`)).json()?.tags, ["keep"]);
      });

      it("manifest PUT with a subject: 201 and OCI-Subject (the subject need not exist)", async () => {
        const name = repo("push-subject");
        const subject = descriptorOf(MT.ociManifest, json({ never: "pushed" }));
        await blob(name, "{}");
        const bytes = imageManifest(descriptorOf(MT.ociEmpty, "{}"), [], { artifactType: SBOM_TYPE, subject });
        const res = await oci.putManifest(name, digestOf(bytes), bytes, MT.ociManifest);
        assertStatus(res, 201);
        assert.equal(res.headers.get("oci-subject"), subject.digest);
        const refs = await oci.get(`/v2/${name}/referrers/${subject.digest}`);
        assertStatus(refs, 200);
        assert.deepEqual(refs.json()?.manifests, [descriptorOf(MT.ociManifest, bytes, { artifactType: SBOM_TYPE })]);
      });
    });

    describe("content discovery", () => {
      const name = "acme/discovery";
      const tags = ["a", "b", "c", "d", "e"];
      before(async () => {
        const image = await pushImage(name, "e");
        for (const tag of tags.slice(0, -1).reverse()) {
          assertStatus(await oci.putManifest(name, tag, image.bytes, MT.ociManifest), 201);
        }
      });

      it("tags/list: all tags, lexically sorted, named", async () => {
        const res = await oci.get(`/v2/${name}/tags/list`);
        assertStatus(res, 200);
        assert.deepEqual(res.json(), { name, tags });
      });

      it("tags/list?n= pages with Link rel=next until the end", async () => {
        const seen: string[] = [];
        let res = await oci.get(`/v2/${name}/tags/list?n=2`);
        assertStatus(res, 200);
        assert.deepEqual(res.json()?.tags, ["a", "b"]);
        seen.push(...res.json().tags);
        let link = nextLink(res.headers.get("link"));
        assert.equal(res.headers.get("link"), `</v2/${name}/tags/list?n=2&last=b>; rel="next"`);
        assert.ok(link);
        const u = oci.resolve(link);
        assert.equal(u.pathname, `/v2/${name}/tags/list`);
        assert.equal(u.searchParams.get("n"), "2");
        assert.equal(u.searchParams.get("last"), "b");
        while (link) {
          res = await oci.get(link);
          assertStatus(res, 200);
          seen.push(...res.json().tags);
          link = nextLink(res.headers.get("link"));
        }
        assert.deepEqual(seen, tags);
        assert.equal(res.headers.get("link"), null);
      });

      it("tags/list?last= starts after that tag; n=0 is empty", async () => {
        assert.deepEqual((await oci.get(`/v2/${name}/tags/list?last=c`)).json()?.tags, ["d", "e"]);
        assert.deepEqual((await oci.get(`/v2/${name}/tags/list?n=2&last=a`)).json()?.tags, ["b", "c"]);
        const zero = await oci.get(`/v2/${name}/tags/list?n=0`);
        assertStatus(zero, 200);
        assert.deepEqual(zero.json()?.tags ?? [], []);
      });

      it("_catalog lists repositories sorted, and pages with n/last and Link", async () => {
        const all: string[] = [];
        let link: string | undefined = "/v2/_catalog";
        while (link) {
          const res = await oci.get(link);
          assertStatus(res, 200);
          all.push(...res.json().repositories);
          link = nextLink(res.headers.get("link"));
        }
        assert.deepEqual(all, [...all].sort());
        const named = (path: string) => all.includes(`acme/${path}`) || all.includes(`${org.uid}/${path}`);
        assert.ok(named("discovery") && named("pull"), JSON.stringify(all));
        const paged: string[] = [];
        let page: OciResponse = await oci.get("/v2/_catalog?n=2");
        assertStatus(page, 200);
        assert.equal(page.json().repositories.length, 2);
        for (;;) {
          paged.push(...page.json().repositories);
          const next = nextLink(page.headers.get("link"));
          if (!next) break;
          assert.equal(oci.resolve(next).pathname, "/v2/_catalog");
          assert.equal(oci.resolve(next).searchParams.get("last"), paged.at(-1));
          page = await oci.get(next);
          assertStatus(page, 200);
        }
        assert.deepEqual(paged, all);
        const after = await oci.get(`/v2/_catalog?last=${encodeURIComponent(all[0]!)}`);
        assert.deepEqual(after.json()?.repositories?.[0], all[1]);
      });

      describe("referrers", () => {
        const rname = "acme/referrers";
        let subject: Awaited<ReturnType<typeof pushImage>>;
        const expected: Descriptor[] = [];
        before(async () => {
          subject = await pushImage(rname, "subject");
          await blob(rname, "{}");
          const sigConfig = json({ sig: randomBytes(8).toString("hex") });
          await blob(rname, sigConfig);
          // artifactType from the field, with annotations
          const sbom = imageManifest(descriptorOf(MT.ociEmpty, "{}"), [], {
            artifactType: SBOM_TYPE,
            subject: subject.descriptor,
            annotations: { "org.example.kind": "sbom" },
          });
          // artifactType from the config's media type, no annotations
          const sig = imageManifest(descriptorOf(SIG_CONFIG_TYPE, sigConfig), [], { subject: subject.descriptor });
          // an index as a referrer
          const idx = indexManifest([subject.descriptor], {
            artifactType: "application/vnd.example.bundle",
            subject: subject.descriptor,
          });
          // refers to something else
          const unrelated = imageManifest(descriptorOf(MT.ociEmpty, "{}"), [], {
            artifactType: SBOM_TYPE,
            subject: descriptorOf(MT.ociManifest, json({ other: true })),
          });
          for (const [bytes, type] of [
            [sbom, MT.ociManifest],
            [sig, MT.ociManifest],
            [idx, MT.ociIndex],
            [unrelated, MT.ociManifest],
          ] as const) {
            assertStatus(await oci.putManifest(rname, digestOf(bytes), bytes, type), 201);
          }
          expected.push(
            descriptorOf(MT.ociManifest, sbom, {
              artifactType: SBOM_TYPE,
              annotations: { "org.example.kind": "sbom" },
            }),
            descriptorOf(MT.ociManifest, sig, { artifactType: SIG_CONFIG_TYPE }),
            descriptorOf(MT.ociIndex, idx, { artifactType: "application/vnd.example.bundle" }),
          );
        });
        const byDigest = (a: Descriptor, b: Descriptor) => a.digest.localeCompare(b.digest);

        it("referrers: an image index of the manifests whose subject is the digest", async () => {
          const res = await oci.get(`/v2/${rname}/referrers/${subject.digest}`);
          assertStatus(res, 200);
          const body = res.json();
          assert.equal(body.schemaVersion, 2);
          assert.equal(body.mediaType, MT.ociIndex);
          assert.deepEqual([...body.manifests].sort(byDigest), [...expected].sort(byDigest));
          // exactly this value: the spec's conformance suite compares the header verbatim
          assert.equal(res.headers.get("content-type"), MT.ociIndex);
        });

        it("referrers?artifactType= filters and says so in OCI-Filters-Applied", async () => {
          const res = await oci.get(
            `/v2/${rname}/referrers/${subject.digest}?artifactType=${encodeURIComponent(SBOM_TYPE)}`,
          );
          assertStatus(res, 200);
          assert.equal(res.headers.get("oci-filters-applied"), "artifactType");
          assert.deepEqual(res.json().manifests, [expected[0]]);
          const none = await oci.get(`/v2/${rname}/referrers/${subject.digest}?artifactType=application%2Fnone`);
          assertStatus(none, 200);
          assert.deepEqual(none.json().manifests, []);
        });

        it("referrers of an unknown digest: 200 with an empty index", async () => {
          const res = await oci.get(`/v2/${rname}/referrers/${digestOf(randomBytes(8))}`);
          assertStatus(res, 200);
          assert.deepEqual(res.json().manifests, []);
          assert.equal(res.headers.get("content-type"), MT.ociIndex);
        });
      });
    });

    describe("content management", () => {
      it("DELETE a tag: 202; the tag is gone, the digest still resolves", async () => {
        const name = repo("delete-tag");
        const image = await pushImage(name, "one");
        assertStatus(await oci.putManifest(name, "two", image.bytes, MT.ociManifest), 201);
        assertStatus(await oci.delete(`/v2/${name}/manifests/one`), 202);
        assertError(await oci.getManifest(name, "one"), 404, "MANIFEST_UNKNOWN");
        assertStatus(await oci.getManifest(name, image.digest), 200);
        assertStatus(await oci.getManifest(name, "two"), 200);
        assert.deepEqual((await oci.get(`/v2/${name}/tags/list`)).json()?.tags, ["two"]);
      });

      it("DELETE a manifest by digest: 202; the manifest and its tags are gone", async () => {
        const name = repo("delete-manifest");
        const image = await pushImage(name, "one");
        const keep = await pushImage(name, "keep", { annotations: { keep: "yes" } });
        assertStatus(await oci.putManifest(name, "two", image.bytes, MT.ociManifest), 201);
        assertStatus(await oci.delete(`/v2/${name}/manifests/${image.digest}`), 202);
        assertError(await oci.getManifest(name, image.digest), 404, "MANIFEST_UNKNOWN");
        assertError(await oci.getManifest(name, "one"), 404, "MANIFEST_UNKNOWN");
        assertError(await oci.getManifest(name, "two"), 404, "MANIFEST_UNKNOWN");
        assertStatus(await oci.getManifest(name, keep.digest), 200);
        assert.deepEqual((await oci.get(`/v2/${name}/tags/list`)).json()?.tags, ["keep"]);
      });

      it("DELETE a blob: 202, then 404 BLOB_UNKNOWN", async () => {
        const name = repo("delete-blob");
        const digest = await blob(name, randomBytes(20));
        assertStatus(await oci.delete(`/v2/${name}/blobs/${digest}`), 202);
        assertError(await oci.get(`/v2/${name}/blobs/${digest}`), 404, "BLOB_UNKNOWN");
        assertError(await oci.head(`/v2/${name}/blobs/${digest}`), 404, "BLOB_UNKNOWN");
      });
    });

    describe("data cases", () => {
      it("a sha512 blob: pushed and fetched by its sha512 digest", async () => {
        const name = repo("sha512-blob");
        const bytes = randomBytes(64);
        const digest = await blob(name, bytes, "sha512");
        assert.match(digest, /^sha512:[0-9a-f]{128}$/);
        const res = await oci.get(`/v2/${name}/blobs/${digest}`);
        assertStatus(res, 200);
        assert.equal(res.headers.get("docker-content-digest"), digest);
        assert.ok(res.body.equals(bytes));
        // and through an upload session's PUT
        const more = randomBytes(10);
        const put = await oci.pushBlob(name, more, digestOf(more, "sha512"));
        assertStatus(put, 201);
        assert.equal(put.headers.get("docker-content-digest"), digestOf(more, "sha512"));
      });

      it("a manifest pushed by sha512 digest keeps that algorithm", async () => {
        const name = repo("sha512-manifest");
        const configBytes = json({ sha: 512 });
        await blob(name, configBytes);
        const bytes = imageManifest(descriptorOf(MT.ociConfig, configBytes), []);
        const digest = digestOf(bytes, "sha512");
        const res = await oci.putManifest(name, digest, bytes, MT.ociManifest);
        assertStatus(res, 201);
        assert.equal(res.headers.get("docker-content-digest"), digest);
        const got = await oci.getManifest(name, digest);
        assertStatus(got, 200);
        assert.equal(got.headers.get("docker-content-digest"), digest);
        assert.ok(got.body.equals(bytes));
      });

      it("the empty blob (sha256 of zero bytes) is pushed, fetched, and usable as a config", async () => {
        const name = repo("empty-blob");
        assert.equal(await blob(name, Buffer.alloc(0)), EMPTY_SHA256);
        const got = await oci.get(`/v2/${name}/blobs/${EMPTY_SHA256}`);
        assertStatus(got, 200);
        assert.equal(got.headers.get("content-length"), "0");
        assert.equal(got.body.length, 0);
        const bytes = imageManifest({ mediaType: MT.ociConfig, digest: EMPTY_SHA256, size: 0 }, []);
        assertStatus(await oci.putManifest(name, "empty-config", bytes, MT.ociManifest), 201);
        assert.ok((await oci.getManifest(name, "empty-config")).body.equals(bytes));
      });

      it("a manifest of exactly 4 MiB is accepted; one byte more is 413 SIZE_INVALID", async () => {
        const name = repo("large");
        const configBytes = json({ large: true });
        await blob(name, configBytes);
        const config = descriptorOf(MT.ociConfig, configBytes);
        const padded = (size: number) => {
          const base = imageManifest(config, [], { annotations: { pad: "" } }).length;
          const bytes = imageManifest(config, [], { annotations: { pad: "x".repeat(size - base) } });
          assert.equal(bytes.length, size);
          return bytes;
        };
        const exact = padded(FOUR_MIB);
        const res = await oci.putManifest(name, "exact", exact, MT.ociManifest);
        assertStatus(res, 201);
        assert.equal(res.headers.get("docker-content-digest"), digestOf(exact));
        const got = await oci.getManifest(name, "exact");
        assert.equal(got.headers.get("content-length"), String(FOUR_MIB));
        assert.ok(got.body.equals(exact));
        const over = await oci.putManifest(name, "over", padded(FOUR_MIB + 1), MT.ociManifest).catch((e: Error) => {
          // a server that drops the connection instead of answering 413
          assert.fail(`PUT of 4 MiB + 1 got no answer: ${e.message} (${(e.cause as Error | undefined)?.message})`);
        });
        assertError(over, 413, "SIZE_INVALID");
        assertError(await oci.getManifest(name, "over"), 404, "MANIFEST_UNKNOWN");
      });

      it("a nested index (index -> index -> image) is pushed and pulled", async () => {
        const name = repo("nested-index");
        const image = await pushImage(name);
        const inner = indexManifest([{ ...image.descriptor, platform: { architecture: "amd64", os: "linux" } }]);
        assertStatus(await oci.putManifest(name, digestOf(inner), inner, MT.ociIndex), 201);
        const outer = indexManifest([descriptorOf(MT.ociIndex, inner)]);
        const res = await oci.putManifest(name, "outer", outer, MT.ociIndex);
        assertStatus(res, 201);
        const got = await oci.getManifest(name, "outer");
        assertStatus(got, 200);
        assert.equal(got.headers.get("content-type"), MT.ociIndex);
        assert.ok(got.body.equals(outer));
        assert.ok((await oci.getManifest(name, digestOf(inner))).body.equals(inner));
      });

      it("an artifact (artifactType, empty config, subject) is listed among its subject's referrers", async () => {
        const name = repo("artifact");
        const image = await pushImage(name, "app");
        await blob(name, "{}");
        const layerBytes = randomBytes(30);
        await blob(name, layerBytes);
        const bytes = imageManifest(
          descriptorOf(MT.ociEmpty, "{}"),
          [descriptorOf("application/vnd.example.data", layerBytes)],
          {
            artifactType: "application/vnd.example.artifact",
            subject: image.descriptor,
          },
        );
        const put = await oci.putManifest(name, digestOf(bytes), bytes, MT.ociManifest);
        assertStatus(put, 201);
        assert.equal(put.headers.get("oci-subject"), image.digest);
        const refs = await oci.get(`/v2/${name}/referrers/${image.digest}`);
        assert.deepEqual(refs.json()?.manifests, [
          descriptorOf(MT.ociManifest, bytes, { artifactType: "application/vnd.example.artifact" }),
        ]);
      });

      it("a malformed digest is 400 DIGEST_INVALID (POST ?digest= and PUT ?digest=)", async () => {
        const name = repo("bad-digest");
        const bytes = randomBytes(10);
        for (const bad of ["sha256:xyz", "sha256:" + "0".repeat(63), "nodigest"]) {
          assertError(await oci.postBlob(name, bytes, bad), 400, "DIGEST_INVALID");
          assertError(await oci.pushBlob(name, bytes, bad), 400, "DIGEST_INVALID");
        }
      });

      describe("invalid manifests", () => {
        const name = "acme/invalid";
        let config: Descriptor;
        let image: Awaited<ReturnType<typeof pushImage>>;
        before(async () => {
          image = await pushImage(name, "base");
          config = image.config;
        });
        const rejected = async (
          bytes: Uint8Array | string,
          type: string,
          status: number,
          code: string,
          ref = "bad",
        ) => {
          assertError(await oci.putManifest(name, ref, bytes, type), status, code);
          if (!ref.includes(":")) assertError(await oci.getManifest(name, ref), 404, "MANIFEST_UNKNOWN");
        };

        it("invalid JSON: 400 MANIFEST_INVALID", async () => {
          await rejected('{"schemaVersion":2,', MT.ociManifest, 400, "MANIFEST_INVALID");
        });

        it("an image manifest without config: 400 MANIFEST_INVALID", async () => {
          await rejected(
            json({ schemaVersion: 2, mediaType: MT.ociManifest, layers: [] }),
            MT.ociManifest,
            400,
            "MANIFEST_INVALID",
          );
        });

        it("schemaVersion other than 2: 400 MANIFEST_INVALID", async () => {
          for (const schemaVersion of [1, 3]) {
            const bytes = json({ schemaVersion, mediaType: MT.ociManifest, config, layers: [] });
            await rejected(bytes, MT.ociManifest, 400, "MANIFEST_INVALID");
          }
        });

        it("a mediaType field disagreeing with Content-Type: 400 MANIFEST_INVALID", async () => {
          await rejected(imageManifest(config, [], {}, MT.ociIndex), MT.ociManifest, 400, "MANIFEST_INVALID");
          await rejected(indexManifest([image.descriptor]), MT.ociManifest, 400, "MANIFEST_INVALID");
        });

        it("a config or layer not in the repository: 400 MANIFEST_BLOB_UNKNOWN", async () => {
          const ghost = descriptorOf(MT.ociLayer, randomBytes(20));
          await rejected(imageManifest(config, [ghost]), MT.ociManifest, 400, "MANIFEST_BLOB_UNKNOWN");
          await rejected(
            imageManifest({ ...ghost, mediaType: MT.ociConfig }, []),
            MT.ociManifest,
            400,
            "MANIFEST_BLOB_UNKNOWN",
          );
          // a blob of another repository does not count
          const elsewhere = repo("invalid-other");
          const otherBytes = randomBytes(20);
          await blob(elsewhere, otherBytes);
          const foreign = imageManifest(config, [descriptorOf(MT.ociLayer, otherBytes)]);
          await rejected(foreign, MT.ociManifest, 400, "MANIFEST_BLOB_UNKNOWN");
        });

        it("an index naming a manifest not in the repository: 400 MANIFEST_BLOB_UNKNOWN", async () => {
          const ghost = descriptorOf(MT.ociManifest, json({ ghost: randomBytes(4).toString("hex") }));
          await rejected(indexManifest([image.descriptor, ghost]), MT.ociIndex, 400, "MANIFEST_BLOB_UNKNOWN");
        });

        it("PUT by a digest the bytes do not hash to: 400 DIGEST_INVALID", async () => {
          const bytes = imageManifest(config, [], { annotations: { x: "y" } });
          const wrong = digestOf(randomBytes(8));
          await rejected(bytes, MT.ociManifest, 400, "DIGEST_INVALID", wrong);
          assertError(await oci.getManifest(name, wrong), 404, "MANIFEST_UNKNOWN");
          assertError(await oci.getManifest(name, digestOf(bytes)), 404, "MANIFEST_UNKNOWN");
        });
      });

      it("a Docker schema 2 manifest and manifest list round-trip with their media types", async () => {
        const name = repo("docker");
        const configBytes = json({ architecture: "arm64", os: "linux", rootfs: { type: "layers", diff_ids: [] } });
        const layerBytes = randomBytes(48);
        await blob(name, configBytes);
        await blob(name, layerBytes);
        const manifest = imageManifest(
          descriptorOf(MT.dockerConfig, configBytes),
          [descriptorOf(MT.dockerLayer, layerBytes)],
          {},
          MT.dockerManifest,
        );
        const put = await oci.putManifest(name, "image", manifest, MT.dockerManifest);
        assertStatus(put, 201);
        assert.equal(put.headers.get("docker-content-digest"), digestOf(manifest));
        const list = indexManifest(
          [{ ...descriptorOf(MT.dockerManifest, manifest), platform: { architecture: "arm64", os: "linux" } }],
          {},
          MT.dockerList,
        );
        assertStatus(await oci.putManifest(name, "list", list, MT.dockerList), 201);
        for (const [tag, bytes, type] of [
          ["image", manifest, MT.dockerManifest],
          ["list", list, MT.dockerList],
        ] as const) {
          const got = await oci.getManifest(name, tag);
          assertStatus(got, 200);
          assert.equal(got.headers.get("content-type"), type);
          assert.equal(got.headers.get("docker-content-digest"), digestOf(bytes));
          assert.ok(got.body.equals(bytes));
        }
      });
    });

    describe("repository names over groups", () => {
      let team: { uid: string };
      before(async () => {
        const res = await restClient(server.url, server.operatorToken).post(`/iam/v2beta1/groups/${org.uid}`, {
          name: "team",
        });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        team = res.body;
      });

      it("acme/team/app (child group) and acme/app are distinct repositories", async () => {
        const nested = await pushImage("acme/team/app", "latest");
        const flat = await pushImage("acme/app", "latest", { annotations: { flat: "yes" } });
        assert.equal(
          (await oci.getManifest("acme/team/app", "latest")).headers.get("docker-content-digest"),
          nested.digest,
        );
        assert.equal((await oci.getManifest("acme/app", "latest")).headers.get("docker-content-digest"), flat.digest);
        const blobRes = await oci.get(`/v2/acme/team/app/blobs/${nested.layer.digest}`);
        assert.ok(blobRes.body.equals(nested.layerBytes));
        assert.deepEqual((await oci.get("/v2/acme/team/app/tags/list")).json(), {
          name: "acme/team/app",
          tags: ["latest"],
        });
        const api = restClient(server.url, server.operatorToken);
        const repos = (await api.get("/registry/v2beta1/repos?name=app")).body.repos as { uid: string; name: string }[];
        assert.ok(
          repos.some((r) => r.name === "app" && r.uid.startsWith(`${team.uid}/`)),
          JSON.stringify(repos),
        );
        assert.ok(
          repos.some((r) => r.name === "app" && r.uid.startsWith(`${org.uid}/`) && !r.uid.startsWith(`${team.uid}/`)),
          JSON.stringify(repos),
        );
      });

      it("<org uid>/<repo> names the same repository as <org name>/<repo>", async () => {
        const image = await pushImage("acme/by-uid", "v1");
        const res = await oci.getManifest(`${org.uid}/by-uid`, "v1");
        assertStatus(res, 200);
        assert.equal(res.headers.get("docker-content-digest"), image.digest);
        // and the other way round
        const other = await pushImage(`${org.uid}/by-uid`, "v2", { annotations: { via: "uid" } });
        assert.equal((await oci.getManifest("acme/by-uid", "v2")).headers.get("docker-content-digest"), other.digest);
      });
    });

    describe("tag history", () => {
      it("retagging adds entries, oldest first; start/end narrow it", async () => {
        const name = repo("history");
        const first = await pushImage(name, "v1");
        const second = await pushImage(name, "v1", { annotations: { second: "yes" } });
        const res = await oci.get(`/v2/${name}/_chainguard/history/v1`);
        assertStatus(res, 200);
        const history = res.json()?.history as { updateTimestamp: string; digest: string }[];
        assert.deepEqual(
          history.map((h) => h.digest),
          [first.digest, second.digest],
        );
        for (const h of history) assert.ok(!Number.isNaN(Date.parse(h.updateTimestamp)), h.updateTimestamp);
        assert.ok(Date.parse(history[0]!.updateTimestamp) <= Date.parse(history[1]!.updateTimestamp));
        const window = (q: string) => oci.get(`/v2/${name}/_chainguard/history/v1?${q}`);
        assert.deepEqual((await window("start=2999-01-01T00:00:00Z")).json()?.history, []);
        assert.deepEqual((await window("end=2000-01-01T00:00:00Z")).json()?.history, []);
        assert.deepEqual(
          (await window("start=2000-01-01T00:00:00Z&end=2999-01-01T00:00:00Z")).json()?.history,
          history,
        );
      });
    });

    describe("the registry API's view", () => {
      it("lists pushed repositories and their tags; deletes and retags show at once", async () => {
        const path = `api-view-${++counter}`;
        const name = `acme/${path}`;
        const one = await pushImage(name, "one");
        assertStatus(await oci.putManifest(name, "two", one.bytes, MT.ociManifest), 201);
        const api = restClient(server.url, server.operatorToken);
        const repos = await api.get(`/registry/v2beta1/repos?name=${path}`);
        assert.equal(repos.status, 200, JSON.stringify(repos.body));
        const found = (repos.body.repos as { uid: string; name: string }[]).filter((r) => r.name === path);
        assert.equal(found.length, 1, JSON.stringify(repos.body));
        const repoUid = found[0]!.uid;
        assert.ok(repoUid.startsWith(`${org.uid}/`), repoUid);
        const tags = async () => {
          const res = await api.get(`/registry/v2beta1/tags?uidp.childrenOf=${encodeURIComponent(repoUid)}`);
          assert.equal(res.status, 200, JSON.stringify(res.body));
          return (res.body.tags as { name: string; digest: string; updateTime: string }[]).sort((a, b) =>
            a.name.localeCompare(b.name),
          );
        };
        const before = await tags();
        assert.deepEqual(
          before.map((t) => [t.name, t.digest]),
          [
            ["one", one.digest],
            ["two", one.digest],
          ],
        );
        for (const t of before) assert.ok(!Number.isNaN(Date.parse(t.updateTime)), t.updateTime);
        assertStatus(await oci.delete(`/v2/${name}/manifests/one`), 202);
        const other = await pushImage(name, "two", { annotations: { retag: "yes" } });
        const afterwards = await tags();
        assert.deepEqual(
          afterwards.map((t) => [t.name, t.digest]),
          [["two", other.digest]],
        );
        assert.ok(Date.parse(afterwards[0]!.updateTime) >= Date.parse(before[1]!.updateTime));
      });
    });

    it("every /v2/ response carried Docker-Distribution-API-Version: registry/2.0", () => {
      assert.deepEqual(missingApiVersion, []);
    });
  });
}
