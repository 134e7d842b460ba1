#!/usr/bin/env node
// Events bench on PostgreSQL (a private cluster, scripts/pg-temp.sh): (1) events delivered per
// second to a local receiver: N group creates are recorded while the receiver answers 503 (so
// they queue behind the first), then it answers 204 and the time until the last arrives is
// measured, for one subscription and for four; (2) what the outbox costs a mutating RPC: group
// creates per second (32 connections) on a server with the events module against one without it,
// in the same run. Servers run from the sources (bench/events-server.ts, through tsx).
// `node bench/events.mjs` (BENCH_EVENTS=N events per row, default 2000; BENCH_SECONDS).
import http from "node:http";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { createInterface } from "node:readline";
import autocannon from "autocannon";
import pg from "pg";
import { Resources, ROOT, spawnTracked, stop } from "./lib.mjs";

const N = Number(process.env.BENCH_EVENTS ?? 2000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const resources = new Resources();
resources.install();

async function startServer(mode, databaseUrl) {
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

const randomKek = randomBytes(32).toString("hex");
// pg-temp.sh makes the directory itself (owned by the user PostgreSQL runs as).
const databaseUrl = await resources.pgStart(join(tmpdir(), `bulwark-events-bench-${randomBytes(4).toString("hex")}`));
const rows = [];
try {
  // (1) delivery throughput
  const server = await startServer("with-events", databaseUrl);
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
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
  await db.query("create database baseline");
  await db.end();
  const baselineUrl = databaseUrl.replace(/\/[^/]*$/, "/baseline");
  // (2) creates/s with and without the outbox
  const rates = {};
  for (const mode of ["without-events", "with-events", "without-events", "with-events"]) {
    // Without the events module its migration is not run: the baseline has a database of its own.
    const s = mode === "with-events" ? server : await startServer(mode, baselineUrl);
    const org = await api(s, "POST", "/iam/v2beta1/groups", { name: `rate-${mode}-${randomBytes(3).toString("hex")}` });
    let i = 0;
    const result = await autocannon({
      url: `${s.url}/iam/v2beta1/groups/${org.uid}`,
      method: "POST",
      connections: 32,
      duration: SECONDS,
      headers: { authorization: `Bearer ${s.token}`, "content-type": "application/json" },
      requests: [{ setupRequest: (req) => ({ ...req, body: JSON.stringify({ name: `c-${i++}` }) }) }],
    });
    (rates[mode] ??= []).push(result.requests.average);
    if (s !== server) await stop(s.child);
  }
  const best = (m) => Math.max(...rates[m]);
  const ratio = best("with-events") / best("without-events");
  rows.push(
    `| PostgreSQL | group creates/s, no events module (baseline) | ${Math.round(best("without-events")).toLocaleString("en")}/s | |`,
  );
  rows.push(
    `| PostgreSQL | group creates/s with the outbox | ${Math.round(best("with-events")).toLocaleString("en")}/s | ${ratio.toFixed(2)}× baseline; goal ≥ 0.90×: ${ratio >= 0.9 ? "met" : "not met"} |`,
  );
  await stop(server.child);
} finally {
  console.log("\n| backend | row | measured | vs goal |\n|---|---|---|---|");
  for (const r of rows) console.log(r);
  await resources.cleanup();
  resources.uninstall();
}
