// google.api.http path templates (src/server/http-template.ts): compiling to an anchored RegExp,
// what each template form captures, and the specificity order routes are tried in.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { compareSpecificity, compileTemplate, type CompiledTemplate } from "../../src/server/http-template.js";

const ROOT = "0123456789abcdef0123456789abcdef01234567";
const UIDP = `${ROOT}/0011223344556677/8899aabbccddeeff`;

/** The captures of `path`, or null when the template does not match it. */
function captures(template: CompiledTemplate, path: string): Array<string | undefined> | null {
  const m = template.regex.exec(path);
  return m ? m.slice(1) : null;
}

describe("literal templates", () => {
  const t = compileTemplate("/iam/v2beta1/groups");

  it("describe themselves", () => {
    assert.equal(t.source, "/iam/v2beta1/groups");
    assert.deepEqual(t.variables, []);
    assert.equal(t.hasVerb, false);
    assert.equal(t.wildcards, 0);
    assert.equal(t.literalLength, "iam".length + "v2beta1".length + "groups".length);
  });

  it("match only the exact path", () => {
    assert.deepEqual(captures(t, "/iam/v2beta1/groups"), []);
    for (const path of [
      "/iam/v2beta1/groups/",
      "/iam/v2beta1/groupsX",
      "/iam/v2beta1/group",
      "/iam/v2beta1/groups/x",
      "/prefix/iam/v2beta1/groups",
      "iam/v2beta1/groups",
      "/IAM/v2beta1/groups",
      "/iam/v2beta1/groups:lookupGroup",
      "",
    ]) {
      assert.equal(captures(t, path), null, path);
    }
  });

  it("treat regex metacharacters as text", () => {
    const dotted = compileTemplate("/v1/a.b+c(d)$");
    assert.deepEqual(captures(dotted, "/v1/a.b+c(d)$"), []);
    assert.equal(captures(dotted, "/v1/aXbbc(d)$"), null);
    assert.equal(captures(dotted, "/v1/a.bbbc(d)"), null);
  });

  it("compare literal text without percent-decoding it", () => {
    // Decoding is the request builder's job, and only for variables.
    assert.equal(captures(t, "/iam/v2beta1/group%73"), null);
  });

  it("include the root template", () => {
    const root = compileTemplate("/");
    assert.deepEqual(captures(root, "/"), []);
    assert.equal(captures(root, "//"), null);
    assert.equal(captures(root, ""), null);
  });
});

describe("single-segment variables", () => {
  it("{var} and {var=*} capture exactly one non-empty segment", () => {
    for (const source of ["/auth/v1/delete/{id}", "/auth/v1/delete/{id=*}"]) {
      const t = compileTemplate(source);
      assert.deepEqual(t.variables, ["id"]);
      assert.equal(t.wildcards, 1);
      assert.deepEqual(captures(t, "/auth/v1/delete/abc"), ["abc"]);
      assert.equal(captures(t, "/auth/v1/delete/"), null, "empty segment");
      assert.equal(captures(t, "/auth/v1/delete"), null);
      assert.equal(captures(t, "/auth/v1/delete/a/b"), null, "a slash ends the segment");
    }
  });

  it("capture the raw (still percent-encoded) text", () => {
    const t = compileTemplate("/v1/things/{name}");
    assert.deepEqual(captures(t, "/v1/things/a%2Fb%20c"), ["a%2Fb%20c"]);
  });

  it("{a.b} names a nested field path", () => {
    const t = compileTemplate("/v1/groups/{group.uid}/members/{member.identity.uid}");
    assert.deepEqual(t.variables, ["group.uid", "member.identity.uid"]);
    assert.deepEqual(captures(t, "/v1/groups/g1/members/m1"), ["g1", "m1"]);
    assert.equal(captures(t, "/v1/groups/g1/members"), null);
  });
});

