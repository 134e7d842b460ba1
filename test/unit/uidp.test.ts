// UIDPs (src/core/uidp.ts): shape validation, the tree relations every authorization check is
// built on, and the shape and randomness of new identifiers.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  ancestorsOf,
  isAncestorOrSelf,
  isUsableFrom,
  isValidUidp,
  newChildUidp,
  newRootUidp,
  parentOf,
} from "../../src/core/uidp.js";

const ROOT = "0123456789abcdef0123456789abcdef01234567";
const OTHER_ROOT = "fedcba9876543210fedcba9876543210fedcba98";
const C1 = "0011223344556677";
const C2 = "8899aabbccddeeff";
const CHILD = `${ROOT}/${C1}`;
const GRANDCHILD = `${CHILD}/${C2}`;

describe("isValidUidp", () => {
  it("accepts a 40-hex root and any depth of 16-hex children", () => {
    assert.equal(isValidUidp(ROOT), true);
    assert.equal(isValidUidp(CHILD), true);
    assert.equal(isValidUidp(GRANDCHILD), true);
    assert.equal(isValidUidp(`${GRANDCHILD}/${C1}/${C2}/${C1}`), true);
  });

  it("rejects wrong lengths at the root and at children", () => {
    assert.equal(isValidUidp(ROOT.slice(0, 39)), false);
    assert.equal(isValidUidp(ROOT + "0"), false);
    assert.equal(isValidUidp(`${ROOT}/${C1.slice(1)}`), false);
    assert.equal(isValidUidp(`${ROOT}/${C1}0`), false);
    // a 40-hex segment is not a child, and a bare child is not a root
    assert.equal(isValidUidp(`${ROOT}/${OTHER_ROOT}`), false);
    assert.equal(isValidUidp(C1), false);
  });

  it("rejects upper-case hex, non-hex characters and stray separators", () => {
    assert.equal(isValidUidp(ROOT.toUpperCase()), false);
    assert.equal(isValidUidp(`${ROOT}/${C2.toUpperCase()}`), false);
    assert.equal(isValidUidp(ROOT.slice(0, 39) + "g"), false);
    assert.equal(isValidUidp(`${ROOT}/001122334455667z`), false);
    assert.equal(isValidUidp(`${ROOT}/`), false);
    assert.equal(isValidUidp(`/${ROOT}`), false);
    assert.equal(isValidUidp(`${ROOT}//${C1}`), false);
    assert.equal(isValidUidp(`${ROOT}:${C1}`), false);
  });

  it("rejects empty strings, whitespace and newlines (the pattern is anchored)", () => {
    assert.equal(isValidUidp(""), false);
    assert.equal(isValidUidp(" "), false);
    assert.equal(isValidUidp(` ${ROOT}`), false);
    assert.equal(isValidUidp(`${ROOT} `), false);
    assert.equal(isValidUidp(`${ROOT}\n`), false);
    assert.equal(isValidUidp(`${ROOT}\n${ROOT}`), false);
  });
});

describe("parentOf / ancestorsOf", () => {
  it("a root has no parent and no ancestors", () => {
    assert.equal(parentOf(ROOT), undefined);
    assert.deepEqual(ancestorsOf(ROOT), []);
  });

  it("a child's parent is the UIDP without its last segment", () => {
    assert.equal(parentOf(CHILD), ROOT);
    assert.equal(parentOf(GRANDCHILD), CHILD);
  });

  it("ancestors are listed root first, without the UIDP itself", () => {
    assert.deepEqual(ancestorsOf(CHILD), [ROOT]);
    assert.deepEqual(ancestorsOf(GRANDCHILD), [ROOT, CHILD]);
    const deep = `${GRANDCHILD}/${C1}`;
    assert.deepEqual(ancestorsOf(deep), [ROOT, CHILD, GRANDCHILD]);
  });

  it("walking parentOf to the root visits ancestorsOf in reverse", () => {
    const deep = `${GRANDCHILD}/${C1}/${C2}`;
    const walked: string[] = [];
    for (let p = parentOf(deep); p !== undefined; p = parentOf(p)) walked.push(p);
    assert.deepEqual(walked.reverse(), ancestorsOf(deep));
  });
});

describe("isAncestorOrSelf", () => {
  it("holds for self and for every proper ancestor", () => {
    assert.equal(isAncestorOrSelf(ROOT, ROOT), true);
    assert.equal(isAncestorOrSelf(ROOT, CHILD), true);
    assert.equal(isAncestorOrSelf(ROOT, GRANDCHILD), true);
    assert.equal(isAncestorOrSelf(CHILD, GRANDCHILD), true);
    assert.equal(isAncestorOrSelf(GRANDCHILD, GRANDCHILD), true);
  });

  it("does not hold downwards, across roots, or between siblings", () => {
    assert.equal(isAncestorOrSelf(CHILD, ROOT), false);
    assert.equal(isAncestorOrSelf(GRANDCHILD, CHILD), false);
    assert.equal(isAncestorOrSelf(OTHER_ROOT, CHILD), false);
    assert.equal(isAncestorOrSelf(`${ROOT}/${C2}`, GRANDCHILD), false);
  });

  it("requires a segment boundary, not just a string prefix", () => {
    // Only the "/" check stops "ab" from counting as an ancestor of "abc".
    assert.equal(isAncestorOrSelf(ROOT.slice(0, 39), ROOT), false);
    assert.equal(isAncestorOrSelf(`${ROOT}/${C1.slice(0, 15)}`, CHILD), false);
  });
});

describe("isUsableFrom", () => {
  it("root-level resources are usable from anywhere", () => {
    assert.equal(isUsableFrom(ROOT, OTHER_ROOT), true);
    assert.equal(isUsableFrom(ROOT, `${OTHER_ROOT}/${C1}`), true);
    assert.equal(isUsableFrom(OTHER_ROOT, GRANDCHILD), true);
  });

  it("others are usable from their owning group and its descendants only", () => {
    const role = `${CHILD}/${C2}`; // owned by CHILD
    assert.equal(isUsableFrom(role, CHILD), true);
    assert.equal(isUsableFrom(role, `${CHILD}/${C1}`), true);
    assert.equal(isUsableFrom(role, `${CHILD}/${C1}/${C2}`), true);
    assert.equal(isUsableFrom(role, ROOT), false, "not from the owner's parent");
    assert.equal(isUsableFrom(role, `${ROOT}/${C2}`), false, "not from a sibling of the owner");
    assert.equal(isUsableFrom(role, OTHER_ROOT), false, "not from another tree");
  });
});

describe("newRootUidp / newChildUidp", () => {
  it("makes valid roots of 40 lower-case hex characters", () => {
    const root = newRootUidp();
    assert.match(root, /^[0-9a-f]{40}$/);
    assert.equal(isValidUidp(root), true);
    assert.equal(parentOf(root), undefined);
  });

  it("makes valid children one level below the parent", () => {
    const root = newRootUidp();
    const child = newChildUidp(root);
    assert.match(child, /^[0-9a-f]{40}\/[0-9a-f]{16}$/);
    assert.equal(isValidUidp(child), true);
    assert.equal(parentOf(child), root);
    const grandchild = newChildUidp(child);
    assert.equal(isValidUidp(grandchild), true);
    assert.deepEqual(ancestorsOf(grandchild), [root, child]);
  });

  it("does not repeat itself", () => {
    const roots = new Set(Array.from({ length: 1000 }, () => newRootUidp()));
    assert.equal(roots.size, 1000);
    const children = new Set(Array.from({ length: 1000 }, () => newChildUidp(ROOT)));
    assert.equal(children.size, 1000);
  });
});
