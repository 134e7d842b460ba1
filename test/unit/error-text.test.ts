// What error messages may repeat of a client's value: short, and always valid UTF-8.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ConnectError, Code, clip, notFound, toWireError } from "../../src/core/errors.js";
import { MAX_ECHO_LENGTH, checkParameterStrings, quote, stringProblem } from "../../src/core/strings.js";

const wellFormed = (s: string) => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

describe("error text", () => {
  it("clip never cuts a surrogate pair in half", () => {
    const text = "a".repeat(63) + "\u{10bae}" + "b".repeat(10);
    const clipped = clip(text, 64);
    assert.ok(wellFormed(clipped), JSON.stringify(clipped));
    assert.equal(clipped, "a".repeat(63) + "…");
    assert.equal(clip("short", 64), "short");
  });

  it("quote repeats at most MAX_ECHO_LENGTH characters, counting code points", () => {
    const long = "\u{1F600}".repeat(200);
    const quoted = JSON.parse(quote(long).replace(/…"$/, '"')) as string;
    assert.equal([...quoted].length, MAX_ECHO_LENGTH);
    assert.ok(wellFormed(quote(long)));
    assert.equal(quote("abc"), '"abc"');
  });

  it("NOT_FOUND names a real uid in full and cuts anything else short", () => {
    const uid = "a".repeat(40) + "/0123456789abcdef".repeat(6);
    assert.match(notFound("group", uid).rawMessage, new RegExp(uid));
    const junk = "x".repeat(5000);
    assert.ok(notFound("group", junk).rawMessage.length < 100);
  });

  it("the wire error's message is always well-formed Unicode", () => {
    const wire = toWireError(new ConnectError("bad \ud800 half", Code.InvalidArgument), "d", () => {});
    assert.ok(wellFormed(wire.rawMessage));
    assert.equal(wire.code, Code.InvalidArgument);
  });

  it("the text rule: NUL, unpaired surrogates and length", () => {
    assert.match(stringProblem("a\u0000", 10)!, /NUL/);
    assert.match(stringProblem("a\udc00", 10)!, /UTF-8/);
    assert.match(stringProblem("x".repeat(11), 10)!, /at most 10/);
    // Length is in code points: ten emoji are ten characters.
    assert.equal(stringProblem("\u{1F600}".repeat(10), 10), undefined);
    assert.equal(stringProblem("plain", 10), undefined);
  });

  it("plain routes: parsed parameters are checked, raw bodies are the route's own", () => {
    assert.throws(() => checkParameterStrings("query", { state: "a\u0000" }), /state: must not contain NUL/);
    const nullProto = Object.assign(Object.create(null) as Record<string, string>, { code: "\ud800" });
    assert.throws(() => checkParameterStrings("query", nullProto), /code: must be valid UTF-8/);
    assert.doesNotThrow(() => checkParameterStrings("form", Buffer.from("a\u0000b")));
    assert.doesNotThrow(() => checkParameterStrings("form", undefined));
  });
});