describe("multi-segment variables", () => {
  it("a trailing {uid=**} captures a slash-containing UIDP", () => {
    const t = compileTemplate("/iam/v2beta1/groups/{uid=**}");
    assert.deepEqual(t.variables, ["uid"]);
    assert.equal(t.hasVerb, false);
    assert.deepEqual(captures(t, `/iam/v2beta1/groups/${ROOT}`), [ROOT]);
    assert.deepEqual(captures(t, `/iam/v2beta1/groups/${UIDP}`), [UIDP]);
    assert.equal(captures(t, `/iam/v2beta1/groupsX/${ROOT}`), null);
  });

  it("a trailing {x=**} may be empty, with or without its slash (POST /groups creates a root)", () => {
    const t = compileTemplate("/iam/v2beta1/groups/{parent=**}");
    assert.deepEqual(captures(t, "/iam/v2beta1/groups"), [undefined]);
    assert.deepEqual(captures(t, "/iam/v2beta1/groups/"), [""]);
  });

  it("{a.b=**} names a nested field path", () => {
    const t = compileTemplate("/iam/v2beta1/groups/{group.uid=**}");
    assert.deepEqual(t.variables, ["group.uid"]);
    assert.deepEqual(captures(t, `/iam/v2beta1/groups/${UIDP}`), [UIDP]);
  });

  it("{x=**} in the middle needs the literal after it", () => {
    const t = compileTemplate("/registry/v1/tags/{parent_id=**}/history");
    assert.deepEqual(t.variables, ["parent_id"]);
    assert.deepEqual(captures(t, `/registry/v1/tags/${UIDP}/history`), [UIDP]);
    assert.equal(captures(t, `/registry/v1/tags/${UIDP}`), null);
    assert.equal(captures(t, `/registry/v1/tags/${UIDP}/history/x`), null);
  });

  it("{name=seg/*/seg/*} captures the whole sub-path, literals included", () => {
    const t = compileTemplate("/v1/{name=projects/*/locations/*}");
    assert.deepEqual(t.variables, ["name"]);
    assert.equal(t.wildcards, 2);
    assert.equal(t.literalLength, "v1".length + "projects".length + "locations".length);
    assert.deepEqual(captures(t, "/v1/projects/p1/locations/l1"), ["projects/p1/locations/l1"]);
    assert.equal(captures(t, "/v1/projects/p1/zones/l1"), null);
    assert.equal(captures(t, "/v1/projects/p1/locations/l1/x"), null);
    assert.equal(captures(t, "/v1/projects//locations/l1"), null);
  });

  it("several variables are captured in template order", () => {
    const t = compileTemplate("/v1/{parent}/items/{item.uid=**}");
    assert.deepEqual(t.variables, ["parent", "item.uid"]);
    assert.deepEqual(captures(t, `/v1/p/items/${UIDP}`), ["p", UIDP]);
  });
});

describe("custom verbs", () => {
  it("a verb after a literal path", () => {
    for (const [source, path] of [
      ["/iam/v2beta1/roleBindings:batchCreate", "/iam/v2beta1/roleBindings"],
      ["/iam/v2beta1/identities:lookupIdentity", "/iam/v2beta1/identities"],
    ] as const) {
      const t = compileTemplate(source);
      assert.equal(t.hasVerb, true);
      assert.deepEqual(t.variables, []);
      assert.deepEqual(captures(t, source), []);
      assert.equal(captures(t, path), null, "the verb is required");
      assert.equal(captures(t, path + ":other"), null, "and must be this verb");
      assert.equal(captures(t, path + "/:" + source.split(":")[1]), null);
      assert.equal(captures(t, source + "x"), null);
    }
  });

  it("the verb's length counts as literal text", () => {
    const t = compileTemplate("/iam/v2beta1/identities:lookupIdentity");
    assert.equal(t.literalLength, "iam".length + "v2beta1".length + "identities".length + "lookupIdentity".length);
  });

  it("a verb after a {x=**} variable: the UIDP is everything before the verb", () => {
    const t = compileTemplate("/iam/v2beta1/groups/{group_uid=**}:requestGroupAccess");
    assert.equal(t.hasVerb, true);
    assert.deepEqual(t.variables, ["group_uid"]);
    assert.deepEqual(captures(t, `/iam/v2beta1/groups/${UIDP}:requestGroupAccess`), [UIDP]);
    assert.equal(captures(t, `/iam/v2beta1/groups/${UIDP}`), null);
    assert.equal(captures(t, `/iam/v2beta1/groups/${UIDP}:requestGroupAccessX`), null);
    // the trailing variable stays optional, as without a verb
    assert.deepEqual(captures(t, "/iam/v2beta1/groups:requestGroupAccess"), [undefined]);
  });

  it("a verb after a single-segment variable", () => {
    const t = compileTemplate("/v1/operations/{name}:cancel");
    assert.deepEqual(captures(t, "/v1/operations/op1:cancel"), ["op1"]);
    assert.equal(captures(t, "/v1/operations/:cancel"), null);
  });

  it("a colon inside braces is not a verb", () => {
    const t = compileTemplate("/v1/{name=things:x/*}");
    assert.equal(t.hasVerb, false);
    assert.deepEqual(t.variables, ["name"]);
    assert.deepEqual(captures(t, "/v1/things:x/y"), ["things:x/y"]);
  });
});

