#!/usr/bin/env node
// Load generator for bench/api.mjs, one process per row so that it never shares an event loop
// with the server under test (or with the bench's own bookkeeping). Argument: one JSON job;
// prints one JSON result line on stdout. Exit code 0 whenever a result was printed: failures are
// in the result (`failed`, `non2xx`, `errors`, `firstError`) and the caller fails the row loudly.
//
//   { mode: "http", url, method?, headers?, body?, connections, seconds, warmup }
//     autocannon 9 for `warmup` + `seconds` on the same connections, measuring the last `seconds`. One request first,
//     through node:http: anything but 200 fails the row at once, with the answer's body.
//     -> { rps, requests, p50, p99, mean, non2xx, errors, timeouts, statusCodes, firstError, elapsed }
//   { mode: "sequence", headers?, ops: [{ name, url, follow?, itemsField?, expect? }], runs, warmupRuns, maxSeconds? }
//     One keep-alive connection. One operation = GET url, then, with `follow`, GET url&page_token=
//     <nextPageToken of the previous answer> until there is none. The ops run in turn (a, b, a, b, …)
//     so that drift hits them alike; `warmupRuns` rounds unmeasured first, then `runs` rounds (fewer
//     when `maxSeconds` runs out). Every answer must be 200; `expect` checks the last operation's
//     { items, pages, totalCount, nextPageToken: "empty"|"present" }.
//     -> { ops: { [name]: { runs, p50, p99, mean, min, max, items, pages, totalCount } }, failed?, firstError? }
// Latencies are in ms (floating point: autocannon's own histogram has 1 ms resolution, so the
// response events are recorded here instead).
import http from "node:http";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const job = JSON.parse(process.argv[2]);

function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((sorted.length * p) / 100) - 1))];
}

function stats(latencies) {
  const sorted = Float64Array.from(latencies).sort();
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean: sorted.length ? sum / sorted.length : NaN,
    min: sorted[0] ?? NaN,
    max: sorted.at(-1) ?? NaN,
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** One request through node:http: status, body text, ms. */
function request(url, { method = "GET", headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const data = body === undefined ? undefined : Buffer.from(body);
    const req = http.request(
      url,
      {
        method,
        agent,
        headers: { ...headers, ...(data ? { "content-type": "application/json", "content-length": data.length } : {}) },
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString(), ms: performance.now() - t }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

const short = (text) => text.replace(/\s+/g, " ").slice(0, 400);

async function httpJob() {
  const autocannon = require("autocannon");
  const { url, method = "GET", headers = {}, body, connections, seconds, warmup = 0 } = job;
  const first = await request(url, { method, headers, body });
  if (first.status !== 200)
    return { failed: true, firstError: `${first.status} ${short(first.text)}`, statusCodes: { [first.status]: 1 } };
  agent.destroy();

  const options = {
    url,
    method,
    headers: { ...headers, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    body,
    connections,
    pipelining: 1,
    timeout: 30,
    // autocannon stops at the first sample tick after `duration`: ticks of 100 ms, not 1 s
    sampleInt: 100,
  };
  // One autocannon run of warmup + seconds over the same connections: only the responses that
  // complete after the warm-up count (a separate warm-up run would leave its last requests still
  // queued in the server when the measured run starts).
  const { result, latencies, ok, elapsed } = await new Promise((resolve, reject) => {
    const latencies = [];
    let ok = 0;
    let measuring = warmup <= 0;
    let start = performance.now();
    const timer = setTimeout(() => {
      measuring = true;
      start = performance.now();
    }, warmup * 1000);
    const instance = autocannon({ ...options, duration: warmup + seconds }, (err, result) => {
      clearTimeout(timer);
      if (err) reject(err);
      else resolve({ result, latencies, ok, elapsed: (performance.now() - start) / 1000 });
    });
    instance.on("response", (_client, statusCode, _bytes, responseTime) => {
      if (measuring && statusCode >= 200 && statusCode < 300) {
        ok++;
        latencies.push(responseTime);
      }
    });
  });
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([k, v]) => [k, v.count]));
  const out = {
    rps: ok / elapsed,
    requests: ok,
    elapsed,
    ...stats(latencies),
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
  };
  if (result.non2xx || result.errors) {
    // autocannon keeps no bodies (keeping them all would cost the generator): up to 50 requests
    // more, one at a time, for the body of a failure.
    let example = "not reproduced by 50 sequential requests after the run";
    for (let i = 0; i < 50; i++) {
      const again = await request(url, { method, headers, body }).catch((err) => ({ status: 0, text: err.message }));
      if (again.status !== 200) {
        example = `one after the run: ${again.status} ${short(again.text)}`;
        break;
      }
    }
    const bad = Object.keys(statusCodes).filter((c) => !c.startsWith("2"));
    out.firstError = `${result.non2xx} non-2xx (${bad.join(", ") || "—"}), ${result.errors} errors (${result.timeouts} timeouts); ${example}`;
  }
  return out;
}

async function sequenceJob() {
  const { headers = {}, ops, runs, warmupRuns = 0, maxSeconds = Infinity } = job;
  async function operation(op) {
    const t = performance.now();
    let items = 0;
    let pages = 0;
    let token = "";
    let page;
    do {
      const sep = op.url.includes("?") ? "&" : "?";
      const url = token ? `${op.url}${sep}page_token=${encodeURIComponent(token)}` : op.url;
      const res = await request(url, { headers });
      if (res.status !== 200) throw new Error(`${op.name}: GET ${url} → ${res.status} ${short(res.text)}`);
      page = JSON.parse(res.text);
      pages++;
      if (op.itemsField) items += page[op.itemsField]?.length ?? 0;
      token = op.follow ? (page.nextPageToken ?? "") : "";
      if (pages > 100_000) throw new Error(`${op.name}: more than 100,000 pages`);
    } while (token);
    return {
      ms: performance.now() - t,
      items,
      pages,
      totalCount: page.totalCount,
      nextPageToken: page.nextPageToken ? "present" : "empty",
    };
  }
  const latencies = Object.fromEntries(ops.map((op) => [op.name, []]));
  const last = {};
  try {
    for (let i = 0; i < warmupRuns; i++) for (const op of ops) last[op.name] = await operation(op);
    const deadline = performance.now() + maxSeconds * 1000;
    for (let i = 0; i < runs && (i < 3 || performance.now() < deadline); i++)
      for (const op of ops) {
        last[op.name] = await operation(op);
        latencies[op.name].push(last[op.name].ms);
      }
    for (const op of ops) {
      const got = last[op.name];
      for (const [k, want] of Object.entries(op.expect ?? {}))
        if (String(got[k]) !== String(want))
          throw new Error(`${op.name}: expected ${k} = ${want}, got ${got[k]} (${op.url})`);
    }
  } catch (err) {
    return { failed: true, firstError: err.message };
  }
  return {
    ops: Object.fromEntries(
      ops.map((op) => {
        const { ms, ...rest } = last[op.name];
        return [op.name, { runs: latencies[op.name].length, ...stats(latencies[op.name]), ...rest }];
      }),
    ),
  };
}

let result;
try {
  if (job.mode === "http") result = await httpJob();
  else if (job.mode === "sequence") result = await sequenceJob();
  else throw new Error(`unknown mode ${job.mode}`);
} catch (err) {
  result = { failed: true, firstError: `load generator: ${err.stack ?? err}` };
}
agent.destroy();
process.stdout.write(JSON.stringify(result) + "\n");
process.exit(0);
