// The outbox: a mutating RPC's event is recorded in the change's own transaction — the proto's
// type, the resource's UIDP as subject, its group, the caller as actor, the response as body —
// on every protocol and API version, once; a refused change records nothing.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { exportJWK, generateKeyPair } from "jose";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { deliveriesOf, subscribeDirectly } from "../support/events.js";
import { EventsRepository } from "../../src/events/storage/events.js";

interface EventRowView {
  uid: string;
  parent_uid: string | null;
  type: string;
  subject: string;
  actor_subject: string | null;
  body: Record<string, unknown>;
}

for (const backend of backends()) {
  describe(`the events outbox [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    const eventsAbout = async (subject: string): Promise<EventRowView[]> =>
      (
        await server.db
          .selectFrom("events")
          .select(["uid", "parent_uid", "type", "subject", "actor_subject", "body"])
          .where("subject", "=", subject)
          .orderBy("seq")
          .execute()
      ).map((r: EventRowView) => r);

    it("records a create, an update and a delete, each once, with subject, group, actor and body", async () => {
      const org = (await api.post("/iam/v2beta1/groups", { name: "outbox-org" })).body;
      const team = await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "team" });
      assert.equal(team.status, 200);
      const updated = await api.patch(`/iam/v2beta1/groups/${team.body.uid}`, { description: "changed" });
      assert.equal(updated.status, 200);
      assert.equal((await api.delete(`/iam/v2beta1/groups/${team.body.uid}`)).status, 200);
      const recorded = await eventsAbout(team.body.uid);
      assert.deepEqual(
        recorded.map((e) => e.type),
        [
          "dev.chainguard.api.iam.group.created.v1",
          "dev.chainguard.api.iam.group.updated.v1",
          "dev.chainguard.api.iam.group.deleted.v1",
        ],
      );
      for (const e of recorded) {
        assert.equal(e.parent_uid, team.body.uid);
        assert.match(e.uid, new RegExp(`^${team.body.uid}/[0-9a-f]{16}$`));
        assert.equal(e.actor_subject, "bulwark:operator");
      }
      assert.deepEqual(recorded[0]!.body, team.body);
      assert.equal((recorded[1]!.body as { description: string }).description, "changed");
    });

    it("records the body as the REST answer's JSON: a timestamp at a whole second keeps its .000", async () => {
      const org = (await api.post("/iam/v2beta1/groups", { name: "outbox-times" })).body;
      const { publicKey } = await generateKeyPair("ES256", { extractable: true });
      const expirationTime = `${new Date().getUTCFullYear() + 1}-01-01T00:00:00.000Z`;
      const created = await api.post(`/iam/v2beta1/identities/${org.uid}`, {
        name: "static",
        staticKeys: {
          issuer: "https://issuer.example",
          subject: "svc",
          issuerKeys: JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" }] }),
          expirationTime,
        },
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.equal(created.body.staticKeys.expirationTime, expirationTime);
      const [recorded] = await eventsAbout(created.body.uid);
      assert.deepEqual(recorded!.body, created.body);
    });

    it("records nothing for a refused change", async () => {
      const org = (await api.post("/iam/v2beta1/groups", { name: "refused-org" })).body;
      const before = await server.db
        .selectFrom("events")
        .select((eb) => eb.fn.countAll().as("n"))
        .executeTakeFirst();
      const bad = await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "NOT VALID!" });
      assert.equal(bad.status, 400);
      const missing = await api.delete(`/iam/v2beta1/groups/${org.uid}/0123456789abcdef`);
      assert.equal(missing.status, 404);
      const afterCount = await server.db
        .selectFrom("events")
        .select((eb) => eb.fn.countAll().as("n"))
        .executeTakeFirst();
      assert.equal(String(afterCount!.n), String(before!.n));
    });

    it("records a tag's event in its repo's group, and a v1 call's event once", async () => {
      const org = (await api.post("/iam/v2beta1/groups", { name: "outbox-reg" })).body;
      const repo = await api.post(`/registry/v1/repos/${org.uid}`, { name: "app" });
      assert.equal(repo.status, 200, JSON.stringify(repo.body));
      const recorded = await eventsAbout(repo.body.id);
      assert.deepEqual(
        recorded.map((e) => [e.type, e.parent_uid]),
        [["dev.chainguard.api.platform.registry.repo.created.v1", org.uid]],
      );
    });
  });
}

for (const backend of backends()) {
  describe(`events gathered and recorded together [${backend}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(backend, { events: { deliveryConcurrency: 0 } });
    });
    after(() => server.close());

    it("deliver to subscriptions of their group and of its ancestors, as events recorded one by one do", async () => {
      const api = restClient(server.url, server.operatorToken);
      const org = (await api.post("/iam/v2beta1/groups", { name: "gathered-org" })).body;
      const team = (await api.post(`/iam/v2beta1/groups/${org.uid}`, { name: "team" })).body;
      const other = (await api.post("/iam/v2beta1/groups", { name: "gathered-other" })).body;
      const atOrg = await subscribeDirectly(server, org.uid, "https://receiver.example/org");
      const atTeam = await subscribeDirectly(server, team.uid, "https://receiver.example/team");
      const filtered = await subscribeDirectly(server, org.uid, "https://receiver.example/f", { types: ["dev.x."] });
      const event = (group: string | undefined, n: number) => ({
        type: "dev.chainguard.registry.pull.v1",
        source: "registry.test",
        subject: `s-${n}`,
        group,
        actor: undefined,
        body: { n },
        traceparent: "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01",
        time: new Date(),
      });
      const { stored, deliveries } = await new EventsRepository(server.db).insertMany([
        event(team.uid, 1),
        event(org.uid, 2),
        event(other.uid, 3),
        event(undefined, 4),
      ]);
      assert.equal(stored.length, 4);
      assert.ok(stored.every((e) => /^\d+$/.test(e.seq)));
      assert.deepEqual(
        (await deliveriesOf(server, atOrg)).map((d) => d.subject),
        ["s-1", "s-2"],
      );
      assert.deepEqual(
        (await deliveriesOf(server, atTeam)).map((d) => d.subject),
        ["s-1"],
      );
      assert.deepEqual(await deliveriesOf(server, filtered), []);
      assert.equal(deliveries, 3);
    });
  });
}
