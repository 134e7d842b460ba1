// Registry traffic as events: a skopeo push records `dev.chainguard.registry.push.v1` for each
// blob and the manifest, a skopeo pull `dev.chainguard.registry.pull.v1` for each manifest and
// blob it fetched, with the documented body fields; a failed pull records its OCI error; an
// anonymous pull of a public repo records no actor; a refused push (an invalid manifest, one
// naming an unknown blob, an upload completed with the wrong digest) records its OCI error.
// Needs skopeo and umoci (CI installs them).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { buildOciLayout, type LayoutImage } from "../support/oci-layout.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { skopeoIn, type Run } from "../support/skopeo.js";
import { flushEvents, lastEventSeq } from "../support/events.js";

const PUSH = "dev.chainguard.registry.push.v1";
const PULL = "dev.chainguard.registry.pull.v1";
const sha256 = (bytes: Uint8Array | string) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
const ok = (run: Run, what: string) => assert.equal(run.code, 0, `${what}: ${run.stderr}`);

interface RegistryEventRow {
  seq: string;
  type: string;
  source: string;
  subject: string;
  parent_uid: string | null;
  actor_subject: string | null;
  actor: { subject: string } | null;
  body: Record<string, unknown>;
}

/** The body fields every registry event has; `method` for pulls, `tag` and `error` when they apply. */
const BASE_FIELDS = ["repository", "repo_id", "digest", "type", "remote_address", "location", "user_agent", "when"];

function assertBody(event: RegistryEventRow, extra: string[]) {
  assert.deepEqual(Object.keys(event.body).sort(), [...BASE_FIELDS, ...extra].sort(), JSON.stringify(event.body));
  assert.equal(event.body.location, "");
  assert.ok(event.body.remote_address, "the client's address");
  assert.ok(event.body.user_agent, "the client's user agent");
  // the SDK's civil.DateTime: UTC without an offset
  assert.match(
    event.body.when as string,
    /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$/,
    `civil time: ${String(event.body.when)}`,
  );
}

