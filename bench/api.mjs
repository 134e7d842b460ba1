#!/usr/bin/env node
// The API part of `npm run bench` (also runnable alone after a build: `node bench/api.mjs [--quick]`).
// `bulwark serve` on PostgreSQL (a cached private cluster, scripts/pg-temp.sh resume) and on PGlite
// (a copy of a cached data dir), each row's load from its own process (bench/load.mjs: autocannon
// for throughput, sequential keep-alive requests for latency), every figure next to a baseline
// measured in the same run, each in its own process (bench/baseline-servers.mjs): bare node:http,
// Fastify + one primary-key select over pg, Fastify + the page + count of a List of 50. Datasets
// come from bench/dataset.mjs (cached under bench/.cache/). Prints a table, the targets (met or
// not), PGlite's idle RSS and start time, and the same as Markdown (also written to
// bench/.cache/last-results.md). Everything shares the machine's cores: compare ratios, not
// absolute numbers. Env: see bench/README.md.
import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import os from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { SignJWT, decodeJwt, importJWK } from "jose";
import { datasetKey, ensureDataset, BIG_GROUPS, WIDE_CHILDREN, TAGS } from "./dataset.mjs";
import {
  CACHE_DIR,
  HERE,
  PG_BIN,
  ROOT,
  Resources,
  adminToken,
  cpuBusy,
  json,
  rssKiB,
  run,
  send,
  sleep,
  spawnTracked,
  startBaseline,
  startBulwark,
  stop,
} from "./lib.mjs";

const LOAD = join(HERE, "load.mjs");
// issue #31: after start, and after the load (this bench's; the registry part checks its own)
const TARGET_RSS_START_MIB = 200;
const TARGET_RSS_LOAD_MIB = 250;
const TARGET_READY_MS = 1000;

