// Helpers shared by the benches (bench/api.mjs, bench/events.mjs, bench/registry.mjs, ...) and the dataset generator (bench/dataset.mjs):
// child processes (bulwark serve, baselines, load generators), PostgreSQL clusters through
// scripts/pg-temp.sh, temp directories, and their cleanup at the end, after an error or on Ctrl-C.
import net from "node:net";
import autocannon from "autocannon";
import { execFile, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const HERE = fileURLToPath(new URL(".", import.meta.url));
export const ROOT = join(HERE, "..");
export const BULWARK = join(ROOT, "bin", "bulwark.js");
export const PG_TEMP = join(ROOT, "scripts", "pg-temp.sh");
export const PG_BIN = process.env.PG_BIN ?? "/usr/lib/postgresql/15/bin";
// Absolute: PostgreSQL gets the socket directory under it while running in its data dir.
export const CACHE_DIR = resolve(process.env.BENCH_CACHE_DIR || join(HERE, ".cache"));

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const run = promisify(execFile);

export async function freePort() {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  return port;
}

/** The environment for a child: none of the caller's Bulwark settings (a DATABASE_URL would turn PGlite off). */
export function childEnv(extra = {}) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("BULWARK_") || k === "DATABASE_URL") delete env[k];
  return { ...env, ...extra };
}

/** A request from this process (setup and checks): status and body text. */
export async function send(url, { method = "GET", headers = {}, body } = {}) {
  const res = await fetch(url, {
    method,
    headers: {
      ...(typeof body === "string" ? { "content-type": "application/json" } : {}),
      ...headers,
    },
    body,
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

export function json(res, what, status = 200) {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${res.text.slice(0, 400)}`);
  return res.text ? JSON.parse(res.text) : {};
}

/** The share of all cores busy over `ms` (other work running when the bench begins). */
export async function cpuBusy(ms = 1000) {
  const read = () => {
    const [, ...t] = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).map(Number);
    return { idle: t[3] + t[4], total: t.reduce((a, b) => a + b, 0) };
  };
  try {
    const a = read();
    await sleep(ms);
    const b = read();
    return 1 - (b.idle - a.idle) / (b.total - a.total);
  } catch {
    return 0; // no /proc/stat
  }
}

export function rssKiB(pid) {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : NaN;
}

/**
 * Everything a bench run starts, so that it can all be stopped: child processes, PostgreSQL
 * clusters (halted when they belong to the cache, removed when temporary) and temp directories.
 */
export class Resources {
  children = new Set();
  clusters = new Map(); // dir -> "halt" | "stop"
  dirs = new Set();
  #handlers;

  /** Stops everything at process exit, on Ctrl-C and on SIGTERM (synchronously: nothing else runs then). */
  install() {
    const onExit = () => this.cleanupSync();
    const onSignal = (signal) => {
      console.log(`\n${signal}: stopping everything the bench started`);
      this.cleanupSync();
      process.exit(signal === "SIGINT" ? 130 : 143);
    };
    this.#handlers = { onExit, onSignal };
    process.on("exit", onExit);
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  }

  uninstall() {
    if (!this.#handlers) return;
    process.off("exit", this.#handlers.onExit);
    process.off("SIGINT", this.#handlers.onSignal);
    process.off("SIGTERM", this.#handlers.onSignal);
    this.#handlers = undefined;
  }

  track(child) {
    this.children.add(child);
    child.on("exit", () => this.children.delete(child));
    return child;
  }

  cleanupSync() {
    for (const child of this.children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    this.children.clear();
    for (const [dir, how] of this.clusters) {
      try {
        execFileSync("bash", [PG_TEMP, how, dir], { stdio: "ignore" });
      } catch {}
    }
    this.clusters.clear();
    for (const dir of this.dirs) rmSync(dir, { recursive: true, force: true });
    this.dirs.clear();
  }

  async cleanup() {
    await Promise.all([...this.children].map((c) => stop(c)));
    for (const [dir, how] of this.clusters)
      await pgTemp(how, dir).catch((err) => console.log(`  ${how} ${dir}: ${err.message}`));
    this.clusters.clear();
    for (const dir of this.dirs) await rm(dir, { recursive: true, force: true });
    this.dirs.clear();
  }

  // ---- PostgreSQL (scripts/pg-temp.sh) ----

  /** A new cluster in `dir`; its URL. `keep`: halted (kept) at cleanup instead of removed. */
  async pgStart(dir, { keep = false } = {}) {
    this.clusters.set(dir, keep ? "halt" : "stop");
    return (await pgTemp("start", dir, String(await freePort()))).stdout.trim();
  }

  /** An existing cluster (made by pgStart) started again; its URL. Halted at cleanup. */
  async pgResume(dir) {
    // A cluster left running by a run that was killed (kill -9 leaves no chance to halt it).
    if (existsSync(join(dir, "data", "postmaster.pid"))) await pgTemp("halt", dir).catch(() => {});
    this.clusters.set(dir, "halt");
    return (await pgTemp("resume", dir, String(await freePort()))).stdout.trim();
  }

  async pgHalt(dir) {
    await pgTemp("halt", dir);
    this.clusters.delete(dir);
  }
}

function pgTemp(...args) {
  return run("bash", [PG_TEMP, ...args]).catch((err) => {
    throw new Error(`pg-temp.sh ${args[0]} ${args[1]}: ${(err.stderr || err.message).trim().slice(-1500)}`);
  });
}

export async function stop(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/** A child process (tracked) whose last few KB of output are kept for error messages. */
export function spawnTracked(resources, command, args, options = {}) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], cwd: ROOT, ...options });
  resources.track(child);
  let tail = "";
  const keep = (c) => (tail = (tail + c).slice(-4000));
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  child.tail = () => tail.trim();
  return child;
}

/**
 * A baseline server of bench/baseline-servers.mjs (`kind`: bare, pk, page, create, create-event),
 * tracked, once it says "ready": its child and its base URL.
 */
export async function startBaseline(resources, kind, databaseUrl) {
  const port = await freePort();
  const child = spawnTracked(resources, process.execPath, [
    join(HERE, "baseline-servers.mjs"),
    kind,
    String(port),
    ...(databaseUrl ? [databaseUrl] : []),
  ]);
  const deadline = Date.now() + 30_000;
  while (!/^ready$/m.test(child.tail())) {
    if (child.exitCode !== null) throw new Error(`baseline ${kind} exited (${child.exitCode}): ${child.tail()}`);
    if (Date.now() > deadline) throw new Error(`baseline ${kind} not ready after 30 s: ${child.tail()}`);
    await sleep(20);
  }
  return { child, base: `http://127.0.0.1:${port}` };
}

/** Runs a command to its end as a tracked child (stopped with the rest on Ctrl-C): its stdout. */
export async function runTracked(resources, command, args, options = {}) {
  const child = spawnTracked(resources, command, args, options);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c) => (stdout += c));
  child.stderr.on("data", (c) => (stderr += c));
  const [code, signal] = await once(child, "exit");
  if (code !== 0)
    throw Object.assign(new Error(`${args[0] ?? command} exited ${code ?? signal}`), { stdout, stderr, code });
  return { stdout, stderr };
}

/**
 * `bulwark serve` (`bin`: another build's bin/bulwark.js) as a child process on a PGlite data dir or a PostgreSQL URL; resolves once GET
 * /healthz answers 200, with `readyMs` (from spawn to that answer; polled every 10 ms).
 */
export async function startBulwark(
  resources,
  { label, dataDir, databaseUrl, blobDir, env = {}, logLevel = "warn", bin = BULWARK },
) {
  const port = await freePort();
  const where = databaseUrl ? ["--database-url", databaseUrl] : ["--data-dir", dataDir];
  // On PostgreSQL the registry's blobs would default to ./data/registry: somewhere of ours instead.
  const blobs = blobDir ? ["--blob-dir", blobDir] : [];
  const args = ["serve", ...where, ...blobs, "--host", "127.0.0.1", "--port", String(port), "--no-rate-limit"];
  const t = performance.now();
  const child = spawnTracked(resources, process.execPath, [bin, ...args, "--log-level", logLevel], {
    env: childEnv(env),
  });
  const server = { label, child, port, base: `http://127.0.0.1:${port}`, where, env, databaseUrl, dataDir };
  try {
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`${label}: bulwark serve exited (${child.exitCode ?? child.signalCode}): ${child.tail()}`);
      const ok = await new Promise((resolve) => {
        const req = net.connect(port, "127.0.0.1");
        req.on("connect", () => {
          req.end("GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
        });
        let text = "";
        req.on("data", (c) => (text += c));
        req.on("close", () => resolve(/^HTTP\/1\.1 200/.test(text)));
        req.on("error", () => resolve(false));
      });
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`${label}: bulwark serve not ready after 120 s: ${child.tail()}`);
      await sleep(10);
    }
    server.readyMs = performance.now() - t;
    return server;
  } catch (err) {
    await stop(child);
    throw err;
  }
}

