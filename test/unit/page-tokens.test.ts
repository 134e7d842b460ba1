// Page tokens (src/core/page-tokens.ts): opaque, tamper-proof cursors with a 3-day lifetime.
// The clock is injected, so expiry is tested without waiting.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PAGE_TOKEN_LIFETIME_SECONDS, PageTokenCodec, type PageCursor } from "../../src/core/page-tokens.js";

const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);
const SECRET = new Uint8Array(32).fill(7);
const CURSOR: PageCursor = { order: "name asc, uid asc", filter: "f:abc", after: ["zeta", "0123"], skipped: 40 };

/** A codec whose clock the test moves. */
function clocked(secret = SECRET): { codec: PageTokenCodec; clock: { now: number } } {
  const clock = { now: T0 };
  return { codec: PageTokenCodec.fromSecret(secret, () => clock.now), clock };
}

/** Changes one character in the middle of the token's `index`-th dot-separated part. */
function flipInPart(token: string, index: number): string {
  const parts = token.split(".");
  const part = parts[index]!;
  const at = Math.floor(part.length / 2);
  // Middle characters carry full 6 bits, so any change alters the decoded bytes.
  const replacement = part[at] === "A" ? "B" : "A";
  parts[index] = part.slice(0, at) + replacement + part.slice(at + 1);
  return parts.join(".");
}

