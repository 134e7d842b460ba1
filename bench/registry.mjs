#!/usr/bin/env node
// The registry part of `npm run bench` (also runnable alone: `node bench/registry.mjs` after a build).
// Baseline: CNCF distribution 2.8 (Debian's docker-registry) on loopback with filesystem storage,
// measured in the same run under the same load. Both registries run as child processes and the load
// comes from a third (bench/registry-load.mjs), so no two of them share an event loop; all three
// still share the machine's cores, so the ratios are indicative, not absolute.
// Env: BENCH_REGISTRY=0 skips; BENCH_SECONDS, BENCH_CONCURRENCY as for run.mjs; BENCH_WARMUP_SECONDS
// (default 1); BENCH_BIG_BLOB_MIB (default 1024, 0 skips the RSS test); DOCKER_REGISTRY (binary path).
import http from "node:http";
import net from "node:net";
import { spawn, execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

const HERE = fileURLToPath(new URL(".", import.meta.url));
const BULWARK = join(HERE, "..", "bin", "bulwark.js");
const LOAD = join(HERE, "registry-load.mjs");
const DOCKER_REGISTRY = process.env.DOCKER_REGISTRY ?? "/usr/bin/docker-registry";
const MiB = 1 << 20;
const NAME = "bench/app";
const TAGS = 10_000; // in all, `latest` included: one full tags/list page on both registries
const TAG_CONCURRENCY = 16;
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";

const agent = new http.Agent({ keepAlive: true, maxSockets: TAG_CONCURRENCY });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A request from this process (setup and the RSS test); the body is kept. */
function send(url, { method = "GET", headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

function expect(res, status, what) {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${res.body.toString().slice(0, 300)}`);
  return res;
}

async function freePort() {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  return port;
}

async function waitFor(what, child, probe, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode}): ${child.stderrTail()}`);
    const ok = await probe().catch(() => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready after ${timeoutMs} ms: ${child.stderrTail()}`);
    await sleep(100);
  }
}

/** A child process whose last few KB of stderr are kept for error messages. */
function start(command, args) {
  const child = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] });
  let tail = "";
  child.stderr.on("data", (c) => (tail = (tail + c).slice(-4000)));
  child.stderrTail = () => tail.trim();
  return child;
}

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

async function startDistribution(dir) {
  const port = await freePort();
  await mkdir(dir, { recursive: true });
  const config = join(dir, "config.yml");
  // Access logs off: ours logs at error level only, so neither pays for per-request log lines.
  await writeFile(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: error",
      "  accesslog:",
      "    disabled: true",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${join(dir, "storage")}`,
      "  delete:",
      "    enabled: true",
      "http:",
      `  addr: 127.0.0.1:${port}`,
      "",
    ].join("\n"),
  );
  const child = start(DOCKER_REGISTRY, ["serve", config]);
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitFor("docker-registry", child, async () => (await send(`${base}/v2/`)).status === 200, 15_000);
  } catch (err) {
    await stop(child);
    throw err;
  }
  const version = (await promisify(execFile)(DOCKER_REGISTRY, ["--version"])).stdout.trim().split(" ").at(-1);
  return { label: "distribution", title: `distribution ${version}`, base, child, auth: {} };
}

