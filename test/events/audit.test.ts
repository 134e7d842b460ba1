// The audit trail and deliveries: ListEvents (filters, paging newest first, visibility), the
// deliveries of a subscription (list, state filter, paging, redelivery), retention pruning in the
// background, and the audit log file (one JSON line per committed event, matching ListEvents).
// Subscriptions are written through `server.db` here: this suite tests what happens to their
// deliveries, not how they are made.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { AuditService } from "../../src/gen/bulwark/events/v1/events_pb.js";
import { assertInvalidArgument, assertNotFound } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import { createGroup, type Api, type Json } from "../support/fixtures.js";
import { query, restClient } from "../support/http.js";
import { workload } from "../support/principals.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";
import { until } from "../support/wait.js";
import { subscribeDirectly } from "../support/events.js";
import { eventJson } from "../../src/events/audit.js";

const EVENTS = "/bulwark/events/v1/events";
const DELIVERIES = "/bulwark/events/v1/deliveries";
const GROUP_CREATED = "dev.chainguard.api.iam.group.created.v1";
const GROUP_UPDATED = "dev.chainguard.api.iam.group.updated.v1";

/** Every page of ListEvents for `params`. */
async function allEvents(api: Api, params: Record<string, string | string[] | number | undefined>): Promise<Json[]> {
  const out: Json[] = [];
  let token: string | undefined;
  do {
    const res = await api.get(EVENTS + query({ ...params, page_token: token }));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    out.push(...((res.body.events ?? []) as Json[]));
    token = res.body.nextPageToken;
  } while (token);
  return out;
}

