#!/usr/bin/env node
// Load generator for bench/registry.mjs, in its own process so that it never shares an event loop
// with the registry under test. Argument: one JSON job; prints one JSON result line.
// Bodies are read and discarded with node:http (only their length is counted, and the first 500
// bytes of an error): a client that keeps or concatenates what it reads caps the blob rows itself.
// With `cannon: true` ("get" and "manifest" jobs) the requests come from autocannon instead, which
// parses responses without keeping bodies and costs far less per request than node:http's client
// (one node:http process tops out near 3,000 small requests/s, below what both registries serve):
// the small-body rows use it, the blob rows keep node:http.
//   job = { kind: "get", url, headers }
//       | { kind: "upload", base, name, size, headers, mode: "post-put" | "monolithic" | "chunked", chunk }
//       | { kind: "manifest", url, headers, body, tagPrefix }  (PUT <url><tagPrefix><n>; every "__N__"
//         in body is replaced by a value unique to this push, so the manifest is new each time)
//   and in all: cannon (see above), seconds, warmup, concurrency, pid (the server's: its CPU time over the measured
//   seconds is reported, and this process's own), ticks (clock ticks per second of /proc/<pid>/stat)
import http from "node:http";
import { readFileSync } from "node:fs";
import { createHash, randomBytes } from "node:crypto";
import { createRequire } from "node:module";

const job = JSON.parse(process.argv[2]);
const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
const nonce = randomBytes(4).toString("hex");
let counter = 0;

/** One request; resolves with the status, headers and number of body bytes read (the body is discarded). */
function send(url, method, headers, chunks = []) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers }, (res) => {
      let bytes = 0;
      let text = "";
      res.on("data", (chunk) => {
        bytes += chunk.length;
        if (res.statusCode >= 300 && text.length < 500) text += chunk; // keep an error body for the report
      });
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, bytes, text }));
      res.on("error", reject);
    });
    req.on("error", reject);
    for (const chunk of chunks.slice(0, -1)) req.write(chunk);
    req.end(chunks.at(-1));
  });
}

class Failure extends Error {}
const expect = (res, status, what) => {
  if (res.status !== status) throw new Failure(`${what}: ${res.status} ${res.text.slice(0, 300)}`);
  return res;
};

// Fresh content per upload without hashing it all each time: every blob is one random prefix plus
// a unique 16-byte tail, so the digest is a copy of the prefix's hash state fed only the tail.
let prepared;
function freshBlob(size) {
  if (!prepared) {
    const prefix = randomBytes(size - 16);
    prepared = { prefix, hash: createHash("sha256").update(prefix), nonce: randomBytes(8), counter: 0n };
  }
  const tail = Buffer.alloc(16);
  prepared.nonce.copy(tail, 0);
  tail.writeBigUInt64BE(prepared.counter++, 8);
  const digest = `sha256:${prepared.hash.copy().update(tail).digest("hex")}`;
  return { chunks: [prepared.prefix, tail], digest };
}

/** The blob's bytes [start, end) as buffers (views of the prefix and the tail). */
function slice(chunks, start, end) {
  const out = [];
  let at = 0;
  for (const c of chunks) {
    const from = Math.max(start, at);
    const to = Math.min(end, at + c.length);
    if (from < to) out.push(c.subarray(from - at, to - at));
    at += c.length;
  }
  return out;
}

async function upload() {
  const { chunks, digest } = freshBlob(job.size);
  const uploads = `${job.base}/v2/${job.name}/blobs/uploads/`;
  const octets = { ...job.headers, "content-type": "application/octet-stream" };
  if (job.mode === "monolithic") {
    const res = await send(`${uploads}?digest=${digest}`, "POST", { ...octets, "content-length": job.size }, chunks);
    expect(res, 201, "POST ?digest=");
    return job.size;
  }
  const started = expect(await send(uploads, "POST", { ...job.headers, "content-length": 0 }), 202, "POST");
  let location = new URL(started.headers.location, job.base);
  if (job.mode === "chunked") {
    // Each PATCH carries its Content-Range (OCI: "<start>-<end>", inclusive) and goes to the
    // Location the previous answer gave (distribution's carries a signed state that changes).
    for (let start = 0; start < job.size; start += job.chunk) {
      const end = Math.min(job.size, start + job.chunk);
      const res = await send(
        location,
        "PATCH",
        { ...octets, "content-length": end - start, "content-range": `${start}-${end - 1}` },
        slice(chunks, start, end),
      );
      expect(res, 202, `PATCH ${start}-${end - 1}`);
      location = new URL(res.headers.location, job.base);
    }
    location.searchParams.set("digest", digest);
    expect(await send(location, "PUT", { ...job.headers, "content-length": 0 }), 201, "PUT ?digest= (no body)");
    return job.size;
  }
  location.searchParams.set("digest", digest);
  expect(await send(location, "PUT", { ...octets, "content-length": job.size }, chunks), 201, "PUT ?digest=");
  return job.size;
}

async function pushManifest() {
  const n = `${nonce}-${counter++}`;
  const body = Buffer.from(job.body.replaceAll("__N__", n));
  const headers = { ...job.headers, "content-length": body.length };
  expect(await send(`${job.url}${job.tagPrefix}${n}`, "PUT", headers, [body]), 201, "PUT manifest");
  return body.length;
}

