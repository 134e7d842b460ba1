#!/usr/bin/env node
// Load generator for bench/advisories.mjs, in its own process so that it never shares an event
// loop with the server under test. Argument: one JSON job; prints one JSON result line.
//   job = { kind: "http", url, method?, headers?, body?, seconds, warmup, concurrency, runs?, maxSeconds? }
//       | { kind: "sql", url, statements: [{ text, values }], poolSize, seconds, warmup, concurrency }
// "http": each request must answer 200. With `runs`, exactly that many requests (one warm-up
// first, unmeasured), stopping early after `maxSeconds`; else as many as fit in `seconds`.
// "sql": one operation = the statements run at once on a pg pool (as the server's list engine
// runs a page and its count), against the database directly.
import http from "node:http";

const job = JSON.parse(process.argv[2]);

class Failure extends Error {}

let once;
let close = async () => {};
if (job.kind === "http") {
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const body = job.body === undefined ? undefined : Buffer.from(job.body);
  const headers = {
    ...job.headers,
    ...(body ? { "content-type": "application/json", "content-length": body.length } : {}),
  };
  once = () =>
    new Promise((resolve, reject) => {
      const req = http.request(job.url, { method: job.method ?? "GET", agent, headers }, (res) => {
        let bytes = 0;
        let text = "";
        res.on("data", (chunk) => {
          bytes += chunk.length;
          if (res.statusCode !== 200 && text.length < 500) text += chunk; // an error body for the report
        });
        res.on("end", () =>
          res.statusCode === 200 ? resolve(bytes) : reject(new Failure(`${res.statusCode} ${text.slice(0, 300)}`)),
        );
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  close = async () => agent.destroy();
} else if (job.kind === "sql") {
  const { default: pg } = await import("pg");
  const pool = new pg.Pool({ connectionString: job.url, max: job.poolSize });
  once = async () => {
    const results = await Promise.all(job.statements.map((s) => pool.query(s.text, s.values)));
    return results.reduce((n, r) => n + r.rowCount, 0);
  };
  close = () => pool.end();
} else throw new Error(`unknown job kind ${job.kind}`);

/** `concurrency` loops until `seconds` pass (or `runs` complete); completions, latencies and errors. */
async function run(seconds, runs) {
  const latencies = [];
  let bytes = 0;
  let errors = 0;
  let firstError;
  let started = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const more = () => performance.now() < deadline && (runs === undefined || started < runs);
  await Promise.all(
    Array.from({ length: job.concurrency }, async () => {
      while (more()) {
        started++;
        const t = performance.now();
        try {
          const n = await once();
          bytes += n;
          latencies.push(performance.now() - t);
        } catch (err) {
          errors++;
          firstError ??= err.message;
          if (!(err instanceof Failure)) await new Promise((r) => setTimeout(r, 10)); // connection trouble: back off
        }
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((latencies.length * p) / 100))] ?? NaN;
  return {
    done: latencies.length,
    elapsed,
    bytes,
    errors,
    firstError,
    p50: pct(50),
    p99: pct(99),
    max: latencies.at(-1),
  };
}

let result;
if (job.runs !== undefined) {
  await run(Infinity, 1); // one unmeasured request
  result = await run(job.maxSeconds ?? Infinity, job.runs);
} else {
  if (job.warmup > 0) await run(job.warmup);
  result = await run(job.seconds);
}
process.stdout.write(JSON.stringify(result) + "\n");
await close();