for (const backend of backends()) {
  describe(`the audit trail and deliveries [${backend}]`, () => {
    let server: TestServer;
    let op: Api;
    before(async () => {
      // This replica delivers nothing: the deliveries stay as the test sets them.
      server = await startTestServer(backend, { events: { deliveryConcurrency: 0 } });
      op = restClient(server.url, server.operatorToken);
    });
    after(() => server?.close());

    it("ListEvents: an org's events newest first, paged, with type, prefix, subject, actor and time filters", async () => {
      const org = await createGroup(op, undefined, "audit org");
      const viewer = (await op.get(`/iam/v2beta1/roles?uidp.in_root=true&page_size=200`)).body.roles.find(
        (r: Json) => r.name === "owner",
      );
      const owner = await workload(server, op, org.uid, "audit owner", [{ at: org.uid, role: viewer }]);
      const asOwner = restClient(server.url, owner.token);
      const team = await createGroup(asOwner, org.uid, "team");
      const renamed = await asOwner.patch(`/iam/v2beta1/groups/${team.uid}`, { description: "changed" });
      assert.equal(renamed.status, 200);
      const scope = { "uidp.descendants_of": org.uid };

      const all = await allEvents(op, { ...scope, page_size: 2 });
      const times = all.map((e) => Date.parse(e.time));
      assert.deepEqual(
        times,
        [...times].sort((a, b) => b - a),
        "newest first",
      );
      assert.equal(new Set(all.map((e) => e.uid)).size, all.length, "each once");
      assert.equal(all[0]!.type, GROUP_UPDATED);
      assert.equal(all[0]!.subject, team.uid);
      assert.equal(all[0]!.group, team.uid);
      assert.equal(all[0]!.actor.subject, owner.uid);
      assert.equal(all[0]!.body.description, "changed");
      assert.match(all[0]!.uid, new RegExp(`^${team.uid}/[0-9a-f]{16}$`));
      assert.ok(all[0]!.source.startsWith("http"), all[0]!.source);

      const types = (params: Record<string, string | string[]>) =>
        allEvents(op, { ...scope, ...params }).then((es) => es.map((e) => `${e.type} ${e.subject}`));
      assert.deepEqual(await types({ types: GROUP_UPDATED }), [`${GROUP_UPDATED} ${team.uid}`]);
      assert.deepEqual(await types({ types: "dev.chainguard.registry." }), []);
      const prefixed = await types({ types: "dev.chainguard.api.iam.group." });
      assert.ok(prefixed.includes(`${GROUP_CREATED} ${team.uid}`) && prefixed.includes(`${GROUP_CREATED} ${org.uid}`));
      assert.deepEqual(await types({ subject: team.uid, types: [GROUP_CREATED, GROUP_UPDATED] }), [
        `${GROUP_UPDATED} ${team.uid}`,
        `${GROUP_CREATED} ${team.uid}`,
      ]);
      const byOwner = await allEvents(op, { ...scope, actor: owner.uid });
      assert.deepEqual(
        byOwner.map((e) => e.type),
        [GROUP_UPDATED, GROUP_CREATED],
      );
      // [start, end): the update alone, then everything before it
      const updateTime = all[0]!.time as string;
      assert.deepEqual(
        (await allEvents(op, { ...scope, start_time: updateTime })).map((e) => e.uid),
        [all[0]!.uid],
      );
      const before = await allEvents(op, { ...scope, end_time: updateTime, order_by: "time asc" });
      assert.ok(!before.some((e) => e.uid === all[0]!.uid));
      assert.equal(before.length, all.filter((e) => e.time < updateTime).length);

      // the owner sees its org's events; an identity of another org sees none of them
      const mine = await allEvents(asOwner, { ...scope });
      assert.deepEqual(mine.map((e) => e.uid).sort(), all.map((e) => e.uid).sort());
      const other = await createGroup(op, undefined, "other org");
      const stranger = await workload(server, op, other.uid, "stranger", [{ at: other.uid, role: viewer }]);
      const theirs = await allEvents(restClient(server.url, stranger.token), {});
      assert.ok(theirs.length > 0, "the stranger sees its own org's events");
      for (const e of theirs) assert.ok(e.uid.startsWith(`${other.uid}/`), `${e.uid} is not of the stranger's org`);
      // events of no group (an organization's own creation is in the group; a root identity's is not)
      const rootless = await op.post("/iam/v2beta1/identities/", {
        name: "root human",
        claimMatch: { issuer: "https://people.example", subject: `audit-${Date.now()}` },
      });
      assert.equal(rootless.status, 200, JSON.stringify(rootless.body));
      const aboutHuman = await allEvents(op, { subject: rootless.body.uid });
      assert.equal(aboutHuman.length, 1);
      assert.equal(aboutHuman[0]!.group, "");
      assert.deepEqual(await allEvents(asOwner, { subject: rootless.body.uid }), []);
    });

    it("ListEvents: bad filters are INVALID_ARGUMENT", async () => {
      assertInvalidArgument(await op.get(EVENTS + query({ types: "not a type!" })), "types[0]");
      assertInvalidArgument(
        await op.get(EVENTS + query({ start_time: "2024-01-02T00:00:00Z", end_time: "2024-01-01T00:00:00Z" })),
        "end_time",
      );
      assertInvalidArgument(await op.get(EVENTS + query({ order_by: "type" })), "order_by");
      assertInvalidArgument(await op.get(EVENTS + query({ "uidp.descendants_of": "nope" })), "uidp.descendants_of");
      // over gRPC a timestamp can name a year the database cannot store
      const grpc = operatorGrpc(server, AuditService);
      try {
        const err = await grpc.client.listEvents({ startTime: { seconds: -100_000_000_000n } }).then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
        assert.equal(err?.code, Code.InvalidArgument, String(err));
        assert.match(err.rawMessage, /start_time/);
      } finally {
        grpc.close();
      }
    });

    it("ListDeliveries: newest event first, paged, by state; RedeliverEvents queues one event or a range again", async () => {
      const org = await createGroup(op, undefined, "deliveries org");
      const subscription = await subscribeDirectly(server, org.uid, "https://receiver.example/hook");
      const made: Json[] = [];
      for (let i = 0; i < 5; i++) made.push(await createGroup(op, org.uid, `delivered ${i}`));
      const events = await allEvents(op, {
        "uidp.descendants_of": org.uid,
        types: GROUP_CREATED,
        order_by: "time asc",
      });
      const recorded = events.filter((e) => made.some((g) => g.uid === e.subject));
      assert.equal(recorded.length, 5);

      const list = (params: Record<string, string | number | string[] | undefined>) =>
        op.get(DELIVERIES + query({ subscription_uid: subscription, ...params }));
      // pages of 2: every delivery once, newest event first, totalCount on each page
      const seen: Json[] = [];
      let token: string | undefined;
      do {
        const res = await list({ page_size: 2, page_token: token });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.totalCount, "5");
        seen.push(...res.body.deliveries);
        token = res.body.nextPageToken;
      } while (token);
      assert.deepEqual(
        seen.map((d) => d.eventId),
        recorded.map((e) => e.uid).reverse(),
      );
      for (const [i, d] of seen.entries()) {
        const e: Json = recorded[recorded.length - 1 - i]!;
        assert.equal(d.subscriptionUid, subscription);
        assert.equal(d.eventType, GROUP_CREATED);
        assert.equal(d.eventSubject, e.subject);
        assert.equal(d.eventTime, e.time);
        assert.equal(d.state, "STATE_PENDING");
        assert.equal(d.attempts, 0);
        assert.ok(d.nextAttemptTime);
      }
      // a token belongs to its filter
      const first = await list({ page_size: 2 });
      assertInvalidArgument(
        await list({ page_size: 2, states: "STATE_FAILED", page_token: first.body.nextPageToken }),
        "page_token",
      );
      assertInvalidArgument(await list({ page_size: 2, page_token: "garbage" }), "page_token");
      assertInvalidArgument(await list({ page_size: -1 }), "page_size");

      // two given up, one delivered: the state filter shows them
      const seqOf = async (uid: string) =>
        String(
          (await server.db.selectFrom("events").select("seq").where("uid", "=", uid).executeTakeFirstOrThrow()).seq,
        );
      const failed = [recorded[0]!, recorded[1]!];
      for (const e of failed)
        await server.db
          .updateTable("event_deliveries")
          .set({ state: "failed", attempts: 7, last_status_code: 503, last_error: "503 Service Unavailable" })
          .where("subscription_uid", "=", subscription)
          .where("event_seq", "=", await seqOf(e.uid))
          .execute();
      await server.db
        .updateTable("event_deliveries")
        .set({ state: "delivered", attempts: 1, last_status_code: 204, delivered_time: new Date() })
        .where("subscription_uid", "=", subscription)
        .where("event_seq", "=", await seqOf(recorded[2]!.uid))
        .execute();
      const failedNow = await list({ states: "STATE_FAILED" });
      assert.equal(failedNow.status, 200);
      assert.deepEqual(
        failedNow.body.deliveries.map((d: Json) => [d.eventId, d.attempts, d.lastStatusCode, d.lastError]),
        [...failed].reverse().map((e) => [e.uid, 7, 503, "503 Service Unavailable"]),
      );
      assert.ok(!("nextAttemptTime" in failedNow.body.deliveries[0]));
      const settled = await list({ states: ["STATE_FAILED", "STATE_DELIVERED"] });
      assert.equal(settled.body.totalCount, "3");
      assert.ok(settled.body.deliveries[0].deliveredTime);

      // redeliver one event: pending again, attempts and last answer kept
      const one = await op.post(`${DELIVERIES}:redeliver`, { subscriptionUid: subscription, eventId: failed[0]!.uid });
      assert.equal(one.status, 200, JSON.stringify(one.body));
      assert.equal(one.body.count, "1");
      const again = (await list({ states: "STATE_PENDING" })).body.deliveries.find(
        (d: Json) => d.eventId === failed[0]!.uid,
      );
      assert.equal(again.attempts, 7);
      assert.equal(again.lastStatusCode, 503);
      // a range [start, end): the second failed and the delivered one
      const range = await op.post(`${DELIVERIES}:redeliver`, {
        subscriptionUid: subscription,
        startTime: failed[1]!.time,
        endTime: recorded[3]!.time,
      });
      assert.equal(range.status, 200, JSON.stringify(range.body));
      assert.equal(range.body.count, recorded[3]!.time > recorded[2]!.time ? "2" : "1");
      assert.equal(
        (await list({ states: ["STATE_FAILED", "STATE_DELIVERED"] })).body.totalCount,
        range.body.count === "2" ? "0" : "1",
      );
      // an event the subscription never got (recorded before it existed) gets no delivery invented
      const older = (await allEvents(op, { subject: org.uid }))[0]!;
      const none = await op.post(`${DELIVERIES}:redeliver`, { subscriptionUid: subscription, eventId: older.uid });
      assert.equal(none.body.count, "0");
      assert.equal((await list({})).body.totalCount, "5");
    });

    it("deliveries: bad requests change nothing; another org's caller finds no subscription", async () => {
      const org = await createGroup(op, undefined, "deliveries bad org");
      const subscription = await subscribeDirectly(server, org.uid, "https://receiver.example/hook");
      await createGroup(op, org.uid, "one");
      const redeliver = (body: Json) => op.post(`${DELIVERIES}:redeliver`, { subscriptionUid: subscription, ...body });
      assertInvalidArgument(await redeliver({}), "event_id");
      assertInvalidArgument(await redeliver({ eventId: "x", startTime: "2024-01-01T00:00:00Z" }), "event_id");
      assertInvalidArgument(
        await redeliver({ startTime: "2024-01-02T00:00:00Z", endTime: "2024-01-01T00:00:00Z" }),
        "end_time",
      );
      assertInvalidArgument(
        await op.get(DELIVERIES + query({ subscription_uid: subscription, states: "STATE_UNSPECIFIED" })),
        "states[0]",
      );
      assertNotFound(await op.get(DELIVERIES + query({ subscription_uid: `${org.uid}/0123456789abcdef` })), "missing");
      assertNotFound(
        await op.post(`${DELIVERIES}:redeliver`, {
          subscriptionUid: `${org.uid}/0123456789abcdef`,
          startTime: "2024-01-01T00:00:00Z",
        }),
        "missing",
      );
      const other = await createGroup(op, undefined, "deliveries other org");
      const roles = (await op.get(`/iam/v2beta1/roles?uidp.in_root=true&page_size=200`)).body.roles as Json[];
      const owner = roles.find((r) => r.name === "owner")!;
      const stranger = await workload(server, op, other.uid, "stranger", [{ at: other.uid, role: owner }]);
      const asStranger = restClient(server.url, stranger.token);
      assertNotFound(await asStranger.get(DELIVERIES + query({ subscription_uid: subscription })), "stranger list");
      assertNotFound(
        await asStranger.post(`${DELIVERIES}:redeliver`, {
          subscriptionUid: subscription,
          startTime: "2024-01-01T00:00:00Z",
        }),
        "stranger redeliver",
      );
      const states = await server.db
        .selectFrom("event_deliveries")
        .select("state")
        .where("subscription_uid", "=", subscription)
        .execute();
      assert.deepEqual(
        states.map((s: { state: string }) => s.state),
        ["pending"],
      );
    });
  });

  describe(`event retention [${backend}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(backend, {
        events: { retentionMs: 60 * 60 * 1000, retentionEveryMs: 20, deliveryRetryForMs: 60 * 60 * 1000 },
      });
    });
    after(() => server?.close());

    it("refuses to start with a retention shorter than the delivery retry period", async () => {
      await assert.rejects(
        startTestServer(backend, { events: { retentionMs: 60 * 60 * 1000, deliveryRetryForMs: 2 * 60 * 60 * 1000 } }),
        /event retention .* is shorter than the delivery retry period/,
      );
    });

    it("prunes events older than the retention in the background, their deliveries with them, and keeps the rest", async () => {
      const op = restClient(server.url, server.operatorToken);
      const org = await createGroup(op, undefined, "retention org");
      const subscription = await subscribeDirectly(server, org.uid, "https://receiver.example/hook");
      const old = await createGroup(op, org.uid, "old");
      const young = await createGroup(op, org.uid, "young");
      const aged = await server.db
        .updateTable("events")
        .set({ time: new Date(Date.now() - 2 * 60 * 60 * 1000) })
        .where("subject", "=", old.uid)
        .returning("seq")
        .execute();
      assert.equal(aged.length, 1);
      await until(
        async () =>
          (await server.db.selectFrom("events").select("seq").where("subject", "=", old.uid).execute()).length === 0,
        "the aged event is pruned",
      );
      const left = await server.db
        .selectFrom("event_deliveries")
        .select("event_seq")
        .where("subscription_uid", "=", subscription)
        .execute();
      assert.ok(!left.some((d: { event_seq: string }) => String(d.event_seq) === String(aged[0]!.seq)));
      assert.equal(left.length, 1, "the young event's delivery stays");
      const kept = await allEvents(op, { subject: young.uid });
      assert.deepEqual(
        kept.map((e) => e.type),
        [GROUP_CREATED],
      );
    });
  });

  describe(`the audit log [${backend}]`, () => {
    let dir: string;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), "bulwark-audit-log-"));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    it("writes each committed event as one JSON line, appended to the file (0600), matching ListEvents", async () => {
      const file = join(dir, "audit.jsonl");
      const server = await startTestServer(backend, { events: { auditLog: file } });
      let closed = false;
      try {
        const op = restClient(server.url, server.operatorToken);
        const org = await createGroup(op, undefined, "logged org");
        const team = await createGroup(op, org.uid, "logged team");
        assert.equal((await op.patch(`/iam/v2beta1/groups/${team.uid}`, { description: "x" })).status, 200);
        assert.equal((await op.delete(`/iam/v2beta1/groups/${team.uid}`)).status, 200);
        // a refused change writes nothing
        assert.equal((await op.post(`/iam/v2beta1/groups/${org.uid}`, { name: "NOT VALID!" })).status, 400);
        const listed = await allEvents(op, { order_by: "time asc", page_size: 200 });
        await server.close();
        closed = true;
        assert.equal(statSync(file).mode & 0o777, 0o600);
        const lines = readFileSync(file, "utf8").split("\n");
        assert.equal(lines.pop(), "", "the file ends with a newline");
        const logged = lines.map((l) => JSON.parse(l) as Json);
        assert.equal(logged.length, listed.length);
        for (const line of logged) {
          assert.match(line.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/);
          delete line.traceparent;
        }
        const byUid = (xs: Json[]) => [...xs].sort((a, b) => (a.uid < b.uid ? -1 : 1));
        assert.deepEqual(byUid(logged), byUid(listed));
        assert.deepEqual(
          logged.filter((e) => e.subject === team.uid).map((e) => e.type),
          [GROUP_CREATED, GROUP_UPDATED, "dev.chainguard.api.iam.group.deleted.v1"],
        );
      } finally {
        if (!closed) await server.close();
      }
      // a second server appends after what is there
      const before = readFileSync(file, "utf8");
      const again = await startTestServer(backend, { events: { auditLog: file } });
      try {
        await createGroup(restClient(again.url, again.operatorToken), undefined, "appended org");
      } finally {
        await again.close();
      }
      const now = readFileSync(file, "utf8");
      assert.ok(now.startsWith(before));
      const added = now.slice(before.length).trim().split("\n");
      assert.equal(added.length, 1);
      assert.equal(JSON.parse(added[0]!).type, GROUP_CREATED);
    });

    it("a path that cannot be written fails the start", async () => {
      writeFileSync(join(dir, "not-a-dir"), "");
      await assert.rejects(
        startTestServer(backend, { events: { auditLog: join(dir, "not-a-dir", "audit.jsonl") } }),
        /ENOTDIR|ENOENT/,
      );
    });
  });
}

describe("the audit log's line", () => {
  it("is the Event as ListEvents answers it over REST: a time at a whole second keeps its .000", () => {
    const line = eventJson({
      uid: "0123456789abcdef0123456789abcdef01234567/0123456789abcdef",
      type: GROUP_CREATED,
      source: "https://bulwark.example",
      subject: "0123456789abcdef0123456789abcdef01234567/0123456789abcdef",
      group: "0123456789abcdef0123456789abcdef01234567",
      time: new Date(Date.UTC(2026, 0, 1)),
      actor: null,
      body: { createTime: "2026-01-01T00:00:00.000Z" },
    }) as Json;
    assert.equal(line.time, "2026-01-01T00:00:00.000Z");
    assert.deepEqual(line.body, { createTime: "2026-01-01T00:00:00.000Z" });
  });
});
