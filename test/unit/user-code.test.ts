// Device user codes are drawn uniformly: a modulo-biased draw (a random byte % alphabet size)
// favours the first letters by ~8%, which this chi-square test over 160,000 letters detects.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mintUserCode } from "../../src/auth/sign-in/service.js";

describe("device user codes", () => {
  it("letters are uniform over the alphabet (chi-square, p < 0.001 would fail)", () => {
    const counts = new Map<string, number>();
    let total = 0;
    for (let i = 0; i < 20_000; i++) {
      for (const letter of mintUserCode()) {
        counts.set(letter, (counts.get(letter) ?? 0) + 1);
        total++;
      }
    }
    const expected = total / counts.size;
    const chiSquare = [...counts.values()].reduce((sum, n) => sum + (n - expected) ** 2 / expected, 0);
    // 99.9th percentile of chi-square for (alphabet - 1) degrees of freedom, alphabet ≤ 32: < 62.
    assert.ok(counts.size >= 16, `alphabet of ${counts.size}`);
    assert.ok(chiSquare < 62, `chi-square ${chiSquare.toFixed(1)} over ${counts.size} letters`);
  });
});