const num = (name, fallback) => {
  const v = process.env[name];
  if (v === undefined || v === "") return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name}=${v}: expected a number`);
  return n;
};

function settings({ quick, seconds, concurrency }) {
  const seqRuns = num("BENCH_SEQ_RUNS", quick ? 10 : 60);
  return {
    quick,
    seconds: seconds ?? num("BENCH_SECONDS", quick ? 1 : 3),
    warmup: num("BENCH_WARMUP_SECONDS", quick ? 0.3 : 1),
    // per server, before its first row: the JIT and every cache warm, as in a server that has run a while
    serverWarmup: num("BENCH_SERVER_WARMUP_SECONDS", quick ? 2 : 8),
    rounds: Math.max(1, Math.round(num("BENCH_ROUNDS", quick ? 1 : 3))),
    concurrency: concurrency ?? num("BENCH_CONCURRENCY", 32),
    seqRuns,
    seqWarmup: Math.max(2, Math.round(seqRuns / 10)),
    walkRuns: Math.max(quick ? 15 : 30, seqRuns),
    seqSeconds: num("BENCH_SEQ_SECONDS", quick ? 4 : 30),
    idleMs: 2000,
    postgres: process.env.BENCH_API_POSTGRES !== "0" && existsSync(join(PG_BIN, "pg_ctl")),
    postgresSkipped:
      process.env.BENCH_API_POSTGRES === "0"
        ? "BENCH_API_POSTGRES=0"
        : !existsSync(join(PG_BIN, "pg_ctl"))
          ? `no PostgreSQL binaries in ${PG_BIN} (set PG_BIN)`
          : undefined,
  };
}

// ---------------------------------------------------------------------------------------------
// Children: load generators and baseline servers.

async function load(resources, job) {
  const child = spawnTracked(resources, process.execPath, [LOAD, JSON.stringify(job)]);
  let out = "";
  child.stdout.on("data", (c) => (out += c));
  const [code] = await once(child, "exit");
  const line = out.trim().split("\n").at(-1);
  try {
    return JSON.parse(line);
  } catch {
    return { failed: true, firstError: `load generator exited ${code}: ${child.tail().slice(-1500)}` };
  }
}

// ---------------------------------------------------------------------------------------------
// Tokens: the operator's (bulwark admin token) and the workload identities' (STS exchange of a
// JWT signed with the identity's own key), re-minted when less than 10 minutes remain.

class Tokens {
  #cache = new Map();
  constructor(resources, server, meta) {
    this.resources = resources;
    this.server = server;
    this.meta = meta;
  }

  async #get(name, mint) {
    const have = this.#cache.get(name);
    if (have && have.expiry - Date.now() > 10 * 60_000) return have.headers;
    const { token, expiry } = await mint();
    const entry = { headers: { authorization: `Bearer ${token}` }, expiry };
    this.#cache.set(name, entry);
    return entry.headers;
  }

  operator() {
    return this.#get("operator", async () => {
      const token = await adminToken(this.resources, this.server);
      return { token, expiry: decodeJwt(token).exp * 1000 };
    });
  }

  /** The workload identity `name` ("bench" or "big") from the dataset, its token as a client gets it. */
  workload(name) {
    return this.#get(`workload:${name}`, async () => {
      const id = this.meta.identities[name];
      const key = await importJWK(this.meta.privateJwk, "ES256");
      const now = Math.floor(Date.now() / 1000);
      const assertion = await new SignJWT({})
        .setProtectedHeader({ alg: "ES256", kid: this.meta.privateJwk.kid })
        .setIssuer(id.issuer)
        .setSubject(id.subject)
        .setAudience(this.server.base)
        .setIssuedAt(now)
        .setExpirationTime(now + 300)
        .sign(key);
      const q = new URLSearchParams({ identity: id.uid, aud: this.server.base });
      const res = json(
        await send(`${this.server.base}/sts/exchange?${q}`, { headers: { authorization: `Bearer ${assertion}` } }),
        `token exchange for ${id.subject}`,
      );
      return { token: res.token, expiry: Date.parse(res.expiry) };
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Rows.

/** Results, in print order. */
class Report {
  rows = [];
  notes = [];
  failures = [];
  byKey = new Map();

  add(row) {
    this.rows.push(row);
    if (row.key) this.byKey.set(row.key, row);
    if (row.failed) this.failures.push(`${row.section} · ${row.name}: ${row.error}`);
    return row;
  }

  get(key) {
    const row = this.byKey.get(key);
    return row && !row.failed ? row : undefined;
  }
}

/** One throughput row: `spec` (key, section, name, token, url, headers, vs) measured once. */
async function throughputRow(ctx, spec) {
  return (await interleavedRows(ctx, [spec], 1))[0];
}

/**
 * Rows measured in interleaved rounds: each round runs every spec once, in an order rotated by
 * one each round, and a row reports its median round (req/s; the p50 and p99 of that round).
 * Against a baseline measured the same way, the ratio no longer depends on which row came first
 * or on the machine's drift between them (on a shared VM, ±5% within a minute).
 */
async function interleavedRows(ctx, specs, rounds = ctx.cfg.rounds) {
  const { resources, cfg, report } = ctx;
  const runs = specs.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < specs.length; k++) {
      const i = (k + round) % specs.length;
      const spec = specs[i];
      const r = await load(resources, {
        mode: "http",
        url: spec.url,
        headers: spec.headers,
        connections: cfg.concurrency,
        seconds: cfg.seconds,
        warmup: cfg.warmup,
      });
      runs[i].push(r);
    }
  }
  return specs.map((spec, i) => {
    const failedRun = runs[i].find((r) => r.failed || r.non2xx || r.errors);
    const sorted = [...runs[i]].sort((a, b) => a.rps - b.rps);
    const median = sorted[Math.floor((sorted.length - 1) / 2)];
    const row = report.add({
      key: spec.key,
      section: spec.section,
      name: spec.name,
      token: spec.token,
      kind: "throughput",
      conns: cfg.concurrency,
      rps: median.rps,
      p50: median.p50,
      p99: median.p99,
      rounds: runs[i].map((r) => r.rps),
      vs: spec.vs,
      failed: Boolean(failedRun),
      error: failedRun ? (failedRun.firstError ?? JSON.stringify(failedRun.statusCodes)) : undefined,
    });
    console.log(
      `  ${spec.section} · ${spec.name}${spec.token ? ` (${spec.token})` : ""} … ` +
        (row.failed
          ? `FAILED: ${row.error}`
          : `${fmt(row.rps)} req/s${rounds > 1 ? ` (median of ${row.rounds.map((n) => fmt(n)).join(", ")})` : ""}, ` +
            `p50 ${ms(row.p50)} / p99 ${ms(row.p99)} ms`),
    );
    return row;
  });
}

async function sequenceRows(ctx, { section, headers, ops, runs, rows }) {
  const { resources, cfg, report } = ctx;
  process.stdout.write(`  ${section} · ${ops.map((o) => o.name).join(" / ")} (sequential) … `);
  const r = await load(resources, {
    mode: "sequence",
    headers,
    ops,
    runs,
    warmupRuns: cfg.seqWarmup,
    maxSeconds: cfg.seqSeconds,
  });
  const out = {};
  for (const spec of rows) {
    const op = r.ops?.[spec.op];
    out[spec.op] = report.add({
      key: spec.key,
      section,
      name: spec.name,
      token: spec.token,
      kind: "latency",
      conns: 1,
      runs: op?.runs,
      p50: op?.p50,
      p99: op?.p99,
      vs: spec.vs,
      failed: Boolean(r.failed),
      error: r.failed ? r.firstError : undefined,
    });
  }
  console.log(
    r.failed
      ? `FAILED: ${r.firstError}`
      : Object.entries(r.ops)
          .map(([name, o]) => `${name}: p50 ${ms(o.p50)} / p99 ${ms(o.p99)} ms (${o.runs} runs)`)
          .join("; "),
  );
  return out;
}

// ---------------------------------------------------------------------------------------------
// The deep page's token, minted as the server mints it (see src/core/list.ts, page-tokens.ts).

async function deepPageUrl(ctx, { server, databaseUrl, headers, big, pageSize, page }) {
  const { PageTokenCodec } = await import("../dist/core/page-tokens.js");
  const { filterFingerprint } = await import("../dist/core/list.js");
  const { ListGroupsRequestSchema } = await import("../dist/gen/chainguard/platform/iam/v2beta1/groups_pb.js");
  const { create } = await import("@bufbuild/protobuf");
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  let secret;
  let afterUid;
  try {
    const row = (await client.query("select secret, secret_jwe from server_secrets where name = 'page_tokens'"))
      .rows[0];
    if (!row) throw new Error("no page_tokens row in server_secrets");
    // Sealed under the key-encryption key (src/storage/server-secrets.ts), as the server reads it.
    const { SecretBox } = await import("../dist/core/secret-box.js");
    const { keyEncryptionKeyFromEnv } = await import("../dist/storage/db.js");
    secret = row.secret_jwe
      ? new Uint8Array(
          Buffer.from(
            await new SecretBox(keyEncryptionKeyFromEnv(server.env)).decrypt(
              row.secret_jwe,
              "server_secrets/page_tokens",
            ),
            "base64url",
          ),
        )
      : new Uint8Array(row.secret);
    // The last row of page `page - 1`: descendants_of = the uid itself and [uid + "/", uid + "0").
    const offset = (page - 1) * pageSize - 1;
    afterUid = (
      await client.query(
        `select uid from groups where uid = $1 or (uid > $1 || '/' and uid < $1 || '0') order by uid offset ${offset} limit 1`,
        [big],
      )
    ).rows[0]?.uid;
    if (!afterUid) throw new Error(`no row at offset ${offset} under ${big}`);
  } finally {
    await client.end();
  }
  const codec = PageTokenCodec.fromSecret(secret);
  const list = `${server.base}/iam/v2beta1/groups?uidp.descendants_of=${big}&page_size=${pageSize}`;
  const first = json(await send(list, { headers }), "first page");
  const decoded = await codec.decode(first.nextPageToken ?? "");
  if (decoded.kind !== "ok")
    throw new Error(`the first page's token does not decode with server_secrets' page_tokens key (${decoded.kind})`);
  const fingerprint = filterFingerprint(
    ListGroupsRequestSchema,
    create(ListGroupsRequestSchema, { uidp: { descendantsOf: big } }),
  );
  if (decoded.cursor.filter !== fingerprint)
    ctx.report.notes.push(
      `deep page: the server's filter fingerprint (${decoded.cursor.filter}) is not filterFingerprint() of the request (${fingerprint}); used the server's`,
    );
  if (decoded.cursor.after.length !== 1 || !/^uid /.test(decoded.cursor.order))
    throw new Error(
      `deep page: the cursor is not by uid alone (order "${decoded.cursor.order}"): update bench/api.mjs`,
    );
  const token = await codec.encode({ ...decoded.cursor, after: [afterUid] });
  const url = `${list}&page_token=${encodeURIComponent(token)}`;
  const deep = json(await send(url, { headers }), `page ${page}`);
  if (deep.groups?.length !== pageSize || deep.nextPageToken)
    throw new Error(
      `page ${page}: ${deep.groups?.length} groups${deep.nextPageToken ? " and a next page" : ""}, expected the last ${pageSize}`,
    );
  return { first: list, deep: url };
}

// ---------------------------------------------------------------------------------------------
// Checks that the dataset is what the rows assume (a bench of empty answers is no bench).

async function checkList(url, headers, field, { items, total }) {
  const page = json(await send(url, { headers }), `GET ${url}`);
  const got = page[field]?.length ?? 0;
  if (got !== items || (total !== undefined && String(page.totalCount) !== String(total)))
    throw new Error(`GET ${url}: ${got} ${field}, totalCount ${page.totalCount}; expected ${items} and ${total}`);
}

async function checkDataset(server, meta, tokens, withBig) {
  const [h, op] = await Promise.all([
    tokens.workload("bench"),
    tokens.operator(),
    ...(withBig ? [tokens.workload("big")] : []),
  ]);
  for (const headers of [h, op]) {
    json(await send(`${server.base}/iam/v2beta1/groups/${meta.wide}`, { headers }), "GET wide");
    await checkList(`${server.base}/iam/v2beta1/groups?uidp.children_of=${meta.wide}&page_size=50`, headers, "groups", {
      items: 50,
      total: WIDE_CHILDREN,
    });
  }
  await checkList(`${server.base}/registry/v2beta1/tags?uidp.children_of=${meta.repo}&page_size=50`, h, "tags", {
    items: 50,
    total: TAGS,
  });
  if (meta.advisories)
    await checkList(`${server.base}/vulnerabilities/v2beta1/advisories?page_size=50`, h, "advisories", {
      items: 50,
      total: meta.advisories,
    });
  if (withBig)
    await checkList(
      `${server.base}/iam/v2beta1/groups?uidp.descendants_of=${meta.big}&page_size=1`,
      await tokens.workload("big"),
      "groups",
      { items: 1, total: BIG_GROUPS },
    );
}

/**
 * GET and List with both tokens, ListTags and ListAdvisories: the rows both backends have. GET and
 * List run in interleaved rounds with their baselines (`baselines.pk`, `baselines.page`: running
 * baseline servers' URLs, PostgreSQL only; see interleavedRows).
 */
async function commonRows(ctx, section, server, meta, tokens, prefix, baselines = {}) {
  const { base } = server;
  const get = `${base}/iam/v2beta1/groups/${meta.wide}`;
  const list = `${base}/iam/v2beta1/groups?uidp.children_of=${meta.wide}&page_size=50`;
  const vsGet = { key: "base.pk", label: "Fastify+pg PK select" };
  const vsList = { key: "base.page", label: "Fastify+pg page+count" };
  // Unmeasured: each row's request in turn, so the first measured row does not pay for the JIT.
  process.stdout.write(
    `  ${section} · server warm-up (${ctx.cfg.serverWarmup} s${baselines.pk ? ", and as long for each baseline" : ""}, unmeasured) … `,
  );
  // The baselines get the same.
  const warmups = [
    [get, await tokens.workload("bench")],
    [list, await tokens.workload("bench")],
    [get, await tokens.operator()],
    [list, await tokens.operator()],
  ];
  for (const url of [baselines.pk, baselines.page]) if (url) warmups.push([url, {}], [url, {}]);
  for (const [url, headers] of warmups)
    await load(ctx.resources, {
      mode: "http",
      url,
      headers,
      connections: ctx.cfg.concurrency,
      seconds: ctx.cfg.serverWarmup / 4,
      warmup: 0,
    });
  console.log("done");
  const vsBare = { key: "base.bare", label: "bare node:http" };
  const rounds = ctx.cfg.rounds > 1 ? ` in ${ctx.cfg.rounds} interleaved rounds` : "";
  for (const [what, url, vs, baseline] of [
    [
      "GET group by uid",
      get,
      vsGet,
      baselines.pk && { key: "base.pk", name: "Fastify+pg PK select", url: baselines.pk },
    ],
    [
      `List 50 of ${fmt(WIDE_CHILDREN)} children + totalCount`,
      list,
      vsList,
      baselines.page && { key: "base.page", name: "Fastify+pg page+count", url: baselines.page },
    ],
  ]) {
    console.log(`  ${section} · ${what}${baseline ? ` and ${baseline.name}` : ""}${rounds} …`);
    await interleavedRows(ctx, [
      ...(baseline ? [{ ...baseline, section: "baseline", headers: {}, vs: vsBare }] : []),
      {
        key: `${prefix}.${what.startsWith("GET") ? "get" : "list"}.workload`,
        section,
        name: what,
        token: "workload",
        url,
        headers: await tokens.workload("bench"),
        vs,
      },
      {
        key: `${prefix}.${what.startsWith("GET") ? "get" : "list"}.operator`,
        section,
        name: what,
        token: "operator",
        url,
        headers: await tokens.operator(),
        vs,
      },
    ]);
  }
  await throughputRow(ctx, {
    key: `${prefix}.tags`,
    section,
    name: `ListTags 50 of ${fmt(TAGS)} + totalCount`,
    token: "workload",
    url: `${base}/registry/v2beta1/tags?uidp.children_of=${meta.repo}&page_size=50`,
    headers: await tokens.workload("bench"),
    vs: vsBare,
  });
  if (meta.advisories)
    await throughputRow(ctx, {
      key: `${prefix}.advisories`,
      section,
      name: `ListAdvisories first page of 50 (${fmt(meta.advisories)})`,
      token: "workload",
      url: `${base}/vulnerabilities/v2beta1/advisories?page_size=50`,
      headers: await tokens.workload("bench"),
      vs: vsBare,
    });
  else ctx.report.notes.push(`${section}: no advisories in the dataset (no corpus): ListAdvisories not measured`);
}

// ---------------------------------------------------------------------------------------------
// The backends.

async function postgresPart(ctx) {
  const { resources, cfg, report, log } = ctx;
  let ds = await ensureDataset(resources, "pg", { key: ctx.key, log });
  let databaseUrl;
  try {
    databaseUrl = await resources.pgResume(ds.dir);
  } catch (err) {
    log(`  the cached PostgreSQL cluster did not start (${err.message.split("\n").at(-1)}): building it again`);
    resources.clusters.delete(ds.dir);
    ds = await ensureDataset(resources, "pg", { key: ctx.key, log, rebuild: true });
    databaseUrl = await resources.pgResume(ds.dir);
  }
  if (ds.cached) log(`  PostgreSQL: dataset ${ds.key} from cache`);
  ctx.datasets.pg = ds;
  const meta = ds.meta;

  // Baselines on the same database, running beside the server: their rows are measured in the
  // same interleaved rounds as the server's GET and List.
  const baselines = {};
  const baselineChildren = [];
  let server;
  try {
    for (const [kind, path] of [
      ["pk", `/?uid=${meta.wide}`],
      ["page", `/?parent=${meta.wide}`],
    ]) {
      const b = await startBaseline(resources, kind, databaseUrl);
      baselineChildren.push(b.child);
      baselines[kind] = `${b.base}${path}`;
    }
    server = await startBulwark(resources, {
      label: "PostgreSQL",
      databaseUrl,
      blobDir: join(ds.dir, "blobs"),
      env: { BULWARK_KEY_ENCRYPTION_KEY: meta.keyEncryptionKey },
    });
  } catch (err) {
    for (const child of baselineChildren) await stop(child);
    throw err;
  }
  ctx.startup.pg = { readyMs: server.readyMs };
  try {
    const tokens = new Tokens(resources, server, meta);
    await checkDataset(server, meta, tokens, true);
    try {
      await commonRows(ctx, "PostgreSQL", server, meta, tokens, "pg", baselines);
    } finally {
      for (const child of baselineChildren) await stop(child);
    }

    const big = await tokens.workload("big");
    const pageSize = 100;
    const page = BIG_GROUPS / pageSize;
    const pageRows = [
      { op: "first", key: "pg.page1", token: "workload", name: `descendants of big, page 1 (page_size ${pageSize})` },
      {
        op: "deep",
        key: "pg.deep",
        token: "workload",
        name: `descendants of big, page ${fmt(page)} (last)`,
        vs: { key: "pg.page1", label: "page 1", by: "p50" },
      },
    ];
    let urls;
    try {
      urls = await deepPageUrl(ctx, { server, databaseUrl, headers: big, big: meta.big, pageSize, page });
    } catch (err) {
      // The other rows still run; these two fail loudly.
      for (const row of pageRows)
        report.add({ ...row, section: "PostgreSQL", kind: "latency", conns: 1, failed: true, error: err.message });
    }
    await sequenceRows(ctx, {
      section: "PostgreSQL",
      headers: big,
      runs: cfg.seqRuns,
      ops: [
        ...(urls
          ? [
              {
                name: "first",
                url: urls.first,
                itemsField: "groups",
                expect: { items: pageSize, totalCount: BIG_GROUPS, nextPageToken: "present" },
              },
              {
                name: "deep",
                url: urls.deep,
                itemsField: "groups",
                expect: { items: pageSize, nextPageToken: "empty" },
              },
            ]
          : []),
        {
          name: "count",
          url: `${server.base}/iam/v2beta1/groups?uidp.descendants_of=${meta.big}&page_size=1`,
          itemsField: "groups",
          expect: { items: 1, totalCount: BIG_GROUPS },
        },
      ],
      rows: [
        ...(urls ? pageRows : []),
        { op: "count", key: "pg.count", token: "workload", name: `totalCount over ${fmt(BIG_GROUPS)} (page_size 1)` },
      ],
    });
    await sequenceRows(ctx, {
      section: "PostgreSQL",
      headers: await tokens.workload("bench"),
      runs: cfg.walkRuns,
      ops: [
        {
          name: "walk",
          url: `${server.base}/iam/v2beta1/groups?uidp.children_of=${meta.wide}&page_size=200`,
          follow: true,
          itemsField: "groups",
          expect: { items: WIDE_CHILDREN, pages: Math.ceil(WIDE_CHILDREN / 200), totalCount: WIDE_CHILDREN },
        },
      ],
      rows: [
        {
          op: "walk",
          key: "pg.walk",
          token: "workload",
          name: `all ${fmt(WIDE_CHILDREN)} children, page_size 200 (${Math.ceil(WIDE_CHILDREN / 200)} requests)`,
        },
      ],
    });
  } finally {
    await stop(server.child);
    await resources.pgHalt(ds.dir);
  }
}

async function pgliteCopy(resources, ds) {
  const tmp = await mkdtemp(join(os.tmpdir(), "bulwark-bench-pglite-"));
  resources.dirs.add(tmp);
  const dataDir = join(tmp, "data");
  const t = performance.now();
  await run("cp", ["-a", ds.dir, dataDir]);
  const mib = Number((await run("du", ["-sm", dataDir])).stdout.split(/\s/)[0]);
  return { dataDir, mib, seconds: (performance.now() - t) / 1000 };
}

async function pglitePart(ctx) {
  const { resources, cfg, log } = ctx;
  const ds = await ensureDataset(resources, "pglite", { key: ctx.key, log });
  if (ds.cached) log(`  PGlite: dataset ${ds.key} from cache`);
  ctx.datasets.pglite = ds;
  const meta = ds.meta;
  const copy = await pgliteCopy(resources, ds);
  log(`  PGlite: the cached data dir (${fmt(copy.mib)} MiB) copied to a temp dir in ${copy.seconds.toFixed(1)} s`);

  // The first start on the copy is reported apart; then the median of three starts (a single one
  // moves by ±10% on a shared machine). The last of them serves the rows.
  const first = await startBulwark(resources, { label: "PGlite", dataDir: copy.dataDir });
  await stop(first.child);
  const starts = [];
  let server;
  for (let i = 0; i < 3; i++) {
    if (server) await stop(server.child);
    server = await startBulwark(resources, { label: "PGlite", dataDir: copy.dataDir });
    starts.push(server.readyMs);
  }
  const sortedStarts = [...starts].sort((a, b) => a - b);
  ctx.startup.pglite = { firstMs: first.readyMs, readyMs: sortedStarts[1], startsMs: starts };
  try {
    await sleep(cfg.idleMs);
    ctx.startup.pglite.rssIdleKiB = rssKiB(server.child.pid);
    const tokens = new Tokens(resources, server, meta);
    await checkDataset(server, meta, tokens, false);
    await commonRows(ctx, "PGlite", server, meta, tokens, "pglite");
    await sleep(cfg.idleMs);
    ctx.startup.pglite.rssAfterKiB = rssKiB(server.child.pid);
  } finally {
    await stop(server.child);
  }
}

// ---------------------------------------------------------------------------------------------
// Output.

function fmt(n, digits = 0) {
  return Number.isFinite(n)
    ? n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : "—";
}
const ms = (n) => (!Number.isFinite(n) ? "—" : n < 10 ? fmt(n, 2) : n < 100 ? fmt(n, 1) : fmt(n));
const ratioText = (n) => (!Number.isFinite(n) ? "—" : n >= 0.1 ? `${fmt(n, 2)}×` : `${n.toPrecision(2)}×`);

function rowRatio(report, row) {
  if (!row.vs || row.failed) return NaN;
  const base = report.get(row.vs.key);
  if (!base) return NaN;
  return row.vs.by === "p50" ? row.p50 / base.p50 : row.rps / base.rps;
}

function targets(report, ctx) {
  const r = (key) => report.get(key);
  const out = [];
  const add = (name, measured, ok, missing) =>
    out.push({
      name,
      measured: missing ? `not measured (${missing})` : measured,
      status: missing ? "not measured" : ok ? "met" : "not met",
    });
  const pgMissing = ctx.cfg.postgres ? "the row failed" : ctx.cfg.postgresSkipped;
  const ratioTarget = (name, key, baseKey, min) => {
    const a = r(key);
    const b = r(baseKey);
    if (!a || !b) return add(name, "", false, !ctx.cfg.postgres ? pgMissing : "a row failed");
    const v = a.rps / b.rps;
    add(name, `${fmt(v, 2)}× (${fmt(a.rps)} vs ${fmt(b.rps)} req/s)`, v >= min);
  };
  ratioTarget("PostgreSQL: GET by uid (workload token) ≥ 0.8× Fastify+pg PK select", "pg.get.workload", "base.pk", 0.8);
  ratioTarget(
    "PostgreSQL: List 50 + totalCount (workload) ≥ 0.6× Fastify+pg page+count",
    "pg.list.workload",
    "base.page",
    0.6,
  );
  {
    const a = r("pg.deep");
    const b = r("pg.page1");
    if (!a || !b) add("PostgreSQL: page 10,000 of 1,000,000 ≤ 1.2× page 1 (p50)", "", false, pgMissing);
    else
      add(
        "PostgreSQL: page 10,000 of 1,000,000 ≤ 1.2× page 1 (p50)",
        `${fmt(a.p50 / b.p50, 2)}× (${ms(a.p50)} vs ${ms(b.p50)} ms)`,
        a.p50 <= 1.2 * b.p50,
      );
  }
  {
    const a = r("pg.count");
    add(
      "PostgreSQL: totalCount over 1,000,000 rows p50 ≤ 25 ms",
      a ? `${ms(a.p50)} ms` : "",
      a && a.p50 <= 25,
      a ? undefined : pgMissing,
    );
  }
  {
    const a = r("pg.walk");
    add(
      `PostgreSQL: all ${fmt(WIDE_CHILDREN)} children (7 pages of 200) p99 ≤ 50 ms`,
      a ? `${ms(a.p99)} ms (p50 ${ms(a.p50)}, ${a.runs} walks)` : "",
      a && a.p99 <= 50,
      a ? undefined : pgMissing,
    );
  }
  ratioTarget(
    "PGlite: GET (workload) ≥ 0.5× the PostgreSQL GET (req/s)",
    "pglite.get.workload",
    "pg.get.workload",
    0.5,
  );
  {
    const a = r("pglite.list.workload");
    add(
      `PGlite: List 50 + totalCount (workload) p50 ≤ 15 ms at ${ctx.cfg.concurrency} connections`,
      a ? `${ms(a.p50)} ms` : "",
      a && a.p50 <= 15,
      a ? undefined : "the row failed",
    );
  }
  const s = ctx.startup.pglite;
  const mib = (k) => k / 1024;
  add(
    `PGlite: idle RSS ${ctx.cfg.idleMs / 1000} s after start ≤ ${TARGET_RSS_START_MIB} MiB`,
    s?.rssIdleKiB ? `${fmt(mib(s.rssIdleKiB))} MiB` : "",
    s?.rssIdleKiB && mib(s.rssIdleKiB) <= TARGET_RSS_START_MIB,
    s?.rssIdleKiB ? undefined : "not reached",
  );
  add(
    `PGlite: idle RSS ${ctx.cfg.idleMs / 1000} s after the load ≤ ${TARGET_RSS_LOAD_MIB} MiB`,
    s?.rssAfterKiB ? `${fmt(mib(s.rssAfterKiB))} MiB` : "",
    s?.rssAfterKiB && mib(s.rssAfterKiB) <= TARGET_RSS_LOAD_MIB,
    s?.rssAfterKiB ? undefined : "not reached",
  );
  add(
    `PGlite: bulwark serve ready (GET /healthz 200) on a migrated data dir ≤ ${TARGET_READY_MS / 1000} s`,
    s?.readyMs
      ? `${fmt(s.readyMs)} ms (median of ${s.startsMs.map((n) => fmt(n)).join(", ")}; first start on the copy: ${fmt(s.firstMs)} ms)`
      : "",
    s?.readyMs && s.readyMs <= TARGET_READY_MS,
    s?.readyMs ? undefined : "not reached",
  );
  return out;
}

function machine() {
  const cpus = os.cpus();
  let nproc = String(os.availableParallelism?.() ?? cpus.length);
  try {
    nproc = execFileSync("nproc", { encoding: "utf8" }).trim();
  } catch {}
  let pgVersion = "—";
  try {
    pgVersion =
      /\d+\.\d+/.exec(execFileSync(join(PG_BIN, "postgres"), ["--version"], { encoding: "utf8" }))?.[0] ?? "—";
  } catch {}
  let commit = "—";
  try {
    commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
    if (execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: ROOT, encoding: "utf8" }).trim())
      commit += " + local changes";
  } catch {}
  const pglite = JSON.parse(
    readFileSync(join(ROOT, "node_modules", "@electric-sql", "pglite", "package.json"), "utf8"),
  ).version;
  return {
    date: new Date().toISOString().replace("T", " ").slice(0, 16) + " UTC",
    cpu: cpus[0]?.model.trim() ?? "unknown CPU",
    nproc,
    memory: `${fmt(os.totalmem() / 2 ** 30)} GiB`,
    node: process.version,
    postgres: pgVersion,
    pglite,
    commit,
  };
}

function tableRows(report) {
  return report.rows.map((row) => {
    const ratio = rowRatio(report, row);
    return [
      row.section,
      row.name,
      row.token ?? "—",
      row.kind === "latency" ? `1 (seq., ${row.runs ?? "—"} runs)` : String(row.conns),
      row.failed ? "FAILED" : row.kind === "latency" ? "—" : fmt(row.rps),
      row.failed ? "—" : ms(row.p50),
      row.failed ? "—" : ms(row.p99),
      row.vs ? `${ratioText(ratio)} ${row.vs.by === "p50" ? "p50 of" : ""} ${row.vs.label}`.replace(/\s+/g, " ") : "",
    ];
  });
}

const HEAD = ["", "row", "token", "conns", "req/s", "p50 ms", "p99 ms", "ratio (req/s unless p50) to"];

function plainTable(rows) {
  const widths = HEAD.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const right = new Set([3, 4, 5, 6]);
  const line = (cells) =>
    "  " +
    cells
      .map((c, i) => (right.has(i) ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join("  ")
      .trimEnd();
  return [line(HEAD), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

function mdTable(head, rows) {
  const esc = (c) => String(c).replace(/\|/g, "\\|");
  return [
    `| ${head.map(esc).join(" | ")} |`,
    `|${head.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.map(esc).join(" | ")} |`),
  ].join("\n");
}

function output(ctx) {
  const { report, cfg } = ctx;
  const m = machine();
  const rows = tableRows(report);
  const tg = targets(report, ctx);
  const s = ctx.startup;
  const conditions =
    `${cfg.seconds} s per throughput row after ${cfg.warmup} s warm-up, ` +
    `${cfg.concurrency} keep-alive connections; sequential rows: ${cfg.seqRuns} runs (walk: ${cfg.walkRuns}) after ${cfg.seqWarmup} warm-up runs, one connection`;
  const machineLine = `${m.date} · ${m.cpu}, nproc ${m.nproc}, ${m.memory} · Node ${m.node} · PostgreSQL ${m.postgres} · PGlite ${m.pglite} · commit ${m.commit}`;
  const startupLines = [];
  if (s.pglite)
    startupLines.push(
      `PGlite server: ready in ${fmt(s.pglite.readyMs)} ms on a migrated data dir (median of three starts after the first, ${fmt(s.pglite.firstMs)} ms); ` +
        `idle RSS ${fmt((s.pglite.rssIdleKiB ?? NaN) / 1024)} MiB after start, ${fmt((s.pglite.rssAfterKiB ?? NaN) / 1024)} MiB after the load`,
    );
  if (s.pg) startupLines.push(`PostgreSQL server: ready in ${fmt(s.pg.readyMs)} ms (cached, migrated database)`);

  console.log(`\nAPI bench · ${machineLine}\n  ${cfg.quick ? "--quick: " : ""}${conditions}\n`);
  console.log(plainTable(rows));
  console.log(`\n  Targets`);
  const w = Math.max(...tg.map((t) => t.name.length));
  for (const t of tg)
    console.log(
      `  ${t.name.padEnd(w)}  ${t.status === "met" ? "met    " : t.status === "not met" ? "NOT MET" : "—      "}  ${t.measured}`,
    );
  for (const line of startupLines) console.log(`  ${line}`);
  for (const note of report.notes) console.log(`  note: ${note}`);
  if (report.failures.length) {
    console.log(`\n  ${report.failures.length} row(s) FAILED (their figures are not usable):`);
    for (const f of report.failures) console.log(`    ${f}`);
  }

  const md = [
    `## API bench, ${m.date}`,
    "",
    `Machine: ${m.cpu}, nproc ${m.nproc}, ${m.memory} memory; Node ${m.node}; PostgreSQL ${m.postgres}; PGlite ${m.pglite}; commit ${m.commit}.`,
    `Run: \`npm run bench${cfg.quick ? " -- --quick" : ""}\`: ${conditions}. Load generator, baselines, server and PostgreSQL share the machine's cores.`,
    "",
    mdTable(
      HEAD.map((h, i) => (i === 0 ? "section" : h)),
      rows,
    ),
    "",
    mdTable(
      ["target", "result", "measured"],
      tg.map((t) => [t.name, t.status, t.measured]),
    ),
    "",
    ...startupLines.map((l) => `- ${l}`),
    ...report.notes.map((n) => `- note: ${n}`),
    ...report.failures.map((f) => `- FAILED: ${f}`),
    "",
  ].join("\n");
  console.log(`\n  Markdown (for bench/RESULTS.md; also in ${join(CACHE_DIR, "last-results.md")}):\n`);
  console.log(md);
  return md;
}

