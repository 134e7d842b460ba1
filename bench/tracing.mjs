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
import { Resources, compareGetGroup } from "./lib.mjs";

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
    await compareGetGroup(resources, modes, { baseline: "unset", what: "tracing" });
    console.log(`sink: ${sink.requests} exports, ${(sink.bytes / 1e6).toFixed(1)} MB`);
  } finally {
    await resources.cleanup();
    resources.uninstall();
    await sink.close();
  }
}

await main();
