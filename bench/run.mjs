#!/usr/bin/env node
// `npm run bench` (after the build): the API bench (bench/api.mjs: bulwark serve on PostgreSQL and
// PGlite against baselines measured in the same run, targets, RSS and start time), then the
// registry against CNCF distribution (bench/registry.mjs), the advisories (bench/advisories.mjs)
// the events (bench/events.mjs: delivery rate, what the outbox costs a create), matching an image
// against the advisories (bench/images-match.mjs), the console's first load (bench/console.mjs)
// and the embedded database's cost of fsync (bench/durability.mjs).
// `npm run bench -- --quick`: the API bench only, with 1 s rows and fewer sequential runs
// (under a minute once the datasets are cached). Indicative only: load generator, baselines and
// server share the machine's cores. Env: bench/README.md.
const args = process.argv.slice(2);
for (const a of args) if (a !== "--quick") console.log(`bench: unknown argument ${a} (ignored; known: --quick)`);
const quick = args.includes("--quick") || process.env.BENCH_QUICK === "1";
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const started = performance.now();

if (process.env.BENCH_API !== "0") {
  const { apiBench } = await import("./api.mjs");
  await apiBench({ quick });
}

if (quick) {
  console.log("\n--quick: the registry, advisories and events parts are skipped (run `npm run bench` for them)");
} else {
  // The registry against CNCF distribution (bench/registry.mjs).
  if (process.env.BENCH_REGISTRY !== "0") {
    const { registryBench } = await import("./registry.mjs");
    await registryBench(); // its own defaults: 2 s rows, 16 connections (bench/README.md)
  }
  // Advisories: import of the wolfi corpus, ListAdvisories and querybatch on PGlite and PostgreSQL
  // (bench/advisories.mjs).
  if (process.env.BENCH_ADVISORIES !== "0") {
    const { advisoriesBench } = await import("./advisories.mjs");
    await advisoriesBench({ seconds: SECONDS, concurrency: CONCURRENCY });
  }
  // Events on PostgreSQL: delivery to local receivers, and group creates/s with and without the
  // outbox (bench/events.mjs).
  if (process.env.BENCH_EVENTS_BENCH !== "0") {
    const { eventsBench } = await import("./events.mjs");
    await eventsBench({ seconds: SECONDS });
  }
  // Matching a 300-package image against the whole advisory corpus (bench/images-match.mjs).
  if (process.env.BENCH_MATCH !== "0") {
    const { matchBench } = await import("./images-match.mjs");
    await matchBench();
  }
  // The console's first page load in Chromium (bench/console.mjs).
  if (process.env.BENCH_CONSOLE !== "0") {
    const { consoleBench } = await import("./console.mjs");
    await consoleBench();
  }
  // The embedded database's cost of durability: creates/s with fsync against --unsafe-no-fsync
  // (bench/durability.mjs).
  if (process.env.BENCH_DURABILITY !== "0") {
    const { durabilityBench } = await import("./durability.mjs");
    await durabilityBench({ seconds: SECONDS });
  }
}
console.log(
  `\nbench: ${((performance.now() - started) / 1000).toFixed(0)} s${process.exitCode ? " (with failures: see above)" : ""}`,
);
