#!/usr/bin/env node
// Events bench on PostgreSQL (a private cluster, scripts/pg-temp.sh): (1) events delivered per
// second to a local receiver: N group creates are recorded while the receiver answers 503 (so
// they queue behind the first), then it answers 204 and the time until the last arrives is
// measured, for one subscription and for four; (2) what the outbox costs a mutating RPC: group
// creates per second (32 connections) on a server with the events module against one without it,
// each on a fresh database of its own made the same way, measured in BENCH_ROUNDS interleaved
// rounds (the median round's rates and the median of the rounds' ratios are reported), and beside
// it the same for Fastify + pg making the create in a transaction with and without one more insert
// (the event's: bench/baseline-servers.mjs create, create-event), the floor of an outbox written
// as one more statement of the change's transaction. Servers
// run from the sources (bench/events-server.ts, through tsx). Run by `npm run bench` (not with
// --quick), or alone: `node bench/events.mjs` (BENCH_EVENTS=N events per delivery row, default
// 2000; BENCH_SECONDS; BENCH_ROUNDS, default 5; BENCH_EVENTS_DELIVERY=0 skips the delivery rows).
import http from "node:http";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { tmpdir } from "node:os";
import { createInterface } from "node:readline";
import autocannon from "autocannon";
import pg from "pg";
import { Resources, ROOT, spawnTracked, startBaseline, stop } from "./lib.mjs";

const N = Number(process.env.BENCH_EVENTS ?? 2000);
/** how many parents the measured creates are spread over (BENCH_PARENTS; 1: all under one) */
const PARENTS = Number(process.env.BENCH_PARENTS ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const DELIVERY = process.env.BENCH_EVENTS_DELIVERY !== "0";
const randomKek = randomBytes(32).toString("hex");

async function startServer(resources, mode, databaseUrl) {
  const child = spawnTracked(
    resources,
    process.execPath,
    ["--import", "tsx", join(ROOT, "bench", "events-server.ts"), mode, databaseUrl],
    {
      env: { ...process.env, BULWARK_KEY_ENCRYPTION_KEY: randomKek },
    },
  );
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on("line", (l) => l.startsWith("ready ") && resolve(l));
    child.on("exit", () => reject(new Error(`events-server exited: ${child.tail()}`)));
  });
  const [, url, token] = line.split(" ");
  return { child, url, token };
}

async function api(server, method, path, body) {
  const res = await fetch(server.url + path, {
    method,
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: body && JSON.stringify(body),
  });
  const json = await res.json();
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

function receiver() {
  const state = { up: false, count: 0, last: 0, server: undefined, url: "" };
  state.server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (!state.up) return res.writeHead(503).end();
      state.count++;
      state.last = performance.now();
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) =>
    state.server.listen(0, "127.0.0.1", () => {
      state.url = `http://127.0.0.1:${state.server.address().port}/hook`;
      resolve(state);
    }),
  );
}

const median = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** Events delivered per second to local receivers, for one subscription and for four. */
async function deliveryRows(resources, databaseUrl, rows) {
  const server = await startServer(resources, "with-events", databaseUrl);
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    for (const subscriptions of [1, 4]) {
      const org = await api(server, "POST", "/iam/v2beta1/groups", { name: `bench-${subscriptions}` });
      const receivers = await Promise.all(Array.from({ length: subscriptions }, receiver));
      for (const r of receivers)
        await db.query("insert into event_subscriptions (uid, parent_uid, sink) values ($1, $2, $3)", [
          `${org.uid}/${randomBytes(8).toString("hex")}`,
          org.uid,
          r.url,
        ]);
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          for (let i = next++; i < N; i = next++)
            await api(server, "POST", `/iam/v2beta1/groups/${org.uid}`, { name: `g-${i}` });
        }),
      );
      const started = performance.now();
      for (const r of receivers) r.up = true;
      const expected = N * subscriptions;
      while (receivers.reduce((n, r) => n + r.count, 0) < expected) await new Promise((r) => setTimeout(r, 20));
      const last = Math.max(...receivers.map((r) => r.last));
      const perSecond = expected / ((last - started) / 1000);
      rows.push(
        `| PostgreSQL | events delivered to ${subscriptions} local receiver(s), ${N} events queued | ${Math.round(perSecond).toLocaleString("en")}/s | goal ≥ 1,000/s: ${perSecond >= 1000 ? "met" : "not met"} |`,
      );
      for (const r of receivers) r.server.close();
    }
  } finally {
    await db.end();
    await stop(server.child);
  }
}

/**
 * Group creates per second with and without the events module. Each server has a fresh database
 * of its own, made the same way (the baseline's lacks only the events migration), so neither
 * pays for the other's rows; the rounds alternate which runs first.
 */