async function once() {
  if (job.kind === "get") return expect(await send(job.url, "GET", job.headers), 200, `GET ${job.url}`).bytes;
  if (job.kind === "manifest") return pushManifest();
  return upload();
}

/** The server's user + system CPU time in ms (NaN without /proc). */
function cpuMs() {
  try {
    const stat = readFileSync(`/proc/${job.pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // fields from the 3rd on
    return ((Number(f[11]) + Number(f[12])) * 1000) / (job.ticks || 100);
  } catch {
    return NaN;
  }
}

/** `concurrency` loops until `seconds` pass; completions, bytes, latencies, errors and server CPU. */
async function run(seconds) {
  const latencies = [];
  let bytes = 0;
  let errors = 0;
  let firstError;
  const cpuBefore = cpuMs();
  const ownBefore = process.cpuUsage();
  const start = performance.now();
  const deadline = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: job.concurrency }, async () => {
      while (performance.now() < deadline) {
        const t = performance.now();
        try {
          const n = await once(); // not `bytes += await once()`: that reads `bytes` before awaiting
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
  const cpu = cpuMs() - cpuBefore;
  const loadCpu = ownCpuMs(ownBefore);
  return resultOf({ latencies, elapsed, bytes, errors, firstError, cpuMs: cpu, loadCpuMs: loadCpu });
}

/** A run's result line: completions, bytes, errors, latency percentiles (ms) and both CPU times. */
function resultOf({ latencies, elapsed, bytes, errors, firstError, cpuMs, loadCpuMs }) {
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((latencies.length * p) / 100))] ?? NaN;
  return { done: latencies.length, elapsed, bytes, errors, firstError, p50: pct(50), p99: pct(99), cpuMs, loadCpuMs };
}

/** This process's own user + system CPU time in ms since `before` (the load generator's cost). */
function ownCpuMs(before) {
  const { user, system } = process.cpuUsage(before);
  return (user + system) / 1000;
}

/**
 * The same measurement with autocannon: one run of warmup + seconds over the same connections, of
 * which only the responses completed after the warm-up count (a separate warm-up run would leave
 * its last requests queued in the server when the measured one starts). A "manifest" job's path and
 * body get a new value per request. Bodies are not kept: a failure's body is fetched once more
 * with node:http after the run.
 */
async function cannon() {
  const autocannon = createRequire(import.meta.url)("autocannon");
  const url = new URL(job.url);
  const request =
    job.kind === "manifest"
      ? {
          method: "PUT",
          setupRequest(req) {
            const n = `${nonce}-${counter++}`;
            return { ...req, path: `${url.pathname}${job.tagPrefix}${n}`, body: job.body.replaceAll("__N__", n) };
          },
        }
      : { method: "GET", path: url.pathname + url.search };
  const latencies = [];
  let bytes = 0;
  let bad = 0;
  let badStatus;
  let measuring = !(job.warmup > 0);
  let cpuBefore = cpuMs();
  let ownBefore = process.cpuUsage();
  let start = performance.now();
  const timer = setTimeout(() => {
    measuring = true;
    cpuBefore = cpuMs();
    ownBefore = process.cpuUsage();
    start = performance.now();
  }, job.warmup * 1000);
  const result = await new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: url.origin,
        headers: job.headers,
        requests: [request],
        connections: job.concurrency,
        pipelining: 1,
        timeout: 30,
        duration: job.warmup + job.seconds,
        sampleInt: 100, // it stops at the first sample tick after `duration`
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    instance.on("response", (_client, status, resBytes, responseTime) => {
      if (status < 200 || status >= 300) {
        bad++; // in the warm-up too: any failure fails the row
        badStatus ??= status;
      } else if (measuring) {
        bytes += resBytes;
        latencies.push(responseTime);
      }
    });
  });
  clearTimeout(timer);
  const elapsed = (performance.now() - start) / 1000;
  const cpu = cpuMs() - cpuBefore;
  const loadCpu = ownCpuMs(ownBefore);
  const errors = bad + result.errors;
  let firstError;
  if (errors) {
    firstError = `${bad} non-2xx (first ${badStatus ?? "—"}), ${result.errors} errors (${result.timeouts} timeouts)`;
    if (job.kind === "get") {
      const again = await send(job.url, "GET", job.headers).catch((err) => ({ status: 0, text: err.message }));
      if (again.status !== 200) firstError += `; one after the run: ${again.status} ${again.text.slice(0, 300)}`;
    }
  }
  return resultOf({ latencies, elapsed, bytes, errors, firstError, cpuMs: cpu, loadCpuMs: loadCpu });
}

let result;
if (job.cannon) result = await cannon();
else {
  let warm = { errors: 0 };
  if (job.warmup > 0) warm = await run(job.warmup);
  result = await run(job.seconds);
  // A failure during the warm-up fails the row too.
  if (warm.errors) Object.assign(result, { errors: result.errors + warm.errors, firstError: warm.firstError });
}
process.stdout.write(JSON.stringify(result) + "\n");
agent.destroy();
