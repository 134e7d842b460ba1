// The verified-token cache (src/auth/tokens.ts) and the LRU under it (src/core/lru.ts): a token's
// signature is checked once, yet a cached answer is never given past the token's `exp`, after its
// signing key is withdrawn, or for another audience. The clock is injected.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from "jose";
import { LruCache } from "../../src/core/lru.js";
import { TokenIssuer, type KeySource } from "../../src/auth/tokens.js";
import type { PublishedKey } from "../../src/auth/keys.js";

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const URLS = {
  issuer: "https://issuer.test",
  apiAudience: "https://api.test",
  registryAudience: "registry.test",
} as unknown as ConstructorParameters<typeof TokenIssuer>[1];

async function keyPair(kid: string) {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: "ES256" } };
}

/** An issuer over one key whose publication and clock the test controls; counts key-set reads. */
async function setup() {
  const key = await keyPair("k1");
  const state = { now: T0, published: [{ kid: key.kid, jwk: key.jwk }] as PublishedKey[], keyReads: 0 };
  const keys: KeySource = {
    signingKey: async () => ({ kid: key.kid, privateKey: key.privateKey, signUntil: new Date(T0 + 86_400_000) }),
    publishedKeys: async () => {
      state.keyReads++;
      return state.published;
    },
  };
  const issuer = new TokenIssuer(keys, URLS, () => new Date(state.now));
  return { issuer, state, key };
}

describe("LruCache", () => {
  it("forgets the least recently used entry beyond its capacity", () => {
    const lru = new LruCache<string, number>(2);
    lru.set("a", 1);
    lru.set("b", 2);
    assert.equal(lru.get("a"), 1); // a is now the most recent
    lru.set("c", 3);
    assert.equal(lru.get("b"), undefined, "b was the least recent");
    assert.equal(lru.get("a"), 1);
    assert.equal(lru.get("c"), 3);
    assert.equal(lru.size, 2);
    lru.delete("a");
    assert.equal(lru.get("a"), undefined);
    assert.throws(() => new LruCache(0));
  });

  it("keeps a used entry for at least half its capacity of new ones, and never more than its capacity", () => {
    const lru = new LruCache<number, number>(100);
    for (let i = 0; i < 100; i++) lru.set(i, i);
    for (let round = 0; round < 20; round++) {
      assert.equal(lru.get(0), 0, `round ${round}: the hot entry is still there`);
      for (let i = 0; i < 50; i++) lru.set(1000 + round * 50 + i, i);
      assert.ok(lru.size <= 100);
    }
    assert.equal(lru.get(1), undefined, "a cold entry was forgotten");
  });
});

describe("verified-token cache", () => {
  it("answers a repeated token from the cache, with the same frozen claims", async () => {
    const { issuer, state } = await setup();
    const { token } = await issuer.mint({ subject: "s1", audience: [URLS.apiAudience], lifetimeMs: 60_000 });
    const first = await issuer.verify(token, URLS.apiAudience);
    const second = await issuer.verify(token, URLS.apiAudience);
    assert.equal(second, first, "the cached object");
    assert.ok(Object.isFrozen(first));
    assert.throws(() => Object.assign(first, { subject: "x" }), TypeError, "no request can change it for the others");
    assert.equal(second.subject, "s1");
    assert.ok(state.keyReads >= 2, "a cached answer still checks that its key is published");
  });

  it("never answers from the cache at or past the token's exp", async () => {
    const { issuer, state } = await setup();
    const { token, expiry } = await issuer.mint({ subject: "s1", audience: [URLS.apiAudience], lifetimeMs: 60_000 });
    await issuer.verify(token, URLS.apiAudience);
    state.now = expiry.getTime() + 31_000; // past exp and the 30 s tolerance
    await assert.rejects(issuer.verify(token, URLS.apiAudience), /expired/);
  });

  it("refuses a cached token once its signing key is no longer published", async () => {
    const { issuer, state } = await setup();
    const { token } = await issuer.mint({ subject: "s1", audience: [URLS.apiAudience] });
    await issuer.verify(token, URLS.apiAudience);
    state.published = [];
    await assert.rejects(issuer.verify(token, URLS.apiAudience), /not signed by a current key/);
  });

  it("keys the cache by audience: a token verified for one audience is not accepted for another", async () => {
    const { issuer } = await setup();
    const { token } = await issuer.mint({ subject: "s1", audience: [URLS.apiAudience] });
    await issuer.verify(token, URLS.apiAudience);
    await assert.rejects(issuer.verify(token, URLS.registryAudience), /audience/);
  });

  it("caches nothing that failed: a bad signature fails every time", async () => {
    const { issuer, state } = await setup();
    const other = await keyPair("k1"); // same kid, another key
    const forged = await new SignJWT({})
      .setProtectedHeader({ alg: "ES256", kid: "k1" })
      .setIssuer(URLS.issuer)
      .setSubject("s1")
      .setAudience(URLS.apiAudience)
      .setIssuedAt(Math.floor(state.now / 1000))
      .setExpirationTime(Math.floor(state.now / 1000) + 600)
      .sign(other.privateKey as CryptoKey);
    for (let i = 0; i < 3; i++) await assert.rejects(issuer.verify(forged, URLS.apiAudience), /signature/);
  });
});
