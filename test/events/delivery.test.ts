// Delivery of events to subscriptions: CloudEvents binary mode with a JWT of our issuer, each
// event once and in order; a receiver that is down gets everything afterwards, in order; a
// Retry-After is honoured; the retry period ends in a failed delivery and the next one goes; a
// sink on a loopback address is refused at connect time unless insecure sinks are allowed; a type
// filter delivers only its types. (Subscriptions are inserted through the repository: the
// Subscriptions service is built in another change.)
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { randomBytes } from "node:crypto";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { startEventReceiver, type EventReceiver } from "../support/event-receiver.js";
import {
  createAccountAssociation,
  createGroup,
  createGroupInvite,
  createIdentity,
  createIdentityProvider,
  createRole,
  createRoleBinding,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { ok } from "../support/assertions.js";
import { until } from "../support/wait.js";
import { SubscriptionsRepository } from "../../src/events/storage/subscriptions.js";

interface DeliveryView {
  event_seq: string;
  state: string;
  attempts: number;
  next_attempt_time: Date;
  last_attempt_time: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  uid: string;
  parent_uid: string | null;
  type: string;
  source: string;
  subject: string;
  actor: unknown;
  body: unknown;
  traceparent: string;
  time: Date;
}

async function subscribe(server: TestServer, group: string, sink: string, types: string[] = []): Promise<string> {
  const uid = `${group}/${randomBytes(8).toString("hex")}`;
  const result = await new SubscriptionsRepository(server.db).insert(
    uid,
    group,
    { sink, types },
    undefined,
    new Date(),
  );
  assert.equal(result.kind, "ok");
  return uid;
}

async function deliveriesOf(server: TestServer, subscription: string): Promise<DeliveryView[]> {
  return (await server.db
    .selectFrom("event_deliveries as d")
    .innerJoin("events as e", "e.seq", "d.event_seq")
    .select([
      "d.event_seq",
      "d.state",
      "d.attempts",
      "d.next_attempt_time",
      "d.last_attempt_time",
      "d.last_status_code",
      "d.last_error",
      "e.uid",
      "e.parent_uid",
      "e.type",
      "e.source",
      "e.subject",
      "e.actor",
      "e.body",
      "e.traceparent",
      "e.time",
    ])
    .where("d.subscription_uid", "=", subscription)
    .orderBy("d.event_seq")
    .execute()) as DeliveryView[];
}

/** The subscription's deliveries once `ready` holds for them. */
async function deliveriesWhen(
  server: TestServer,
  subscription: string,
  ready: (rows: DeliveryView[]) => boolean,
  what: string,
): Promise<DeliveryView[]> {
  let rows: DeliveryView[] = [];
  await until(async () => ready((rows = await deliveriesOf(server, subscription))), what);
  return rows;
}

const settled = (rows: DeliveryView[]) => rows.length > 0 && rows.every((r) => r.state !== "pending");

/** One change of every mutating kind the IAM API serves, under `org`. */
async function mutateEveryKind(api: Api, org: string): Promise<void> {
  const team = await createGroup(api, org, "team");
  ok(await api.patch(`/iam/v2beta1/groups/${team.uid}`, { description: "changed" }), "update group");
  const role = await createRole(api, org, "reader");
  ok(await api.patch(`/iam/v2beta1/roles/${role.uid}`, { description: "changed" }), "update role");
  const identity = await createIdentity(api, org, "robot", "robot-subject");
  ok(await api.patch(`/iam/v2beta1/identities/${identity.uid}`, { description: "changed" }), "update identity");
  const binding = await createRoleBinding(api, org, identity.uid, role.uid);
  ok(await api.delete(`/iam/v2beta1/roleBindings/${binding.uid}`), "delete role binding");
  const idp = await createIdentityProvider(api, org, "corp-idp");
  ok(await api.delete(`/iam/v2beta1/identityProviders/${idp.uid}`), "delete identity provider");
  const invite = await createGroupInvite(api, org);
  ok(await api.delete(`/iam/v2beta1/groupInvites/${invite.uid}`), "delete invite");
  await createAccountAssociation(api, team.uid, "aws");
  ok(await api.delete(`/iam/v2beta1/accountAssociations/${team.uid}`), "delete account association");
  ok(await api.delete(`/iam/v2beta1/identities/${identity.uid}`), "delete identity");
  ok(await api.delete(`/iam/v2beta1/roles/${role.uid}`), "delete role");
  ok(await api.delete(`/iam/v2beta1/groups/${team.uid}`), "delete group");
}

for (const backend of backends()) {
  describe(`events delivery [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    before(async () => {
      server = await startTestServer(backend, {
        events: {
          allowInsecureSinks: true,
          deliveryBackoffMinMs: 5,
          deliveryBackoffMaxMs: 40,
          deliveryPollMs: 20,
        },
      });
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    it("delivers each event of the subtree once, in order, in binary mode with a verifiable JWT", async () => {
      const org = await createGroup(api, undefined, "delivery-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      try {
        const subscription = await subscribe(server, org.uid, receiver.url);
        await mutateEveryKind(api, org.uid);
        const rows = await deliveriesWhen(server, subscription, (r) => settled(r), "every delivery settled");
        assert.ok(rows.length >= 15, `deliveries: ${rows.length}`);
        assert.deepEqual(receiver.rejected, []);
        const got = receiver.accepted();
        assert.deepEqual(
          got.map((d) => d.event.id),
          rows.map((r) => r.uid),
          "each event once, in event order",
        );
        for (const [i, row] of rows.entries()) {
          const d = got[i]!;
          assert.equal(row.state, "delivered");
          assert.equal(row.attempts, 1);
          assert.equal(row.last_status_code, 200);
          assert.equal(d.headers["content-type"], "application/json");
          assert.equal(d.event.specversion, "1.0");
          assert.equal(d.event.type, row.type);
          assert.equal(d.event.source, row.source);
          assert.equal(d.event.source, server.urls.apiAudience);
          assert.equal(d.event.subject, row.subject);
          assert.equal(new Date(d.event.time!).getTime(), new Date(row.time).getTime());
          assert.equal(d.event.group, row.parent_uid);
          assert.ok(String(d.event.group).startsWith(org.uid));
          assert.equal(d.event.audience, "customer");
          assert.equal(d.headers.traceparent, row.traceparent);
          assert.deepEqual(d.event.data, { actor: row.actor, body: row.body });
          assert.deepEqual(d.event.data, JSON.parse(d.body.toString()));
          assert.equal((d.event.data as { actor: { subject: string } }).actor.subject, "bulwark:operator");
          assert.equal(d.claims.sub, `webhook:${org.uid}`);
          assert.deepEqual(d.claims.aud, [receiver.url, "customer"]);
        }
        const types = new Set(rows.map((r) => r.type));
        for (const kind of ["group", "roles", "identity", "rolebindings", "identity_providers", "account_associations"])
          assert.ok(
            [...types].some((t) => t.includes(`.${kind}.`)),
            `a ${kind} event among ${[...types].join(", ")}`,
          );
      } finally {
        await receiver.close();
      }
    });

    it("holds deliveries while the receiver is down and sends every event afterwards, in order", async () => {
      const org = await createGroup(api, undefined, "down-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      let down = true;
      receiver.answer = () => ({ status: down ? 503 : 204 });
      try {
        const subscription = await subscribe(server, org.uid, receiver.url);
        const groups: string[] = [];
        for (let i = 0; i < 12; i++) groups.push((await createGroup(api, org.uid, `g${i}`)).uid);
        // Retried, with backoff, at the head only: the rest wait behind it (order).
        const whileDown = await deliveriesWhen(
          server,
          subscription,
          (r) => r.length === 12 && r[0]!.attempts >= 3,
          "three attempts of the first delivery",
        );
        assert.equal(whileDown[0]!.last_status_code, 503);
        assert.match(whileDown[0]!.last_error ?? "", /HTTP 503/);
        assert.ok(whileDown[0]!.next_attempt_time > whileDown[0]!.last_attempt_time!);
        assert.ok(whileDown.slice(1).every((r) => r.attempts === 0 && r.state === "pending"));
        assert.ok(receiver.all.every((d) => d.event.id === whileDown[0]!.uid));
        down = false;
        const rows = await deliveriesWhen(server, subscription, (r) => settled(r), "every delivery settled");
        assert.ok(rows.every((r) => r.state === "delivered" && r.last_status_code === 204));
        assert.deepEqual(
          receiver.accepted().map((d) => d.event.id),
          rows.map((r) => r.uid),
        );
        assert.deepEqual(
          receiver.accepted().map((d) => d.event.subject),
          groups,
        );
        // Every attempt of one event carries the same Ce-Id (the event's uid).
        assert.ok(receiver.all.filter((d) => d.status === 503).every((d) => d.event.id === rows[0]!.uid));
      } finally {
        await receiver.close();
      }
    });

    it("delivers to a type-filtered subscription only the types it names", async () => {
      const org = await createGroup(api, undefined, "filter-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      try {
        const subscription = await subscribe(server, org.uid, receiver.url, ["dev.chainguard.api.iam.roles."]);
        await mutateEveryKind(api, org.uid);
        const marker = await createRole(api, org.uid, "last-one");
        const rows = await deliveriesWhen(
          server,
          subscription,
          (r) => settled(r) && r.some((x) => x.subject === marker.uid),
          "the last role's delivery",
        );
        const types = receiver.accepted().map((d) => d.event.type);
        assert.deepEqual(
          types,
          rows.map((r) => r.type),
        );
        assert.deepEqual([...new Set(types)].sort(), [
          "dev.chainguard.api.iam.roles.created.v1",
          "dev.chainguard.api.iam.roles.deleted.v1",
          "dev.chainguard.api.iam.roles.updated.v1",
        ]);
      } finally {
        await receiver.close();
      }
    });
  });

  describe(`events delivery retries [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    before(async () => {
      server = await startTestServer(backend, {
        events: {
          allowInsecureSinks: true,
          deliveryBackoffMinMs: 5,
          deliveryBackoffMaxMs: 2 * 3600_000,
          deliveryRetryForMs: 3 * 3600_000,
          deliveryPollMs: 20,
        },
      });
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    it("honours Retry-After, then gives up at the end of the retry period and sends the next event", async () => {
      const org = await createGroup(api, undefined, "retry-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      receiver.answer = (d) =>
        d.event.subject === first.uid ? { status: 429, headers: { "retry-after": "3600" } } : { status: 200 };
      let first: Json = { uid: "" };
      try {
        const subscription = await subscribe(server, org.uid, receiver.url);
        first = await createGroup(api, org.uid, "first");
        const second = await createGroup(api, org.uid, "second");
        const [head] = await deliveriesWhen(
          server,
          subscription,
          (r) => r.length === 2 && r[0]!.attempts === 1,
          "the first attempt",
        );
        assert.equal(head!.last_status_code, 429);
        const waited = head!.next_attempt_time.getTime() - head!.last_attempt_time!.getTime();
        assert.ok(waited >= 3600_000, `next attempt ${waited} ms later`);
        // The hour passes: the event is now older than the retry period.
        await server.db
          .updateTable("events")
          .set({ time: new Date(Date.now() - 4 * 3600_000) })
          .where("uid", "=", head!.uid)
          .execute();
        await server.db
          .updateTable("event_deliveries")
          .set({ next_attempt_time: new Date(Date.now() - 1000) })
          .where("subscription_uid", "=", subscription)
          .where("event_seq", "=", head!.event_seq)
          .execute();
        const rows = await deliveriesWhen(server, subscription, (r) => settled(r), "both deliveries settled");
        assert.equal(rows[0]!.state, "failed");
        assert.equal(rows[0]!.attempts, 2);
        assert.equal(rows[1]!.state, "delivered");
        assert.deepEqual(
          receiver.accepted().map((d) => d.event.subject),
          [second.uid],
        );
      } finally {
        await receiver.close();
      }
    });
  });

  describe(`events delivery to refused addresses [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    before(async () => {
      server = await startTestServer(backend, {
        events: { deliveryBackoffMinMs: 5, deliveryBackoffMaxMs: 40, deliveryPollMs: 20 },
      });
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    it("refuses a sink resolving to a loopback address at connect time, and plain http, without the flag", async () => {
      let connections = 0;
      const listener = net.createServer((socket) => {
        connections++;
        socket.destroy();
      });
      await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
      const port = (listener.address() as net.AddressInfo).port;
      try {
        const org = await createGroup(api, undefined, "ssrf-org");
        const byName = await subscribe(server, org.uid, `https://localhost:${port}/hook`);
        const byLiteral = await subscribe(server, org.uid, `https://127.0.0.1:${port}/hook`);
        const plain = await subscribe(server, org.uid, `http://127.0.0.1:${port}/hook`);
        await createGroup(api, org.uid, "team");
        const failedTwice = async (subscription: string) =>
          (
            await deliveriesWhen(
              server,
              subscription,
              (r) => r.length === 1 && r[0]!.attempts >= 2,
              `two attempts for ${subscription}`,
            )
          )[0]!;
        const [name, literal, http] = await Promise.all([byName, byLiteral, plain].map(failedTwice));
        assert.match(
          name!.last_error!,
          /sink refused: localhost resolves to a refused address: .* is a loopback address/,
        );
        assert.match(literal!.last_error!, /sink refused: 127\.0\.0\.1 is a loopback address/);
        assert.match(http!.last_error!, /sink refused: only https sinks/);
        for (const row of [name!, literal!, http!]) {
          assert.equal(row.state, "pending");
          assert.equal(row.last_status_code, null);
        }
        assert.equal(connections, 0, "nothing reached the address");
      } finally {
        await new Promise((resolve) => listener.close(resolve));
      }
    });
  });
}
