// The failed-authentication limit locks out attackers, not the people beside them: failures are
// counted per client address and per principal the credentials name, and a credential that
// verifies is served whatever was tried from its address or in its name (issue 26, item 2).
// Every limit here refills one request an hour, so no refused attempt can be earned back while
// the test runs, however slow the machine: the assertions are counts, never times.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { decodeJwt } from "jose";
import { CREDENTIALS_REFUSED_EVENT } from "../../src/auth/events.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import { createGroup, createRoleBinding, type Json } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { pullTokenIdentity, workload, type PullTokenIdentity, type Workload } from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";

const ONE_AN_HOUR = 1 / 3600;
const ATTEMPTS = 10_000;
/** Requests in flight at once during a flood (enough to interleave, few enough for one test client). */
const CONCURRENCY = 32;

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

/** How many refused credentials the audit trail holds. */
async function refusalsRecorded(server: TestServer): Promise<number> {
  const row = await server.db
    .selectFrom("events")
    .select((eb) => eb.fn.countAll<string>().as("count"))
    .where("type", "=", CREDENTIALS_REFUSED_EVENT)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Sends `count` requests made by `attempt(i)`, `CONCURRENCY` at a time; answers how many got each status. */
async function flood(count: number, attempt: (i: number) => Promise<Response>): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const res = await attempt(next++);
      await res.arrayBuffer();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return statuses;
}

