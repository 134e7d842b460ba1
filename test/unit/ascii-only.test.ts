// The serve bundle made ASCII (scripts/ascii-only.mjs): non-ASCII characters in comments are
// replaced one per UTF-16 unit, so columns hold; one anywhere else stops the build.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { isAscii } from "node:buffer";
import { asciiOnly } from "../../scripts/ascii-only.mjs";

describe("the serve bundle made ASCII", () => {
  it("replaces non-ASCII characters in comments, one per UTF-16 unit, and leaves code as it is", () => {
    const text = [
      'var a = "\\u2014"; // a dash \u2014 here',
      "/** an arrow \u2192 and W\u00e4rting */",
      " * a continued comment \u00a7 4.1 \ud83d\ude00",
      "  (*! formdata-polyfill. Jimmy W\u00e4rting *)",
      "var b = 1;",
    ].join("\n");
    const ascii = asciiOnly(text, "serve.cjs");
    assert.ok(isAscii(Buffer.from(ascii)), ascii);
    assert.equal(ascii.length, text.length, "one character per UTF-16 unit");
    assert.deepEqual(ascii.split("\n"), [
      'var a = "\\u2014"; // a dash ? here',
      "/** an arrow ? and Warting */",
      " * a continued comment ? 4.1 ??",
      "  (*! formdata-polyfill. Jimmy Warting *)",
      "var b = 1;",
    ]);
  });

  it("stops at a non-ASCII character outside a comment, naming the file and line", () => {
    assert.throws(
      () => asciiOnly('var a = 1;\nvar s = "\u2014";', "dist/bundle/serve.cjs"),
      /dist\/bundle\/serve\.cjs:2: a non-ASCII character outside a comment: var s = "\u2014";/,
    );
  });
});
