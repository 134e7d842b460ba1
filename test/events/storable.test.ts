// Events record what callers sent (a token's unverified subject, a pull's reference): text the
// database cannot store (NUL, an unpaired surrogate) is recorded replaced, never turning the
// request's own answer (401, 404) into a fault.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { flushEvents } from "../support/events.js";
import { storableJson, storableText } from "../../src/events/storable.js";

describe("storable event text", () => {
  it("replaces NUL and unpaired surrogates, keeps pairs, bounds length, keys too", () => {
    assert.equal(storableText("a\u0000b"), "a\uFFFDb");
    assert.equal(storableText("x\uD800y\uDC00z"), "x\uFFFDy\uFFFDz");
    assert.equal(storableText("ok \uD83D\uDE00"), "ok \uD83D\uDE00");
    assert.equal(storableText("u".repeat(5000)).length, 2048);
    assert.deepEqual(storableJson({ "k\u0000": ["v\u0000", 1, null] }), { "k\uFFFD": ["v\uFFFD", 1, null] });
  });
});

for (const backend of backends()) {
  describe(`events of what callers sent [${backend}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(backend);
    });
    after(() => server.close());

    it("a failed pull of a reference with a NUL answers its OCI error and is recorded", async () => {
      const api = restClient(server.url, server.operatorToken);
      const org = (await api.post("/iam/v2beta1/groups", { name: "storable-org" })).body;
      const basic = `Basic ${Buffer.from(`_token:${server.operatorToken}`).toString("base64")}`;
      const res = await fetch(`${server.url}/v2/storable-org/app/manifests/%00`, { headers: { authorization: basic } });
      assert.ok(res.status >= 400 && res.status < 500, `a client error, not ${res.status}`);
      const anonymous = await fetch(`${server.url}/v2/storable-org/app/manifests/%00`);
      assert.ok(anonymous.status >= 400 && anonymous.status < 500, `a client error, not ${anonymous.status}`);
      await flushEvents(server);
      const recorded = await server.db
        .selectFrom("events")
        .select(["type", "body"])
        .where("parent_uid", "=", org.uid)
        .where("type", "=", "dev.chainguard.registry.pull.v1")
        .execute();
      assert.ok(recorded.length >= 1);
      assert.ok(!JSON.stringify(recorded).includes("\\u0000"));
    });
  });
}
