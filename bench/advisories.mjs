#!/usr/bin/env node
// The advisories part of `npm run bench` (also runnable alone: `node bench/advisories.mjs` after a
// build). On both backends — embedded PGlite, and PostgreSQL 15 on a private cluster started for
// the run (scripts/pg-temp.sh) — a `bulwark serve` child process gets the wolfi corpus
// (../shared/data/wolfi-advisories) through `bulwark advisories import`, twice (the second import
// changes nothing), then: ListAdvisories with `query`, with a status filter and plain, at two
// concurrencies, from a load generator in its own process (bench/advisories-load.mjs); and OSV
// querybatch of 1,000 queries, sequentially. Baselines in the same run: a bare node:http server
// (throughput ratio) and, on PostgreSQL, the same page + count in raw SQL over `pg` against the
// same database (latency ratio). Everything shares the machine's cores: indicative, not absolute.
// Env: BENCH_ADVISORIES=0 skips; BENCH_SECONDS, BENCH_CONCURRENCY, BENCH_WARMUP_SECONDS as for the
// other parts; BENCH_ADVISORIES_CORPUS (the advisories directory), BENCH_ADVISORIES_POSTGRES=0
// (PGlite only), BENCH_QUERYBATCH_RUNS (default 20), BENCH_QUERYBATCH_SECONDS (default 15: the
// most time the querybatch runs may take per backend), PG_BIN (as for scripts/pg-temp.sh).
import http from "node:http";
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { cpuBusy } from "./registry.mjs";
import { BULWARK, HERE, PG_BIN, PG_TEMP, ROOT, childEnv, freePort, json, run, send, sleep, stop } from "./lib.mjs";

const LOAD = join(HERE, "advisories-load.mjs");
const CORPUS =
  process.env.BENCH_ADVISORIES_CORPUS ?? join(ROOT, "..", "shared", "data", "wolfi-advisories", "advisories");
const EXPECTED_ADVISORIES = 20_770; // the corpus's README
const BATCH_QUERIES = 1000;
/** The issue's targets (#31): querybatch p50 per backend, /v1/query p50, ListAdvisories p50 at 32 connections. */
const QUERYBATCH_TARGET_MS = { PostgreSQL: 100, PGlite: 150 };
const QUERY_TARGET_MS = 5;
const LIST_TARGET_MS = 20;
const LIST_TARGET_CONNS = 32;
/** One OSV /v1/query (a package by name in the corpus, all versions). */
const ONE_QUERY = JSON.stringify({ package: { name: "curl", ecosystem: "Wolfi" }, version: "0" });
const LIST = "/vulnerabilities/v2beta1/advisories";

