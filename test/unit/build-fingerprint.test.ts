// `npm start` compiles only when the build's inputs changed (scripts/build.mjs): the fingerprint
// must move with every input's content, and only with it.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build, fingerprint } from "../../scripts/build.mjs";

describe("build fingerprint", () => {
  it("changes with a source, a new file, the lockfile or the build configuration; not with a touch", () => {
    const root = mkdtempSync(join(tmpdir(), "bulwark-fingerprint-")) + "/";
    try {
      mkdirSync(join(root, "src", "core"), { recursive: true });
      writeFileSync(join(root, "src", "core", "a.ts"), "export const a = 1;\n");
      for (const f of ["tsconfig.json", "package.json", "package-lock.json"]) writeFileSync(join(root, f), "{}\n");
      const first = fingerprint(root);
      assert.equal(fingerprint(root), first, "the same inputs, the same fingerprint");
      utimesSync(join(root, "src", "core", "a.ts"), new Date(0), new Date(0));
      assert.equal(fingerprint(root), first, "a changed mtime alone builds nothing");

      const seen = new Set([first]);
      const changed = (what: string) => {
        const now = fingerprint(root);
        assert.ok(!seen.has(now), `${what} changes the fingerprint`);
        seen.add(now);
      };
      writeFileSync(join(root, "src", "core", "a.ts"), "export const a = 2;\n");
      changed("a source's content");
      writeFileSync(join(root, "src", "core", "b.ts"), "");
      changed("a new source");
      writeFileSync(join(root, "package-lock.json"), '{"lockfileVersion":3}\n');
      changed("the lockfile");
      writeFileSync(join(root, "tsconfig.json"), '{"compilerOptions":{}}\n');
      changed("the compiler's configuration");
      cpSync(join(root, "src", "core", "a.ts"), join(root, "src", "a.ts"));
      changed("a file moved or copied elsewhere in src");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("an up-to-date tree is not built again (the test run built it)", () => {
    assert.equal(build({ ifChanged: true }), false);
  });
});
