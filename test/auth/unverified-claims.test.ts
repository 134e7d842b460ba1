// unverifiedClaims: what a token claims before verification (the audience to verify against, the
// principal a refusal is counted under). Decoded claims are remembered by the token's text, so
// the answer must be the same every time and no caller may change what the next one is given.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { unverifiedClaims } from "../../src/auth/tokens.js";

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
const jwt = (payload: unknown) => `${b64({ alg: "EdDSA", typ: "JWT" })}.${b64(payload)}.c2ln`;

describe("unverifiedClaims", () => {
  it("reads the subject and the audiences, a string audience as a list of one", () => {
    assert.deepEqual(unverifiedClaims(jwt({ sub: "u1", aud: ["a", "b"] })), { sub: "u1", aud: ["a", "b"] });
    assert.deepEqual(unverifiedClaims(jwt({ sub: "u2", aud: "reg" })), { sub: "u2", aud: ["reg"] });
    assert.deepEqual(unverifiedClaims(jwt({ aud: 7 })), { sub: undefined, aud: [] });
  });

  it("answers undefined for what is not a JWT, every time", () => {
    for (let i = 0; i < 2; i++) {
      assert.equal(unverifiedClaims("not-a-jwt"), undefined);
      assert.equal(unverifiedClaims("a.b.c"), undefined);
    }
  });

  it("answers a repeated token from memory with claims no caller can change", () => {
    const token = jwt({ sub: "u3", aud: ["reg"] });
    const first = unverifiedClaims(token)!;
    assert.equal(unverifiedClaims(token), first, "the second decode is the remembered one");
    assert.ok(Object.isFrozen(first) && Object.isFrozen(first.aud));
    assert.throws(() => (first.aud as string[]).push("api"));
    assert.deepEqual(unverifiedClaims(token), { sub: "u3", aud: ["reg"] });
  });

  it("decodes a very long token each time (not remembered) with the same answer", () => {
    const token = jwt({ sub: "u4", aud: ["reg"], pad: "x".repeat(5000) });
    const first = unverifiedClaims(token);
    const second = unverifiedClaims(token);
    assert.notEqual(second, first);
    assert.deepEqual(second, first);
  });
});