async function startBulwark(dir) {
  const port = await freePort();
  const dataDir = join(dir, "data");
  const child = start(process.execPath, [
    BULWARK,
    "serve",
    "--data-dir",
    dataDir,
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--no-rate-limit",
    "--log-level",
    "error",
  ]);
  const base = `http://127.0.0.1:${port}`;
  const reg = { label: "bulwark", title: "bulwark", base, child, auth: {} };
  try {
    await waitFor("bulwark", child, async () => (await send(`${base}/healthz`)).status === 200, 60_000);
    const v2 = await send(`${base}/v2/`);
    if (v2.status !== 401 || !v2.headers["www-authenticate"])
      throw new Error(`/v2/ is not a registry yet: ${v2.status} ${v2.body.toString().slice(0, 200)}`);
    const token = async (...extra) =>
      (
        await promisify(execFile)(process.execPath, [
          BULWARK,
          "admin",
          "token",
          "--data-dir",
          dataDir,
          "--host",
          "127.0.0.1",
          "--port",
          String(port),
          ...extra,
        ])
      ).stdout.trim();
    const api = await token();
    expect(
      await send(`${base}/iam/v2beta1/groups`, {
        method: "POST",
        headers: { authorization: `Bearer ${api}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "bench" }),
      }),
      200,
      "create org",
    );
    reg.registryToken = await token("--audience", `127.0.0.1:${port}`);
    reg.service = `127.0.0.1:${port}`;
    reg.auth = { authorization: `Bearer ${reg.registryToken}` };
    return reg;
  } catch (err) {
    await stop(child);
    throw err;
  }
}

/** Monolithic in two requests (POST, then PUT ?digest= with the body): the flow both registries support. */
async function pushBlob(reg, bytes) {
  const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
  const started = expect(
    await send(`${reg.base}/v2/${NAME}/blobs/uploads/`, { method: "POST", headers: reg.auth }),
    202,
    "POST upload",
  );
  const location = new URL(started.headers.location, reg.base);
  location.searchParams.set("digest", digest);
  expect(
    await send(location, {
      method: "PUT",
      headers: { ...reg.auth, "content-type": "application/octet-stream" },
      body: bytes,
    }),
    201,
    "PUT upload",
  );
  return { digest, size: bytes.length };
}

async function setup(reg, blobs) {
  const config = await pushBlob(reg, blobs.config);
  const layers = [await pushBlob(reg, blobs.small), await pushBlob(reg, blobs.large)];
  reg.blobs = { small: layers[0].digest, large: layers[1].digest };
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
    layers: layers.map((l) => ({ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", ...l })),
  });
  const put = async (tag) =>
    expect(
      await send(`${reg.base}/v2/${NAME}/manifests/${tag}`, {
        method: "PUT",
        headers: { ...reg.auth, "content-type": OCI_MANIFEST },
        body: manifest,
      }),
      201,
      `PUT manifest ${tag}`,
    );
  await put("latest");
  const t = performance.now();
  let next = 1;
  await Promise.all(
    Array.from({ length: TAG_CONCURRENCY }, async () => {
      while (next < TAGS) await put(`t${String(next++).padStart(5, "0")}`);
    }),
  );
  reg.tagSeconds = (performance.now() - t) / 1000;
  // What each tags/list workload returns, so the table can say when the two differ.
  const count = async (query) =>
    JSON.parse(
      expect(await send(`${reg.base}/v2/${NAME}/tags/list${query}`, { headers: reg.auth }), 200, "tags/list").body,
    ).tags.length;
  reg.tagCounts = { all: await count(""), page: await count("?n=100") };
}

/** Runs one workload in a separate process; its result as printed by registry-load.mjs. */
async function load(job) {
  const child = spawn(process.execPath, [LOAD, JSON.stringify(job)], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (c) => (out += c));
  child.stderr.on("data", (c) => (err += c));
  const [code] = await once(child, "exit");
  if (code !== 0) throw new Error(`load generator exited ${code}: ${err.slice(-2000)}`);
  return JSON.parse(out.trim().split("\n").at(-1));
}

function rssKiB(pid) {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : NaN;
}

/** The share of all cores busy over one second (the load average would still count run.mjs's rows). */
export async function cpuBusy() {
  const read = () => {
    const [, ...t] = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).map(Number);
    return { idle: t[3] + t[4], total: t.reduce((a, b) => a + b, 0) };
  };
  const a = read();
  await sleep(1000);
  const b = read();
  return 1 - (b.idle - a.idle) / (b.total - a.total);
}

/** Samples a process's RSS every 100 ms; `done()` gives the value at start and the peak. */
function sampleRss(pid) {
  const before = rssKiB(pid);
  let peak = before;
  const timer = setInterval(() => (peak = Math.max(peak, rssKiB(pid))), 100);
  return () => {
    clearInterval(timer);
    peak = Math.max(peak, rssKiB(pid));
    return { before, peak };
  };
}

/** Pushes a `mib` MiB blob in one streamed PATCH, then GETs it, sampling the server's RSS during each. */
async function bigBlob(reg, mib) {
  const chunk = randomBytes(MiB);
  const pid = reg.child.pid;
  const up = sampleRss(pid);
  let t = performance.now();
  const started = expect(
    await send(`${reg.base}/v2/${NAME}/blobs/uploads/`, { method: "POST", headers: reg.auth }),
    202,
    "POST upload",
  );
  const hash = createHash("sha256");
  const patched = await new Promise((resolve, reject) => {
    const req = http.request(new URL(started.headers.location, reg.base), {
      method: "PATCH",
      agent,
      headers: { ...reg.auth, "content-type": "application/octet-stream" }, // no length: chunked
    });
    req.on("response", (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on("error", reject);
    (async () => {
      for (let i = 0; i < mib; i++) {
        hash.update(chunk);
        if (!req.write(chunk)) await once(req, "drain");
      }
      req.end();
    })().catch(reject);
  });
  expect(patched, 202, "PATCH upload");
  const digest = `sha256:${hash.digest("hex")}`;
  const location = new URL(patched.headers.location ?? started.headers.location, reg.base);
  location.searchParams.set("digest", digest);
  expect(await send(location, { method: "PUT", headers: reg.auth }), 201, "PUT ?digest=");
  const upload = { ...up(), seconds: (performance.now() - t) / 1000 };

  const down = sampleRss(pid);
  t = performance.now();
  const got = await new Promise((resolve, reject) => {
    http
      .get(`${reg.base}/v2/${NAME}/blobs/${digest}`, { agent, headers: reg.auth }, (res) => {
        const check = createHash("sha256");
        let bytes = 0;
        res.on("data", (c) => {
          bytes += c.length;
          check.update(c);
        });
        res.on("end", () => resolve({ status: res.statusCode, bytes, digest: `sha256:${check.digest("hex")}` }));
        res.on("error", reject);
      })
      .on("error", reject);
  });
  if (got.status !== 200 || got.bytes !== mib * MiB || got.digest !== digest)
    throw new Error(`GET big blob: ${got.status}, ${got.bytes} bytes, ${got.digest}`);
  const download = { ...down(), seconds: (performance.now() - t) / 1000 };
  return { upload, download };
}

/** A registry token from /token, as a docker client would use (5 minutes: fetched just before use). */
async function issuedToken(reg) {
  const basic = Buffer.from(`_token:${reg.registryToken}`).toString("base64");
  const res = expect(
    await send(
      `${reg.base}/token?service=${encodeURIComponent(reg.service)}&scope=${encodeURIComponent(`repository:${NAME}:pull`)}`,
      { headers: { authorization: `Basic ${basic}` } },
    ),
    200,
    "/token",
  );
  return JSON.parse(res.body).token;
}

const fmt = (n, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : "—";

function printReport({ regs, rows, big, bigMib, seconds, warmup, concurrency, busyBefore }) {
  const [dist, ours] = regs;
  const rps = (r) => (r ? r.done / r.elapsed : NaN);
  const mibps = (r) => (r ? r.bytes / MiB / r.elapsed : NaN);
  console.log(
    `\nRegistry /v2/: ${dist.title} (docker-registry, filesystem storage) vs bulwark (PGlite, filesystem blobs),\n` +
      `  both child processes on loopback, load from a third process: ${seconds}s per row after ${warmup}s warm-up,\n` +
      `  ${concurrency} keep-alive connections; ratio = bulwark / distribution (> 1: bulwark faster).`,
  );
  // Everything shares the machine's cores: other work running meanwhile skews both columns.
  if (busyBefore > 0.1)
    console.log(`  warning: the machine was ${Math.round(busyBefore * 100)}% busy with other work when the run began`);
  console.log(
    `  setup, ${fmt(TAGS - 1)} tag PUTs of one manifest, ${TAG_CONCURRENCY} at a time: ` +
      regs.map((r) => `${r.label} ${fmt(r.tagSeconds, 1)} s (${fmt((TAGS - 1) / r.tagSeconds)}/s)`).join(", "),
  );
  const cols = (...c) =>
    "  " +
    c[0].padEnd(42) +
    c
      .slice(1)
      .map((x, i) => x.padStart([9, 9, 7, 10, 10, 15, 15][i]))
      .join("  ");
  console.log();
  console.log(cols("", "dist", "bulwark", "", "dist", "bulwark", "p50 ms", "p99 ms"));
  console.log(cols("workload", "req/s", "req/s", "ratio", "MiB/s", "MiB/s", "dist/bulwark", "dist/bulwark"));
  const notes = [];
  for (const row of rows) {
    const [d, b] = row.results;
    const ms = (p) => `${d ? fmt(d[p], 1) : "—"}/${b ? fmt(b[p], 1) : "—"}`;
    console.log(
      cols(
        row.label,
        fmt(rps(d)),
        fmt(rps(b)),
        d && b ? fmt(rps(b) / rps(d), 2) : "—",
        row.blob ? fmt(mibps(d)) : "",
        row.blob ? fmt(mibps(b)) : "",
        ms("p50"),
        ms("p99"),
      ),
    );
    regs.forEach((reg, i) => {
      const r = row.results[i];
      if (r?.errors) notes.push(`${row.label}: ${reg.label} had ${r.errors} failed requests, first: ${r.firstError}`);
    });
    if (row.tags && ours && dist.tagCounts[row.tags] !== ours.tagCounts[row.tags])
      notes.push(
        `${row.label}: distribution answers ${fmt(dist.tagCounts[row.tags])} names, bulwark ${fmt(ours.tagCounts[row.tags])}` +
          (row.tags === "page" ? " (distribution 2.8 ignores n)" : ""),
      );
  }
  for (const note of notes) console.log(`  note: ${note}`);
  if (!big.length) return;
  const mib = (kib) => `${fmt(kib / 1024, 1)} MiB`;
  const phase = (p) =>
    `before ${mib(p.before)}, peak ${mib(p.peak)} (+${mib(p.peak - p.before)}), ${fmt(bigMib / p.seconds)} MiB/s`;
  console.log(`\nServer RSS while streaming a ${fmt(bigMib)} MiB blob (VmRSS every 100 ms; growth = peak − before)`);
  regs.forEach((reg, i) => {
    console.log(`  ${reg.label.padEnd(13)} upload (POST, one streamed PATCH, PUT ?digest=): ${phase(big[i].upload)}`);
    console.log(`  ${"".padEnd(13)} download (GET):                                 ${phase(big[i].download)}`);
  });
}

export async function registryBench({
  seconds = Number(process.env.BENCH_SECONDS ?? 3),
  concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32),
} = {}) {
  const warmup = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
  const bigMib = Number(process.env.BENCH_BIG_BLOB_MIB ?? 1024);
  if (!existsSync(DOCKER_REGISTRY)) {
    console.log(`\nRegistry: skipped, no baseline (${DOCKER_REGISTRY} missing: apt-get install docker-registry)`);
    return;
  }
  const busyBefore = await cpuBusy();
  const dir = await mkdtemp(join(tmpdir(), "bulwark-bench-registry-"));
  const regs = [];
  const killAll = () => regs.forEach((r) => r.child.exitCode === null && r.child.kill("SIGKILL"));
  process.on("exit", killAll); // a crash must not leave servers behind
  try {
    regs.push(await startDistribution(join(dir, "distribution")));
    try {
      regs.push(await startBulwark(join(dir, "bulwark")));
    } catch (err) {
      console.log(`\nRegistry: bulwark not measured (${err.message}); distribution alone.`);
    }
    const ours = regs[1];
    const blobs = {
      config: Buffer.from('{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}'),
      small: randomBytes(MiB),
      large: randomBytes(10 * MiB),
    };
    for (const reg of regs) await setup(reg, blobs);

    const get =
      (path, headers = {}) =>
      (reg) => ({ kind: "get", url: `${reg.base}/v2/${NAME}/${path(reg)}`, headers: { ...reg.auth, ...headers } });
    const upload =
      (size, mode = "post-put") =>
      (reg) => ({ kind: "upload", base: reg.base, name: NAME, size, mode, headers: reg.auth });
    const manifest = get(() => "manifests/latest", { accept: OCI_MANIFEST });
    const workloads = [
      { label: "manifest GET by tag", job: manifest },
      { label: "blob GET 1 MiB", job: get((r) => `blobs/${r.blobs.small}`), blob: true },
      { label: "blob GET 10 MiB", job: get((r) => `blobs/${r.blobs.large}`), blob: true },
      { label: "blob PUT 1 MiB (POST + PUT ?digest=)", job: upload(MiB), blob: true },
      { label: "blob PUT 10 MiB (POST + PUT ?digest=)", job: upload(10 * MiB), blob: true },
      { label: `tags/list, ${fmt(TAGS)} tags`, job: get(() => "tags/list"), tags: "all" },
      { label: "tags/list?n=100", job: get(() => "tags/list?n=100"), tags: "page" },
    ];
    // Ours only: distribution 2.8 answers a monolithic POST ?digest= with 202 and ignores the body;
    // and a docker client pulls with a /token-issued token rather than the platform token.
    const extras = [
      { label: "blob PUT 1 MiB (one POST ?digest=)", job: upload(MiB, "monolithic"), blob: true },
      { label: "blob PUT 10 MiB (one POST ?digest=)", job: upload(10 * MiB, "monolithic"), blob: true },
      {
        label: "manifest GET by tag, /token-issued token",
        job: async (reg) => ({
          ...manifest(reg),
          headers: { ...manifest(reg).headers, authorization: `Bearer ${await issuedToken(reg)}` },
        }),
      },
    ];
    const common = { seconds, warmup, concurrency };
    const rows = [];
    // Each row runs on both registries back to back, so both see the machine in the same state.
    for (const w of workloads) {
      const results = [];
      for (const reg of regs) results.push(await load({ ...common, ...(await w.job(reg)) }));
      rows.push({ ...w, results });
    }
    if (ours)
      for (const w of extras)
        rows.push({ ...w, results: [undefined, await load({ ...common, ...(await w.job(ours)) })] });

    const big = [];
    if (bigMib > 0) for (const reg of regs) big.push(await bigBlob(reg, bigMib));
    printReport({ regs, rows, big, bigMib, seconds, warmup, concurrency, busyBefore });
  } finally {
    for (const reg of regs) await stop(reg.child);
    process.off("exit", killAll);
    agent.destroy();
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.env.BENCH_REGISTRY !== "0")
  await registryBench();
