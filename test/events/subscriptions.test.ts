// Subscriptions: the published SubscriptionsService (v2beta1, v2, v1) and the type-filter
// extension over REST and gRPC; a sink must be an https URL on a public address unless the
// server allows insecure sinks; a type filter is exact types or "."-ending prefixes; each change
// records its event; only callers holding CAP_EVENTS_SUBSCRIPTION_LIST at the group see one;
// deleting the group deletes its subscriptions.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { SubscriptionFiltersService } from "../../src/gen/bulwark/events/v1/events_pb.js";
import { SubscriptionsService } from "../../src/gen/chainguard/platform/events/v2beta1/subscriptions_pb.js";
import {
  assertInvalidArgument,
  assertNotFound,
  assertPermissionDenied,
  assertResourceNotFound,
  assertRpcError,
  ok,
} from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import {
  createFilteredSubscription,
  createGroup,
  createRole,
  createSubscription,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { query, restClient } from "../support/http.js";
import { workload } from "../support/principals.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";

const SINK = "https://receiver.example.com/hooks/bulwark";

for (const backend of backends()) {
  describe(`event subscriptions [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    let org: Json;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "subscriptions-org");
    });
    after(() => server.close());

    const eventsAbout = async (subject: string) =>
      server.db
        .selectFrom("events")
        .select(["type", "subject", "parent_uid", "actor_subject", "body"])
        .where("subject", "=", subject)
        .orderBy("seq")
        .execute() as Promise<
        { type: string; subject: string; parent_uid: string | null; actor_subject: string; body: Json }[]
      >;

    const subscriptionCount = async () =>
      Number(
        (
          await server.db
            .selectFrom("event_subscriptions")
            .select((eb) => eb.fn.countAll().as("n"))
            .executeTakeFirstOrThrow()
        ).n,
      );

    it("creates, gets, lists and deletes over REST, recording created and deleted events", async () => {
      const created = await createSubscription(api, org.uid, SINK);
      assert.match(created.uid, new RegExp(`^${org.uid}/[0-9a-f]{16}$`));
      assert.deepEqual(created, { uid: created.uid, sink: SINK });
      assert.deepEqual(ok(await api.get(`/events/v2beta1/subscriptions/${created.uid}`)), created);

      const listed = ok(
        await api.get(`/events/v2beta1/subscriptions${query({ "uidp.descendants_of": org.uid, order_by: "sink" })}`),
      );
      assert.deepEqual(
        listed.subscriptions.map((s: Json) => s.uid),
        [created.uid],
      );
      assert.equal(listed.totalCount, "1");

      // The creator is stored with it (deliveries show only what the creator could see).
      const row = await server.db
        .selectFrom("event_subscriptions")
        .select(["creator", "types"])
        .where("uid", "=", created.uid)
        .executeTakeFirstOrThrow();
      assert.equal(row.creator, "bulwark:operator");
      assert.deepEqual(row.types, []);

      ok(await api.delete(`/events/v2beta1/subscriptions/${created.uid}`));
      assertResourceNotFound(await api.get(`/events/v2beta1/subscriptions/${created.uid}`), "subscription");
      assertNotFound(await api.delete(`/events/v2beta1/subscriptions/${created.uid}`), "delete again");

      const recorded = await eventsAbout(created.uid);
      assert.deepEqual(
        recorded.map((e) => e.type),
        ["dev.chainguard.api.events.subscription.created.v1", "dev.chainguard.api.events.subscription.deleted.v1"],
      );
      for (const e of recorded) {
        assert.equal(e.parent_uid, org.uid);
        assert.equal(e.actor_subject, "bulwark:operator");
      }
      assert.deepEqual(recorded[0]!.body, created);
    });

    it("serves the same resource as v2 and v1", async () => {
      const v2 = ok(await api.post(`/events/v2/subscriptions/${org.uid}`, { sink: `${SINK}/v2` }));
      assert.deepEqual(ok(await api.get(`/events/v2beta1/subscriptions/${v2.uid}`)), v2);
      assert.deepEqual(ok(await api.get(`/events/v2/subscriptions/${v2.uid}`)), v2);

      const v1 = ok(await api.post(`/events/v1/subscriptions/${org.uid}`, { sink: `${SINK}/v1` }));
      assert.deepEqual(v1, { id: v1.id, sink: `${SINK}/v1` });
      assert.deepEqual(ok(await api.get(`/events/v2/subscriptions/${v1.id}`)), { uid: v1.id, sink: `${SINK}/v1` });
      // a v1 create records one event, of its own method's type
      assert.deepEqual(
        (await eventsAbout(v1.id)).map((e) => e.type),
        ["dev.chainguard.api.events.subscription.created.v1"],
      );

      const all = ok(await api.get(`/events/v1/subscriptions${query({ "uidp.descendants_of": org.uid })}`));
      const ids = all.items.map((s: Json) => s.id);
      assert.ok(ids.includes(v1.id) && ids.includes(v2.uid), JSON.stringify(all));
      assert.deepEqual(ok(await api.get(`/events/v1/subscriptions${query({ id: v1.id })}`)).items, [v1]);

      ok(await api.delete(`/events/v1/subscriptions/${v1.id}`));
      ok(await api.delete(`/events/v2/subscriptions/${v2.uid}`));
      assert.deepEqual(ok(await api.get(`/events/v1/subscriptions${query({ id: v1.id })}`)).items, []);
      assertNotFound(await api.get(`/events/v2/subscriptions/${v2.uid}`), "v2 get after delete");
    });

    it("creates, gets, lists and deletes over gRPC", async () => {
      const { client, close } = operatorGrpc(server, SubscriptionsService);
      try {
        const created = await client.createSubscription({ parent: org.uid, subscription: { sink: `${SINK}/grpc` } });
        assert.equal(created.sink, `${SINK}/grpc`);
        assert.equal((await client.getSubscription({ uid: created.uid })).sink, `${SINK}/grpc`);
        const page = await client.listSubscriptions({ uidp: { descendantsOf: org.uid } });
        assert.ok(page.subscriptions.some((s) => s.uid === created.uid));
        await client.deleteSubscription({ uid: created.uid });
        await assert.rejects(client.getSubscription({ uid: created.uid }), (err) => {
          assert.equal(ConnectError.from(err).code, Code.NotFound);
          return true;
        });
      } finally {
        close();
      }
    });

    it("keeps a type filter, shown by the extension and not by the published API", async () => {
      const types = ["dev.chainguard.registry.", "dev.chainguard.api.iam.group.created.v1"];
      const created = await createFilteredSubscription(api, org.uid, `${SINK}/filtered`, types);
      assert.deepEqual(created, { uid: created.uid, sink: `${SINK}/filtered`, types });
      assert.deepEqual(ok(await api.get(`/bulwark/events/v1/subscriptions/${created.uid}`)), created);
      assert.deepEqual(ok(await api.get(`/events/v2beta1/subscriptions/${created.uid}`)), {
        uid: created.uid,
        sink: `${SINK}/filtered`,
      });
      // a subscription made by the published API receives every type
      const unfiltered = await createSubscription(api, org.uid, `${SINK}/all`);
      assert.deepEqual(ok(await api.get(`/bulwark/events/v1/subscriptions/${unfiltered.uid}`)).types, []);
    });

    it("updates the sink or the types over REST (the keys present) and gRPC (the mask), recording updated events", async () => {
      const types = ["dev.chainguard.registry.push.v1"];
      const sub = await createFilteredSubscription(api, org.uid, `${SINK}/update`, types);
      const path = `/bulwark/events/v1/subscriptions/${sub.uid}`;

      // REST: only the sink is named, so the types stay
      const moved = ok(await api.patch(path, { sink: `${SINK}/moved` }));
      assert.deepEqual(moved, { uid: sub.uid, sink: `${SINK}/moved`, types });
      // REST: an empty list present clears the filter
      assert.deepEqual(ok(await api.patch(path, { types: [] })).types, []);

      const { client, close } = operatorGrpc(server, SubscriptionFiltersService);
      try {
        // gRPC without a mask: the populated fields change
        const filtered = await client.updateFilteredSubscription({
          subscription: { uid: sub.uid, types: ["dev.chainguard.api."] },
        });
        assert.deepEqual(filtered.types, ["dev.chainguard.api."]);
        assert.equal(filtered.sink, `${SINK}/moved`);
        // gRPC: clearing the list needs the mask
        const cleared = await client.updateFilteredSubscription({
          subscription: { uid: sub.uid },
          updateMask: { paths: ["types"] },
        });
        assert.deepEqual(cleared.types, []);
        assert.equal(cleared.sink, `${SINK}/moved`);
        // a bad value over gRPC is INVALID_ARGUMENT too
        await assert.rejects(
          client.updateFilteredSubscription({ subscription: { uid: sub.uid, sink: "http://receiver.example.com/" } }),
          (err) => {
            assert.equal(ConnectError.from(err).code, Code.InvalidArgument);
            return true;
          },
        );
      } finally {
        close();
      }

      const updates = (await eventsAbout(sub.uid)).filter(
        (e) => e.type === "dev.chainguard.api.events.subscription.updated.v1",
      );
      assert.equal(updates.length, 4);
      assert.deepEqual(updates[0]!.body, moved);
      assertNotFound(
        await api.patch(`/bulwark/events/v1/subscriptions/${org.uid}/0123456789abcdef`, { sink: SINK }),
        "update of a missing subscription",
      );
    });

    it("refuses sinks that are not https URLs of public hosts, and changes nothing", async () => {
      const before = await subscriptionCount();
      const refused: [string, RegExp][] = [
        ["", /is required/],
        ["http://receiver.example.com/hook", /https/],
        ["ftp://receiver.example.com/hook", /https/],
        ["receiver.example.com/hook", /absolute URL/],
        ["https://user:secret@receiver.example.com/hook", /user name or password/],
        ["https://receiver.example.com/hook#part", /fragment/],
        ["https://127.0.0.1/hook", /loopback/],
        // every spelling of an address is the address: 0x7f.1 is 127.0.0.1
        ["https://0x7f.1/hook", /loopback/],
        ["https://[::1]:8443/hook", /loopback/],
        ["https://[::ffff:10.1.2.3]/hook", /private/],
        ["https://10.0.0.8/hook", /private/],
        ["https://192.168.1.20/hook", /private/],
        ["https://169.254.169.254/latest/meta-data", /link-local/],
        ["https://localhost:8443/hook", /loopback/],
        ["https://hooks.localhost/hook", /loopback/],
      ];
      for (const [sink, why] of refused) {
        assertInvalidArgument(
          await api.post(`/events/v2beta1/subscriptions/${org.uid}`, { sink }),
          "subscription.sink",
          sink,
          { description: why },
        );
      }
      // a sink's length is bounded by the rule every string of a request passes
      assertRpcError(
        await api.post(`/events/v2beta1/subscriptions/${org.uid}`, { sink: `${SINK}/${"x".repeat(2100)}` }),
        400,
        3,
        "long sink",
      );
      assertInvalidArgument(
        await api.post(`/events/v1/subscriptions/${org.uid}`, { sink: "http://127.0.0.1/" }),
        "subscription.sink",
        "v1",
      );
      const sub = await createFilteredSubscription(api, org.uid, `${SINK}/kept`, []);
      assertInvalidArgument(
        await api.patch(`/bulwark/events/v1/subscriptions/${sub.uid}`, { sink: "https://10.0.0.8/" }),
        "subscription.sink",
        "update",
      );
      assert.equal(ok(await api.get(`/events/v2beta1/subscriptions/${sub.uid}`)).sink, `${SINK}/kept`);
      assert.equal(await subscriptionCount(), before + 1);
      // a public address literal is a public sink
      ok(await api.post(`/events/v2beta1/subscriptions/${org.uid}`, { sink: "https://93.184.215.14:8443/hook" }));
    });

    it("refuses type filters that are not event types or prefixes", async () => {
      const post = (types: unknown) =>
        api.post(`/bulwark/events/v1/subscriptions/${org.uid}`, { sink: `${SINK}/types`, types });
      assertInvalidArgument(await post([""]), "subscription.types[0]", "empty", { description: /empty/ });
      assertInvalidArgument(
        await post(["dev.chainguard.", "Dev.Chainguard.Registry.push.v1"]),
        "subscription.types[1]",
      );
      assertInvalidArgument(await post(["dev..chainguard"]), "subscription.types[0]", "empty word");
      assertInvalidArgument(await post([".dev"]), "subscription.types[0]", "leading dot");
      assertInvalidArgument(await post(["dev.chainguard.*"]), "subscription.types[0]", "wildcard");
      assertInvalidArgument(await post(["dev.x", "dev.x"]), "subscription.types[1]", "twice", { description: /twice/ });
      assertInvalidArgument(await post([`dev.${"a".repeat(200)}`]), "subscription.types[0]", "long", {
        description: /at most 200/,
      });
      assertInvalidArgument(
        await post(Array.from({ length: 51 }, (_, i) => `dev.t${i}`)),
        "subscription.types",
        "51 entries",
        { description: /at most 50/ },
      );
      // 50 entries are fine
      ok(await post(Array.from({ length: 50 }, (_, i) => `dev.t${i}`)));
    });

    it("shows a subscription only to callers holding CAP_EVENTS_SUBSCRIPTION_LIST at its group", async () => {
      const team = await createGroup(api, org.uid, "subscribers");
      const sub = await createSubscription(api, team.uid, `${SINK}/private`);
      const groupsOnly = await createRole(api, org.uid, "groups only", ["CAP_IAM_GROUPS_LIST"]);
      const lister = await createRole(api, org.uid, "subscription lister", ["CAP_EVENTS_SUBSCRIPTION_LIST"]);
      const blind = await workload(server, api, org.uid, "blind", [{ at: org.uid, role: groupsOnly }]);
      const seeing = await workload(server, api, org.uid, "seeing", [{ at: team.uid, role: lister }]);
      const other = await createGroup(api, undefined, "other-org");
      const otherLister = await createRole(api, other.uid, "lister there", ["CAP_EVENTS_SUBSCRIPTION_LIST"]);
      const stranger = await workload(server, api, other.uid, "stranger", [{ at: other.uid, role: otherLister }]);

      const as = (token: string) => restClient(server.url, token);
      assertPermissionDenied(await as(blind.token).get(`/events/v2beta1/subscriptions/${sub.uid}`), "no capability");
      assertNotFound(await as(stranger.token).get(`/events/v2beta1/subscriptions/${sub.uid}`), "other org");
      assert.deepEqual(ok(await as(seeing.token).get(`/events/v2beta1/subscriptions/${sub.uid}`)), sub);

      const listed = (token: string) =>
        as(token)
          .get(`/events/v2beta1/subscriptions${query({ "uidp.descendants_of": org.uid })}`)
          .then((r) => ok(r).subscriptions.map((s: Json) => s.uid));
      assert.deepEqual(await listed(blind.token), []);
      assert.deepEqual(await listed(stranger.token), []);
      assert.deepEqual(await listed(seeing.token), [sub.uid]);
      // listing may not create, update or delete
      assertPermissionDenied(
        await as(seeing.token).post(`/events/v2beta1/subscriptions/${team.uid}`, { sink: SINK }),
        "create",
      );
      assertPermissionDenied(
        await as(seeing.token).patch(`/bulwark/events/v1/subscriptions/${sub.uid}`, { sink: SINK }),
        "update",
      );
      assertPermissionDenied(await as(seeing.token).delete(`/events/v2beta1/subscriptions/${sub.uid}`), "delete");
    });

    it("deletes a group's subscriptions with the group", async () => {
      const team = await createGroup(api, org.uid, "doomed");
      const sub = await createSubscription(api, team.uid, `${SINK}/doomed`);
      ok(await api.delete(`/iam/v2beta1/groups/${team.uid}`));
      assertNotFound(await api.get(`/events/v2beta1/subscriptions/${sub.uid}`), "after the group's delete");
      const rows = await server.db.selectFrom("event_subscriptions").select("uid").where("uid", "=", sub.uid).execute();
      assert.deepEqual(rows, []);
    });

    it("refuses a subscription under a group that does not exist", async () => {
      assertNotFound(
        await api.post(`/events/v2beta1/subscriptions/${org.uid}/0123456789abcdef`, { sink: SINK }),
        "missing group",
      );
    });
  });

  describe(`event subscriptions with --allow-insecure-sinks [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    before(async () => {
      server = await startTestServer(backend, { allowInsecureSinks: true });
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    it("accepts http sinks and loopback or private addresses, still refusing what is no URL", async () => {
      const org = await createGroup(api, undefined, "insecure-org");
      for (const sink of ["http://127.0.0.1:8080/hook", "https://10.0.0.8/hook", "http://localhost/hook"])
        assert.equal((await createSubscription(api, org.uid, sink)).sink, sink);
      for (const [sink, field] of [
        ["ftp://127.0.0.1/hook", /http or https/],
        ["http://user:pw@127.0.0.1/hook", /user name/],
        ["/relative", /absolute/],
      ] as const)
        assertInvalidArgument(
          await api.post(`/events/v2beta1/subscriptions/${org.uid}`, { sink }),
          "subscription.sink",
          sink,
          { description: field },
        );
    });
  });
}
