// Codegen drift: regenerating from proto/ with the committed buf.gen.yaml must
// reproduce the committed generated code byte for byte. Fails when a .proto is
// edited without running `npm run generate`, or when generated code is hand-edited.
// (The OpenAPI documents are checked in openapi.test.ts, against a running server.)

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { REPO_ROOT } from "../support/paths.js";

const ROOT = REPO_ROOT;
const BUF = join(ROOT, "node_modules", ".bin", "buf");

function listFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p).split(sep).join("/"));
    }
  };
  walk(dir);
  return out.sort();
}

/** The `out:` directories of buf.gen.yaml (relative to the repo root). */
function outDirs(): string[] {
  const yaml = readFileSync(join(ROOT, "buf.gen.yaml"), "utf8");
  const dirs = [...yaml.matchAll(/^\s*out:\s*["']?([^"'\s#]+)["']?\s*$/gm)].map((m) => m[1]!);
  assert.ok(dirs.length > 0, "no `out:` found in buf.gen.yaml");
  return [...new Set(dirs)];
}

test("committed generated code matches `buf generate` output", () => {
  const tmp = mkdtempSync(join(tmpdir(), "bulwark-codegen-"));
  try {
    // -o prefixes every plugin `out` with the temp dir; everything else comes from buf.gen.yaml.
    execFileSync(BUF, ["generate", "-o", tmp], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
    const problems: string[] = [];
    for (const out of outDirs()) {
      const fresh = listFiles(join(tmp, out));
      const committed = listFiles(join(ROOT, out));
      assert.ok(fresh.length > 0, `buf generate produced nothing in ${out}`);
      const committedSet = new Set(committed);
      const freshSet = new Set(fresh);
      for (const f of fresh)
        if (!committedSet.has(f)) problems.push(`${out}/${f}: missing (not committed / not regenerated)`);
      for (const f of committed)
        if (!freshSet.has(f)) problems.push(`${out}/${f}: stale or hand-added (buf generate does not produce it)`);
      for (const f of fresh) {
        if (!committedSet.has(f)) continue;
        const a = readFileSync(join(tmp, out, f));
        const b = readFileSync(join(ROOT, out, f));
        if (!a.equals(b)) {
          const al = a.toString("utf8").split("\n");
          const bl = b.toString("utf8").split("\n");
          let i = 0;
          while (i < al.length && al[i] === bl[i]) i++;
          const g = al[i] ?? "<EOF>";
          const c = bl[i] ?? "<EOF>";
          let col = 0;
          while (col < g.length && g[col] === c[col]) col++;
          const snip = (line: string): string => JSON.stringify(line.slice(Math.max(0, col - 40), col + 40));
          problems.push(
            `${out}/${f}: differs at line ${i + 1}, column ${col + 1}\n      generated: ${snip(g)}\n      committed: ${snip(c)}`,
          );
        }
      }
    }
    if (problems.length > 0) {
      assert.fail(
        `generated code is out of date; run \`npm run generate\` (${problems.length} problem(s)):\n` +
          problems
            .slice(0, 30)
            .map((p) => `  - ${p}`)
            .join("\n"),
      );
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

test("the GA (v2) protos are exactly what scripts/derive-v2-protos.mjs derives from v2beta1", () => {
  try {
    execFileSync(process.execPath, [join(ROOT, "scripts", "derive-v2-protos.mjs"), "--check"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (err) {
    assert.fail(String((err as { stderr?: Buffer }).stderr ?? err));
  }
});