/** The operator's API token (`bulwark admin token`), or with `audience` another audience's. */
export async function adminToken(resources, server, audience) {
  const args = [BULWARK, "admin", "token", ...server.where, "--host", "127.0.0.1", "--port", String(server.port)];
  if (audience) args.push("--audience", audience);
  try {
    return (await runTracked(resources, process.execPath, args, { env: childEnv(server.env) })).stdout.trim();
  } catch (err) {
    throw new Error(`bulwark admin token: ${(err.stderr || err.message).trim().slice(-1000)}`);
  }
}

/**
 * GetGroup over REST (an authenticated GET) against one `bulwark serve` per mode on PGlite, in
 * BENCH_ROUNDS interleaved rounds of BENCH_SECONDS after a warm-up, each mode's rate reported as
 * the median round and as the median of its rounds' ratios to the `baseline` mode's, from the
 * same run (not a timed test). A mode: { name, env?, bin?, logLevel? }.
 */
export async function compareGetGroup(resources, modes, { baseline, what }) {
  const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
  const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
  const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
  const CONNECTIONS = Number(process.env.BENCH_CONCURRENCY ?? 32);
  for (const mode of modes) {
    const dataDir = mkdtempSync(join(tmpdir(), `bulwark-bench-${what}-${mode.name}-`));
    resources.dirs.add(dataDir);
    mode.server = await startBulwark(resources, {
      label: mode.name,
      dataDir,
      env: mode.env,
      bin: mode.bin,
      logLevel: mode.logLevel,
    });
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
  const base = modes.find((m) => m.name === baseline) ?? modes[0];
  console.log(`\nGetGroup over REST, PGlite, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s (median):`);
  console.log(`| mode | req/s | ratio to ${base.name} (median of rounds) |`);
  console.log("|---|---|---|");
  for (const mode of modes) {
    const ratios = mode.rates.map((r, i) => r / base.rates[i]);
    console.log(`| ${mode.name} | ${Math.round(median(mode.rates))} | ${median(ratios).toFixed(3)} |`);
  }
}
