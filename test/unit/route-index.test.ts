// The transcoder's route index (src/server/transcoder.ts indexRoutes) finds, for any path, the
// same route as trying every template of the verb in order: checked over every route the server
// serves, with paths made from each template (variables filled with one segment, several, or
// nothing; custom verbs; a trailing slash) and paths that match nothing.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { collectRoutes, indexRoutes, type RestRoute } from "../../src/server/transcoder.js";
import { MODULES } from "../../src/server/modules.js";

const routes = collectRoutes(MODULES.flatMap((m) => m.services.map((service) => ({ service, handlers: {} }))));

function firstMatch(candidates: readonly RestRoute[], path: string): RestRoute | undefined {
  return candidates.find((r) => r.template.regex.test(path));
}

/** Paths a template matches, and near misses. */
function pathsOf(template: string): string[] {
  const fills = ["x", "a1b2/c3d4", "a1b2/c3d4/e5f6", ""];
  const paths = fills.map((fill) =>
    template.replace(/\{[^}]*\}/g, () => fill).replace(/(^|\/)\*\*?(?=\/|$|:)/g, `$1${fill || "y"}`),
  );
  return [...paths, ...paths.map((p) => p + "/"), ...paths.map((p) => p.replace(/:[a-zA-Z]+$/, ""))];
}

describe("the transcoder's route index", () => {
  it("serves enough routes for the test to mean something", () => {
    assert.ok(routes.length > 100, `${routes.length} routes`);
    assert.ok(routes.some((r) => r.template.hasVerb));
    assert.ok(routes.some((r) => r.template.leadingLiterals.length < 3));
  });

  it("finds the same route as trying every template in order, for every verb and path", () => {
    const verbs = [...new Set(routes.map((r) => r.verb))];
    const paths = new Set<string>(["/", "/iam", "/iam/v2beta1", "/nope/x/y/z", "//iam/v2beta1/groups/x"]);
    for (const r of routes) for (const p of pathsOf(r.template.source)) paths.add(p);
    let matched = 0;
    for (const verb of verbs) {
      const ofVerb = routes.filter((r) => r.verb === verb);
      const index = indexRoutes(ofVerb);
      for (const path of paths) {
        const expected = firstMatch(ofVerb, path);
        const got = firstMatch(index.candidates(path), path);
        assert.equal(got?.template.source, expected?.template.source, `${verb} ${path}`);
        assert.equal(got?.method, expected?.method, `${verb} ${path}`);
        if (expected) matched++;
      }
    }
    assert.ok(matched > routes.length, `${matched} matching paths`);
  });

  it("offers a path few candidates", () => {
    const gets = routes.filter((r) => r.verb === "GET");
    const index = indexRoutes(gets);
    const candidates = index.candidates("/iam/v2beta1/groups/0123456789abcdef0123456789abcdef01234567");
    assert.ok(candidates.length < gets.length / 4, `${candidates.length} of ${gets.length}`);
    assert.equal(firstMatch(candidates, "/iam/v2beta1/groups/ab")?.method.name, "GetGroup");
  });
});
