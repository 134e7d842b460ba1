// Many replicas on one PostgreSQL, one delivery: three replicas share the outbox and every event
// reaches each subscription exactly once across 2,000 changes spread over them; a replica killed
// (kill -9) in the middle of a delivery loses nothing: once its lease expires another replica
// resends, with the same Ce-Id. PostgreSQL only (PGlite is one process's database).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { postgresUrl } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { startEventReceiver, type EventReceiver } from "../support/event-receiver.js";
import { serveProcess, type ServeProcess } from "../support/cli.js";
import { createGroup } from "../support/fixtures.js";
import { until, withinHang } from "../support/wait.js";
import { subscribeDirectly } from "../support/events.js";

/** The event uids a subscription has deliveries for, in event order, once none is pending. */
async function settledDeliveries(server: TestServer, subscription: string, expected: number): Promise<string[]> {
  let uids: string[] = [];
  await until(async () => {
    const rows = await server.db
      .selectFrom("event_deliveries as d")
      .innerJoin("events as e", "e.seq", "d.event_seq")
      .select(["e.uid", "d.state"])
      .where("d.subscription_uid", "=", subscription)
      .orderBy("d.event_seq")
      .execute();
    uids = rows.map((r: { uid: string }) => r.uid);
    return rows.length >= expected && rows.every((r: { state: string }) => r.state === "delivered");
  }, `${expected} deliveries delivered`);
  return uids;
}

function counts(ids: string[]): Map<string, number> {
  const seen = new Map<string, number>();
  for (const id of ids) seen.set(id, (seen.get(id) ?? 0) + 1);
  return seen;
}

// The request deadline stays under half the lease (the server refuses anything else).
const FAST = { allowInsecureSinks: true, deliveryPollMs: 50, deliveryLeaseMs: 2_000, deliveryTimeoutMs: 900 };

describe("events delivery across replicas [postgres]", { skip: !postgresUrl() && "needs PostgreSQL" }, () => {
  let primary: TestServer;
  const replicas: TestServer[] = [];
  before(async () => {
    primary = await startTestServer("postgres", { events: FAST });
    const publicUrls = { issuerUrl: primary.urls.issuer, apiUrl: primary.urls.apiAudience };
    for (let i = 0; i < 2; i++)
      replicas.push(await startTestServer("postgres", { replicaOf: primary, publicUrls, events: FAST }));
  });
  after(async () => {
    for (const r of replicas) await r.close();
    await primary.close();
  });

  it("delivers each of 2,000 changes made on three replicas exactly once to each subscription", async () => {
    const servers = [primary, ...replicas];
    const apis = servers.map((s) => restClient(s.url, primary.operatorToken));
    const org = await createGroup(apis[0]!, undefined, "replicated-org");
    const receivers = await Promise.all([0, 1].map(() => startEventReceiver(primary.urls.issuer, () => org.uid)));
    try {
      const subscriptions = await Promise.all(receivers.map((r) => subscribeDirectly(primary, org.uid, r.url)));
      const CHANGES = 2_000;
      let next = 0;
      // Eight callers at a time, each change on the next replica in turn.
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = next++; i < CHANGES; i = next++) {
            const res = await apis[i % 3]!.post(`/iam/v2beta1/groups/${org.uid}`, { name: `g-${i}` });
            assert.equal(res.status, 200, JSON.stringify(res.body));
          }
        }),
      );
      for (const [i, receiver] of receivers.entries()) {
        const expected = await settledDeliveries(primary, subscriptions[i]!, CHANGES);
        assert.equal(expected.length, CHANGES);
        assert.deepEqual(receiver.rejected, []);
        const got = receiver.accepted().map((d) => d.event.id);
        const duplicates = [...counts(got)].filter(([, n]) => n > 1);
        assert.deepEqual(duplicates, [], "no event twice");
        assert.deepEqual([...got].sort(), [...expected].sort(), "every event, once");
      }
    } finally {
      await Promise.all(receivers.map((r) => r.close()));
    }
  });
});

describe("events delivery after a replica's kill -9 [postgres]", { skip: !postgresUrl() && "needs PostgreSQL" }, () => {
  let primary: TestServer;
  before(async () => {
    // This replica delivers only on its own events (it makes none after the subscription): the
    // child process is the one delivering.
    primary = await startTestServer("postgres", { events: { deliveryPollMs: 3600_000 } });
  });
  after(() => primary.close());

  it("resends what a replica killed mid-delivery was sending, with the same Ce-Id, and loses nothing", async () => {
    const api = restClient(primary.url, primary.operatorToken);
    const org = await createGroup(api, undefined, "killed-org");
    const receiver: EventReceiver = await startEventReceiver(primary.urls.issuer, () => org.uid);
    let child: ServeProcess | undefined;
    let taker: TestServer | undefined;
    try {
      child = await serveProcess(
        [
          ...["--host", "127.0.0.1", "--port", "0"],
          ...["--issuer-url", primary.urls.issuer, "--api-url", primary.urls.apiAudience],
          ...[
            "--allow-insecure-sinks",
            "--delivery-lease",
            "2s",
            "--delivery-timeout",
            "900ms",
            "--delivery-poll",
            "50ms",
          ],
        ],
        { DATABASE_URL: primary.databaseUrl! },
      );
      const childApi = restClient(child.url, primary.operatorToken);
      const subscription = await subscribeDirectly(primary, org.uid, receiver.url);
      let held: string | undefined;
      let holding!: () => void;
      const heldArrived = new Promise<void>((resolve) => (holding = resolve));
      // The fifth event's first delivery gets no answer: the child is killed while sending it.
      receiver.answer = (d) => {
        const name = (d.event.data as { body?: { name?: string } }).body?.name;
        if (held === undefined && name === "k-4") {
          held = d.event.id;
          holding();
          return { status: 0, hold: true };
        }
        return { status: 200 };
      };
      for (let i = 0; i < 10; i++) await createGroup(childApi, org.uid, `k-${i}`);
      await withinHang(heldArrived, "the held delivery");
      child.child.kill("SIGKILL");
      // Another replica takes the subscription over once the dead one's lease expires.
      taker = await startTestServer("postgres", {
        replicaOf: primary,
        publicUrls: { issuerUrl: primary.urls.issuer, apiUrl: primary.urls.apiAudience },
        events: FAST,
      });
      const expected = await settledDeliveries(primary, subscription, 10);
      assert.deepEqual(receiver.rejected, []);
      const got = receiver.accepted().map((d) => d.event.id);
      assert.deepEqual(
        got.filter((id, i) => got.indexOf(id) === i),
        expected,
        "every event, in order",
      );
      // The dead replica records what it delivered a batch at a time: the cut-short delivery, and
      // any it sent since it last recorded, come again (with their Ce-Id); none after it.
      const again = [...counts(receiver.all.map((d) => d.event.id))].filter(([, n]) => n > 1).map(([id]) => id);
      const heldAt = expected.indexOf(held!);
      assert.ok(
        again.every((id) => expected.indexOf(id) <= heldAt),
        `only what the killed replica was sending or had sent came twice: ${again.join(", ")}`,
      );
      assert.ok(again.includes(held!), "the cut-short delivery was resent with its Ce-Id");
    } finally {
      if (child && child.child.exitCode === null && child.child.signalCode === null) child.child.kill("SIGKILL");
      await taker?.close();
      await receiver.close();
    }
  });
});
