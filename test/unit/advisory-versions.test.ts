// Version ordering and OSV range evaluation (src/vulnerabilities/versions.ts): apk ordering for
// Chainguard/Wolfi/Alpine, SemVer ranges as the rustsec records write them, the OSV evaluation
// rules (introduced "0", fixed, last_affected, limit, several ranges), and no throwing on junk.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { compareVersions, isAffected, type OsvRange } from "../../src/vulnerabilities/versions.js";

/** Asserts the versions are in strictly increasing order under `ecosystem`, pairwise both ways. */
function assertAscending(ecosystem: string, versions: string[]): void {
  for (let i = 0; i < versions.length; i++)
    for (let j = 0; j < versions.length; j++) {
      const want = Math.sign(i - j);
      const got = Math.sign(compareVersions(ecosystem, versions[i]!, versions[j]!));
      assert.equal(got, want, `${versions[i]} vs ${versions[j]} (${ecosystem})`);
    }
}

const semverRange = (...events: OsvRange["events"]): OsvRange => ({ type: "SEMVER", events });
const ecoRange = (...events: OsvRange["events"]): OsvRange => ({ type: "ECOSYSTEM", events });

describe("compareVersions: apk (Chainguard, Wolfi, Alpine)", () => {
  it("orders revisions, then releases", () => {
    assertAscending("Chainguard", ["1.2.3-r0", "1.2.3-r1", "1.2.3-r10", "1.2.4-r0", "1.10.0-r0"]);
    assertAscending("Wolfi", ["2.38-r1", "2.38-r2", "2.38-r10", "2.38.1-r0", "2.39-r0"]);
  });

  it("compares components as numbers, and more components as later", () => {
    assertAscending("Alpine", ["1.9", "1.10", "1.10.1", "1.100", "2", "10"]);
    assertAscending("Chainguard", ["1.2", "1.2.0", "1.2.0.1"]);
    assertAscending("Chainguard", ["20230101", "99999999999999999999", "100000000000000000000"]);
    assert.equal(compareVersions("Chainguard", "01.2", "1.2"), 0);
    // after the first component, a leading zero makes the component compare as text (apk-tools 3)
    assertAscending("Chainguard", ["1.0", "1.00", "1.02", "1.1", "1.2"]);
  });

  it("puts pre-release suffixes before the release and post-release ones after", () => {
    assertAscending("Wolfi", [
      "1.0_alpha",
      "1.0_alpha2",
      "1.0_beta",
      "1.0_pre1",
      "1.0_rc1",
      "1.0_rc2",
      "1.0",
      "1.0_cvs",
      "1.0_svn",
      "1.0_git20240101",
      "1.0_hg",
      "1.0_p1",
      "1.0_p2",
    ]);
    assertAscending("Chainguard", ["1.0_rc1-r5", "1.0-r0", "1.0-r1", "1.0_p1-r0"]);
    assertAscending("Chainguard", ["1.0_alpha1_p1", "1.0_alpha2", "1.0_beta1"]);
  });

  it("orders a letter after the plain release and before the next component", () => {
    assertAscending("Alpine", ["1.0", "1.0a", "1.0b", "1.0.1"]);
    assertAscending("Wolfi", ["1.1.1w-r0", "1.1.1w-r1", "1.1.1x-r0"]);
  });

  it("puts a version without revision before its -r0, and orders ~hashes as text before the revision", () => {
    assertAscending("Chainguard", ["1.0", "1.0-r0", "1.0-r1"]);
    assertAscending("Chainguard", ["0_git20240101~abc123-r0", "0_git20240101~abc123-r1", "0_git20240101~def456-r0"]);
  });

  it("matches the ecosystem name case-insensitively, release suffix included", () => {
    assert.equal(compareVersions("alpine:v3.20", "1.0_rc1", "1.0"), -1);
    assert.equal(compareVersions("WOLFI", "1.0_p1", "1.0"), 1);
  });

  it("falls back to a natural order for what apk cannot read", () => {
    assert.equal(compareVersions("Chainguard", "v1.2", "v1.10"), -1);
    assert.equal(compareVersions("Chainguard", "1.2-foo", "1.10-foo"), -1);
    assert.equal(compareVersions("Chainguard", "", "1"), -1);
    assert.equal(compareVersions("Chainguard", "abc", "abc"), 0);
  });
});

