#!/usr/bin/env node
// Load generator for bench/registry.mjs, in its own process so that it never shares an event loop
// with the registry under test. Argument: one JSON job; prints one JSON result line.
//   job = { kind: "get", url, headers, seconds, warmup, concurrency }
//       | { kind: "upload", base, name, size, headers, mode: "post-put" | "monolithic", seconds, warmup, concurrency }
import http from "node:http";
import { createHash, randomBytes } from "node:crypto";

const job = JSON.parse(process.argv[2]);
const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });

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

async function once() {
  if (job.kind === "get") return expect(await send(job.url, "GET", job.headers), 200, `GET ${job.url}`).bytes;
  const { chunks, digest } = freshBlob(job.size);
  const uploads = `${job.base}/v2/${job.name}/blobs/uploads/`;
  const bodyHeaders = { ...job.headers, "content-type": "application/octet-stream", "content-length": job.size };
  if (job.mode === "monolithic") {
    expect(await send(`${uploads}?digest=${digest}`, "POST", bodyHeaders, chunks), 201, "POST ?digest=");
    return job.size;
  }
  const started = expect(await send(uploads, "POST", { ...job.headers, "content-length": 0 }), 202, "POST");
  const location = new URL(started.headers.location, job.base);
  location.searchParams.set("digest", digest);
  expect(await send(location, "PUT", bodyHeaders, chunks), 201, "PUT ?digest=");
  return job.size;
}

/** `concurrency` loops until `seconds` pass; completions, bytes, latencies and errors. */
async function run(seconds) {
  const latencies = [];
  let bytes = 0;
  let errors = 0;
  let firstError;
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
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((latencies.length * p) / 100))] ?? NaN;
  return { done: latencies.length, elapsed, bytes, errors, firstError, p50: pct(50), p99: pct(99) };
}

if (job.warmup > 0) await run(job.warmup);
process.stdout.write(JSON.stringify(await run(job.seconds)) + "\n");
agent.destroy();