describe("PageTokenCodec", () => {
  it("round-trips a cursor", async () => {
    const { codec } = clocked();
    const token = await codec.encode(CURSOR);
    assert.deepEqual(await codec.decode(token), { kind: "ok", cursor: CURSOR });
  });

  it("round-trips edge values: empty strings and lists, zero skipped, unicode", async () => {
    const { codec } = clocked();
    for (const cursor of [
      { order: "", filter: "", after: [], skipped: 0 },
      { order: "create_time desc", filter: '名前="x"', after: ["", "a.b/c"], skipped: 2 ** 31 },
    ]) {
      assert.deepEqual(await codec.decode(await codec.encode(cursor)), { kind: "ok", cursor });
    }
  });

  it("is opaque: the cursor is not readable from the token, and each encryption is fresh", async () => {
    const { codec, clock } = clocked();
    const a = await codec.encode(CURSOR);
    // The same cursor within a minute gets the same token back (no second encryption of it) ...
    assert.equal(await codec.encode(CURSOR), a, "reused within a minute");
    // ... and every encryption has its own random IV.
    clock.now += 61_000;
    const b = await codec.encode(CURSOR);
    assert.notEqual(b.split(".")[2], a.split(".")[2], "a random IV per encryption");
    assert.notEqual(await codec.encode({ ...CURSOR, skipped: 41 }), a, "another cursor, another token");
    // Compact JWE: header, empty encrypted key ("dir"), IV, ciphertext, tag.
    const parts = a.split(".");
    assert.equal(parts.length, 5);
    assert.equal(parts[1], "");
    assert.deepEqual(JSON.parse(Buffer.from(parts[0]!, "base64url").toString()), { alg: "dir", enc: "A256GCM" });
    for (const part of parts) {
      const text = Buffer.from(part, "base64url").toString("latin1");
      assert.ok(!text.includes("zeta") && !text.includes("f:abc"), "cursor values must not appear in clear");
    }
    assert.deepEqual(await codec.decode(b), { kind: "ok", cursor: CURSOR });
  });

  it("is shared by codecs built from the same secret (any replica continues a walk)", async () => {
    const token = await clocked().codec.encode(CURSOR);
    const other = clocked(new Uint8Array(SECRET)).codec;
    assert.deepEqual(await other.decode(token), { kind: "ok", cursor: CURSOR });
  });

  it("rejects a token made under another secret as invalid", async () => {
    const token = await clocked().codec.encode(CURSOR);
    const otherSecret = new Uint8Array(32).fill(8);
    assert.deepEqual(await clocked(otherSecret).codec.decode(token), { kind: "invalid" });
  });

  it("reports another secret's token as invalid even when it would also have expired", async () => {
    // Decryption comes first, so a forged or foreign token can never learn about expiry.
    const token = await clocked().codec.encode(CURSOR);
    const { codec, clock } = clocked(new Uint8Array(32).fill(9));
    clock.now = T0 + 10 * PAGE_TOKEN_LIFETIME_SECONDS * 1000;
    assert.deepEqual(await codec.decode(token), { kind: "invalid" });
  });

  it("rejects tampering with any part of the token", async () => {
    const { codec } = clocked();
    const token = await codec.encode(CURSOR);
    for (const index of [2, 3, 4]) {
      const tampered = flipInPart(token, index);
      assert.notEqual(tampered, token);
      assert.deepEqual(await codec.decode(tampered), { kind: "invalid" }, `part ${index}`);
    }
    // a different (still valid JSON) protected header breaks the authenticated data
    const parts = token.split(".");
    parts[0] = Buffer.from(JSON.stringify({ enc: "A256GCM", alg: "dir" })).toString("base64url");
    assert.deepEqual(await codec.decode(parts.join(".")), { kind: "invalid" });
    // truncation and extension
    assert.deepEqual(await codec.decode(token.slice(0, -2)), { kind: "invalid" });
    assert.deepEqual(await codec.decode(token + "A"), { kind: "invalid" });
  });

  it("rejects garbage as invalid, never throwing", async () => {
    const { codec } = clocked();
    const garbage = [
      "",
      "abc",
      "....",
      "a.b.c.d.e",
      "not a token at all",
      // a signed (not encrypted) JWT with alg none
      `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from('{"o":"x"}').toString("base64url")}.`,
      "%%%%.%%%%.%%%%.%%%%.%%%%",
    ];
    for (const token of garbage) {
      assert.deepEqual(await codec.decode(token), { kind: "invalid" }, JSON.stringify(token));
    }
  });

  it("expires after exactly PAGE_TOKEN_LIFETIME_SECONDS", async () => {
    const { codec, clock } = clocked();
    const token = await codec.encode(CURSOR);
    clock.now = T0 + PAGE_TOKEN_LIFETIME_SECONDS * 1000 - 1000;
    assert.deepEqual(await codec.decode(token), { kind: "ok", cursor: CURSOR });
    clock.now = T0 + PAGE_TOKEN_LIFETIME_SECONDS * 1000;
    assert.deepEqual(await codec.decode(token), { kind: "expired" });
    clock.now = T0 + 365 * 24 * 3600 * 1000;
    assert.deepEqual(await codec.decode(token), { kind: "expired" });
  });

  it("lasts three days", () => {
    assert.equal(PAGE_TOKEN_LIFETIME_SECONDS, 3 * 24 * 60 * 60);
  });

  it("returns invalid for authentic tokens whose payload has the wrong types", async () => {
    // The codec signs whatever it is given; decode must still refuse a malformed cursor.
    const { codec } = clocked();
    const bad: Array<[string, unknown]> = [
      ["order not a string", { ...CURSOR, order: 1 }],
      ["order missing", { filter: "", after: [], skipped: 0 }],
      ["filter not a string", { ...CURSOR, filter: null }],
      ["after not an array", { ...CURSOR, after: "zeta" }],
      ["after with a non-string", { ...CURSOR, after: ["a", 2] }],
      ["skipped negative", { ...CURSOR, skipped: -1 }],
      ["skipped fractional", { ...CURSOR, skipped: 1.5 }],
      ["skipped a numeric string", { ...CURSOR, skipped: "3" }],
    ];
    for (const [what, cursor] of bad) {
      const token = await codec.encode(cursor as PageCursor);
      assert.deepEqual(await codec.decode(token), { kind: "invalid" }, what);
    }
  });
});