describe("compareVersions: other ecosystems", () => {
  it("orders SemVer ecosystems by SemVer precedence", () => {
    assertAscending("crates.io", [
      "0.0.0-0",
      "0.1.0-alpha.1",
      "0.1.0-alpha.2",
      "0.1.0-beta",
      "0.1.0",
      "0.1.1",
      "1.0.0",
    ]);
    assertAscending("Go", ["v0.9.0", "v1.0.0-rc.1", "v1.0.0", "v1.10.0"]);
    assert.equal(compareVersions("npm", "1.0.0+build1", "1.0.0+build2"), 0);
  });

  it("orders the rest naturally: digits as numbers, the rest as text", () => {
    assertAscending("PyPI", ["1.0", "1.0.1", "1.2", "1.10", "1.10a", "2.0"]);
    assertAscending("Debian", ["1:2.3", "1:2.10"]);
    assert.equal(compareVersions("Maven", "1.01", "1.1"), 0);
  });

  it("never throws", () => {
    fc.assert(
      fc.property(fc.constantFrom("Chainguard", "crates.io", "PyPI", ""), fc.string(), fc.string(), (eco, a, b) => {
        const ab = compareVersions(eco, a, b);
        const ba = compareVersions(eco, b, a);
        assert.ok(Number.isFinite(ab));
        // antisymmetric
        assert.equal(Math.sign(ab) + Math.sign(ba), 0);
      }),
      { seed: 99, numRuns: 300 },
    );
  });
});

describe("isAffected: SEMVER ranges", () => {
  // the shape of every rustsec record: introduced 0.0.0-0, one or more fixes
  const rustsec = [semverRange({ introduced: "0.0.0-0" }, { fixed: "0.9.0" })];

  it("affects from introduced 0.0.0-0 up to, not including, the fix", () => {
    assert.equal(isAffected(rustsec, "0.0.0", "crates.io"), true);
    assert.equal(isAffected(rustsec, "0.0.1-alpha", "crates.io"), true);
    assert.equal(isAffected(rustsec, "0.8.9", "crates.io"), true);
    assert.equal(isAffected(rustsec, "0.9.0-rc.1", "crates.io"), true);
    assert.equal(isAffected(rustsec, "0.9.0", "crates.io"), false);
    assert.equal(isAffected(rustsec, "0.9.1", "crates.io"), false);
    assert.equal(isAffected(rustsec, "1.0.0", "crates.io"), false);
  });

  it('treats introduced "0" as before every version', () => {
    const all = [semverRange({ introduced: "0" })];
    assert.equal(isAffected(all, "0.0.0-0", "npm"), true);
    assert.equal(isAffected(all, "99.0.0", "npm"), true);
  });

  it("evaluates several introduced/fixed pairs in one range, in any written order", () => {
    const range = semverRange(
      { introduced: "0.0.0-0" },
      { fixed: "0.1.3" },
      { introduced: "0.2.0" },
      { fixed: "0.2.1" },
    );
    const shuffled = semverRange(
      { fixed: "0.2.1" },
      { introduced: "0.2.0" },
      { fixed: "0.1.3" },
      { introduced: "0.0.0-0" },
    );
    for (const r of [range, shuffled]) {
      assert.equal(isAffected([r], "0.1.2", "crates.io"), true);
      assert.equal(isAffected([r], "0.1.3", "crates.io"), false);
      assert.equal(isAffected([r], "0.1.9", "crates.io"), false);
      assert.equal(isAffected([r], "0.2.0", "crates.io"), true);
      assert.equal(isAffected([r], "0.2.1", "crates.io"), false);
    }
  });

  it("is affected when any of several ranges says so", () => {
    const ranges = [
      semverRange({ introduced: "1.0.0" }, { fixed: "1.0.2" }),
      semverRange({ introduced: "3.0.0" }, { fixed: "3.2.5" }),
    ];
    assert.equal(isAffected(ranges, "0.9.0", "npm"), false);
    assert.equal(isAffected(ranges, "1.0.1", "npm"), true);
    assert.equal(isAffected(ranges, "2.0.0", "npm"), false);
    assert.equal(isAffected(ranges, "3.2.4", "npm"), true);
    assert.equal(isAffected(ranges, "3.2.5", "npm"), false);
    assert.equal(isAffected([], "1.0.1", "npm"), false);
  });

  it("includes last_affected itself, and nothing after it", () => {
    const range = [semverRange({ introduced: "0" }, { last_affected: "2.1.214" })];
    assert.equal(isAffected(range, "2.1.213", "crates.io"), true);
    assert.equal(isAffected(range, "2.1.214", "crates.io"), true);
    assert.equal(isAffected(range, "2.1.215-alpha", "crates.io"), false);
    assert.equal(isAffected(range, "2.1.215", "crates.io"), false);
  });

  it("applies limit events to the whole range ('*' is infinity)", () => {
    const limited = [semverRange({ introduced: "1.0.0" }, { limit: "2.0.0" })];
    assert.equal(isAffected(limited, "1.5.0", "crates.io"), true);
    assert.equal(isAffected(limited, "2.0.0", "crates.io"), false);
    assert.equal(isAffected(limited, "3.0.0", "crates.io"), false);
    const twoLimits = [semverRange({ introduced: "1.0.0" }, { limit: "1.1.0" }, { limit: "5.0.0" })];
    assert.equal(isAffected(twoLimits, "4.0.0", "crates.io"), true);
    const infinite = [semverRange({ introduced: "1.0.0" }, { limit: "*" })];
    assert.equal(isAffected(infinite, "100.0.0", "crates.io"), true);
  });

  it("reads versions leniently (v prefix, missing components) and ignores build metadata", () => {
    assert.equal(isAffected(rustsec, "v0.8.0", "crates.io"), true);
    assert.equal(isAffected(rustsec, "0.8", "crates.io"), true);
    assert.equal(isAffected(rustsec, "0.9", "crates.io"), false);
    assert.equal(isAffected(rustsec, "0.9.0+build.7", "crates.io"), false);
  });

  it("does not count what it cannot compare, and never throws", () => {
    assert.equal(isAffected(rustsec, "not a version", "crates.io"), false);
    assert.equal(isAffected(rustsec, "", "crates.io"), false);
    assert.equal(isAffected([semverRange({ introduced: "0" }, { fixed: "garbage" })], "1.0.0", "crates.io"), false);
    // a good range still counts next to a broken one
    assert.equal(
      isAffected([semverRange({ introduced: "x" }), semverRange({ introduced: "0" })], "1.0.0", "crates.io"),
      true,
    );
    // GIT ranges need the repository; unknown types are not evaluated
    assert.equal(isAffected([{ type: "GIT", events: [{ introduced: "0" }] }], "1.0.0", "crates.io"), false);
    assert.equal(isAffected([{ type: "WHATEVER", events: [{ introduced: "0" }] }], "1.0.0", "crates.io"), false);
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            type: fc.constantFrom("SEMVER", "ECOSYSTEM", "GIT"),
            events: fc.array(
              fc.record(
                { introduced: fc.string(), fixed: fc.string(), last_affected: fc.string(), limit: fc.string() },
                { requiredKeys: [] },
              ),
            ),
          }),
        ),
        fc.string(),
        fc.constantFrom("Chainguard", "crates.io", "PyPI"),
        (ranges, version, ecosystem) => typeof isAffected(ranges, version, ecosystem) === "boolean",
      ),
      { seed: 1234, numRuns: 300 },
    );
  });
});

