// The API bench's datasets (bench/api.mjs), generated once and cached under bench/.cache/datasets/
// <key>/, where <key> hashes src/*/migrations/*.ts (a schema change rebuilds), GENERATOR_VERSION and
// the advisory corpus's file list. Per backend:
//   pg/ + pg.json         a PostgreSQL cluster made by scripts/pg-temp.sh (halted; `resume`d per run)
//   pglite/ + pglite.json a bulwark PGlite data dir (copied to a temp dir per run: see bench/README.md)
// The .json (uids, the identities' signing key, the cluster's key-encryption key) is written last:
// without it the entry is incomplete and is built again.
//
// How: `bulwark serve` migrates the empty database; through the API (operator token) it gets
// org "bench" with group "wide", a static-keys workload identity "bench-viewer" holding the
// built-in viewer role at "bench", and (PostgreSQL only) org "big" with identity "big-viewer" bound
// at "big"; one image is pushed to bench/app over the OCI API; the wolfi advisory corpus is
// imported with `bulwark advisories import`. Then the server stops and plain set-based SQL (so
// the schema's checks and triggers apply) adds 1,250 children to "wide", 9,999 more tags to
// bench/app (10,000 in all) and, on PostgreSQL, 999 children × 1,000 grandchildren to "big"
// (1,000,000 groups with "big" itself), followed by `vacuum analyze`.
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { exportJWK, generateKeyPair } from "jose";
import {
  BULWARK,
  CACHE_DIR,
  ROOT,
  adminToken,
  childEnv,
  json,
  run,
  runTracked,
  send,
  startBulwark,
  stop,
} from "./lib.mjs";

/** Bump when what the generator makes changes (the migrations are hashed anyway). */
export const GENERATOR_VERSION = 3;

export const CORPUS =
  process.env.BENCH_ADVISORIES_CORPUS ?? join(ROOT, "..", "shared", "data", "wolfi-advisories", "advisories");
export const WIDE_CHILDREN = 1250;
export const TAGS = 10_000;
export const BIG_CHILDREN = 999;
export const BIG_GRANDCHILDREN = 1000; // per child
export const BIG_GROUPS = 1 + BIG_CHILDREN + BIG_CHILDREN * BIG_GRANDCHILDREN; // 1,000,000
const STATIC_ISSUER = "https://bench-issuer.bulwark.invalid";
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";

function corpusFiles() {
  return existsSync(CORPUS)
    ? readdirSync(CORPUS)
        .filter((f) => f.endsWith(".yaml"))
        .sort()
    : [];
}

/** The cache key: the migrations' sources, the generator's version, the corpus's file names. */
export function datasetKey() {
  const hash = createHash("sha256").update(`generator ${GENERATOR_VERSION}\n`);
  const src = join(ROOT, "src");
  for (const module of readdirSync(src).sort()) {
    const dir = join(src, module, "migrations");
    if (!existsSync(dir)) continue;
    for (const file of readdirSync(dir)
      .filter((f) => f.endsWith(".ts"))
      .sort()) {
      hash
        .update(`${module}/migrations/${file}\n`)
        .update(readFileSync(join(dir, file)))
        .update("\n");
    }
  }
  hash.update(corpusFiles().join("\n"));
  return hash.digest("hex").slice(0, 16);
}

const UID = /^[0-9a-f]{40}(\/[0-9a-f]{16})*$/;
/** A uid for SQL text (checked, so interpolation is safe; literals keep PGlite's typing happy). */
function lit(uid) {
  if (!UID.test(uid)) throw new Error(`not a uid: ${uid}`);
  return `'${uid}'`;
}

const NOW = `date_trunc('milliseconds', now())`;