describe("invalid templates", () => {
  it("a template must start with a slash", () => {
    for (const source of ["", "iam/v2beta1/groups", "{uid=**}", ":verb"]) {
      assert.throws(() => compileTemplate(source), /http template must start with "\/"/, JSON.stringify(source));
    }
  });
});

describe("compareSpecificity", () => {
  const sorted = (...sources: string[]) =>
    sources
      .map(compileTemplate)
      .sort(compareSpecificity)
      .map((t) => t.source);

  it("puts custom verbs first", () => {
    assert.deepEqual(sorted("/iam/v2beta1/groups", "/iam/v2beta1/groups:lookupGroup"), [
      "/iam/v2beta1/groups:lookupGroup",
      "/iam/v2beta1/groups",
    ]);
    const verb = "/iam/v2beta1/groups/{group_uid=**}:requestGroupAccess";
    assert.deepEqual(sorted("/iam/v2beta1/groups/{parent=**}", verb), [verb, "/iam/v2beta1/groups/{parent=**}"]);
  });

  it("puts a literal collection before the {uid=**} route that would also match it", () => {
    // GET /groups must list, not get a group with an empty uid.
    assert.deepEqual(sorted("/iam/v2beta1/groups/{uid=**}", "/iam/v2beta1/groups"), [
      "/iam/v2beta1/groups",
      "/iam/v2beta1/groups/{uid=**}",
    ]);
  });

  it("puts single-segment wildcards before multi-segment ones", () => {
    assert.deepEqual(sorted("/v1/things/{name=**}", "/v1/things/{name}"), [
      "/v1/things/{name}",
      "/v1/things/{name=**}",
    ]);
  });

  it("breaks wildcard ties by more literal text", () => {
    assert.deepEqual(sorted("/v1/{id}/x", "/v1/{id}/longer"), ["/v1/{id}/longer", "/v1/{id}/x"]);
    assert.deepEqual(sorted("/v1/{a=**}", "/v1/items/{a=**}"), ["/v1/items/{a=**}", "/v1/{a=**}"]);
  });

  it("puts a ** route with a literal tail before the bare ** route that would also match its paths", () => {
    const size = "/registry/v2beta1/repos/{repo_uid=**}/digests/{digest}/size";
    assert.deepEqual(sorted("/registry/v2beta1/repos/{uid=**}", size), [size, "/registry/v2beta1/repos/{uid=**}"]);
  });

  it("is a consistent comparator", () => {
    const a = compileTemplate("/v1/{id}");
    const b = compileTemplate("/v2/{id}");
    assert.equal(compareSpecificity(a, b), 0);
    assert.equal(compareSpecificity(a, a), 0);
    const c = compileTemplate("/v1/x:verb");
    assert.ok(compareSpecificity(c, a) < 0 && compareSpecificity(a, c) > 0);
  });
});