describe("failed authentications from one address", () => {
  const FAILED_BURST = 20;
  const ADDRESS_BURST = 400;
  let server: TestServer;
  let registryHost: string;
  let puller: PullTokenIdentity;

  before(async () => {
    server = await startTestServer("pglite", {
      rateLimits: {
        address: { perSecond: ONE_AN_HOUR, burst: ADDRESS_BURST },
        identity: { perSecond: ONE_AN_HOUR, burst: 1_000 },
        sensitive: { perSecond: ONE_AN_HOUR, burst: 30 },
        failedAuthentication: { perSecond: ONE_AN_HOUR, burst: FAILED_BURST },
      },
    });
    registryHost = server.tokens.urls.registryAudience;
    const api = restClient(server.url, server.operatorToken);
    const org = await createGroup(api, undefined, "acme");
    puller = await pullTokenIdentity(api, org.uid, "puller", registryHost);
    await createRoleBinding(api, org.uid, puller.uid, builtinRoleUid("registry.pull"));
    // Something to pull afterwards (pushed before the flood, with a registry token): an empty index.
    const registryToken = await server.tokenFor(OPERATOR_SUBJECT, { audience: [registryHost] });
    const index = "application/vnd.oci.image.index.v1+json";
    const put = await fetch(`${server.url}/v2/acme/app/manifests/v1`, {
      method: "PUT",
      headers: { authorization: basic("_token", registryToken), "content-type": index },
      body: JSON.stringify({ schemaVersion: 2, mediaType: index, manifests: [] }),
    });
    assert.equal(put.status, 201, await put.text());
    // And a public repo, pulled by anyone: with a token, the token is still checked.
    const pub = await fetch(`${server.url}/v2/acme/pub/manifests/v1`, {
      method: "PUT",
      headers: { authorization: basic("_token", registryToken), "content-type": index },
      body: JSON.stringify({ schemaVersion: 2, mediaType: index, manifests: [] }),
    });
    assert.equal(pub.status, 201, await pub.text());
    const repos = await api.get(`/registry/v2beta1/repos?uidp.childrenOf=${org.uid}&name=pub`);
    const uid = repos.body.repos[0].uid as string;
    const visible = await api.call("PATCH", `/bulwark/registry/v1/repos/${uid}/visibility`, { public: true });
    assert.equal(visible.status, 200, JSON.stringify(visible.body));
  });
  after(() => server?.close());

  it(`${ATTEMPTS} bad attempts cannot stop a valid API token or a registry login from the same address`, async () => {
    // Bad API tokens, bad registry passwords, at /token and at /v2/: every limit is passed many times over.
    const attempts = [
      () => fetch(`${server.url}/iam/v2beta1/groups`, { headers: { authorization: "Bearer not-a-token" } }),
      () =>
        fetch(`${server.url}/token?service=${registryHost}&scope=repository:acme/app:pull`, {
          headers: { authorization: basic("_token", "wrong") },
        }),
      () => fetch(`${server.url}/v2/`, { headers: { authorization: basic("_token", "wrong") } }),
    ];
    const statuses = await flood(ATTEMPTS, (i) => attempts[i % attempts.length]!());
    assert.deepEqual(
      Object.fromEntries(statuses),
      { 401: FAILED_BURST, 429: ATTEMPTS - FAILED_BURST },
      "the failed budget answers 401, then every further failure is 429",
    );
    // Each 401 is in the audit trail; the flood past the limit is not (it is in the metrics).
    assert.equal(await refusalsRecorded(server), FAILED_BURST);

    // The operator's API token is served over REST ...
    const groups = await restClient(server.url, server.operatorToken).get("/iam/v2beta1/groups");
    assert.equal(groups.status, 200, JSON.stringify(groups.body));
    // ... and logs in to the registry as the password (`docker login -u _token`), and pulls.
    const login = await fetch(`${server.url}/token?service=${registryHost}&scope=repository:acme/app:pull`, {
      headers: { authorization: basic("_token", server.operatorToken) },
    });
    assert.equal(login.status, 200, await login.clone().text());
    const { token } = (await login.json()) as { token: string };
    assert.equal(decodeJwt(token).sub, OPERATOR_SUBJECT);
    const pull = await fetch(`${server.url}/v2/acme/app/manifests/v1`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(pull.status, 200, await pull.text());

    // A public repo too: its puller's token verifies, so the address's budget does not stop it.
    const publicLogin = await fetch(`${server.url}/token?service=${registryHost}&scope=repository:acme/pub:pull`, {
      headers: { authorization: basic("_token", server.operatorToken) },
    });
    assert.equal(publicLogin.status, 200, await publicLogin.clone().text());
    const publicPull = await fetch(`${server.url}/v2/acme/pub/manifests/v1`, {
      headers: { authorization: `Bearer ${((await publicLogin.json()) as { token: string }).token}` },
    });
    assert.equal(publicPull.status, 200, await publicPull.text());

    // The attacker is still refused, on every path, and so is anyone without credentials here;
    // a refused credential gets the limit's answer whatever else is wrong with its request.
    const badQuery = await fetch(`${server.url}/v2/acme/app/tags/list?last=%00`, {
      headers: { authorization: "Bearer garbage" },
    });
    assert.equal(badQuery.status, 429, await badQuery.text());
    for (const attempt of attempts) assert.equal((await attempt()).status, 429);
    const anonymous = await fetch(`${server.url}/v2/`);
    assert.equal(anonymous.status, 429, "the address is over its request budget too");
    // Over that budget only our own tokens are checked (no database read): a pull token, which
    // must be exchanged, waits for the address's budget to refill.
    const exchanged = await fetch(`${server.url}/token?service=${registryHost}&scope=repository:acme/app:pull`, {
      headers: { authorization: basic(puller.uid, await puller.pullToken()) },
    });
    assert.equal(exchanged.status, 429);
    assert.match(await exchanged.text(), /requests per client address/);
    assert.equal(await refusalsRecorded(server), FAILED_BURST, "no refusal answered 429 was recorded");
  });
});

describe("failed authentications in one principal's name", () => {
  const FAILED_BURST = 5;
  let server: TestServer;
  let registryHost: string;
  let puller: PullTokenIdentity;
  let bystander: Workload;
  let org: Json;
  // Each request comes from the address X-Forwarded-For names (the server trusts the proxy).
  const from = (address: string, path: string, authorization: string) =>
    fetch(`${server.url}${path}`, { headers: { authorization, "x-forwarded-for": address } });
  const login = (address: string, authorization: string) =>
    from(address, `/token?service=${registryHost}&scope=repository:acme/app:pull`, authorization);

  before(async () => {
    server = await startTestServer("pglite", {
      rateLimits: { failedAuthentication: { perSecond: ONE_AN_HOUR, burst: FAILED_BURST } },
      trustProxy: true,
    });
    registryHost = server.tokens.urls.registryAudience;
    const api = restClient(server.url, server.operatorToken);
    org = await createGroup(api, undefined, "acme");
    puller = await pullTokenIdentity(api, org.uid, "puller", registryHost);
    await createRoleBinding(api, org.uid, puller.uid, builtinRoleUid("registry.pull"));
    bystander = await workload(server, api, org.uid, "bystander");
  });
  after(() => server?.close());

  it("limits attempts naming that principal from any address, without locking out other principals", async () => {
    // A distributed guesser: every attempt from another address, all in the puller's name.
    const statuses = await flood(200, (i) => login(`198.51.100.${i % 250}`, basic(puller.uid, `guess-${i}`)));
    assert.deepEqual(Object.fromEntries(statuses), { 401: FAILED_BURST, 429: 200 - FAILED_BURST });
    assert.equal(await refusalsRecorded(server), FAILED_BURST);

    // From an address that never failed: a bad password in the puller's name is limited ...
    const limited = await login("203.0.113.7", basic(puller.uid, "another-guess"));
    assert.equal(limited.status, 429);
    assert.match(await limited.text(), /failed authentications in this principal's name/);
    // ... one in another principal's name is merely refused ...
    assert.equal((await login("203.0.113.7", basic(bystander.uid, "a-guess"))).status, 401);
    const forged = server.operatorToken.slice(0, server.operatorToken.lastIndexOf(".") + 1) + "AAAA";
    assert.equal((await from("203.0.113.7", "/iam/v2beta1/groups", `Bearer ${forged}`)).status, 401);
    // ... and valid credentials are served: the puller's own pull token, from an address the
    // attacker used and from another, and the bystander's API token.
    for (const address of ["198.51.100.1", "203.0.113.7"]) {
      const served = await login(address, basic(puller.uid, await puller.pullToken()));
      assert.equal(served.status, 200, await served.clone().text());
      assert.equal(decodeJwt(((await served.json()) as { token: string }).token).sub, puller.uid);
    }
    const groups = await from("203.0.113.7", "/iam/v2beta1/groups", `Bearer ${bystander.token}`);
    assert.equal(groups.status, 200, await groups.text());
  });

  it("counts an API token's claimed subject: a forged token in someone's name spends that name's budget", async () => {
    const victim = await workload(server, restClient(server.url, server.operatorToken), org.uid, "victim");
    const [header, payload] = victim.token.split(".");
    const forged = `${header}.${payload}.${"A".repeat(86)}`;
    const statuses = await flood(20, (i) => from(`192.0.2.${i}`, "/iam/v2beta1/groups", `Bearer ${forged}`));
    assert.deepEqual(Object.fromEntries(statuses), { 401: FAILED_BURST, 429: 20 - FAILED_BURST });
    // The victim's real token is served all the same.
    assert.equal((await from("192.0.2.1", "/iam/v2beta1/groups", `Bearer ${victim.token}`)).status, 200);
  });

  it("a refused token exchange spends the budget of the identity it asks for, recorded only while answered 403", async () => {
    const target = await workload(server, restClient(server.url, server.operatorToken), org.uid, "target");
    const forged = server.operatorToken.slice(0, server.operatorToken.lastIndexOf(".") + 1) + "A".repeat(86);
    const recordedBefore = await refusalsRecorded(server);
    const statuses = await flood(20, (i) =>
      from(`203.0.113.${100 + i}`, `/sts/exchange?identity=${encodeURIComponent(target.uid)}`, `Bearer ${forged}`),
    );
    // A token the exchange cannot verify is refused as PERMISSION_DENIED (its own suite says why).
    assert.deepEqual(Object.fromEntries(statuses), { 403: FAILED_BURST, 429: 20 - FAILED_BURST });
    assert.equal(await refusalsRecorded(server), recordedBefore + FAILED_BURST);
  });
});