/** The SQL that fills a migrated database, in order (label, statement). */
function fillStatements(meta, backend) {
  const groupsCols = "uid, parent_uid, name, description, create_time, update_time";
  const out = [
    [
      `${WIDE_CHILDREN} children of bench/wide`,
      `insert into groups (${groupsCols})
       select ${lit(meta.wide)} || '/' || substr(md5('wide/' || i), 1, 16), ${lit(meta.wide)},
              'child-' || lpad(i::text, 4, '0'), 'bench child ' || i,
              ${NOW} - i * interval '1 millisecond', ${NOW} - i * interval '1 millisecond'
       from generate_series(1, ${WIDE_CHILDREN}) i`,
    ],
    [
      `${TAGS - 1} tags of bench/app`,
      `insert into tags (uid, repo_uid, name, digest, update_time)
       select ${lit(meta.repo)} || '/' || substr(md5('tag/' || i), 1, 16), ${lit(meta.repo)},
              'v' || lpad(i::text, 5, '0'), '${meta.digest}', ${NOW} - i * interval '1 millisecond'
       from generate_series(1, ${TAGS - 1}) i`,
    ],
  ];
  if (backend === "pg") {
    // Checkpoints every 64 MB while loading, so the cluster keeps (and the cache holds) ~100 MB
    // of WAL instead of the ~1 GB these inserts write; reset to the default at the end.
    out.unshift(["", "alter system set max_wal_size = '64MB'"], ["", "select pg_reload_conf()"]);
    out.push([
      `${BIG_CHILDREN} children of big`,
      `insert into groups (${groupsCols})
       select ${lit(meta.big)} || '/' || substr(md5('big/' || i), 1, 16), ${lit(meta.big)},
              'team-' || lpad(i::text, 3, '0'), '', ${NOW}, ${NOW}
       from generate_series(1, ${BIG_CHILDREN}) i`,
    ]);
    // The grandchildren in slices of 100 children (100,000 rows per statement).
    for (let from = 1; from <= BIG_CHILDREN; from += 100) {
      const to = Math.min(BIG_CHILDREN, from + 99);
      const name = (n) => `'team-${String(n).padStart(3, "0")}'`;
      out.push([
        `grandchildren of big's children ${from}-${to}`,
        `insert into groups (${groupsCols})
         select c.uid || '/' || substr(md5(c.uid || '/' || j), 1, 16), c.uid,
                'group-' || lpad(j::text, 4, '0'), '', ${NOW} - j * interval '1 millisecond',
                ${NOW} - j * interval '1 millisecond'
         from groups c cross join generate_series(1, ${BIG_GRANDCHILDREN}) j
         where c.parent_uid = ${lit(meta.big)} and c.name between ${name(from)} and ${name(to)}`,
      ]);
    }
  }
  out.push(["vacuum analyze", "vacuum analyze"]);
  if (backend === "pg") out.push(["", "alter system reset max_wal_size"], ["", "select pg_reload_conf()"]);
  out.push(["checkpoint", "checkpoint"]);
  return out;
}

/** What the filled database must hold (query, expected), checked after the SQL. */
function checks(meta, backend) {
  const out = [
    [`select count(*)::int as n from groups where parent_uid = ${lit(meta.wide)}`, WIDE_CHILDREN],
    [`select count(*)::int as n from tags where repo_uid = ${lit(meta.repo)}`, TAGS],
  ];
  if (backend === "pg")
    out.push([
      // descendants_of: the uid itself and [uid + "/", uid + "0"), as the server's filter
      `select count(*)::int as n from groups where uid = ${lit(meta.big)} or (uid > '${meta.big}/' and uid < '${meta.big}0')`,
      BIG_GROUPS,
    ]);
  return out;
}

/** Runs the fill SQL with `exec(sql) -> rows`; logs each step's time. */
async function fill(exec, meta, backend, log) {
  for (const [label, statement] of fillStatements(meta, backend)) {
    const t = performance.now();
    await exec(statement);
    if (label) log(`    ${label}: ${((performance.now() - t) / 1000).toFixed(1)} s`);
  }
  for (const [query, want] of checks(meta, backend)) {
    const [row] = await exec(query);
    if (Number(row.n) !== want) throw new Error(`dataset check failed: ${query} → ${row.n}, expected ${want}`);
  }
}

async function pushImage(server, registryToken) {
  const auth = { authorization: `Bearer ${registryToken}` };
  const blob = async (bytes) => {
    const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
    const started = await send(`${server.base}/v2/bench/app/blobs/uploads/`, { method: "POST", headers: auth });
    if (started.status !== 202) throw new Error(`POST upload: ${started.status} ${started.text.slice(0, 300)}`);
    const location = new URL(started.headers.get("location"), server.base);
    location.searchParams.set("digest", digest);
    const put = await send(location, {
      method: "PUT",
      headers: { ...auth, "content-type": "application/octet-stream" },
      body: bytes,
    });
    if (put.status !== 201) throw new Error(`PUT upload: ${put.status} ${put.text.slice(0, 300)}`);
    return { digest, size: bytes.length };
  };
  const config = await blob(
    Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", rootfs: { type: "layers", diff_ids: [] } })),
  );
  const layer = await blob(randomBytes(1024));
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
    layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", ...layer }],
  });
  const res = await send(`${server.base}/v2/bench/app/manifests/latest`, {
    method: "PUT",
    headers: { ...auth, "content-type": OCI_MANIFEST },
    body: manifest,
  });
  if (res.status !== 201) throw new Error(`PUT manifest: ${res.status} ${res.text.slice(0, 300)}`);
  return `sha256:${createHash("sha256").update(manifest).digest("hex")}`;
}