/** `bulwark serve` as a child process, ready (GET /healthz), with the operator's API token. */
async function startBulwark({ label, dataDir, databaseUrl, env }) {
  const port = await freePort();
  const where = databaseUrl ? ["--database-url", databaseUrl] : ["--data-dir", dataDir];
  // --metrics: GET /metrics on the main port, for the operator's token (the in-memory answers' use)
  const args = ["serve", ...where, "--host", "127.0.0.1", "--port", String(port), "--no-rate-limit", "--metrics"];
  const child = spawn(process.execPath, [BULWARK, ...args, "--log-level", "warn"], {
    stdio: ["ignore", "ignore", "pipe"],
    env: childEnv(env),
  });
  let tail = "";
  child.stderr.on("data", (c) => (tail = (tail + c).slice(-4000)));
  const server = { label, child, base: `http://127.0.0.1:${port}`, stderrTail: () => tail.trim() };
  try {
    const t = performance.now();
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${label} exited (${child.exitCode}): ${tail.trim()}`);
      if ((await send(`${server.base}/healthz`).catch(() => ({}))).status === 200) break;
      if (Date.now() > deadline) throw new Error(`${label} not ready after 60 s: ${tail.trim()}`);
      await sleep(100);
    }
    server.startSeconds = (performance.now() - t) / 1000;
    const token = (
      await run(
        process.execPath,
        [BULWARK, "admin", "token", ...where, "--host", "127.0.0.1", "--port", String(port)],
        {
          env: childEnv(env),
        },
      )
    ).stdout.trim();
    server.token = token;
    server.auth = { authorization: `Bearer ${token}` };
    const org = json(
      await send(`${server.base}/iam/v2beta1/groups`, {
        method: "POST",
        headers: server.auth,
        body: JSON.stringify({ name: "bench" }),
      }),
      "create org",
    );
    server.group = org.uid;
    return server;
  } catch (err) {
    await stop(child);
    throw err;
  }
}

const SUMMARY =
  /(\d+) files: (\d+) advisories \((\d+) created, (\d+) updated, (\d+) unchanged\), (\d+) events added, (\d+) removed; (\d+) skipped/;

/** `bulwark advisories import` of the corpus into the server's group: wall time and its summary. */
async function importCorpus(server) {
  const t = performance.now();
  let out;
  try {
    out = await run(
      process.execPath,
      [BULWARK, "advisories", "import", CORPUS, "--group", server.group, "--api-url", server.base],
      { env: childEnv({ BULWARK_TOKEN: server.token }), maxBuffer: 64 << 20 },
    );
  } catch (err) {
    throw new Error(
      `advisories import into ${server.label} failed (${err.code}): ${`${err.stderr ?? ""}${err.stdout ?? ""}`.slice(-2000)}\n` +
        `server's log: ${server.stderrTail().slice(-2000)}`,
    );
  }
  const seconds = (performance.now() - t) / 1000;
  const line = out.stdout.trim().split("\n").at(-1) ?? "";
  const m = SUMMARY.exec(line);
  if (!m) throw new Error(`advisories import: no summary line in ${JSON.stringify(out.stdout.slice(-500))}`);
  const [files, advisories, created, updated, unchanged, eventsAdded, eventsRemoved, skipped] = m.slice(1).map(Number);
  return { seconds, line, files, advisories, created, updated, unchanged, eventsAdded, eventsRemoved, skipped };
}

/** Load generators running now (killed with everything else on a crash or Ctrl-C). */
const loads = new Set();

/** Runs one job in the load generator's process; its result line. */
async function load(job) {
  const child = spawn(process.execPath, [LOAD, JSON.stringify(job)], { stdio: ["ignore", "pipe", "pipe"], cwd: ROOT });
  loads.add(child);
  child.on("exit", () => loads.delete(child));
  let out = "";
  let err = "";
  child.stdout.on("data", (c) => (out += c));
  child.stderr.on("data", (c) => (err += c));
  const [code] = await once(child, "exit");
  if (code !== 0) throw new Error(`load generator exited ${code}: ${err.slice(-2000)}`);
  return JSON.parse(out.trim().split("\n").at(-1));
}

