// Authentication in the audit trail: a token exchange records dev.bulwark.auth.token_exchanged.v1
// and its token carries the presented token's iss/sub in an `act` claim, which every event the
// new token causes names as actor.act; a registry token issued at /token records
// dev.bulwark.auth.registry_login.v1; credentials refused at verification record
// dev.bulwark.auth.credentials_refused.v1 (a request without credentials records nothing).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { decodeJwt } from "jose";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import { backends } from "../support/db-templates.js";
import { createRoleBinding } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { expiredToken, pullTokenIdentity, type PullTokenIdentity } from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { lastEventSeq } from "../support/events.js";

interface EventRow {
  seq: string;
  type: string;
  subject: string;
  parent_uid: string | null;
  actor: { subject: string; act?: Record<string, string> } | null;
  body: Record<string, unknown>;
}

const UPSTREAM_AUDIENCE = "https://ci.example/bulwark";

for (const backend of backends()) {
  describe(`auth events [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let orgUid: string;
    let ci: PullTokenIdentity;

    const eventsSince = async (seq: string, type?: string): Promise<EventRow[]> => {
      let query = server.db
        .selectFrom("events")
        .select(["seq", "type", "subject", "parent_uid", "actor", "body"])
        .where("seq", ">", seq as never);
      if (type) query = query.where("type", "=", type);
      return (await query.orderBy("seq").execute()) as EventRow[];
    };
    const lastSeq = () => lastEventSeq(server);
    const exchange = async (identity: string, aud: string) => {
      const res = await restClient(server.url, await ci.pullToken()).get(
        `/sts/exchange?identity=${encodeURIComponent(identity)}&aud=${encodeURIComponent(aud)}`,
      );
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.token as string;
    };

    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      const org = await api.post("/iam/v2beta1/groups", { name: "auth-events" });
      assert.equal(org.status, 200, JSON.stringify(org.body));
      orgUid = org.body.uid;
      ci = await pullTokenIdentity(api, orgUid, "ci", UPSTREAM_AUDIENCE);
      await createRoleBinding(api, orgUid, ci.uid, builtinRoleUid("owner"));
    });
    after(() => server.close());

    it("an exchange is recorded, and its token's act claim names the presented token", async () => {
      const since = await lastSeq();
      const token = await exchange(ci.uid, server.tokens.urls.apiAudience);
      const act = decodeJwt(token).act as Record<string, string>;
      assert.equal(act.iss, "https://pull-tokens.example/ci");
      assert.equal(act.sub, "pull-token-ci");
      assert.equal(act.aud, UPSTREAM_AUDIENCE);
      const [event, ...more] = await eventsSince(since, "dev.bulwark.auth.token_exchanged.v1");
      assert.equal(more.length, 0);
      assert.equal(event!.subject, ci.uid);
      assert.equal(event!.parent_uid, orgUid);
      assert.deepEqual(event!.actor, { subject: ci.uid, act });
      assert.equal(event!.body.identity, ci.uid);
      assert.equal(event!.body.issuer, "https://pull-tokens.example/ci");
      assert.deepEqual(event!.body.audience, [server.tokens.urls.apiAudience]);
      assert.ok(event!.body.remote_address);
      assert.ok(!JSON.stringify(event).includes(token), "no token in the event");
    });

    it("an event caused by an exchanged token names the upstream token as actor.act", async () => {
      const token = await exchange(ci.uid, server.tokens.urls.apiAudience);
      const since = await lastSeq();
      const created = await restClient(server.url, token).post(`/iam/v2beta1/groups/${orgUid}`, { name: "by-ci" });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const [event] = await eventsSince(since, "dev.chainguard.api.iam.group.created.v1");
      assert.equal(event!.subject, created.body.uid);
      assert.equal(event!.actor?.subject, ci.uid);
      assert.equal(event!.actor?.act?.iss, "https://pull-tokens.example/ci");
      assert.equal(event!.actor?.act?.sub, "pull-token-ci");
    });

    it("a registry token at /token is a registry login; the act claim carries through", async () => {
      const apiToken = await exchange(ci.uid, server.tokens.urls.apiAudience);
      const since = await lastSeq();
      const basic = Buffer.from(`_token:${apiToken}`).toString("base64");
      const res = await fetch(
        `${server.url}/token?service=${encodeURIComponent(server.tokens.urls.registryAudience)}`,
        {
          headers: { authorization: `Basic ${basic}` },
        },
      );
      assert.equal(res.status, 200);
      const registryToken = ((await res.json()) as { token: string }).token;
      assert.equal((decodeJwt(registryToken).act as Record<string, string>).sub, "pull-token-ci");
      const [login, ...more] = await eventsSince(since, "dev.bulwark.auth.registry_login.v1");
      assert.equal(more.length, 0);
      assert.equal(login!.subject, ci.uid);
      assert.equal(login!.parent_uid, orgUid);
      assert.equal(login!.actor?.act?.sub, "pull-token-ci");
      assert.ok(!JSON.stringify(login).includes(apiToken) && !JSON.stringify(login).includes(registryToken));
    });

    it("refused credentials are recorded with the reason and whom they claimed; no credentials, nothing", async () => {
      const since = await lastSeq();
      const expired = await expiredToken(server, ci.uid);
      assert.equal((await restClient(server.url, expired).get(`/iam/v2beta1/groups/${orgUid}`)).status, 401);
      assert.equal((await restClient(server.url, undefined).get(`/iam/v2beta1/groups/${orgUid}`)).status, 401);
      const refused = await eventsSince(since, "dev.bulwark.auth.credentials_refused.v1");
      assert.equal(refused.length, 1, JSON.stringify(refused));
      assert.equal(refused[0]!.subject, ci.uid);
      assert.equal(refused[0]!.parent_uid, null, "a claim anyone can make is sent to no group");
      assert.equal(refused[0]!.body.reason, "Unauthenticated: token has expired");
      assert.equal(refused[0]!.body.claimed_subject, ci.uid);
      assert.ok(!JSON.stringify(refused[0]).includes(expired));
    });

    it("a denied exchange is a refused credential", async () => {
      const since = await lastSeq();
      const other = await pullTokenIdentity(api, orgUid, "other", UPSTREAM_AUDIENCE);
      const res = await restClient(server.url, await other.pullToken()).get(
        `/sts/exchange?identity=${encodeURIComponent(ci.uid)}`,
      );
      assert.equal(res.status, 403);
      const refused = await eventsSince(since, "dev.bulwark.auth.credentials_refused.v1");
      assert.equal(refused.length, 1);
      assert.equal(refused[0]!.subject, ci.uid);
      assert.equal(refused[0]!.body.reason, "Permission denied: the presented token cannot assume this identity");
    });
  });
}
