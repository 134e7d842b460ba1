// The timestamptz fast path (src/storage/timestamps.ts) gives what node-postgres's own parser
// gives — for what a UTC session prints and for everything it hands over (other offsets, BC,
// infinity, years below 100).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import { parseTimestamptz } from "../../src/storage/timestamps.js";
import { seededRandom as random } from "../support/seeded.js";

const general = pg.types.getTypeParser(1184, "text") as (text: string) => unknown;

const same = (text: string) => {
  const a = parseTimestamptz(text);
  const b = general(text);
  assert.equal(a instanceof Date ? a.getTime() : a, b instanceof Date ? b.getTime() : b, text);
};

describe("timestamptz parsing", () => {
  it("agrees with postgres-date on what a UTC session prints, every fraction length", () => {
    const next = random(7);
    const two = (n: number) => String(n).padStart(2, "0");
    for (let i = 0; i < 20_000; i++) {
      const year = 100 + Math.floor(next() * 9900);
      const digits = Math.floor(next() * 7);
      const fraction = digits === 0 ? "" : "." + String(Math.floor(next() * 10 ** digits)).padStart(digits, "0");
      same(
        `${String(year).padStart(4, "0")}-${two(1 + Math.floor(next() * 12))}-${two(1 + Math.floor(next() * 28))} ` +
          `${two(Math.floor(next() * 24))}:${two(Math.floor(next() * 60))}:${two(Math.floor(next() * 60))}${fraction}+00`,
      );
    }
    for (let ms = 0; ms < 1000; ms++) same(`2026-11-25 18:17:15.${String(ms).padStart(3, "0")}+00`);
  });

  it("hands everything else to postgres-date", () => {
    for (const text of [
      "2026-11-25 18:17:15.304+05:30",
      "2026-11-25 18:17:15-08",
      "0044-03-15 12:00:00+00",
      "0001-01-01 00:00:00+00 BC",
      "infinity",
      "-infinity",
      "12026-01-01 00:00:00+00",
      "2026-11-25 18:17:15.+00",
    ])
      same(text);
  });
});