const SUMMARY = /(\d+) files: (\d+) advisories/;

async function importCorpus(resources, server, token, group) {
  try {
    const out = await runTracked(
      resources,
      process.execPath,
      [BULWARK, "advisories", "import", CORPUS, "--group", group, "--api-url", server.base],
      { env: childEnv({ BULWARK_TOKEN: token }) },
    );
    const m = SUMMARY.exec(out.stdout.trim().split("\n").at(-1) ?? "");
    if (!m) throw new Error(`no summary line in ${JSON.stringify(out.stdout.slice(-500))}`);
    return Number(m[2]);
  } catch (err) {
    throw new Error(`advisories import failed: ${`${err.stderr ?? ""}${err.stdout ?? ""}${err.message}`.slice(-2000)}`);
  }
}

/** Through the API, as the operator: orgs, groups, identities and bindings, the image, the advisories. */
async function populate(resources, server, backend, meta, log) {
  const token = await adminToken(resources, server);
  const auth = { authorization: `Bearer ${token}` };
  const post = async (path, body) =>
    json(
      await send(`${server.base}${path}`, { method: "POST", headers: auth, body: JSON.stringify(body) }),
      `POST ${path}`,
    );
  const { builtinRoleUid } = await import("../dist/iam/builtin-roles.js");
  const viewer = builtinRoleUid("viewer");
  const identity = async (org, name) => {
    const id = await post(`/iam/v2beta1/identities/${org}`, {
      name,
      description: "bench workload (viewer)",
      staticKeys: { issuer: STATIC_ISSUER, subject: name, issuerKeys: JSON.stringify({ keys: [meta.publicJwk] }) },
    });
    await post(`/iam/v2beta1/roleBindings/${org}`, { identityUid: id.uid, roleUid: viewer });
    return { uid: id.uid, issuer: STATIC_ISSUER, subject: name };
  };

  meta.bench = (await post("/iam/v2beta1/groups", { name: "bench" })).uid;
  meta.wide = (await post(`/iam/v2beta1/groups/${meta.bench}`, { name: "wide" })).uid;
  meta.identities = { bench: await identity(meta.bench, "bench-viewer") };
  if (backend === "pg") {
    meta.big = (await post("/iam/v2beta1/groups", { name: "big" })).uid;
    meta.identities.big = await identity(meta.big, "big-viewer");
  }
  meta.digest = await pushImage(server, await adminToken(resources, server, `127.0.0.1:${server.port}`));
  const repos = json(
    await send(`${server.base}/registry/v2beta1/repos?uidp.children_of=${meta.bench}`, { headers: auth }),
    "list repos",
  );
  meta.repo = repos.repos?.find((r) => r.name === "app")?.uid;
  if (!meta.repo) throw new Error(`no repo "app" after the push: ${JSON.stringify(repos).slice(0, 300)}`);
  if (corpusFiles().length) {
    const t = performance.now();
    meta.advisories = await importCorpus(resources, server, token, meta.bench);
    log(
      `    advisories import (${meta.advisories.toLocaleString("en-US")}): ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
  } else {
    meta.advisories = 0;
    log(`    no advisory corpus at ${CORPUS}: ListAdvisories rows will be skipped`);
  }
}

async function build(resources, backend, dir, log) {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const kid = randomUUID();
  const meta = {
    generator: GENERATOR_VERSION,
    backend,
    publicJwk: { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" },
    privateJwk: { ...(await exportJWK(privateKey)), kid, alg: "ES256" },
  };
  let databaseUrl;
  const env = {};
  if (backend === "pg") {
    meta.keyEncryptionKey = randomBytes(32).toString("hex");
    env.BULWARK_KEY_ENCRYPTION_KEY = meta.keyEncryptionKey;
    databaseUrl = await resources.pgStart(dir);
  }
  let t = performance.now();
  const server = await startBulwark(resources, {
    label: `${backend} dataset`,
    dataDir: dir,
    databaseUrl,
    blobDir: databaseUrl ? join(dir, "blobs") : undefined,
    env,
  });
  log(`    migrated (bulwark serve ready): ${((performance.now() - t) / 1000).toFixed(1)} s`);
  try {
    await populate(resources, server, backend, meta, log);
  } catch (err) {
    err.message += `\n  the server's last log lines: ${server.child.tail().slice(-1500) || "(none)"}`;
    throw err;
  } finally {
    await stop(server.child);
  }

  if (backend === "pg") {
    const { default: pg } = await import("pg");
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      await fill(async (text) => (await client.query(text)).rows, meta, backend, log);
    } finally {
      await client.end();
    }
    await resources.pgHalt(dir);
  } else {
    const { PGlite } = await import("@electric-sql/pglite");
    // the extensions the server loads (its migrations made pg_trgm's index)
    const { PGLITE_EXTENSIONS } = await import("../dist/storage/db.js");
    const db = await PGlite.create(dir, { extensions: PGLITE_EXTENSIONS });
    try {
      await fill(async (text) => (await db.query(text)).rows, meta, backend, log);
    } finally {
      await db.close();
    }
  }
  return meta;
}