async function outboxRows(resources, databaseUrl, seconds, rows) {
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  const urls = {};
  for (const mode of ["without-events", "with-events"]) {
    const name = `rate_${mode.replace("-", "_").replace("-", "_")}`;
    await admin.query(`create database ${name}`);
    urls[mode] = databaseUrl.replace(/\/[^/]*$/, `/${name}`);
  }
  await admin.end();
  const servers = {};
  for (const mode of ["without-events", "with-events"]) servers[mode] = await startServer(resources, mode, urls[mode]);
  // The baselines write the same tables of the same databases (the events table is only in the
  // with-events one): after the servers, which migrated them.
  // Shaped like startServer's (the baselines take no token).
  const baseline = async (kind, url) => {
    const { child, base } = await startBaseline(resources, kind, url);
    return { child, url: base, token: "baseline" };
  };
  servers.create = await baseline("create", urls["without-events"]);
  servers["create-event"] = await baseline("create-event", urls["with-events"]);
  const MODES = ["without-events", "with-events", "create", "create-event"];
  const rates = Object.fromEntries(MODES.map((m) => [m, []]));
  const ratios = [];
  const floors = [];
  try {
    // Creates under many parents: under one, every create waits for the one before it (the
    // parent's maintained child count is one row), which measures that lock, not the outbox.
    const measure = async (mode, parents = PARENTS) => {
      const s = servers[mode];
      const orgs = [];
      for (let p = 0; p < parents; p++)
        orgs.push(await api(s, "POST", "/iam/v2beta1/groups", { name: `rate-${randomBytes(3).toString("hex")}` }));
      let i = 0;
      const result = await autocannon({
        url: `${s.url}/iam/v2beta1/groups/${orgs[0].uid}`,
        method: "POST",
        connections: 32,
        duration: seconds,
        headers: { authorization: `Bearer ${s.token}`, "content-type": "application/json" },
        requests: [
          {
            setupRequest: (req) => {
              const n = i++;
              return {
                ...req,
                path: `/iam/v2beta1/groups/${orgs[n % parents].uid}`,
                body: JSON.stringify({ name: `c-${n}` }),
              };
            },
          },
        ],
      });
      if (result.non2xx > 0) throw new Error(`${mode}: ${result.non2xx} creates failed`);
      return result.requests.average;
    };
    // An unmeasured round first: every server's JIT and pools warm.
    for (const mode of MODES) await measure(mode);
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? [...MODES].reverse() : MODES;
      const got = {};
      for (const mode of order) got[mode] = await measure(mode);
      for (const mode of order) rates[mode].push(got[mode]);
      ratios.push(got["with-events"] / got["without-events"]);
      floors.push(got["create-event"] / got.create);
    }
  } finally {
    for (const s of Object.values(servers)) await stop(s.child);
  }
  const ratio = median(ratios);
  const perRound = ratios.map((r) => r.toFixed(2)).join(", ");
  rows.push(
    `| PostgreSQL | group creates/s under ${PARENTS} parent(s), no events module (baseline), median of ${ROUNDS} rounds | ${Math.round(median(rates["without-events"])).toLocaleString("en")}/s | |`,
  );
  rows.push(
    `| PostgreSQL | group creates/s under ${PARENTS} parent(s) with the outbox, median of ${ROUNDS} rounds | ${Math.round(median(rates["with-events"])).toLocaleString("en")}/s | ${ratio.toFixed(2)}× baseline (median of the rounds' ratios: ${perRound}); goal ≥ 0.90×: ${ratio >= 0.9 ? "met" : "not met"} |`,
  );
  const floor = median(floors);
  rows.push(
    `| PostgreSQL | Fastify + pg: the create in a transaction, without / with one more insert (its event), median of ${ROUNDS} rounds | ${Math.round(median(rates.create)).toLocaleString("en")}/s / ${Math.round(median(rates["create-event"])).toLocaleString("en")}/s | ${floor.toFixed(2)}× (rounds: ${floors.map((r) => r.toFixed(2)).join(", ")}): the floor of an outbox written as one more statement; the outbox above is ${(ratio / floor).toFixed(2)}× of it |`,
  );
}

export async function eventsBench({ seconds = Number(process.env.BENCH_SECONDS ?? 3) } = {}) {
  console.log("\n== events: delivery to local receivers and the outbox's cost, on PostgreSQL ==");
  const resources = new Resources();
  resources.install();
  const rows = [];
  try {
    // pg-temp.sh makes the directory itself (owned by the user PostgreSQL runs as).
    const databaseUrl = await resources.pgStart(
      join(tmpdir(), `bulwark-events-bench-${randomBytes(4).toString("hex")}`),
    );
    if (DELIVERY) await deliveryRows(resources, databaseUrl, rows);
    await outboxRows(resources, databaseUrl, seconds, rows);
  } catch (err) {
    console.log(`events bench failed: ${err.stack ?? err}`);
    process.exitCode = 1;
  } finally {
    console.log("\n| backend | row | measured | vs goal |\n|---|---|---|---|");
    for (const r of rows) console.log(r);
    await resources.cleanup();
    resources.uninstall();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await eventsBench();