describe("isAffected: ECOSYSTEM ranges", () => {
  it("evaluates the ranges the feeds build for Chainguard advisories with apk ordering", () => {
    // a fixed event: everything before the fixed package revision
    const fixed = [ecoRange({ introduced: "0" }, { fixed: "2.38-r2" })];
    assert.equal(isAffected(fixed, "2.38-r1", "Chainguard"), true);
    assert.equal(isAffected(fixed, "2.38-r2", "Chainguard"), false);
    assert.equal(isAffected(fixed, "2.38-r10", "Chainguard"), false);
    assert.equal(isAffected(fixed, "2.37.9-r0", "Chainguard"), true);
    assert.equal(isAffected(fixed, "2.38_rc1-r0", "Chainguard"), true);
    // natural ordering would put 2.38-r10 before 2.38-r2 only as text; apk must not
    assert.equal(isAffected(fixed, "2.9-r0", "Chainguard"), true);
    // still open: every version
    assert.equal(isAffected([ecoRange({ introduced: "0" })], "1.0-r0", "Wolfi"), true);
  });

  it("takes a patched event's versions as several fixes", () => {
    // patched 1.2.3-r4 and 1.3.0-r1 in one range: the events sort to 0, 1.2.3-r4, 1.3.0-r1
    const patched = [ecoRange({ introduced: "0" }, { fixed: "1.3.0-r1" }, { fixed: "1.2.3-r4" })];
    assert.equal(isAffected(patched, "1.2.3-r3", "Chainguard"), true);
    assert.equal(isAffected(patched, "1.2.3-r4", "Chainguard"), false);
    assert.equal(isAffected(patched, "1.3.0-r0", "Chainguard"), false);
    assert.equal(isAffected(patched, "1.3.0-r1", "Chainguard"), false);
  });

  it("uses natural order for ecosystems without a known ordering", () => {
    const range = [ecoRange({ introduced: "1.2" }, { fixed: "1.10" })];
    assert.equal(isAffected(range, "1.9", "PyPI"), true);
    assert.equal(isAffected(range, "1.10", "PyPI"), false);
    assert.equal(isAffected(range, "1.1", "PyPI"), false);
  });
});
