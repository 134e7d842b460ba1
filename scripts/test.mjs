#!/usr/bin/env node
// `npm test`: formatting check and type-check, compile the sources and suites
// (scripts/test-build.mjs), prepare migrated database templates, then run the unit tier
// (test/unit) and every suite on both PGlite and PostgreSQL, compiled. PostgreSQL comes from
// BULWARK_TEST_DATABASE_URL, or else a private cluster is started from the machine's PostgreSQL 15
// binaries for the run and removed after.
import { spawnSync, execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { buildTestTree, compiledPath } from "./test-build.mjs";

const run = (cmd, args, env = process.env) => spawnSync(cmd, args, { stdio: "inherit", env }).status ?? 1;
const extraArgs = process.argv.slice(2);

if (!extraArgs.length && run("npx", ["prettier", "--check", "--log-level", "warn", "."]) !== 0) {
  console.error("Formatting differs: run `npm run format`.");
  process.exit(1);
}
if (!extraArgs.length && run("npx", ["tsc", "--noEmit", "-p", "tsconfig.json"]) !== 0) process.exit(1);
if (!extraArgs.length && run("npx", ["tsc", "--noEmit", "-p", "test/tsconfig.json"]) !== 0) process.exit(1);

let pgDir;
const env = { ...process.env };
if (!env.BULWARK_TEST_DATABASE_URL && env.BULWARK_TEST_SKIP_POSTGRES !== "1") {
  pgDir = mkdtempSync(join(tmpdir(), "bulwark-pg-"));
  const port = String(20000 + Math.floor(Math.random() * 20000));
  try {
    env.BULWARK_TEST_DATABASE_URL = execFileSync("bash", ["scripts/pg-temp.sh", "start", pgDir, port], {
      encoding: "utf8",
    }).trim();
  } catch {
    console.error(
      "Could not start a PostgreSQL cluster: set BULWARK_TEST_DATABASE_URL, or BULWARK_TEST_SKIP_POSTGRES=1 to run on PGlite only.",
    );
    process.exit(1);
  }
  console.log(`PostgreSQL for this run: ${env.BULWARK_TEST_DATABASE_URL}`);
}
const stopPg = () => pgDir && spawnSync("bash", ["scripts/pg-temp.sh", "stop", pgDir], { stdio: "inherit" });
process.on("SIGINT", () => {
  stopPg();
  process.exit(130);
});

const started = performance.now();
try {
  const compiled = await buildTestTree();
  console.log(`${compiled} files compiled for the tests in ${Math.round(performance.now() - started)} ms`);
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  stopPg();
  process.exit(1);
}
// Every new data directory a suite's server or CLI child opens copies what prepare's initdb made
// (test/support/db-templates.ts INITDB_TEMPLATE) instead of running initdb again.
env.BULWARK_INITDB_TEMPLATE = resolve(".cache", "initdb-template");
let status = run("node", ["--enable-source-maps", compiledPath("test/support/prepare.ts")], env);
if (status === 0) {
  // Every *.test.ts below test/ (the tree mirrors src/), the unit tier first.
  const suites = (dir) =>
    readdirSync(dir, { recursive: true })
      .filter((f) => f.endsWith(".test.ts"))
      .map((f) => join(dir, f))
      .sort();
  const all = suites("test");
  const unit = all.filter((f) => f.startsWith(join("test", "unit") + "/"));
  const files = extraArgs.length ? extraArgs : [...unit, ...all.filter((f) => !unit.includes(f))];
  status = run(
    "node",
    [
      "--enable-source-maps",
      "--test",
      "--test-concurrency=2",
      "--test-reporter=spec",
      ...files.map((f) => compiledPath(f)),
    ],
    env,
  );
}
stopPg();
process.exit(status);
