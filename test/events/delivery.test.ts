// Delivery of events to subscriptions: CloudEvents binary mode with a JWT of our issuer, each
// event once and in order; a receiver that is down gets everything afterwards, in order; a
// Retry-After is honoured; the retry period ends in a failed delivery and the next one goes; a
// sink on a loopback address is refused at connect time unless insecure sinks are allowed; a type
// filter delivers only its types. Covered kinds: every IAM kind, repos, tags, subscriptions (of a
// group below the subscribed one), and a skopeo push and pull. (The subscriptions under test are
// inserted through the repository, so their own creation is not among what they receive.)
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { RECEIVER_DOWN_ATTEMPTS, startEventReceiver, type EventReceiver } from "../support/event-receiver.js";
import {
  createAccountAssociation,
  createGroup,
  createGroupInvite,
  createIdentity,
  createIdentityProvider,
  createRole,
  createRoleBinding,
  createSubscription,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { ok } from "../support/assertions.js";
import { until } from "../support/wait.js";
import { buildOciLayout } from "../support/oci-layout.js";
import { skopeoIn } from "../support/skopeo.js";
import { deliveriesOf, deliveriesWhen, flushEvents, subscribeDirectly, type DeliveryView } from "../support/events.js";

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
        const subscription = await subscribeDirectly(server, org.uid, receiver.url);
        // another organization's changes, made meanwhile, are none of this subscription's
        const other = await createGroup(api, undefined, "delivery-other-org");
        await mutateEveryKind(api, other.uid);
        await mutateEveryKind(api, org.uid);
        const rows = await deliveriesWhen(server, subscription, (r) => settled(r), "every delivery settled");
        assert.ok(rows.length >= 15, `deliveries: ${rows.length}`);
        assert.ok(
          rows.every(
            (r) => r.parent_uid !== null && (r.parent_uid === org.uid || r.parent_uid.startsWith(`${org.uid}/`)),
          ),
          "only the subscription's subtree",
        );
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

    it("delivers registry and subscription changes: repos, tags, and subscriptions below the subscribed group", async () => {
      const org = await createGroup(api, undefined, "registry-changes-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      try {
        const subscription = await subscribeDirectly(server, org.uid, receiver.url);
        const repo = ok(await api.post(`/registry/v2beta1/repos/${org.uid}`, { name: "app" }), "create repo");
        ok(await api.patch(`/registry/v2beta1/repos/${repo.uid}`, { description: "changed" }), "update repo");
        ok(
          await api.patch(`/bulwark/registry/v1/repos/${repo.uid}/visibility`, { public: true }),
          "update repo visibility",
        );
        const digest = `sha256:${createHash("sha256").update("a manifest").digest("hex")}`;
        const tag = ok(await api.post(`/registry/v2beta1/tags/${repo.uid}`, { name: "v1", digest }), "create tag");
        ok(await api.delete(`/registry/v2beta1/tags/${tag.uid}`), "delete tag");
        // A subscription of a group below: its changes reach the ancestor's subscription.
        const team = await createGroup(api, org.uid, "team");
        const below = await createSubscription(api, team.uid, "https://hooks.example.invalid/team");
        ok(
          await api.patch(`/bulwark/events/v1/subscriptions/${below.uid}`, { types: ["dev.chainguard.registry."] }),
          "update subscription",
        );
        ok(await api.delete(`/events/v2beta1/subscriptions/${below.uid}`), "delete subscription");
        ok(await api.delete(`/registry/v2beta1/repos/${repo.uid}`), "delete repo");
        const rows = await deliveriesWhen(
          server,
          subscription,
          (r) => settled(r) && r.some((x) => x.type.endsWith(".repo.deleted.v1")),
          "every delivery settled",
        );
        assert.deepEqual(receiver.rejected, []);
        const got = receiver.accepted();
        assert.deepEqual(
          got.map((d) => d.event.id),
          rows.map((r) => r.uid),
          "each event once, in event order",
        );
        const registry = "dev.chainguard.api.platform.registry.";
        const subscriptions = "dev.chainguard.api.events.subscription.";
        const expectations: [type: string, subject: string, group: string][] = [
          [`${registry}repo.created.v1`, repo.uid, org.uid],
          [`${registry}repo.updated.v1`, repo.uid, org.uid],
          [`${registry}repo.updated.v1`, repo.uid, org.uid],
          [`${registry}tag.created.v1`, tag.uid, org.uid],
          [`${registry}tag.deleted.v1`, tag.uid, org.uid],
          [`${subscriptions}created.v1`, below.uid, team.uid],
          [`${subscriptions}updated.v1`, below.uid, team.uid],
          [`${subscriptions}deleted.v1`, below.uid, team.uid],
          [`${registry}repo.deleted.v1`, repo.uid, org.uid],
        ];
        const relevant = got.filter((d) => d.event.type.startsWith(registry) || d.event.type.startsWith(subscriptions));
        assert.deepEqual(
          relevant.map((d) => [d.event.type, d.event.subject, d.event.group]),
          expectations,
        );
        for (const d of relevant) {
          assert.equal(d.event.source, server.urls.apiAudience);
          assert.equal(d.claims.sub, `webhook:${org.uid}`);
          assert.deepEqual(d.claims.aud, [receiver.url, "customer"]);
          assert.equal((d.event.data as { actor: { subject: string } }).actor.subject, "bulwark:operator");
        }
        const bodyOf = (i: number) => (relevant[i]!.event.data as { body: Json }).body;
        assert.equal(bodyOf(0).name, "app");
        assert.equal(bodyOf(1).description, "changed");
        assert.equal(bodyOf(2).public, true);
        assert.equal(bodyOf(3).digest, digest);
        assert.equal(bodyOf(5).sink, "https://hooks.example.invalid/team");
        assert.deepEqual(bodyOf(6).types, ["dev.chainguard.registry."]);
      } finally {
        await receiver.close();
      }
    });

    it("delivers a skopeo push and pull as the registry's push and pull events", async () => {
      const work = mkdtempSync(join(tmpdir(), "bulwark-delivery-"));
      const org = await createGroup(api, undefined, `pushers-${randomBytes(3).toString("hex")}`);
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      try {
        const skopeo = skopeoIn(work);
        const image = await buildOciLayout(join(work, "src"));
        const subscription = await subscribeDirectly(server, org.uid, receiver.url, {
          types: ["dev.chainguard.registry."],
        });
        const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.urls.registryAudience] });
        const ref = `docker://${new URL(server.url).host}/${org.name}/app:v1`;
        const push = await skopeo(
          "copy",
          "--preserve-digests",
          "--dest-tls-verify=false",
          "--dest-creds",
          `_token:${password}`,
          `oci:${image.dir}:${image.tag}`,
          ref,
        );
        assert.equal(push.code, 0, push.stderr);
        // Everything the push recorded (its refused HEADs are gathered pulls: recorded now).
        await flushEvents(server);
        const pushed = new Set((await deliveriesOf(server, subscription)).map((r) => r.uid));
        const pull = await skopeo(
          "copy",
          "--src-tls-verify=false",
          "--src-creds",
          `_token:${password}`,
          ref,
          `oci:${join(work, "pulled")}:v1`,
        );
        assert.equal(pull.code, 0, pull.stderr);
        await flushEvents(server);
        const rows = await deliveriesWhen(
          server,
          subscription,
          (r) => settled(r) && r.some((x) => x.type === "dev.chainguard.registry.pull.v1"),
          "the push and pull deliveries settled",
        );
        assert.deepEqual(receiver.rejected, []);
        const got = receiver.accepted();
        const sent = got.map((d) => d.event.id);
        assert.deepEqual([...sent].sort(), rows.map((r) => r.uid).sort(), "each event once");
        // skopeo uploads blobs at the same time: their events have no order between them (README,
        // "Order"). The pull began after the push was answered, so its events come after all of the
        // push's, in the order they were recorded.
        const pullPhase = rows.filter((r) => !pushed.has(r.uid)).map((r) => r.uid);
        assert.ok(pushed.size > 0 && pullPhase.length > 0, "events of the push and of the pull");
        assert.deepEqual(sent.slice(0, pushed.size).sort(), [...pushed].sort(), "the push's events first");
        assert.deepEqual(sent.slice(pushed.size), pullPhase, "then the pull's, in event order");
        const manifestPush = got.find(
          (d) =>
            d.event.type === "dev.chainguard.registry.push.v1" &&
            (d.event.data as { body: Json }).body.type === "manifest",
        );
        const manifestPull = got.find(
          (d) =>
            d.event.type === "dev.chainguard.registry.pull.v1" &&
            (d.event.data as { body: Json }).body.type === "manifest" &&
            (d.event.data as { body: Json }).body.method === "GET" &&
            (d.event.data as { body: Json }).body.error === undefined,
        );
        assert.ok(manifestPush, "the manifest's push was delivered");
        assert.ok(manifestPull, "the manifest's GET was delivered");
        const repoUid = manifestPush.event.subject!;
        assert.match(repoUid, new RegExp(`^${org.uid}/[0-9a-f]{16}$`));
        const pushedBlobs = got
          .filter((d) => d.event.type === "dev.chainguard.registry.push.v1")
          .map((d) => (d.event.data as { body: Json }).body)
          .filter((b) => b.type === "blob")
          .map((b) => b.digest as string);
        assert.deepEqual(
          pushedBlobs.sort(),
          [...image.layerDigests, `sha256:${createHash("sha256").update(image.config).digest("hex")}`].sort(),
        );
        for (const d of got) {
          const { actor, body } = d.event.data as { actor: { subject: string }; body: Json };
          const where = `${d.event.type} ${JSON.stringify(body)}`;
          assert.equal(d.event.source, server.urls.registryAudience, where);
          // skopeo's probes during the push fail (HEAD of a blob not yet there; before its first
          // upload made the repo, the repo is unknown and the event names the group)
          if (body.error !== undefined) {
            assert.equal(body.method, "HEAD", where);
            const code = (body.error as Json).code;
            assert.equal(code, body.repo_id ? "BLOB_UNKNOWN" : "NAME_UNKNOWN", where);
          }
          assert.ok(body.repo_id === repoUid || (body.repo_id === "" && body.error), where);
          assert.equal(d.event.subject, body.repo_id || org.uid, where);
          assert.equal(d.event.group, org.uid, where);
          assert.equal(d.claims.sub, `webhook:${org.uid}`, where);
          assert.equal(actor.subject, OPERATOR_SUBJECT, where);
          assert.equal(body.repository, `${org.name}/app`, where);
          assert.match(body.digest as string, /^sha256:[0-9a-f]{64}$/, where);
          assert.ok(["manifest", "blob"].includes(body.type as string), where);
          assert.ok(body.remote_address, where);
          assert.equal(body.location, "", where);
          assert.match(body.user_agent as string, /skopeo|containers/i, where);
          assert.match(body.when as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$/, where);
          if (d.event.type === "dev.chainguard.registry.pull.v1")
            assert.ok(["GET", "HEAD"].includes(body.method as string), where);
          else assert.equal(body.method, undefined, where);
        }
        assert.equal((manifestPush.event.data as { body: Json }).body.digest, image.manifestDigest);
        assert.equal((manifestPush.event.data as { body: Json }).body.tag, "v1");
        assert.equal((manifestPull.event.data as { body: Json }).body.digest, image.manifestDigest);
      } finally {
        await receiver.close();
        rmSync(work, { recursive: true, force: true });
      }
    });

    it("holds deliveries while the receiver is down for what is 10 minutes at the default backoff, then sends every event, in order", async () => {
      const org = await createGroup(api, undefined, "down-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      // Down until the head delivery has failed RECEIVER_DOWN_ATTEMPTS times: at the default
      // backoff those attempts span at least 10 minutes (test/unit/delivery-backoff.test.ts);
      // this server's backoff is shortened by its settings, so the test waits no minutes.
      let failures = 0;
      receiver.answer = () => (failures < RECEIVER_DOWN_ATTEMPTS ? (failures++, { status: 503 }) : { status: 204 });
      try {
        const subscription = await subscribeDirectly(server, org.uid, receiver.url);
        const groups: string[] = [];
        for (let i = 0; i < 12; i++) groups.push((await createGroup(api, org.uid, `g${i}`)).uid);
        const rows = await deliveriesWhen(
          server,
          subscription,
          (r) => r.length === 12 && settled(r),
          "every delivery settled",
        );
        assert.deepEqual(receiver.rejected, []);
        // Retried at the head only: the rest waited behind it (order), and every attempt of it
        // carried the same Ce-Id (the event's uid).
        const refused = receiver.all.filter((d) => d.status === 503);
        assert.equal(refused.length, RECEIVER_DOWN_ATTEMPTS);
        assert.ok(refused.every((d) => d.event.id === rows[0]!.uid));
        assert.deepEqual(
          receiver.all.slice(0, RECEIVER_DOWN_ATTEMPTS + 1).map((d) => d.event.id),
          Array(RECEIVER_DOWN_ATTEMPTS + 1).fill(rows[0]!.uid),
          "nothing else was sent while the head failed",
        );
        assert.equal(rows[0]!.attempts, RECEIVER_DOWN_ATTEMPTS + 1);
        assert.ok(rows.slice(1).every((r) => r.attempts === 1));
        assert.ok(rows.every((r) => r.state === "delivered" && r.last_status_code === 204));
        assert.deepEqual(
          receiver.accepted().map((d) => d.event.id),
          rows.map((r) => r.uid),
        );
        assert.deepEqual(
          receiver.accepted().map((d) => d.event.subject),
          groups,
        );
      } finally {
        await receiver.close();
      }
    });

    it("delivers to a type-filtered subscription only the types it names", async () => {
      const org = await createGroup(api, undefined, "filter-org");
      const receiver = await startEventReceiver(server.urls.issuer, () => org.uid);
      try {
        const subscription = await subscribeDirectly(server, org.uid, receiver.url, {
          types: ["dev.chainguard.api.iam.roles."],
        });
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
        const subscription = await subscribeDirectly(server, org.uid, receiver.url);
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
        const byName = await subscribeDirectly(server, org.uid, `https://localhost:${port}/hook`);
        const byLiteral = await subscribeDirectly(server, org.uid, `https://127.0.0.1:${port}/hook`);
        const plain = await subscribeDirectly(server, org.uid, `http://127.0.0.1:${port}/hook`);
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