// ---------------------------------------------------------------------------------------------

export async function apiBench(options = {}) {
  const cfg = settings({ quick: Boolean(options.quick), seconds: options.seconds, concurrency: options.concurrency });
  const resources = new Resources();
  resources.install();
  const report = new Report();
  // One dataset key for the whole run, though the migrations may change while it runs.
  const key = datasetKey();
  const ctx = { cfg, resources, report, key, log: (line) => console.log(line), startup: {}, datasets: {} };
  const t = performance.now();
  try {
    console.log(
      `\nAPI bench: bulwark serve on ${cfg.postgres ? "PostgreSQL and " : ""}PGlite against baselines measured in this run` +
        (cfg.quick ? " (--quick: short rows, indicative only)" : ""),
    );
    const busy = await cpuBusy(cfg.quick ? 500 : 1000);
    if (busy > 0.1)
      report.notes.push(
        `the machine was ${Math.round(busy * 100)}% busy with other work when the run began: figures are noise`,
      );
    const bare = await startBaseline(resources, "bare");
    try {
      await throughputRow(ctx, {
        key: "base.bare",
        section: "baseline",
        name: "bare node:http (fixed JSON)",
        url: `${bare.base}/`,
        headers: {},
      });
    } finally {
      await stop(bare.child);
    }
    if (cfg.postgres)
      // A PostgreSQL part that cannot go on (a cluster that does not start, ...) does not stop PGlite's.
      await postgresPart(ctx).catch((err) =>
        report.failures.push(`PostgreSQL part stopped: ${err.stack ?? err.message}`),
      );
    else
      report.notes.push(
        `PostgreSQL skipped: ${cfg.postgresSkipped}; its rows, the Fastify+pg baselines and their targets are not measured`,
      );
    await pglitePart(ctx);
  } catch (err) {
    report.failures.push(`the bench stopped: ${err.stack ?? err.message}`);
  } finally {
    await resources.cleanup();
    resources.uninstall();
  }
  const md = output(ctx);
  await mkdir(CACHE_DIR, { recursive: true });
  await writeFile(join(CACHE_DIR, "last-results.md"), md);
  console.log(`  (API bench: ${((performance.now() - t) / 1000).toFixed(0)} s)`);
  if (report.failures.length) process.exitCode = 1;
  return { report, failed: report.failures.length > 0 };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  await apiBench({ quick: process.argv.includes("--quick") });
