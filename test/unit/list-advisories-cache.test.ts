// ListAdvisories' answer cache (src/vulnerabilities/list-cache.ts): an answer is reused only for
// the same request, visibility and advisories change counter; its memory is bounded by entries
// and bytes; requests making the same answer at once share it; and a kept answer's next page token
// is minted when it is served, so it never goes out older than the codec mints. The clock is
// injected (no waiting). The server-level behaviour is in test/vulnerabilities/answer-caches.test.ts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import {
  AdvisorySchema,
  ListAdvisoriesRequestSchema,
} from "../../src/gen/chainguard/platform/vulnerabilities/v2beta1/advisories_pb.js";
import { PAGE_TOKEN_LIFETIME_SECONDS, PageTokenCodec, type PageCursor } from "../../src/core/page-tokens.js";
import { ListAdvisoriesCache, type ListAnswer } from "../../src/vulnerabilities/list-cache.js";

const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);
const DAY = 24 * 60 * 60 * 1000;
const CURSOR: PageCursor = { order: "advisory_id asc,uid asc", filter: "f", after: ["CGA-1", "u1"], skipped: 0 };

function setup(limits?: { entries: number; bytes: number }) {
  const clock = { now: T0 };
  const tokens = PageTokenCodec.fromSecret(new Uint8Array(32).fill(3), () => clock.now);
  const cache = new ListAdvisoriesCache({ tokens }, limits);
  let made = 0;
  /** An answer of `n` advisories (about 60 bytes each encoded) with a next page. */
  const make =
    (n = 1) =>
    async (): Promise<ListAnswer> => {
      made++;
      return {
        advisories: Array.from({ length: n }, (_, i) =>
          create(AdvisorySchema, { uid: `${"a".repeat(40)}/${i}`, advisoryId: `CGA-${i}` }),
        ),
        nextPageToken: await tokens.encode(CURSOR),
        totalCount: BigInt(n + 1),
        skipped: 0,
      };
    };
  return { clock, tokens, cache, make, made: () => made };
}

const req = (init: Record<string, unknown> = {}) => create(ListAdvisoriesRequestSchema, { pageSize: 1, ...init });

describe("ListAdvisoriesCache", () => {
  it("reuses an answer only for the same request, visibility and counter value", async () => {
    const { cache, make, made } = setup();
    await cache.answer(req(), ["g1"], "1", make());
    await cache.answer(req(), ["g1"], "1", make());
    assert.equal(made(), 1);
    await cache.answer(req(), ["g2"], "1", make());
    await cache.answer(req(), "all", "1", make());
    await cache.answer(req(), ["g1", "g2"], "1", make());
    assert.equal(made(), 4, "each visibility has its own answer");
    // the same visible groups in another order are the same visibility
    await cache.answer(req(), ["g2", "g1"], "1", make());
    assert.equal(made(), 4);
    await cache.answer(req({ query: "cve" }), ["g1"], "1", make());
    await cache.answer(req({ pageSize: 2 }), ["g1"], "1", make());
    assert.equal(made(), 6, "each request has its own answer");
    await cache.answer(req(), ["g1"], "2", make());
    assert.equal(made(), 7, "a moved counter makes the answer again");
    await cache.answer(req(), ["g1"], "2", make());
    assert.equal(made(), 7);
    assert.deepEqual({ hits: cache.stats.hits, misses: cache.stats.misses }, { hits: 3, misses: 7 });
  });

  it("a page token is keyed by the cursor it stands for; an invalid one is never answered from the cache", async () => {
    const { cache, make, made, tokens, clock } = setup();
    const first = await tokens.encode(CURSOR);
    clock.now += 120_000; // past the codec's reuse: another token for the same cursor
    const second = await tokens.encode(CURSOR);
    assert.notEqual(first, second);
    await cache.answer(req({ pageToken: first }), "all", "1", make());
    await cache.answer(req({ pageToken: second }), "all", "1", make());
    assert.equal(made(), 1);
    await assert.rejects(
      cache.answer(req({ pageToken: "not-a-token" }), "all", "1", async () => {
        throw new Error("refused by the list engine");
      }),
      /refused by the list engine/,
    );
  });

  it("mints the next page token when it serves a kept answer, so it lives as long as a fresh one", async () => {
    const { cache, make, tokens, clock } = setup();
    await cache.answer(req(), "all", "1", make());
    clock.now += 2 * DAY;
    const kept = await cache.answer(req(), "all", "1", make());
    clock.now += PAGE_TOKEN_LIFETIME_SECONDS * 1000 - 60_000;
    const decoded = await tokens.decode(kept.nextPageToken);
    assert.equal(decoded.kind, "ok");
    assert.deepEqual(decoded.kind === "ok" && decoded.cursor, CURSOR);
  });

  it("keeps at most its entries and bytes, forgetting the least recently used first", async () => {
    const { cache, make, made } = setup({ entries: 3, bytes: 1_000_000 });
    for (const q of ["a", "b", "c"]) await cache.answer(req({ query: q }), "all", "1", make());
    await cache.answer(req({ query: "a" }), "all", "1", make()); // a is now the most recent
    await cache.answer(req({ query: "d" }), "all", "1", make()); // b goes
    assert.equal(cache.stats.entries, 3);
    const before = made();
    await cache.answer(req({ query: "a" }), "all", "1", make());
    assert.equal(made(), before);
    await cache.answer(req({ query: "b" }), "all", "1", make());
    assert.equal(made(), before + 1);

    const small = setup({ entries: 100, bytes: 20_000 });
    for (let i = 0; i < 20; i++) await small.cache.answer(req({ query: `q${i}` }), "all", "1", small.make(10));
    assert.ok(small.cache.stats.bytes <= 20_000, `${small.cache.stats.bytes} bytes kept`);
    assert.ok(small.cache.stats.entries > 0 && small.cache.stats.entries < 20);
    // an answer larger than an eighth of the bytes is served, not kept
    await small.cache.answer(req({ query: "big" }), "all", "1", small.make(200));
    await small.cache.answer(req({ query: "big" }), "all", "1", small.make(200));
    assert.equal(small.cache.stats.misses, 22);
  });

  it("does not keep an answer made while its page token expired (the walk restarted: not this cursor's page)", async () => {
    const { cache, make, tokens, clock, made } = setup();
    const expiring = await tokens.encode(CURSOR);
    clock.now += PAGE_TOKEN_LIFETIME_SECONDS * 1000 - 1;
    const fresh = await tokens.encode(CURSOR);
    // the token is still good when the request is keyed, and has expired by the time it is made
    const expiresMeanwhile = async () => {
      clock.now += 2;
      return make()();
    };
    await cache.answer(req({ pageToken: expiring }), "all", "1", expiresMeanwhile);
    const before = made();
    await cache.answer(req({ pageToken: fresh }), "all", "1", make());
    assert.equal(made(), before + 1, "the same cursor's page is made, not answered with the restarted walk");
  });

  it("requests making the same answer at once share one", async () => {
    const { cache, make, made } = setup();
    const answers = await Promise.all(Array.from({ length: 5 }, () => cache.answer(req(), "all", "1", make())));
    assert.equal(made(), 1);
    assert.equal(cache.stats.joined, 4);
    for (const a of answers) assert.equal(a.advisories.length, 1);
  });
});
