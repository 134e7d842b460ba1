// A manifest push's database work, on every backend: one statement stores the manifest, its
// references and the tag's move whatever the number of layers; the foreign keys refuse a
// missing reference (and the first one missing is named); the bytes stored are the bytes pushed.
// A new tag on a manifest the repo holds is one statement with its event, and no queue write.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { observeQueries } from "../../src/storage/observed.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { MEDIA_TYPES as MT, OciClient, descriptorOf, digestOf, type Descriptor } from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { lastEventSeq, subscribeDirectly } from "../support/events.js";

const manifestOf = (config: Descriptor, layers: Descriptor[], extra: Record<string, unknown> = {}) =>
  Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MT.ociManifest, config, layers, ...extra }));

for (const backend of backends()) {
  describe(`manifest pushes [${backend}]`, () => {
    let server: TestServer;
    let oci: OciClient;
    let counter = 0;
    const repo = () => `acme/push-${++counter}`;

    before(async () => {
      // No inventory reads, no vulnerability-report polls and no delivery polls: only the push's
      // own statements are counted. (A 200-layer push on a busy machine can take longer than the
      // 1 s poll: both of its windows then held one, and the fewer of two below did not help. The
      // report task's drains, a transaction each, fell into a tag push's window once.)
      server = await startTestServer(backend, {
        images: { inventoryConcurrency: 0, pollIntervalMs: 3_600_000 },
        events: { deliveryConcurrency: 0 },
      });
      const created = await restClient(server.url, server.operatorToken).post("/iam/v2beta1/groups", { name: "acme" });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const token = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      oci = new OciClient(server.url, { credential: { username: "_token", password: token } });
    });
    after(() => server?.close());

    const blob = async (name: string, bytes: Uint8Array) => {
      const res = await oci.postBlob(name, bytes);
      assert.equal(res.status, 201, res.body.toString());
    };
    /** A config and `n` layers pushed to `name` (`skip`: layers left unpushed); their descriptors. */
    const image = async (name: string, n: number, skip: number[] = []) => {
      const configBytes = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", n: ++counter }));
      await blob(name, configBytes);
      const layers: Descriptor[] = [];
      for (let i = 0; i < n; i++) {
        const bytes = randomBytes(32);
        if (!skip.includes(i)) await blob(name, bytes);
        layers.push(descriptorOf(MT.ociLayer, bytes));
      }
      return { config: descriptorOf(MT.ociConfig, configBytes), layers };
    };
    /** The statements the database ran while `fn` ran. */
    const statementsDuring = async (fn: () => Promise<unknown>) => {
      const seen: string[] = [];
      const stop = observeQueries(server.db, (sql) => void seen.push(sql));
      try {
        await fn();
      } finally {
        stop();
      }
      return seen;
    };
    const references = async (digest: string) =>
      (
        await server.db
          .selectFrom("manifest_blobs")
          .select("blob_digest")
          .where("manifest_digest", "=", digest)
          .execute()
      ).map((r: { blob_digest: string }) => r.blob_digest);

    it("a manifest naming 200 layers is stored with every reference in as many statements as one naming 1", async () => {
      const name = repo();
      const { config, layers } = await image(name, 200);
      const small = manifestOf(config, layers.slice(0, 1));
      const large = manifestOf(config, layers);
      let res;
      // Each kind pushed twice, new manifests each time, and the fewer counted: another background
      // task's statement may fall into one push's window.
      const fewest = async (pushes: Array<[string, Buffer]>) => {
        const counts: string[][] = [];
        for (const [tag, bytes] of pushes) {
          counts.push(
            await statementsDuring(async () => (res = await oci.putManifest(name, tag, bytes, MT.ociManifest))),
          );
          assert.equal(res!.status, 201, res!.body.toString());
        }
        return counts.sort((x, y) => x.length - y.length)[0]!;
      };
      const one = await fewest([
        ["small", small],
        ["small2", manifestOf(config, layers.slice(1, 2))],
      ]);
      const many = await fewest([
        ["large", large],
        ["large2", manifestOf(config, [...layers].reverse())],
      ]);
      assert.equal(many.length, one.length, `${one.join("\n")}\n----\n${many.join("\n")}`);
      assert.ok(many.length <= 10, many.join("\n"));
      assert.deepEqual(
        (await references(digestOf(large))).sort(),
        [config.digest, ...layers.map((l) => l.digest)].sort(),
      );
      const got = await oci.get(`/v2/${name}/manifests/large`, { accept: MT.ociManifest });
      assert.equal(got.status, 200);
      assert.ok(got.body.equals(large));
    });

    it("a missing layer among 200 refuses the push, naming the first missing; nothing is stored", async () => {
      const name = repo();
      const { config, layers } = await image(name, 200, [150, 170]);
      const bytes = manifestOf(config, layers);
      const res = await oci.putManifest(name, "v1", bytes, MT.ociManifest);
      assert.equal(res.status, 400, res.body.toString());
      assert.deepEqual(res.errorCodes(), ["MANIFEST_BLOB_UNKNOWN"]);
      assert.equal(
        res.json<{ errors: { detail: { digest: string } }[] }>()!.errors[0]!.detail.digest,
        layers[150]!.digest,
      );
      assert.equal((await oci.get(`/v2/${name}/manifests/v1`)).status, 404);
      assert.equal((await oci.get(`/v2/${name}/manifests/${digestOf(bytes)}`)).status, 404);
      assert.deepEqual(await references(digestOf(bytes)), []);
      // The repo takes a manifest naming only layers it holds.
      const ok = await oci.putManifest(name, "v1", manifestOf(config, layers.slice(0, 100)), MT.ociManifest);
      assert.equal(ok.status, 201, ok.body.toString());
    });

    it("a layer named twice is one reference; bytes with a BOM and non-ASCII text come back exactly", async () => {
      const name = repo();
      const { config, layers } = await image(name, 2);
      const json = manifestOf(config, [layers[0]!, layers[1]!, layers[0]!], { annotations: { note: "żółw 🐢" } });
      const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json]);
      const res = await oci.putManifest(name, digestOf(bytes), bytes, MT.ociManifest);
      assert.equal(res.status, 201, res.body.toString());
      assert.equal((await references(digestOf(bytes))).length, 3);
      const got = await oci.get(`/v2/${name}/manifests/${digestOf(bytes)}`, { accept: MT.ociManifest });
      assert.ok(got.body.equals(bytes));
    });

    it("a new tag on a manifest the repo holds: one statement with its event (as a full push's), no transaction, no queue write", async () => {
      const name = repo();
      const { config, layers } = await image(name, 1);
      const bytes = manifestOf(config, layers);
      const digest = digestOf(bytes);
      const repoUid = (await server.db
        .selectFrom("repos")
        .select("uid")
        .where("name", "=", name.split("/")[1]!)
        .executeTakeFirstOrThrow()) as { uid: string };
      // every push event of the repo's group delivered to a subscription there
      await subscribeDirectly(server, repoUid.uid.slice(0, repoUid.uid.lastIndexOf("/")), "https://sink.example/x", {
        types: ["dev.chainguard.registry.push.v1"],
      });
      const since = await lastEventSeq(server);
      assert.equal((await oci.putManifest(name, "first", bytes, MT.ociManifest)).status, 201);
      const inventory = () =>
        server.db.selectFrom("image_inventories").selectAll().where("digest", "=", digest).executeTakeFirst();
      const queued = await inventory();
      assert.equal(queued?.state, "pending", "the new image is queued by its first push");

      let res;
      const seen = await statementsDuring(
        async () => (res = await oci.putManifest(name, "second", bytes, MT.ociManifest)),
      );
      assert.equal(res!.status, 201, res!.body.toString());
      assert.equal(res!.headers.get("docker-content-digest"), digest);
      // (the delivery worker's statements may fall in between: only the push's are looked at)
      const pushing = seen.filter(
        (q) => !/^\s*select\b/i.test(q) && /\binsert into "?(tags|events|manifests)\b|\bimage_inventories\b/i.test(q),
      );
      assert.equal(pushing.length, 1, seen.join("\n----\n"));
      assert.match(pushing[0]!, /insert into tags[\s\S]*insert into events/);
      assert.ok(!seen.some((q) => /^\s*(begin|commit|savepoint)\b/i.test(q)), seen.join("\n----\n"));
      assert.deepEqual(await inventory(), queued, "the queue row is left as it was");

      const events = (await server.db
        .selectFrom("events")
        .selectAll()
        .where("seq", ">", since as never)
        .where("type", "=", "dev.chainguard.registry.push.v1")
        .orderBy("seq")
        .execute()) as any[];
      assert.equal(events.length, 2);
      const [full, held] = events;
      const comparable = (e: any) => {
        const { uid, seq, time, body, traceparent, ...rest } = e;
        const { when, tag, ...fields } = body;
        return { ...rest, body: fields, uidParent: uid.slice(0, uid.lastIndexOf("/")) };
      };
      assert.deepEqual(comparable(held), comparable(full));
      assert.match(held.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/, "the request's trace");
      assert.deepEqual([full.body.tag, held.body.tag, held.body.digest], ["first", "second", digest]);
      const deliveries = await server.db
        .selectFrom("event_deliveries")
        .select("event_seq")
        .where("event_seq", "in", [full.seq, held.seq])
        .execute();
      assert.equal(deliveries.length, 2, "each delivered to the subscription");
      const history = await oci.get(`/v2/${name}/_chainguard/history/second`);
      assert.deepEqual(
        history.json<{ history: { digest: string }[] }>()!.history.map((h) => h.digest),
        [digest],
      );

      // A read failed by storage: a new tag on the image queues it again; a malformed one is left failed.
      await server.db
        .updateTable("image_inventories")
        .set({ state: "failed", error_kind: "transient", error: "storage error", attempts: 3 } as never)
        .where("digest", "=", digest)
        .execute();
      assert.equal((await oci.putManifest(name, "third", bytes, MT.ociManifest)).status, 201);
      assert.deepEqual([(await inventory())?.state, (await inventory())?.attempts], ["pending", 0]);
      await server.db
        .updateTable("image_inventories")
        .set({ state: "failed", error_kind: "image", error: "a tar bomb", attempts: 1 } as never)
        .where("digest", "=", digest)
        .execute();
      assert.equal((await oci.putManifest(name, "fourth", bytes, MT.ociManifest)).status, 201);
      assert.deepEqual([(await inventory())?.state, (await inventory())?.attempts], ["failed", 1]);
    });

    it("a tag pushed again onto the digest it names writes no history; moved, it does", async () => {
      const name = repo();
      const { config, layers } = await image(name, 1);
      const first = manifestOf(config, layers);
      const second = manifestOf(config, layers, { annotations: { n: "2" } });
      for (const bytes of [first, first, second, second, first])
        assert.equal((await oci.putManifest(name, "latest", bytes, MT.ociManifest)).status, 201);
      const history = await oci.get(`/v2/${name}/_chainguard/history/latest`);
      assert.deepEqual(
        history.json<{ history: { digest: string }[] }>()!.history.map((h) => h.digest),
        [digestOf(first), digestOf(second), digestOf(first)],
      );
    });
  });
}
