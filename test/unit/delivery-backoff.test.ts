// The delivery retry schedule (src/events/delivery.ts retryDelayRangeMs) at the DEFAULT settings:
// the receiver-down test in test/events/delivery.test.ts holds its receiver down for
// RECEIVER_DOWN_ATTEMPTS attempts with the backoff shortened; this proves that as many attempts
// at the defaults (1 s min, 10 min max) span at least 10 minutes whatever the jitter draws.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DELIVERY_DEFAULTS, retryDelayRangeMs } from "../../src/events/delivery.js";
import { RECEIVER_DOWN_ATTEMPTS } from "../support/event-receiver.js";

const { deliveryBackoffMinMs: MIN, deliveryBackoffMaxMs: MAX } = DELIVERY_DEFAULTS;

/** The least time from the first of `attempts` failed attempts to the last one, at the defaults. */
function leastSpanMs(attempts: number): number {
  let total = 0;
  // the delays after the 1st … (attempts-1)th failures; `prior` attempts came before each failure
  for (let prior = 0; prior < attempts - 1; prior++) total += retryDelayRangeMs(prior, MIN, MAX).low;
  return total;
}

describe("delivery retry schedule at the defaults", () => {
  it("the defaults are 1 s and 10 min", () => {
    assert.equal(MIN, 1_000);
    assert.equal(MAX, 10 * 60_000);
  });

  it(`the receiver-down test's ${RECEIVER_DOWN_ATTEMPTS} attempts span at least 10 minutes at the least delays`, () => {
    assert.ok(RECEIVER_DOWN_ATTEMPTS >= 10);
    const span = leastSpanMs(RECEIVER_DOWN_ATTEMPTS);
    assert.ok(span >= 10 * 60_000, `${RECEIVER_DOWN_ATTEMPTS} attempts span at least ${span} ms`);
    // and fewer than 10 would not: the test needs its many attempts
    assert.ok(leastSpanMs(9) < 10 * 60_000);
  });

  it("each delay is drawn from [max(min, bound/2), bound], the bound doubling from min up to max", () => {
    const ranges = Array.from({ length: 14 }, (_, prior) => retryDelayRangeMs(prior, MIN, MAX));
    assert.deepEqual(ranges.slice(0, 4), [
      { low: 1_000, high: 1_000 },
      { low: 1_000, high: 2_000 },
      { low: 2_000, high: 4_000 },
      { low: 4_000, high: 8_000 },
    ]);
    for (const [prior, r] of ranges.entries()) {
      assert.ok(r.low >= MIN && r.low <= r.high && r.high <= MAX, `after ${prior} attempts: ${JSON.stringify(r)}`);
      if (prior > 0) assert.ok(r.low >= ranges[prior - 1]!.low, "never sooner than the attempt before");
    }
    assert.deepEqual(ranges.at(-1), { low: MAX / 2, high: MAX });
    // a huge attempt count neither overflows nor exceeds the max
    assert.deepEqual(retryDelayRangeMs(10_000, MIN, MAX), { low: MAX / 2, high: MAX });
  });
});
