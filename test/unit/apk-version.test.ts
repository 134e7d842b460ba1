// apk version ordering (src/vulnerabilities/versions.ts compareApk), which decides whether an
// installed Wolfi package is below an advisory's fixed version. The reference table is written by
// hand from apk-tools' rules (src/version.c and its test/unit/version.data): numeric components,
// more components later, one letter, suffixes _alpha < _beta < _pre < _rc < (none) < _cvs < _svn <
// _git < _hg < _p, a ~commit hash, -rN revisions, and components with a leading zero compared as
// text. Seeded properties check the order is one: antisymmetric, reflexive and transitive over
// generated versions (valid and not).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { compareApk } from "../../src/vulnerabilities/versions.js";

/** Each chain strictly ascending. */
const ASCENDING: readonly (readonly string[])[] = [
  // revisions, then releases; components as numbers
  ["1.2.3-r0", "1.2.3-r1", "1.2.3-r9", "1.2.3-r10", "1.2.4-r0", "1.10.0-r0"],
  ["2.38-r10", "2.38.1-r0", "2.39-r0", "20240101"],
  // more components is later; a revision ends a version that another goes on from
  ["1.2", "1.2-r5", "1.2.0", "1.2.0.1", "1.2.1"],
  // pre-release suffixes before the release, post-release ones after its revisions
  [
    "1.0_alpha",
    "1.0_alpha1",
    "1.0_alpha2",
    "1.0_beta",
    "1.0_beta9",
    "1.0_pre1",
    "1.0_rc1",
    "1.0_rc1-r5",
    "1.0_rc2",
    "1.0",
    "1.0-r0",
    "1.0-r1",
    "1.0_cvs",
    "1.0_svn",
    "1.0_git20240101",
    "1.0_hg",
    "1.0_p",
    "1.0_p1",
    "1.0_p9",
    "1.0_p10",
    "1.0a",
    "1.0b",
    "1.0.0",
  ],
  // suffix chains: a pre-release suffix after another lowers it
  ["0.1.0_alpha_pre2", "0.1.0_alpha", "0.1.0_alpha_p1", "0.1.0_beta"],
  // a letter after the last component, before the next component
  ["1.1.1w-r0", "1.1.1w-r1", "1.1.1x-r0", "1.1.2-r0"],
  // leading zeros after the first component: compared as text
  ["1.0", "1.00", "1.001", "1.01", "1.1", "1.2", "1.10"],
  ["8.2.0", "8.2.001", "8.2.0015", "8.2.002", "8.2.1"],
  // a commit hash: compared as text; a version with one goes on past the same without (its
  // revisions too), and before its post-release suffixes
  ["1.0", "1.0-r0", "1.0-r9", "1.0~1234", "1.0~1234-r0", "1.0~1234-r1", "1.0~2345-r0", "1.0~abcd", "1.0_p1", "1.0.1"],
  // wolfi-shaped versions as advisories name them
  ["3.0.9-r3", "3.0.15-r0", "3.3.1-r5", "3.3.2-r0", "3.10.0-r0"],
  ["0_git20230101-r0", "0_git20240101-r0", "0.1-r0"],
];

/** Pairs apk-tools calls equal. */
const EQUAL: readonly (readonly [string, string])[] = [
  ["1.2.3-r4", "1.2.3-r4"],
  ["01.2", "1.2"],
  ["1.0-r01", "1.0-r1"],
  ["1.0_p01", "1.0_p1"],
];

const sign = (n: number) => Math.sign(n) + 0;

describe("apk version ordering", () => {
  it("agrees with the reference table, both ways round", () => {
    for (const chain of ASCENDING)
      for (let i = 0; i < chain.length; i++)
        for (let j = 0; j < chain.length; j++)
          assert.equal(sign(compareApk(chain[i]!, chain[j]!)), sign(i - j), `${chain[i]} vs ${chain[j]}`);
    for (const [a, b] of EQUAL) {
      assert.equal(sign(compareApk(a, b)), 0, `${a} = ${b}`);
      assert.equal(sign(compareApk(b, a)), 0, `${b} = ${a}`);
    }
  });

  it("orders what apk cannot read without throwing: the unreadable one first, two unreadable ones naturally", () => {
    // "1.0bc" has a second letter: apk reads 1.0b, then stops
    assert.equal(sign(compareApk("1.0", "1.0bc")), -1);
    assert.equal(sign(compareApk("1.0_foo", "1.0")), -1);
    assert.equal(sign(compareApk("", "0")), -1);
    assert.equal(sign(compareApk("v1.2", "v1.10")), -1);
    assert.equal(sign(compareApk("abc", "abc")), 0);
  });

  // Versions from the grammar, with leading zeros, unknown suffixes and stray characters mixed
  // in so unreadable versions are ordered too.
  const component = fc.oneof(
    fc.integer({ min: 0, max: 12 }).map(String),
    fc.constantFrom("0", "00", "01", "010", "002"),
  );
  const version = fc
    .record({
      numbers: fc.array(component, { minLength: 1, maxLength: 4 }),
      letter: fc.option(fc.constantFrom("a", "b", "z"), { nil: "" }),
      suffixes: fc.array(
        fc.tuple(
          fc.constantFrom("alpha", "beta", "pre", "rc", "cvs", "svn", "git", "hg", "p", "foo"),
          fc.option(component, { nil: "" }),
        ),
        { maxLength: 2 },
      ),
      hash: fc.option(fc.constantFrom("1234", "abcd", "ff"), { nil: undefined }),
      revision: fc.option(component, { nil: undefined }),
      junk: fc.option(fc.constantFrom("-", ".", "~", "x", "-r", "_"), { nil: "" }),
    })
    .map(
      (v) =>
        v.numbers.join(".") +
        v.letter +
        v.suffixes.map(([s, n]) => `_${s}${n}`).join("") +
        (v.hash === undefined ? "" : `~${v.hash}`) +
        (v.revision === undefined ? "" : `-r${v.revision}`) +
        v.junk,
    );

  it("is antisymmetric and reflexive on generated versions", () => {
    fc.assert(
      fc.property(version, version, (a, b) => {
        assert.equal(sign(compareApk(a, b)), -sign(compareApk(b, a)), `${a} vs ${b}`);
        assert.equal(compareApk(a, a), 0, a);
      }),
      { seed: 28, numRuns: 3000 },
    );
  });

  it("is transitive on generated versions: a sorted list is in order pairwise", () => {
    fc.assert(
      fc.property(fc.array(version, { minLength: 3, maxLength: 30 }), (versions) => {
        const sorted = [...versions].sort(compareApk);
        for (let i = 0; i < sorted.length; i++)
          for (let j = i + 1; j < sorted.length; j++)
            assert.ok(compareApk(sorted[i]!, sorted[j]!) <= 0, `${sorted[i]} after ${sorted[j]} in ${sorted}`);
      }),
      { seed: 2028, numRuns: 500 },
    );
  });

  it("is transitive on generated triples", () => {
    fc.assert(
      fc.property(version, version, version, (a, b, c) => {
        if (compareApk(a, b) <= 0 && compareApk(b, c) <= 0) assert.ok(compareApk(a, c) <= 0, `${a} ≤ ${b} ≤ ${c}`);
      }),
      { seed: 4711, numRuns: 5000 },
    );
  });
});
