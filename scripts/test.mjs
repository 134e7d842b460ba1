#!/usr/bin/env node
// `npm test`: formatting check and type-check (beside the next steps), compile the sources and
// suites (scripts/test-build.mjs), build and prepare migrated database templates, then run the
// unit tier (test/unit) and every suite on both PGlite and PostgreSQL, compiled. PostgreSQL comes
// from BULWARK_TEST_DATABASE_URL, or else a private cluster is started from the machine's
// PostgreSQL 15 binaries for the run and removed after.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { buildTestTree, compiledPath } from "./test-build.mjs";

const run = (cmd, args, env = process.env) => spawnSync(cmd, args, { stdio: "inherit", env }).status ?? 1;
const extraArgs = process.argv.slice(2);

/** A command run beside what follows, its output kept: answers its exit status and output at its end. */
function inBackground(cmd, args) {
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
  process.once("exit", () => child.exitCode === null && child.kill());
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  return new Promise((resolve) => child.on("close", (status) => resolve({ status: status ?? 1, output })));
}

// The whole run checks formatting and the suites' types while the build and the templates are
// made (each is CPU-bound, but none uses both cores throughout). The sources' own types are
// checked by the build's tsc (prepare, below), which fails the run on an error; a build skipped as
// up to date checked these same sources.
const checks = extraArgs.length
  ? []
  : [
      {
        what: "Formatting differs: run `npm run format`.",
        done: inBackground("npx", ["prettier", "--check", "--log-level", "warn", "."]),
      },
      {
        what: "The suites do not type-check.",
        done: inBackground("npx", ["tsc", "--noEmit", "-p", "test/tsconfig.json"]),
      },
    ];
/** Every check's output; false if one failed. */
async function checksPassed() {
  let passed = true;
  for (const check of checks) {
    const { status, output } = await check.done;
    if (output) process.stdout.write(output);
    if (status !== 0) {
      console.error(check.what);
      passed = false;
    }
  }
  return passed;
}

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
if (!(await checksPassed())) status = 1;
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
