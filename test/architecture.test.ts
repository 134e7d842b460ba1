// The layers point one way (docs/ARCHITECTURE.md), checked on every import in src/:
//   core ← storage ← platform ← features (iam, auth, ...) ← server ← cli
// - core imports no other layer; storage imports only core; platform only core and storage;
// - a feature's storage/ imports no service code (nothing of its feature outside storage/), and
//   no storage code imports the API errors (it answers results; services map them);
// - features import neither server nor cli, and iam nothing of auth (auth is built on iam);
// - in server/, only modules.ts names a feature.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "..", "src");
const LAYERS = new Set(["core", "storage", "platform", "server", "cli", "gen"]);
const FEATURES = readdirSync(SRC).filter((d) => statSync(join(SRC, d)).isDirectory() && !LAYERS.has(d));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "gen" ? [] : sourceFiles(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

interface Import {
  /** importing file, relative to src/ */
  from: string;
  /** imported file, relative to src/ */
  to: string;
}

const IMPORTS: Import[] = sourceFiles(SRC).flatMap((file) => {
  const text = readFileSync(file, "utf8");
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => m[1]!);
  return specs.map((spec) => ({
    from: relative(SRC, file).split(sep).join("/"),
    to: relative(SRC, resolve(dirname(file), spec))
      .split(sep)
      .join("/"),
  }));
});

const top = (path: string) => path.split("/")[0]!;
const isFeatureStorage = (path: string) => FEATURES.includes(top(path)) && path.split("/")[1] === "storage";

function violations(rule: (i: Import) => boolean): string[] {
  return IMPORTS.filter(rule).map((i) => `${i.from} → ${i.to}`);
}

describe("architecture: layers point one way", () => {
  it("finds the feature folders and their imports", () => {
    assert.ok(FEATURES.includes("iam") && FEATURES.includes("auth"), `features: ${FEATURES.join(", ")}`);
    assert.ok(IMPORTS.length > 100, `only ${IMPORTS.length} imports read`);
  });

  it("core imports nothing outside core (and the generated code)", () => {
    assert.deepEqual(
      violations((i) => top(i.from) === "core" && !["core", "gen"].includes(top(i.to))),
      [],
    );
  });

  it("storage imports only core", () => {
    assert.deepEqual(
      violations((i) => top(i.from) === "storage" && !["core", "gen", "storage"].includes(top(i.to))),
      [],
    );
  });

  it("platform imports only core and storage", () => {
    const allowed = ["core", "gen", "storage", "platform"];
    assert.deepEqual(
      violations((i) => top(i.from) === "platform" && !allowed.includes(top(i.to))),
      [],
    );
  });

  it("a feature's storage imports no service code", () => {
    const allowed = (i: Import) => ["core", "gen", "storage"].includes(top(i.to)) || isFeatureStorage(i.to);
    assert.deepEqual(
      violations((i) => isFeatureStorage(i.from) && !allowed(i)),
      [],
    );
  });

  it("storage throws no API errors: neither storage/ nor a feature's storage imports core/errors", () => {
    const isStorage = (path: string) => top(path) === "storage" || isFeatureStorage(path);
    assert.deepEqual(
      violations((i) => isStorage(i.from) && i.to === "core/errors.js"),
      [],
    );
  });

  it("features import neither the server nor the CLI", () => {
    assert.deepEqual(
      violations((i) => FEATURES.includes(top(i.from)) && ["server", "cli"].includes(top(i.to))),
      [],
    );
  });

  it("iam does not depend on auth", () => {
    assert.deepEqual(
      violations((i) => top(i.from) === "iam" && top(i.to) === "auth"),
      [],
    );
  });

  it("in server/, only modules.ts names a feature", () => {
    const named = (i: Import) =>
      top(i.from) === "server" && i.from !== "server/modules.ts" && FEATURES.includes(top(i.to));
    assert.deepEqual(violations(named), []);
  });
});