/**
 * The cached dataset for "pg" or "pglite", built first if missing: { dir, meta, cached, key }.
 * `key`: computed once per run (the migrations may change while it runs); `rebuild`: throw the
 * cached one away first (a cluster that does not start again).
 */
export async function ensureDataset(
  resources,
  backend,
  { key = datasetKey(), log = console.log, rebuild = false } = {},
) {
  const root = join(CACHE_DIR, "datasets");
  const base = join(root, key);
  const dir = join(base, backend);
  const metaFile = join(base, `${backend}.json`);
  if (!rebuild && existsSync(metaFile) && existsSync(dir))
    return { dir, meta: JSON.parse(await readFile(metaFile, "utf8")), cached: true, key };

  // Old keys (another schema or generator): removed, their clusters halted first.
  await mkdir(root, { recursive: true });
  for (const other of await readdir(root)) {
    if (other === key) continue;
    const pgDir = join(root, other, "pg");
    if (existsSync(join(pgDir, "data", "postmaster.pid")))
      await run("bash", [join(ROOT, "scripts", "pg-temp.sh"), "halt", pgDir]).catch(() => {});
    await rm(join(root, other), { recursive: true, force: true });
  }
  await rm(metaFile, { force: true });
  if (existsSync(join(dir, "data", "postmaster.pid")))
    await run("bash", [join(ROOT, "scripts", "pg-temp.sh"), "halt", dir]).catch(() => {});
  await rm(dir, { recursive: true, force: true });
  await mkdir(base, { recursive: true });

  const building = `${dir}.building-${process.pid}`;
  await rm(building, { recursive: true, force: true });
  resources.dirs.add(building); // removed if the build fails or is interrupted
  const what =
    backend === "pg"
      ? `PostgreSQL: orgs bench (wide: ${WIDE_CHILDREN.toLocaleString("en-US")} children, ${TAGS.toLocaleString("en-US")} tags, advisories) and big (${BIG_GROUPS.toLocaleString("en-US")} groups)`
      : `PGlite: org bench (wide: ${WIDE_CHILDREN.toLocaleString("en-US")} children, ${TAGS.toLocaleString("en-US")} tags, advisories)`;
  log(
    `  dataset ${key} for ${what}: not in the cache, generating it once (a minute or so; later runs take it from the cache)…`,
  );
  const t = performance.now();
  const meta = await build(resources, backend, building, log);
  await rename(building, dir);
  resources.dirs.delete(building);
  if (backend === "pg") resources.clusters.delete(building);
  meta.key = key;
  meta.builtAt = new Date().toISOString();
  meta.buildSeconds = (performance.now() - t) / 1000;
  await writeFile(metaFile, JSON.stringify(meta, null, 2) + "\n", { mode: 0o600 });
  log(`  dataset ${key} (${backend}) generated in ${meta.buildSeconds.toFixed(1)} s`);
  return { dir, meta, cached: false, key };
}
