#!/usr/bin/env node
// `npm run bench`: throughput of each layer as a ratio to a baseline measured in the same run
// (bare node:http), and the cost of a deep page relative to the first (keyset pagination keeps
// it flat). Indicative only: load generator and server share the machine's cores.
import http from "node:http";
import { once } from "node:events";
import { pino } from "pino";
import { startServer } from "../dist/server/start.js";
import { OPERATOR_SUBJECT } from "../dist/auth/tokens.js";
import { authModule } from "../dist/auth/module.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

let authorization = "";

function request(url, method = "GET", body) {
  return new Promise((resolve, reject) => {
    const headers = {
      ...(authorization ? { authorization } : {}),
      ...(body ? { "content-type": "application/json" } : {}),
    };
    const req = http.request(url, { method, agent, headers }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`${url}: ${res.statusCode}`))));
    });
    req.on("error", reject);
    req.end(body);
  });
}

async function throughput(label, url, method, body) {
  for (let i = 0; i < 200; i++) await request(url, method, body); // warm-up
  let done = 0;
  const deadline = Date.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < deadline) {
        await request(url, method, body);
        done++;
      }
    }),
  );
  return { label, rps: done / SECONDS };
}

async function timeIt(fn, runs) {
  const t = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) await fn();
  return Number(process.hrtime.bigint() - t) / 1e6 / runs;
}

const bare = http.createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ status: "SERVING" }));
});
bare.listen(0, "127.0.0.1");
await once(bare, "listening");
const bareUrl = `http://127.0.0.1:${bare.address().port}/`;

const server = await startServer({
  port: 0,
  host: "127.0.0.1",
  dataDir: "memory://",
  errorDomain: "bench",
  logger: pino({ level: "silent" }),
  // Throughput is what is measured here, not the limiter's 429s.
  rateLimits: false,
});
const issuer = server.exportsOf(authModule).issuer;
authorization = `Bearer ${(await issuer.mint({ subject: OPERATOR_SUBJECT, audience: [issuer.urls.apiAudience] })).token}`;
const post = async (path, body) =>
  (await fetch(server.url + path, { method: "POST", headers: { authorization }, body: JSON.stringify(body) })).json();
const org = await post("/iam/v2beta1/groups", { name: "bench" });
const N = 2000;
for (let i = 0; i < N; i += 50) {
  await Promise.all(
    Array.from({ length: 50 }, (_, j) =>
      post(`/iam/v2beta1/groups/${org.uid}`, { name: `g${String(i + j).padStart(5, "0")}` }),
    ),
  );
}

const results = [];
results.push(await throughput("bare node:http (baseline)", bareUrl));
results.push(await throughput("Auth.Validate (token verify only)", `${server.url}/auth/v1/ok`));
results.push(await throughput("GET /healthz (Fastify + one-port sniffer)", `${server.url}/healthz`));
results.push(await throughput("REST GetGroup", `${server.url}/iam/v2beta1/groups/${org.uid}`));
results.push(
  await throughput(
    "REST ListGroups page_size=50",
    `${server.url}/iam/v2beta1/groups?uidp.children_of=${org.uid}&page_size=50`,
  ),
);
results.push(
  await throughput(
    "Connect JSON GetGroup",
    `${server.url}/chainguard.platform.iam.v2beta1.GroupsService/GetGroup`,
    "POST",
    JSON.stringify({ uid: org.uid }),
  ),
);

const base = results[0].rps;
console.log(`\nThroughput (${SECONDS}s each, ${CONCURRENCY} connections, PGlite in memory, ${N} groups)`);
for (const r of results)
  console.log(
    `  ${r.label.padEnd(44)} ${r.rps.toFixed(0).padStart(7)} req/s   ${(r.rps / base).toFixed(3)} × baseline`,
  );

// Page depth: page 1 vs the page after walking 1,900 rows by cursor, name order.
const get = (url) => fetch(url, { headers: { authorization } });
const listUrl = (token) =>
  `${server.url}/iam/v2beta1/groups?uidp.children_of=${org.uid}&page_size=50&order_by=name${token ? `&page_token=${encodeURIComponent(token)}` : ""}`;
let token;
for (let i = 0; i < 38; i++) token = (await (await get(listUrl(token))).json()).nextPageToken;
const first = await timeIt(() => get(listUrl()).then((r) => r.text()), 50);
const deep = await timeIt(() => get(listUrl(token)).then((r) => r.text()), 50);
console.log(
  `\nPage cost by depth (ms per page of 50): first ${first.toFixed(2)}, after 1,900 rows ${deep.toFixed(2)}  → ratio ${(deep / first).toFixed(2)} (1.0 = flat)`,
);

await server.close();
bare.close();
agent.destroy();

// The registry against CNCF distribution (bench/registry.mjs); after the server above is closed.
if (process.env.BENCH_REGISTRY !== "0") {
  const { registryBench } = await import("./registry.mjs");
  await registryBench({ seconds: SECONDS, concurrency: CONCURRENCY });
}

// Advisories: import of the wolfi corpus, ListAdvisories and querybatch on PGlite and PostgreSQL
// (bench/advisories.mjs).
if (process.env.BENCH_ADVISORIES !== "0") {
  const { advisoriesBench } = await import("./advisories.mjs");
  await advisoriesBench({ seconds: SECONDS, concurrency: CONCURRENCY });
}