for (const backend of backends()) {
  describe(`registry events [${backend}]`, () => {
    let server: TestServer;
    let work: string;
    let skopeo: ReturnType<typeof skopeoIn>;
    let image: LayoutImage;
    let host: string;
    let creds: string;
    let orgUid: string;
    let repoUid: string;
    const ref = (suffix: string) => `docker://${host}/acme/app${suffix}`;

    /** The registry events recorded after `sinceSeq`, in order. */
    const registryEvents = async (sinceSeq: string): Promise<RegistryEventRow[]> => {
      await flushEvents(server);
      return (await server.db
        .selectFrom("events")
        .select(["seq", "type", "source", "subject", "parent_uid", "actor_subject", "actor", "body"])
        .where("type", "in", [PUSH, PULL])
        .where("seq", ">", sinceSeq as never)
        .orderBy("seq")
        .execute()) as RegistryEventRow[];
    };
    const lastSeq = () => lastEventSeq(server);

    before(async () => {
      work = mkdtempSync(join(tmpdir(), "bulwark-events-"));
      skopeo = skopeoIn(work);
      [server, image] = await Promise.all([startTestServer(backend), buildOciLayout(join(work, "src"))]);
      host = new URL(server.url).host;
      const org = await restClient(server.url, server.operatorToken).post("/iam/v2beta1/groups", { name: "acme" });
      assert.equal(org.status, 200, JSON.stringify(org.body));
      orgUid = org.body.uid;
      const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      creds = `_token:${password}`;
    });
    after(async () => {
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("a skopeo push records a push event per blob and for the tagged manifest, by the pusher", async () => {
      const since = await lastSeq();
      ok(
        await skopeo(
          "copy",
          "--preserve-digests",
          "--dest-tls-verify=false",
          "--dest-creds",
          creds,
          `oci:${image.dir}:${image.tag}`,
          ref(":v1"),
        ),
        "push",
      );
      const pushes = (await registryEvents(since)).filter((e) => e.type === PUSH);
      const blobs = pushes.filter((e) => e.body.type === "blob").map((e) => e.body.digest);
      assert.deepEqual(blobs.sort(), [...image.layerDigests, sha256(image.config)].sort());
      const manifests = pushes.filter((e) => e.body.type === "manifest");
      assert.equal(manifests.length, 1);
      const manifest = manifests[0]!;
      assert.equal(manifest.body.digest, image.manifestDigest);
      assert.equal(manifest.body.tag, "v1");
      repoUid = manifest.subject;
      assert.equal(manifest.parent_uid, orgUid, "the event belongs to the repo's group");
      assert.match(repoUid, new RegExp(`^${orgUid}/[0-9a-f]{16}$`));
      for (const e of pushes) {
        assert.equal(e.subject, repoUid);
        assert.equal(e.body.repository, "acme/app");
        assert.equal(e.body.repo_id, repoUid);
        assert.equal(e.actor_subject, OPERATOR_SUBJECT);
        assert.equal(e.source, server.tokens.urls.registryAudience);
        assertBody(e, e.body.type === "manifest" ? ["tag"] : []);
      }
      // The manifest is pushed last, after the blobs it names.
      assert.equal(pushes.at(-1), manifest);
    });

    it("a skopeo pull records a pull event for the manifest (by tag) and each blob it fetched", async () => {
      const since = await lastSeq();
      ok(
        await skopeo("copy", "--src-tls-verify=false", "--src-creds", creds, ref(":v1"), `oci:${join(work, "out")}:v1`),
        "pull",
      );
      const pulls = (await registryEvents(since)).filter((e) => e.type === PULL);
      assert.ok(pulls.length > 0);
      const manifestGets = pulls.filter((e) => e.body.type === "manifest" && e.body.method === "GET");
      assert.ok(
        manifestGets.some((e) => e.body.tag === "v1" && e.body.digest === image.manifestDigest),
        JSON.stringify(manifestGets.map((e) => e.body)),
      );
      const blobGets = pulls.filter((e) => e.body.type === "blob" && e.body.method === "GET").map((e) => e.body.digest);
      for (const digest of [...image.layerDigests, sha256(image.config)]) assert.ok(blobGets.includes(digest), digest);
      for (const e of pulls) {
        assert.equal(e.subject, repoUid);
        assert.equal(e.parent_uid, orgUid);
        assert.equal(e.body.repo_id, repoUid);
        assert.equal(e.actor_subject, OPERATOR_SUBJECT);
        assert.ok(e.body.method === "GET" || e.body.method === "HEAD");
        assertBody(e, e.body.tag === undefined ? ["method"] : ["method", "tag"]);
      }
    });

    it("a pull of an unknown tag records a pull event with the OCI error", async () => {
      const since = await lastSeq();
      const inspect = await skopeo("inspect", "--raw", "--tls-verify=false", "--creds", creds, ref(":nope"));
      assert.notEqual(inspect.code, 0);
      const failed = (await registryEvents(since)).filter((e) => e.type === PULL);
      assert.ok(failed.length >= 1);
      for (const e of failed) {
        assert.equal(e.subject, repoUid);
        assert.equal(e.body.tag, "nope");
        assert.equal(e.body.digest, "");
        assert.deepEqual(e.body.error, { code: "MANIFEST_UNKNOWN", message: "manifest unknown", status: 404 });
        assertBody(e, ["method", "tag", "error"]);
      }
    });

    it("a pull refused for missing credentials records the refusal, by no one", async () => {
      const since = await lastSeq();
      const res = await fetch(`${server.url}/v2/acme/app/manifests/v1`);
      assert.equal(res.status, 401);
      const [event, ...rest] = (await registryEvents(since)).filter((e) => e.type === PULL);
      assert.equal(rest.length, 0);
      assert.equal(event!.actor, null);
      assert.equal((event!.body.error as { code: string }).code, "UNAUTHORIZED");
      assert.equal((event!.body.error as { status: number }).status, 401);
    });

    /** A registry request with the operator's registry token. */
    const registryCall = async (method: string, path: string, body?: string | Uint8Array, type?: string) => {
      const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      const headers: Record<string, string> = { authorization: `Bearer ${password}` };
      if (type) headers["content-type"] = type;
      const res = await fetch(new URL(path, server.url), { method, headers, body });
      const text = await res.text();
      return { status: res.status, headers: res.headers, json: () => JSON.parse(text) as { errors: unknown[] } };
    };

    it("a refused manifest push records a push event with the OCI error the client got", async () => {
      const since = await lastSeq();
      const invalid = await registryCall(
        "PUT",
        "/v2/acme/app/manifests/broken",
        JSON.stringify({ schemaVersion: 1 }),
        "application/vnd.oci.image.manifest.v1+json",
      );
      assert.equal(invalid.status, 400);
      const invalidError = { code: "MANIFEST_INVALID", message: "schemaVersion must be 2", status: 400 };
      assert.deepEqual(invalid.json().errors, [{ code: invalidError.code, message: invalidError.message }]);
      const missing = sha256("never pushed");
      const unknownBlob = await registryCall(
        "PUT",
        "/v2/acme/app/manifests/dangling",
        JSON.stringify({
          schemaVersion: 2,
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: missing, size: 12 },
          layers: [],
        }),
        "application/vnd.oci.image.manifest.v1+json",
      );
      assert.equal(unknownBlob.status, 400);
      assert.equal((unknownBlob.json().errors[0] as { code: string }).code, "MANIFEST_BLOB_UNKNOWN");
      const events = await registryEvents(since);
      assert.deepEqual(
        events.map((e) => [e.type, e.body.type, e.body.tag, e.body.digest, (e.body.error as { code: string }).code]),
        [
          [PUSH, "manifest", "broken", "", "MANIFEST_INVALID"],
          [PUSH, "manifest", "dangling", "", "MANIFEST_BLOB_UNKNOWN"],
        ],
      );
      assert.deepEqual(events[0]!.body.error, invalidError);
      assert.equal((events[1]!.body.error as { status: number }).status, 400);
      for (const e of events) {
        assert.equal(e.subject, repoUid);
        assert.equal(e.parent_uid, orgUid);
        assert.equal(e.body.repo_id, repoUid);
        assert.equal(e.actor_subject, OPERATOR_SUBJECT);
        assertBody(e, ["tag", "error"]);
      }
    });

    it("a blob upload completed with the wrong digest records a push event with the OCI error", async () => {
      const started = await registryCall("POST", "/v2/acme/app/blobs/uploads/");
      assert.equal(started.status, 202);
      const location = started.headers.get("location")!;
      const claimed = sha256("something else");
      const since = await lastSeq();
      const completed = await registryCall(
        "PUT",
        `${location}?digest=${claimed}`,
        "the bytes sent",
        "application/octet-stream",
      );
      assert.equal(completed.status, 400);
      const [error] = completed.json().errors as Array<{ code: string; message: string }>;
      assert.equal(error!.code, "DIGEST_INVALID");
      const [event, ...rest] = await registryEvents(since);
      assert.equal(rest.length, 0);
      assert.equal(event!.type, PUSH);
      assert.equal(event!.subject, repoUid);
      assert.equal(event!.body.type, "blob");
      assert.equal(event!.body.digest, claimed);
      assert.deepEqual(event!.body.error, { code: "DIGEST_INVALID", message: error!.message, status: 400 });
      assertBody(event!, ["error"]);
      // Nothing was stored: the blob is unknown.
      assert.equal((await registryCall("HEAD", `/v2/acme/app/blobs/${claimed}`)).status, 404);
    });

    it("an anonymous pull of a public repo records an event without an actor", async () => {
      const api = restClient(server.url, server.operatorToken);
      const visibility = await api.patch(`/bulwark/registry/v1/repos/${repoUid}/visibility`, { public: true });
      assert.equal(visibility.status, 200, JSON.stringify(visibility.body));
      const since = await lastSeq();
      const head = await fetch(`${server.url}/v2/acme/app/manifests/v1`, { method: "HEAD" });
      assert.equal(head.status, 200);
      const blob = await fetch(`${server.url}/v2/acme/app/blobs/${image.layerDigests[0]}`);
      assert.equal(blob.status, 200);
      await blob.arrayBuffer();
      const pulls = (await registryEvents(since)).filter((e) => e.type === PULL);
      assert.deepEqual(
        pulls.map((e) => [e.body.type, e.body.method, e.body.digest]),
        [
          ["manifest", "HEAD", image.manifestDigest],
          ["blob", "GET", image.layerDigests[0]],
        ],
      );
      for (const e of pulls) {
        assert.equal(e.actor, null);
        assert.equal(e.actor_subject, null);
        assert.equal(e.body.error, undefined);
      }
    });
  });
}