/** 1,000 OSV queries over the corpus's packages: half by name at version "0", half by purl at a version it names. */
function batchQueries() {
  const files = readdirSync(CORPUS)
    .filter((f) => f.endsWith(".advisories.yaml"))
    .sort();
  const queries = [];
  for (let i = 0; i < BATCH_QUERIES; i++) {
    const file = files[Math.floor((i * files.length) / BATCH_QUERIES)];
    const name = file.slice(0, -".advisories.yaml".length);
    if (i % 2 === 0) queries.push({ package: { name, ecosystem: "Chainguard" }, version: "0" });
    else {
      // a version the document itself names (its first fixed version), so version comparison runs
      const fixed = /fixed-version:\s*["']?([^"'\s]+)/.exec(readFileSync(join(CORPUS, file), "utf8"))?.[1];
      queries.push({ package: { purl: `pkg:apk/chainguard/${name}@${encodeURIComponent(fixed ?? "0")}` } });
    }
  }
  return queries;
}

const fmt = (n, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : "—";
/** A ratio: two decimals, or two significant digits when small (list rows are far below bare node:http). */
const ratio = (n) => (!Number.isFinite(n) ? "—" : n >= 0.1 ? fmt(n, 2) : n.toPrecision(2));

/** The three ListAdvisories workloads, their query strings and raw-SQL equivalents (page of 50 + 1, count). */
const WORKLOADS = [
  {
    key: "query",
    label: "query=cve-2024",
    qs: "query=cve-2024&page_size=50",
    where: "search_text like $1",
    values: ["%cve-2024%"],
  },
  {
    key: "fixed",
    label: "latest_event_type=FIXED",
    qs: "latest_event_type=EVENT_TYPE_FILTER_FIXED&page_size=50",
    where: "latest_event_type = $1",
    values: ["fixed"],
  },
  { key: "plain", label: "plain page", qs: "page_size=50" },
];

function rawStatements(w) {
  const where = w.where ? ` where ${w.where}` : "";
  return [
    { text: `select * from advisories${where} order by advisory_id, uid limit 51`, values: w.values ?? [] },
    { text: `select count(*) from advisories${where}`, values: w.values ?? [] },
  ];
}

/** One backend: import twice, the list rows, the querybatch runs. */
async function measureBackend(server, { conns, seconds, warmup, queries, qbRuns, qbSeconds, databaseUrl }) {
  const result = { label: server.label, startSeconds: server.startSeconds, list: {}, raw: {} };
  result.import = await importCorpus(server);
  result.reimport = await importCorpus(server);

  for (const w of WORKLOADS) {
    const page = json(await send(`${server.base}${LIST}?${w.qs}`, { headers: server.auth }), `ListAdvisories ${w.qs}`);
    result.list[w.key] = { totalCount: Number(page.totalCount ?? 0), rows: [] };
    for (const c of conns) {
      result.list[w.key].rows.push(
        await load({
          kind: "http",
          url: `${server.base}${LIST}?${w.qs}`,
          headers: server.auth,
          seconds,
          warmup,
          concurrency: c,
        }),
      );
      if (databaseUrl)
        (result.raw[w.key] ??= []).push(
          await load({
            kind: "sql",
            url: databaseUrl,
            statements: rawStatements(w),
            poolSize: 10, // the server's pool
            seconds,
            warmup,
            concurrency: c,
          }),
        );
    }
  }

  const body = JSON.stringify({ queries });
  const answer = json(
    await send(`${server.base}/v1/querybatch`, { method: "POST", headers: server.auth, body }),
    "querybatch",
  );
  if (answer.results?.length !== queries.length)
    throw new Error(`querybatch: ${answer.results?.length} results for ${queries.length} queries`);
  result.batchVulns = answer.results.reduce((n, r) => n + (r.vulns?.length ?? 0), 0);
  result.batchBytes = Buffer.byteLength(JSON.stringify(answer));
  result.batch = await load({
    kind: "http",
    method: "POST",
    url: `${server.base}/v1/querybatch`,
    headers: server.auth,
    body,
    concurrency: 1,
    runs: qbRuns,
    maxSeconds: qbSeconds,
  });
  result.query = await load({
    kind: "http",
    method: "POST",
    url: `${server.base}/v1/query`,
    headers: server.auth,
    body: ONE_QUERY,
    seconds,
    warmup,
    concurrency: 1,
  });
  result.memory = await answersInMemory(server);
  return result;
}

/**
 * How the in-memory advisory answers were used (the server's bulwark_advisories_* gauges) and the
 * server's resident memory, read after the load (idle).
 */
async function answersInMemory(server) {
  const text = await (await fetch(`${server.base}/metrics`, { headers: server.auth })).text();
  const lines = text.split("\n");
  const gauge = (name) => Number(lines.find((l) => l.startsWith(`${name} `))?.slice(name.length + 1) ?? NaN);
  const status = readFileSync(`/proc/${server.child.pid}/status`, "utf8");
  return {
    hits: gauge('bulwark_advisories_list_cache_requests_total{outcome="hit"}'),
    misses: gauge('bulwark_advisories_list_cache_requests_total{outcome="miss"}'),
    joined: gauge('bulwark_advisories_list_cache_requests_total{outcome="joined"}'),
    entries: gauge("bulwark_advisories_list_cache_entries"),
    bytes: gauge("bulwark_advisories_list_cache_bytes"),
    indexed: gauge("bulwark_advisories_package_index_advisories"),
    builds: gauge("bulwark_advisories_package_index_builds_total"),
    rssKiB: Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? NaN),
  };
}

function printReport({ results, bare, conns, seconds, warmup, busyBefore, pgSkipped, qbRuns, qbSeconds }) {
  const cpus = os.cpus();
  console.log(
    `\nAdvisories: the wolfi corpus (${relative(ROOT, CORPUS)}) in bulwark serve on PGlite and PostgreSQL 15,\n` +
      `  ${new Date().toISOString().slice(0, 10)}, ${cpus[0]?.model.trim() ?? "unknown CPU"} × ${cpus.length} cores, ` +
      `${fmt(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; load from a separate process.`,
  );
  if (busyBefore > 0.1)
    console.log(`  warning: the machine was ${Math.round(busyBefore * 100)}% busy with other work when the run began`);
  if (pgSkipped) console.log(`  PostgreSQL: skipped (${pgSkipped})`);
  const notes = [];

  console.log(`\n  import (bulwark advisories import, wall time of the CLI)`);
  for (const r of results) {
    const i = r.import;
    const again = r.reimport;
    console.log(
      `  ${r.label.padEnd(11)} ${fmt(i.seconds, 1).padStart(6)} s  ${fmt(i.advisories / i.seconds).padStart(6)} advisories/s  ` +
        `(${fmt(i.files)} files, ${fmt(i.advisories)} advisories, ${fmt(i.eventsAdded)} events)   ` +
        `re-import, all unchanged: ${fmt(again.seconds, 1)} s  (server start ${fmt(r.startSeconds, 1)} s)`,
    );
    if (Math.abs(i.advisories - EXPECTED_ADVISORIES) > EXPECTED_ADVISORIES * 0.01)
      notes.push(
        `${r.label}: import reported ${fmt(i.advisories)} advisories, expected about ${fmt(EXPECTED_ADVISORIES)}`,
      );
    if (i.skipped) notes.push(`${r.label}: import skipped ${i.skipped} documents: ${i.line}`);
    if (again.created || again.updated || again.eventsAdded || again.eventsRemoved || again.unchanged !== i.advisories)
      notes.push(`${r.label}: the re-import changed something: ${again.line}`);
  }

  const hasRaw = results.some((r) => Object.keys(r.raw).length);
  console.log(
    `\n  ListAdvisories, page_size=50: ${seconds}s per row after ${warmup}s warm-up; req/s, × bare = / bare node:http at the same\n` +
      `  connections; p50/p99 ms${hasRaw ? "; raw SQL = the same page (51 rows) + count over pg, pool of 10, on PostgreSQL" : ""}`,
  );
  const cols = (...c) =>
    "  " +
    c[0].padEnd(38) +
    c
      .slice(1)
      .map((x, i) => x.padStart([5, 8, 7, 13, 8, 7, 13, 13, 9][i]))
      .join(" ")
      .trimEnd();
  const labels = results.map((r) => r.label);
  console.log(
    cols(
      "",
      "",
      ...(labels[0] ? [labels[0], "", ""] : []),
      ...(labels[1] ? [labels[1], "", ""] : []),
      hasRaw ? "raw SQL" : "",
      hasRaw ? "pg p50" : "",
    ),
  );
  console.log(
    cols(
      "workload",
      "conns",
      ...results.flatMap(() => ["req/s", "× bare", "p50/p99"]),
      ...(hasRaw ? ["p50/p99", "/ raw p50"] : []),
    ),
  );
  const rps = (r) => (r ? r.done / r.elapsed : NaN);
  const ms = (r) => (r ? `${fmt(r.p50, 1)}/${fmt(r.p99, 1)}` : "—");
  conns.forEach((c, ci) => {
    console.log(
      cols(
        "bare node:http (fixed JSON)",
        String(c),
        ...results.flatMap(() => [fmt(rps(bare[ci])), "1.00", ms(bare[ci])]),
      ),
    );
  });
  for (const w of WORKLOADS) {
    const total = results[0]?.list[w.key].totalCount;
    conns.forEach((c, ci) => {
      const row = results.flatMap((r) => {
        const x = r.list[w.key].rows[ci];
        if (x.errors) notes.push(`${r.label} ${w.label} at ${c}: ${x.errors} failed requests, first: ${x.firstError}`);
        return [fmt(rps(x)), ratio(rps(x) / rps(bare[ci])), ms(x)];
      });
      const pgResult = results.find((r) => r.raw[w.key]);
      const raw = pgResult?.raw[w.key][ci];
      if (raw?.errors) notes.push(`raw SQL ${w.label} at ${c}: ${raw.errors} failed, first: ${raw.firstError}`);
      console.log(
        cols(
          `${w.label} (${fmt(total)} match)`,
          String(c),
          ...row,
          ...(hasRaw ? [ms(raw), raw ? `${fmt(pgResult.list[w.key].rows[ci].p50 / raw.p50, 1)}×` : "—"] : []),
        ),
      );
    });
    for (const r of results.slice(1))
      if (r.list[w.key].totalCount !== total)
        notes.push(`${w.label}: ${results[0].label} counts ${fmt(total)}, ${r.label} ${fmt(r.list[w.key].totalCount)}`);
  }
  if (hasRaw && results.some((r) => !Object.keys(r.raw).length))
    console.log(
      `  (no raw SQL baseline on PGlite: the server holds the embedded database; the PostgreSQL one is the reference)`,
    );

  console.log(
    `\n  POST /v1/querybatch, ${fmt(BATCH_QUERIES)} queries (half name + version "0", half purl@version), sequential runs ` +
      `(up to ${qbRuns}, at most ${qbSeconds} s;\n  p99 of so few = the slowest)`,
  );
  for (const r of results) {
    const b = r.batch;
    const goal = QUERYBATCH_TARGET_MS[r.label];
    const target = goal ? `   target ≤ ${goal} ms: ${b.p50 <= goal ? "met" : "NOT MET"} (p50)` : "";
    console.log(
      `  ${r.label.padEnd(11)} p50 ${fmt(b.p50).padStart(6)} ms  p99 ${fmt(b.p99).padStart(6)} ms  (${b.done} runs; ` +
        `${fmt(r.batchVulns)} vulns, ${fmt(r.batchBytes / 1024)} KiB answer)${target}`,
    );
    if (b.errors) notes.push(`${r.label} querybatch: ${b.errors} failed, first: ${b.firstError}`);
  }
  console.log(`\n  POST /v1/query (${ONE_QUERY}), sequential for ${seconds}s`);
  for (const r of results) {
    const q = r.query;
    console.log(
      `  ${r.label.padEnd(11)} p50 ${fmt(q.p50, 1).padStart(6)} ms  p99 ${fmt(q.p99, 1).padStart(6)} ms   target ≤ ${QUERY_TARGET_MS} ms: ${q.p50 <= QUERY_TARGET_MS ? "met" : "NOT MET"} (p50)`,
    );
    if (q.errors) notes.push(`${r.label} /v1/query: ${q.errors} failed, first: ${q.firstError}`);
  }

  console.log(
    `\n  in-memory answers after the load: ListAdvisories cache (requests by outcome, what it keeps), package index`,
  );
  for (const r of results) {
    const m = r.memory;
    console.log(
      `  ${r.label.padEnd(11)} list: ${fmt(m.hits)} hits, ${fmt(m.misses)} misses, ${fmt(m.joined)} joined; ${fmt(m.entries)} answers, ` +
        `${fmt(m.bytes / 1024)} KiB   index: ${fmt(m.indexed)} advisories, ${fmt(m.builds)} builds   server RSS ${fmt(m.rssKiB / 1024)} MiB`,
    );
  }

  const ci = conns.indexOf(LIST_TARGET_CONNS);
  console.log(`\n  targets (issue #31), p50`);
  for (const r of results) {
    for (const w of WORKLOADS) {
      const x = ci >= 0 ? r.list[w.key].rows[ci] : undefined;
      console.log(
        `  ${r.label.padEnd(11)} ListAdvisories ${w.label.padEnd(24)} at ${LIST_TARGET_CONNS}: ${x ? `${fmt(x.p50, 1)} ms` : "not measured"}  target ≤ ${LIST_TARGET_MS} ms: ${x ? (x.p50 <= LIST_TARGET_MS ? "met" : "NOT MET") : "—"}`,
      );
    }
    const goal = QUERYBATCH_TARGET_MS[r.label];
    console.log(
      `  ${r.label.padEnd(11)} querybatch of ${fmt(BATCH_QUERIES)}: ${fmt(r.batch.p50)} ms  target ≤ ${goal} ms: ${r.batch.p50 <= goal ? "met" : "NOT MET"}`,
    );
    console.log(
      `  ${r.label.padEnd(11)} /v1/query: ${fmt(r.query.p50, 1)} ms  target ≤ ${QUERY_TARGET_MS} ms: ${r.query.p50 <= QUERY_TARGET_MS ? "met" : "NOT MET"}`,
    );
  }
  for (const note of notes) console.log(`  note: ${note}`);
}

export async function advisoriesBench({
  seconds = Number(process.env.BENCH_SECONDS ?? 3),
  concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32),
} = {}) {
  if (!existsSync(CORPUS)) {
    console.log(`\nAdvisories: skipped, no corpus at ${CORPUS} (set BENCH_ADVISORIES_CORPUS)`);
    return;
  }
  const warmup = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
  const qbRuns = Number(process.env.BENCH_QUERYBATCH_RUNS ?? 20);
  const qbSeconds = Number(process.env.BENCH_QUERYBATCH_SECONDS ?? 15);
  const conns = [...new Set([8, concurrency])].sort((a, b) => a - b);
  let pgSkipped;
  if (process.env.BENCH_ADVISORIES_POSTGRES === "0") pgSkipped = "BENCH_ADVISORIES_POSTGRES=0";
  else if (!existsSync(join(PG_BIN, "initdb"))) pgSkipped = `no PostgreSQL binaries in ${PG_BIN} (set PG_BIN)`;

  const busyBefore = await cpuBusy();
  const dir = await mkdtemp(join(os.tmpdir(), "bulwark-bench-advisories-"));
  let pgDir;
  const servers = [];
  let bare;
  // A crash or Ctrl-C must not leave servers, a cluster or temp directories behind.
  const cleanupSync = () => {
    for (const child of [...loads, ...servers.map((s) => s.child)])
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    if (pgDir) {
      try {
        execFileSync("bash", [PG_TEMP, "stop", pgDir], { stdio: "ignore" });
      } catch {}
      pgDir = undefined;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const onSignal = (signal) => {
    cleanupSync();
    process.exit(signal === "SIGINT" ? 130 : 143);
  };
  process.on("exit", cleanupSync);
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    const queries = batchQueries();
    bare = http.createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ advisories: [], totalCount: "0" }));
    });
    bare.listen(0, "127.0.0.1");
    await once(bare, "listening");
    const bareResults = [];
    for (const c of conns)
      bareResults.push(
        await load({ kind: "http", url: `http://127.0.0.1:${bare.address().port}/`, seconds, warmup, concurrency: c }),
      );
    bare.close();

    const common = { conns, seconds, warmup, queries, qbRuns, qbSeconds };
    const results = [];
    const pglite = await startBulwark({ label: "PGlite", dataDir: join(dir, "data") });
    servers.push(pglite);
    results.push(await measureBackend(pglite, common));
    await stop(pglite.child);

    if (!pgSkipped) {
      pgDir = await mkdtemp(join(os.tmpdir(), "bulwark-bench-pg-"));
      const databaseUrl = (await run("bash", [PG_TEMP, "start", pgDir, String(await freePort())])).stdout.trim();
      const env = { BULWARK_KEY_ENCRYPTION_KEY: randomBytes(32).toString("hex") };
      const postgres = await startBulwark({ label: "PostgreSQL", databaseUrl, env });
      servers.push(postgres);
      results.push(await measureBackend(postgres, { ...common, databaseUrl }));
      await stop(postgres.child);
    }
    printReport({ results, bare: bareResults, conns, seconds, warmup, busyBefore, pgSkipped, qbRuns, qbSeconds });
  } finally {
    bare?.close();
    for (const s of servers) await stop(s.child);
    if (pgDir) {
      await run("bash", [PG_TEMP, "stop", pgDir]).catch((err) => console.log(`  PostgreSQL stop: ${err.message}`));
      pgDir = undefined;
    }
    await rm(dir, { recursive: true, force: true });
    process.off("exit", cleanupSync);
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.env.BENCH_ADVISORIES !== "0")
  await advisoriesBench();
