#!/usr/bin/env node
// What tracing costs (not a timed test): an authenticated GET (GetGroup over REST) with autocannon
// against `bulwark serve` on PGlite
//   - unset:    this build, no OTEL_* variable (the default: no provider, no hook)
//   - traced:   this build, OTEL_EXPORTER_OTLP_ENDPOINT at a local sink that accepts and discards
//               (every request a sampled root: the worst case)
//   - traced10: the same with OTEL_TRACES_SAMPLER=traceidratio, OTEL_TRACES_SAMPLER_ARG=0.1
//   - before:   (BENCH_BEFORE_BIN, a bin/bulwark.js of the code before tracing, e.g. main built in
//               a temporary directory) the same GET with no OTEL_* variable: "no cost when unset"
// each in BENCH_ROUNDS interleaved rounds of BENCH_SECONDS (after a warm-up), every figure reported
// as the median round and as a ratio to `unset` from the same run.
// Run after `npm run build`: `node bench/tracing.mjs`.
import http from "node:http";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { Resources, adminToken, json, send, startBulwark } from "./lib.mjs";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONCURRENCY ?? 32);
const BEFORE_BIN = process.env.BENCH_BEFORE_BIN;

/** An OTLP/HTTP sink that reads each export and answers 200 (a collector that keeps nothing). */
async function startSink() {
  const sink = { requests: 0, bytes: 0 };
  const server = http.createServer((req, res) => {
    req.on("data", (c) => (sink.bytes += c.length));
    req.on("end", () => {
      sink.requests++;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  sink.endpoint = `http://127.0.0.1:${server.address().port}`;
  sink.close = () => new Promise((resolve) => server.close(resolve));
  return sink;
}

/** No OTEL_* of the caller's reaches a server: each mode says exactly what it sets. */
function withoutOtel(extra) {
  const env = {};
  for (const k of Object.keys(process.env)) if (k.startsWith("OTEL_")) env[k] = undefined;
  return { ...env, ...extra };
}

async function main() {
  const resources = new Resources();
  resources.install();
  const sink = await startSink();
  try {
    const modes = [
      { name: "unset", env: withoutOtel({}) },
      { name: "traced", env: withoutOtel({ OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint }) },
      {
        name: "traced10",
        env: withoutOtel({
          OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
          OTEL_TRACES_SAMPLER: "traceidratio",
          OTEL_TRACES_SAMPLER_ARG: "0.1",
        }),
      },
      ...(BEFORE_BIN ? [{ name: "before", env: withoutOtel({}), bin: BEFORE_BIN }] : []),
    ];
    for (const mode of modes) {
      const dataDir = mkdtempSync(join(tmpdir(), `bulwark-bench-tracing-${mode.name}-`));
      resources.dirs.add(dataDir);
      mode.server = await startBulwark(resources, { label: mode.name, dataDir, env: mode.env, bin: mode.bin });
      mode.token = await adminToken(resources, mode.server);
      const group = json(
        await send(`${mode.server.base}/iam/v2beta1/groups`, {
          method: "POST",
          headers: { authorization: `Bearer ${mode.token}` },
          body: JSON.stringify({ name: `bench-${mode.name}` }),
        }),
        `${mode.name}: create group`,
      );
      mode.url = `${mode.server.base}/iam/v2beta1/groups/${group.uid}`;
      mode.rates = [];
    }
    const load = (mode, duration) =>
      autocannon({
        url: mode.url,
        connections: CONNECTIONS,
        duration,
        headers: { authorization: `Bearer ${mode.token}` },
      });
    for (const mode of modes) await load(mode, Math.max(WARMUP * 3, 2)); // JIT and caches warm
    for (let round = 0; round < ROUNDS; round++) {
      // Interleaved, the order turning each round: a busy moment of the machine is shared out.
      const order = modes.map((_, i) => modes[(i + round) % modes.length]);
      for (const mode of order) {
        await load(mode, WARMUP);
        const result = await load(mode, SECONDS);
        if (result.non2xx > 0) throw new Error(`${mode.name}: ${result.non2xx} answers were not 2xx`);
        mode.rates.push(result.requests.average);
      }
    }
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const unset = modes[0];
    console.log(`\nGetGroup over REST, PGlite, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s (median):`);
    console.log("| mode | req/s | ratio to unset (median of rounds) |");
    console.log("|---|---|---|");
    for (const mode of modes) {
      const ratios = mode.rates.map((r, i) => r / unset.rates[i]);
      console.log(`| ${mode.name} | ${Math.round(median(mode.rates))} | ${median(ratios).toFixed(3)} |`);
    }
    console.log(`sink: ${sink.requests} exports, ${(sink.bytes / 1e6).toFixed(1)} MB`);
  } finally {
    await resources.cleanup();
    resources.uninstall();
    await sink.close();
  }
}

await main();
