// What a blob push writes to the database: a monolithic push (POST ?digest=) records no upload
// session, a completing PUT records its last chunk only with the blob (one statement, with the
// push's event), while a
// PATCH records the size it acknowledged (so another replica can continue). A session cancelled
// while its last chunk streamed records nothing.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { sql } from "kysely";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { registryModule } from "../../src/registry/module.js";
import { observeQueries } from "../../src/storage/observed.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { OciClient, digestOf, withQuery } from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { until, withinHang } from "../support/wait.js";

/** The statements that write the uploads table on their own (not inside a statement that records a blob). */
const SESSION_WRITE = /^\s*(insert into|update|delete from)\s+"?uploads"?\s/i;
/** A statement that inserts one event (of its own, or within another statement). */
const ONE_EVENT = /insert into events \([^)]*\)\s*(values\s*\(\s*\$|select \$)/i;

for (const backend of backends()) {
  describe(`upload sessions in the database [${backend}]`, () => {
    let server: TestServer;
    let oci: OciClient;
    let token: string;
    before(async () => {
      server = await startTestServer(backend);
      const created = await restClient(server.url, server.operatorToken).post("/iam/v2beta1/groups", { name: "acme" });
      assert.equal(created.status, 200);
      token = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      oci = new OciClient(server.url, { bearer: token });
      assert.equal((await oci.postBlob("acme/app", "first")).status, 201); // the repo exists
      for (const id of await stagedIds()) known.add(id);
    });
    after(() => server?.close());

    /** The session writes `work` sends (statements on the uploads table of their own). */
    async function sessionWrites(work: () => Promise<void>): Promise<string[]> {
      const seen: string[] = [];
      const stop = observeQueries(server.db, (sql) => {
        if (SESSION_WRITE.test(sql)) seen.push(sql.trim().split(/\s+/).slice(0, 3).join(" "));
      });
      try {
        await work();
      } finally {
        stop();
      }
      return seen;
    }

    const known = new Set<string>();
    async function stagedIds(): Promise<string[]> {
      const ids: string[] = [];
      for await (const u of server.exportsOf(registryModule).store.listUploads()) ids.push(u.uploadId);
      return ids;
    }

    const sessions = async () =>
      Number(
        (
          await server.db
            .selectFrom("uploads")
            .select((eb) => eb.fn.countAll().as("n"))
            .executeTakeFirstOrThrow()
        ).n,
      );

    it("a monolithic push writes no session, and leaves none", async () => {
      const before = await sessions();
      const bytes = randomBytes(100_000);
      const writes = await sessionWrites(async () => {
        assert.equal((await oci.postBlob("acme/app", bytes)).status, 201);
      });
      for (const id of await stagedIds()) known.add(id);
      assert.deepEqual(writes, []);
      assert.equal(await sessions(), before);
      const pulled = await oci.get(`/v2/acme/app/blobs/${digestOf(bytes)}`);
      assert.equal(pulled.status, 200);
      assert.deepEqual(pulled.body, bytes);
    });

    it("a monolithic push whose body is cut short leaves no session and no staged bytes behind", async () => {
      const before = await sessions();
      const digest = digestOf(`never ${randomBytes(8).toString("hex")}`);
      const port = Number(new URL(server.url).port);
      const req = request({
        host: "127.0.0.1",
        port,
        method: "POST",
        path: `/v2/acme/app/blobs/uploads/?digest=${digest}`,
        headers: { authorization: `Bearer ${token}`, "content-length": "100000" },
      });
      req.on("error", () => undefined);
      req.write(randomBytes(1000));
      // Once the bytes are staged, the client goes away.
      const staged = await until(async () => (await stagedIds()).find((id) => !known.has(id)), "the staged bytes");
      req.destroy();
      // The failed push is recorded once the server gave up on it.
      await until(
        async () =>
          (
            await sql<{ n: number }>`select count(*)::int as n from events where body->>'digest' = ${digest}`.execute(
              server.db,
            )
          ).rows[0]!.n > 0,
        "the failed push's event",
      );
      assert.equal(await sessions(), before);
      assert.ok(!(await stagedIds()).includes(staged), "its staged bytes are gone");
    });

    it("POST then PUT with the body: the session is written once, and ends with the blob", async () => {
      const bytes = randomBytes(50_000);
      const writes = await sessionWrites(async () => {
        assert.equal((await oci.pushBlob("acme/app", bytes)).status, 201);
      });
      assert.deepEqual(writes, ['insert into "uploads"']);
      assert.deepEqual((await oci.get(`/v2/acme/app/blobs/${digestOf(bytes)}`)).body, bytes);
    });

    it("completing a push writes the blob, its link, the session's end and the push's event in one statement", async () => {
      const writes = async (push: () => Promise<void>) => {
        const seen: string[] = [];
        const stop = observeQueries(server.db, (text) => {
          // What the push writes: its blob, link or session, or one event (not a batch recorded soon).
          if (/^\s*(select|begin|commit|rollback|savepoint|release)\b/i.test(text)) return;
          if (/\b(blobs|repo_blobs|"?uploads"?)\b/.test(text) || ONE_EVENT.test(text)) seen.push(text);
        });
        try {
          await push();
        } finally {
          stop();
        }
        return seen;
      };
      const [a, b] = [randomBytes(40_000), randomBytes(40_000)];
      const monolithic = await writes(async () => assert.equal((await oci.postBlob("acme/app", a)).status, 201));
      assert.equal(monolithic.length, 1, monolithic.join("\n"));
      assert.match(monolithic[0]!, /insert into blobs[\s\S]*insert into repo_blobs[\s\S]*insert into events/i);
      const twoStep = await writes(async () => assert.equal((await oci.pushBlob("acme/app", b)).status, 201));
      assert.equal(twoStep.length, 2, twoStep.join("\n"));
      assert.match(twoStep[0]!, /insert into "uploads"/);
      assert.match(twoStep[1]!, /insert into blobs[\s\S]*delete from uploads[\s\S]*insert into events/i);
      for (const bytes of [a, b]) {
        const event = await sql<{ n: number }>`
          select count(*)::int as n from events where type = 'dev.chainguard.registry.push.v1' and body->>'digest' = ${digestOf(bytes)}`.execute(
          server.db,
        );
        assert.equal(event.rows[0]!.n, 1, "the push's event");
      }
    });

    it("each PATCH records the size it acknowledged; the empty PUT ends the session", async () => {
      const [a, b] = [randomBytes(30_000), randomBytes(20_000)];
      const whole = Buffer.concat([a, b]);
      const before = await sessions();
      const writes = await sessionWrites(async () => {
        let location = (await oci.startUpload("acme/app")).headers.get("location")!;
        for (const [start, part] of [
          [0, a],
          [a.length, b],
        ] as const) {
          const res = await oci.request("PATCH", location, {
            body: part,
            headers: { "content-range": `${start}-${start + part.length - 1}` },
          });
          assert.equal(res.status, 202);
          location = res.headers.get("location")!;
          // Acknowledged: another replica reading the session sees this size.
          const [row] = await server.db
            .selectFrom("uploads")
            .select("size")
            .where("id", "=", location.split("/").pop()!)
            .execute();
          assert.equal(Number(row?.size), start + part.length);
        }
        assert.equal((await oci.request("PUT", withQuery(location, { digest: digestOf(whole) }))).status, 201);
      });
      assert.deepEqual(writes, ['insert into "uploads"', 'update "uploads" set', 'update "uploads" set']);
      assert.equal(await sessions(), before);
      assert.deepEqual((await oci.get(`/v2/acme/app/blobs/${digestOf(whole)}`)).body, whole);
    });

    it("a session cancelled while its last chunk streams records nothing: 416", async () => {
      const bytes = randomBytes(64_000);
      const location = (await oci.startUpload("acme/app")).headers.get("location")!;
      const url = new URL(withQuery(location, { digest: digestOf(bytes) }), server.url);
      const answer = withinHang(
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = request(url, {
            method: "PUT",
            headers: { authorization: `Bearer ${token}`, "content-length": String(bytes.length) },
          });
          req.on("response", (res) => {
            let body = "";
            res.on("data", (c: Buffer) => (body += c.toString()));
            res.on("end", () => resolve({ status: res.statusCode!, body }));
          });
          req.on("error", reject);
          // Half now; the rest once the session is cancelled.
          req.write(bytes.subarray(0, 32_000));
          const id = location.split("/").pop()!;
          // Once the PUT is streaming into the session's staged bytes, it is cancelled.
          void until(async () => (await stagedIds()).includes(id), "the PUT's staged bytes")
            .then(async () => {
              assert.equal((await oci.request("DELETE", location)).status, 204);
              req.end(bytes.subarray(32_000));
            })
            .catch(reject);
        }),
        "the PUT's answer",
      );
      const { status, body } = await answer;
      assert.equal(status, 416, body);
      assert.match(body, /BLOB_UPLOAD_INVALID/);
      assert.equal((await oci.request("HEAD", `/v2/acme/app/blobs/${digestOf(bytes)}`)).status, 404);
    });
  });
}
