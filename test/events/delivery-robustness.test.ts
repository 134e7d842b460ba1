// The delivery worker where things go wrong: a subscription busy with new deliveries is still
// claimed (PostgreSQL: their foreign key locks); a request that cannot even be made, or whose token
// cannot be minted, is a failed attempt, not a run started again at once; a sink changed mid-run
// gets the rest; a timeout not under half the lease is refused at start; a redelivery of an old
// event is retried for a whole retry period; a subscription receives only what its creator may
// still see, and only creators who may see the group's subscriptions can make one.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { startEventReceiver } from "../support/event-receiver.js";
import {
  createGroup,
  createIdentity,
  createRole,
  createRoleBinding,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { assertPermissionDenied, ok } from "../support/assertions.js";
import { signal, until, withinHang } from "../support/wait.js";
import { EventsRepository } from "../../src/events/storage/events.js";
import { DeliveryQueue } from "../../src/events/storage/delivery-queue.js";
import { CREATOR_ACCESS_LOST, DeliveryWorker } from "../../src/events/delivery.js";
import { deliveriesOf, deliveriesWhen, subscribeDirectly, type DeliveryView } from "../support/events.js";

/** An event of `group` recorded as a module would, with a subject of our choosing. */
function eventOf(group: string, subject: string) {
  return {
    type: "dev.bulwark.test.made.v1",
    source: "https://bulwark.test",
    subject,
    group,
    actor: undefined,
    body: { made: subject },
    traceparent: "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01",
    time: new Date(),
  };
}

/** Records `event` for the subscription, and waits until its one delivery failed twice (still pending: retried). */
async function failedTwice(
  server: TestServer,
  subscription: string,
  event: ReturnType<typeof eventOf>,
): Promise<DeliveryView> {
  await new EventsRepository(server.db).insert(event);
  const [row] = await deliveriesWhen(
    server,
    subscription,
    (r) => r.length === 1 && r[0]!.attempts >= 2,
    "two failed attempts",
  );
  assert.equal(row!.state, "pending");
  return row!;
}

const FAST = {
  allowInsecureSinks: true,
  deliveryBackoffMinMs: 5,
  deliveryBackoffMaxMs: 40,
  deliveryPollMs: 20,
  deliveryRetryForMs: 3 * 3600_000,
};

for (const backend of backends()) {
  describe(`events delivery robustness [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    before(async () => {
      server = await startTestServer(backend, { events: FAST });
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    it("records a request that cannot be made as a failed attempt, retried with backoff", async () => {
      const org = await createGroup(api, undefined, "unsendable-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      try {
        const subscription = await subscribeDirectly(server, org.uid, receiver.url);
        // A line break in a header value: the request throws before anything is sent.
        const row = await failedTwice(server, subscription, eventOf(org.uid, "broken\nsubject"));
        assert.match(row.last_error ?? "", /^the delivery could not be sent: .*ce-subject/);
        assert.ok(row.next_attempt_time > row.last_attempt_time!, "the next attempt is after the last");
        assert.deepEqual(receiver.all, []);
      } finally {
        await receiver.close();
      }
    });

    it("sends the rest of a run to the sink the subscription was changed to during it", async () => {
      const org = await createGroup(api, undefined, "moved-org");
      const [old, moved] = await Promise.all([0, 1].map(() => startEventReceiver(server.urls.issuer, () => org.uid)));
      const made = signal();
      let subscription: Json = {};
      let first = true;
      old!.answer = async () => {
        if (first) {
          first = false;
          // Everything is queued behind this delivery before the sink changes.
          await withinHang(made.promise, "the groups made");
          ok(
            await api.patch(`/bulwark/events/v1/subscriptions/${subscription.uid}`, { sink: moved!.url }),
            "change the sink",
          );
        }
        return { status: 200 };
      };
      try {
        subscription = ok(await api.post(`/bulwark/events/v1/subscriptions/${org.uid}`, { sink: old!.url }));
        const groups: string[] = [];
        for (let i = 0; i < 4; i++) groups.push((await createGroup(api, org.uid, `m${i}`)).uid);
        made.resolve();
        const rows = await deliveriesWhen(
          server,
          subscription.uid,
          (r) => r.some((x) => x.type.endsWith(".updated.v1")) && r.every((x) => x.state === "delivered"),
          "every delivery, the sink change's too",
        );
        assert.deepEqual(old!.rejected, []);
        assert.deepEqual(moved!.rejected, []);
        assert.equal(old!.all.length, 1, "the old sink got only the delivery it was answering");
        const got = [...old!.all, ...moved!.accepted()].map((d) => d.event.id);
        assert.deepEqual(
          got,
          rows.map((r) => r.uid),
          "each event once, in order",
        );
        const movedSubjects = moved!.accepted().map((d) => d.event.subject);
        for (const group of groups.filter((g) => !old!.all.some((d) => d.event.subject === g)))
          assert.ok(movedSubjects.includes(group), `${group} went to the new sink`);
      } finally {
        await Promise.all([old!.close(), moved!.close()]);
      }
    });

    it("retries a redelivered old event for a whole retry period from the redelivery", async () => {
      const org = await createGroup(api, undefined, "redelivered-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      try {
        const subscription = await subscribeDirectly(server, org.uid, receiver.url);
        const group = await createGroup(api, org.uid, "old");
        const [delivered] = await deliveriesWhen(
          server,
          subscription,
          (r) => r.length === 1 && r[0]!.state === "delivered",
          "the first delivery",
        );
        // The event is now older than the retry period (3 h).
        await server.db
          .updateTable("events")
          .set({ time: new Date(Date.now() - 4 * 3600_000) })
          .where("uid", "=", delivered!.uid)
          .execute();
        let refusals = 0;
        receiver.answer = () => (refusals++ < 2 ? { status: 503 } : { status: 204 });
        const redelivered = ok(
          await api.post("/bulwark/events/v1/deliveries:redeliver", {
            subscriptionUid: subscription,
            eventId: delivered!.uid,
          }),
        );
        assert.equal(Number(redelivered.count), 1);
        const [row] = await deliveriesWhen(
          server,
          subscription,
          (r) => r[0]!.state !== "pending",
          "the redelivery settled",
        );
        assert.equal(row!.state, "delivered", row!.last_error ?? "");
        assert.equal(row!.attempts, 4, "the first delivery, two refusals, then delivered");
        assert.deepEqual(
          receiver.all.map((d) => [d.event.subject, d.status]),
          [
            [group.uid, 200],
            [group.uid, 503],
            [group.uid, 503],
            [group.uid, 204],
          ],
        );
      } finally {
        await receiver.close();
      }
    });

    it("lets only a creator who may list the group's subscriptions create one, on every version", async () => {
      const org = await createGroup(api, undefined, "creator-org");
      const createOnly = await createRole(api, org.uid, "create-only", ["CAP_EVENTS_SUBSCRIPTION_CREATE"]);
      const identity = await createIdentity(api, org.uid, "maker", "maker-subject");
      await createRoleBinding(api, org.uid, identity.uid, createOnly.uid);
      const maker = restClient(server.url, await server.tokenFor(identity.uid));
      const sink = "https://receiver.example.com/hook";
      for (const path of [
        `/events/v2beta1/subscriptions/${org.uid}`,
        `/events/v2/subscriptions/${org.uid}`,
        `/events/v1/subscriptions/${org.uid}`,
        `/bulwark/events/v1/subscriptions/${org.uid}`,
      ])
        assertPermissionDenied(await maker.post(path, { sink }), path);
      const count = await server.db
        .selectFrom("event_subscriptions")
        .select((eb) => eb.fn.countAll().as("n"))
        .where("parent_uid", "=", org.uid)
        .executeTakeFirstOrThrow();
      assert.equal(Number(count.n), 0, "nothing created");
      const createAndList = await createRole(api, org.uid, "create-and-list", [
        "CAP_EVENTS_SUBSCRIPTION_CREATE",
        "CAP_EVENTS_SUBSCRIPTION_LIST",
      ]);
      await createRoleBinding(api, org.uid, identity.uid, createAndList.uid);
      ok(await maker.post(`/events/v2beta1/subscriptions/${org.uid}`, { sink }), "created with both");
    });

    it("holds deliveries while the subscription's creator may not see the group, and resumes when it may", async () => {
      const org = await createGroup(api, undefined, "access-org");
      const role = await createRole(api, org.uid, "subscriber", [
        "CAP_EVENTS_SUBSCRIPTION_CREATE",
        "CAP_EVENTS_SUBSCRIPTION_LIST",
      ]);
      const identity = await createIdentity(api, org.uid, "subscriber", "subscriber-subject");
      const binding = await createRoleBinding(api, org.uid, identity.uid, role.uid);
      const subscriber = restClient(server.url, await server.tokenFor(identity.uid));
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      try {
        const subscription = ok(
          await subscriber.post(`/bulwark/events/v1/subscriptions/${org.uid}`, {
            sink: receiver.url,
            types: ["dev.chainguard.api.iam.group."],
          }),
        ).uid as string;
        const seen = await createGroup(api, org.uid, "seen");
        await deliveriesWhen(server, subscription, (r) => r.length === 1 && r[0]!.state === "delivered", "seen");
        ok(await api.delete(`/iam/v2beta1/roleBindings/${binding.uid}`), "unbind the creator");
        const unseen = await createGroup(api, org.uid, "unseen");
        const held = await deliveriesWhen(
          server,
          subscription,
          (r) => r.length === 2 && r[1]!.attempts >= 2,
          "the held delivery's attempts",
        );
        assert.equal(held[1]!.state, "pending");
        assert.equal(held[1]!.last_error, CREATOR_ACCESS_LOST);
        assert.ok(held[1]!.next_attempt_time > held[1]!.last_attempt_time!);
        assert.deepEqual(
          receiver.all.map((d) => d.event.subject),
          [seen.uid],
          "nothing sent while held",
        );
        await createRoleBinding(api, org.uid, identity.uid, role.uid);
        await deliveriesWhen(server, subscription, (r) => r.every((x) => x.state === "delivered"), "resumed");
        assert.deepEqual(
          receiver.accepted().map((d) => d.event.subject),
          [seen.uid, unseen.uid],
        );
      } finally {
        await receiver.close();
      }
    });

    it("refuses to start with a delivery timeout not under half the lease", async () => {
      await assert.rejects(
        startTestServer(backend, { events: { deliveryLeaseMs: 2_000, deliveryTimeoutMs: 1_000 } }),
        /the delivery timeout \(1000 ms\) must be less than half the delivery lease \(2000 ms\)/,
      );
    });
  });
}

for (const backend of backends()) {
  describe(`events delivery by a worker whose tokens cannot be minted [${backend}]`, () => {
    let server: TestServer;
    before(async () => {
      // This server delivers nothing: the test's worker is the only one.
      server = await startTestServer(backend, { events: { ...FAST, deliveryConcurrency: 0 } });
    });
    after(() => server.close());

    it("records a token not minted as a failed attempt, retried with backoff, and sends nothing", async () => {
      const api = restClient(server.url, server.operatorToken);
      const org = await createGroup(api, undefined, "tokenless-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      let asked = 0;
      const worker = new DeliveryWorker({
        queue: new DeliveryQueue(server.db),
        tokens: async () => {
          asked++;
          throw new Error("no signing key");
        },
        settings: FAST,
        logger: pino({ level: "silent" }),
        now: () => new Date(),
      });
      try {
        const subscription = await subscribeDirectly(server, org.uid, receiver.url);
        worker.start();
        const row = await failedTwice(server, subscription, eventOf(org.uid, "unsigned"));
        assert.equal(row.last_error, "the delivery could not be sent: no signing key");
        assert.ok(asked >= 2, "a token was asked for at each attempt");
        assert.deepEqual(receiver.all, []);
      } finally {
        await worker.stop();
        await receiver.close();
      }
    });
  });
}

describe("events delivery claims busy subscriptions [postgres]", () => {
  const postgres = backends().includes("postgres");
  let server: TestServer;
  before(async () => {
    if (!postgres) return;
    // This server delivers nothing: the test claims as a replica would.
    server = await startTestServer("postgres", { events: { deliveryConcurrency: 0 } });
  });
  after(() => server?.close());

  it(
    "claims a subscription while another transaction is inserting one of its deliveries",
    { skip: !postgres && "needs PostgreSQL (PGlite has one connection)" },
    async () => {
      const api = restClient(server.url, server.operatorToken);
      const org = await createGroup(api, undefined, "busy-org");
      const subscription = await subscribeDirectly(server, org.uid, "https://receiver.example.com/busy");
      await createGroup(api, org.uid, "due");
      const inserted = signal();
      const done = signal();
      // An RPC's transaction that has recorded its event (its delivery's foreign key locks the
      // subscription row) and not committed yet.
      const transaction = server.db
        .transaction()
        .execute(async (trx) => {
          await new EventsRepository(trx as unknown as TestServer["db"]).insert(eventOf(org.uid, "in-flight"));
          inserted.resolve();
          await done.promise;
          throw new Error("rolled back");
        })
        .catch(() => undefined);
      try {
        await withinHang(inserted.promise, "the uncommitted delivery");
        const claimed = await withinHang(
          new DeliveryQueue(server.db).claim("test-replica", 60_000, 10, new Date(), []),
          "the claim",
        );
        assert.deepEqual(
          claimed.map((s) => s.uid),
          [subscription],
        );
      } finally {
        done.resolve();
        await transaction;
      }
    },
  );
});
