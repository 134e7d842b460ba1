// The embedded database's cost of durability: authenticated group creates per second (32
// keep-alive connections, autocannon) on `bulwark serve` over a fresh PGlite data directory with
// fsync on (the default) against one with --unsafe-no-fsync, in one run, rounds alternating which
// goes first; the ratio is the figure. Needs `npm run build` (bin/bulwark.js). Runs alone:
// `node bench/durability.mjs`.
import { mkdtempSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import autocannon from "autocannon";
import { adminToken, json, Resources, send, startBulwark, stop } from "./lib.mjs";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** the parents the creates are spread over (under one, each create waits on its parent's row) */
const PARENTS = 16;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function creates(server, seconds) {
  const auth = { authorization: `Bearer ${server.token}` };
  const orgs = [];
  for (let p = 0; p < PARENTS; p++)
    orgs.push(
      json(
        await send(`${server.base}/iam/v2beta1/groups`, {
          method: "POST",
          headers: auth,
          body: JSON.stringify({ name: `rate-${randomBytes(3).toString("hex")}` }),
        }),
        "create a parent",
      ),
    );
  let i = 0;
  const result = await autocannon({
    url: `${server.base}/iam/v2beta1/groups/${orgs[0].uid}`,
    method: "POST",
    connections: 32,
    duration: seconds,
    headers: { ...auth, "content-type": "application/json" },
    requests: [
      {
        setupRequest: (req) => {
          const n = i++;
          return {
            ...req,
            path: `/iam/v2beta1/groups/${orgs[n % PARENTS].uid}`,
            body: JSON.stringify({ name: `c-${n}` }),
          };
        },
      },
    ],
  });
  if (result.non2xx > 0) throw new Error(`${server.label}: ${result.non2xx} creates failed`);
  return result.requests.average;
}

export async function durabilityBench({ seconds = Number(process.env.BENCH_SECONDS ?? 3) } = {}) {
  console.log("\n== durability: PGlite group creates/s with fsync (default) and with --unsafe-no-fsync ==");
  const resources = new Resources();
  resources.install();
  const rows = [];
  const servers = {};
  try {
    for (const [mode, env] of [
      ["fsync", {}],
      ["no-fsync", { BULWARK_UNSAFE_NO_FSYNC: "1" }],
    ]) {
      const dataDir = mkdtempSync(join(tmpdir(), `bulwark-durability-${mode}-`));
      resources.dirs.add(dataDir);
      const server = await startBulwark(resources, { label: mode, dataDir, env });
      server.token = await adminToken(resources, server);
      servers[mode] = server;
    }
    // An unmeasured round warms both (JIT, caches).
    for (const mode of ["fsync", "no-fsync"]) await creates(servers[mode], 1);
    const rates = { fsync: [], "no-fsync": [] };
    const ratios = [];
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? ["no-fsync", "fsync"] : ["fsync", "no-fsync"];
      const got = {};
      for (const mode of order) got[mode] = await creates(servers[mode], seconds);
      for (const mode of order) rates[mode].push(got[mode]);
      ratios.push(got.fsync / got["no-fsync"]);
    }
    const fmt = (n) => Math.round(n).toLocaleString("en");
    rows.push(
      `| PGlite | group creates/s, --unsafe-no-fsync (baseline), median of ${ROUNDS} rounds | ${fmt(median(rates["no-fsync"]))}/s | |`,
    );
    rows.push(
      `| PGlite | group creates/s, fsync on (the default), median of ${ROUNDS} rounds | ${fmt(median(rates.fsync))}/s | ${median(ratios).toFixed(2)}× baseline (rounds: ${ratios.map((r) => r.toFixed(2)).join(", ")}) |`,
    );
  } catch (err) {
    console.log(`durability bench failed: ${err.stack ?? err}`);
    process.exitCode = 1;
  } finally {
    for (const s of Object.values(servers)) await stop(s.child);
    console.log("\n| backend | row | measured | vs baseline |\n|---|---|---|---|");
    for (const r of rows) console.log(r);
    await resources.cleanup();
    resources.uninstall();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await durabilityBench();
