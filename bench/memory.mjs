#!/usr/bin/env node
// Where a `bulwark serve` process's resident memory is: VmRSS split by kind of mapping (from
// /proc/<pid>/smaps), next to the V8 heap by space and the external memory from its /metrics.
// `node bench/memory.mjs <data-dir>` starts `bulwark serve` (bin/bulwark.js, after `npm run build`)
// on that data directory, waits BENCH_MEMORY_WAIT_MS (default 2000) after /healthz answers, prints
// the breakdown and stops it (run it twice on a new directory: the first start runs initdb);
// `node bench/memory.mjs --pid <pid> [--metrics <url>]` prints it for a running server.
//
// The kinds, by mapping (Linux x86-64, glibc):
// - file: the node binary and shared libraries (shared with other node processes);
// - WebAssembly memory: PGlite's linear memory (an anonymous read-write mapping of 128 MiB or
//   more; only the pages PostgreSQL touched are resident: its shared buffers, caches, sorts);
// - malloc main / malloc arenas: glibc's heap ([heap]) and its per-thread arenas (64 MiB-aligned
//   mappings): Node's and V8's own C++ allocations, ArrayBuffer contents (Buffers), compiler zones;
// - code: executable anonymous mappings (JavaScript and WebAssembly machine code);
// - V8 heap and other anonymous: the rest (V8's heap pages, stacks).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const MiB = 1 << 20;
const fmt = (bytes) => (bytes / MiB).toFixed(1).padStart(7);

/** The process's resident memory by kind of mapping, in bytes. */
export function residentByKind(pid) {
  const kinds = new Map();
  const add = (kind, bytes) => kinds.set(kind, (kinds.get(kind) ?? 0) + bytes);
  let mapping;
  const flush = () => {
    if (!mapping) return;
    const { start, size, perms, name, rss } = mapping;
    if (name.startsWith("/")) add("file (node, libraries)", rss);
    else if (name === "[heap]") add("malloc main arena ([heap])", rss);
    else if (name.startsWith("[")) add("other (stack, vdso)", rss);
    else if (start % (64 * MiB) === 0 && size <= 64 * MiB && perms === "rw-p") add("malloc thread arenas", rss);
    else if (perms === "rw-p" && size >= 128 * MiB) add("WebAssembly memory (PGlite)", rss);
    else if (perms.includes("x")) add("code (JIT, WebAssembly)", rss);
    else add("V8 heap and other anonymous", rss);
  };
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      flush();
      const start = parseInt(head[1], 16);
      mapping = { start, size: parseInt(head[2], 16) - start, perms: head[3], name: head[4], rss: 0 };
    } else if (line.startsWith("Rss:")) mapping.rss = Number(line.split(/\s+/)[1]) * 1024;
  }
  flush();
  return kinds;
}

/** VmRSS in bytes. */
export function vmRss(pid) {
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
}

/** The V8 and external-memory gauges of a server's Prometheus /metrics, in bytes. */
async function v8Metrics(url) {
  const text = await (await fetch(url)).text();
  const out = [];
  for (const line of text.split("\n")) {
    const m =
      /^bulwark_nodejs_(heap_size_total|heap_size_used|external_memory|heap_space_size_used)_bytes(\{space="(\w+)"\})? (\S+)/.exec(
        line,
      );
    if (m && Number(m[4]) > 0)
      out.push([m[3] ? `V8 ${m[3]} space used` : `V8 ${m[1].replaceAll("_", " ")}`, Number(m[4])]);
  }
  return out;
}

export async function printBreakdown(pid, metricsUrl, print = console.log) {
  print(`VmRSS ${fmt(vmRss(pid)).trim()} MiB`);
  for (const [kind, bytes] of [...residentByKind(pid)].sort((a, b) => b[1] - a[1]))
    print(`  ${fmt(bytes)} MiB  ${kind}`);
  if (!metricsUrl) return;
  print("from /metrics:");
  for (const [name, bytes] of await v8Metrics(metricsUrl)) print(`  ${fmt(bytes)} MiB  ${name}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const pidAt = args.indexOf("--pid");
  const metricsAt = args.indexOf("--metrics");
  if (pidAt >= 0) {
    await printBreakdown(Number(args[pidAt + 1]), metricsAt >= 0 ? args[metricsAt + 1] : undefined);
  } else if (args[0]) {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const bin = fileURLToPath(new URL("../bin/bulwark.js", import.meta.url));
    const child = spawn(
      process.execPath,
      [bin, "serve", "--data-dir", args[0], "--host", "127.0.0.1", "--port", String(port)].concat([
        "--metrics-port",
        String(port + 1),
        "--no-rate-limit",
        "--log-level",
        "error",
      ]),
      { stdio: "inherit" },
    );
    try {
      const started = Date.now();
      for (;;) {
        if (child.exitCode !== null) throw new Error(`bulwark serve exited with ${child.exitCode}`);
        try {
          if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break;
        } catch {}
        await new Promise((r) => setTimeout(r, 20));
      }
      console.log(`ready in ${Date.now() - started} ms`);
      await new Promise((r) => setTimeout(r, Number(process.env.BENCH_MEMORY_WAIT_MS ?? 2000)));
      await printBreakdown(child.pid, `http://127.0.0.1:${port + 1}/metrics`);
    } finally {
      child.kill("SIGINT");
    }
  } else {
    console.error("usage: node bench/memory.mjs <data-dir> | --pid <pid> [--metrics <url>]");
    process.exit(2);
  }
}
