// Bench: re-matching 1,000 stored images after a full re-import of the wolfi advisory corpus
// (issue 28, item 8: goal ≤ 60 s on PostgreSQL). Everything runs in this process on a private
// PostgreSQL (scripts/pg-temp.sh), migrated like a server's:
//   1. the corpus (../shared/data/wolfi-advisories) imported through the advisories repository;
//   2. 1,000 inventories saved through the inventories repository (enqueued, claimed, saved, as
//      the indexer does), each of 40–80 apks named after corpus packages (every third a
//      subpackage `<origin>-libs`), at versions below every fix or above it, spread over 10 repos;
//   3. the report worker (src/images/reports.ts, the real one with its advisory cache) makes the
//      first reports (checkAdvisories + drain), untimed;
//   4. the whole corpus imported again under another import origin (so every advisory row
//      changes: update_time moves on all ~20,000), then timed: checkAdvisories (which images the
//      change concerns: all of them) and drain until the queue is empty.
// The registry is a stand-in answering which repos hold a digest (the bench has no registry
// tables filled); events are not recorded (NO_EVENTS): their cost is one insert per changed
// report. Reported: import times, the re-match time, images queued and reports written.
//
// Run: npm run build && node bench/images-reports.mjs   (or import { rematchBench } from it)
import { readFileSync, readdirSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { pino } from "pino";
import { ROOT, Resources } from "./lib.mjs";

const CORPUS =
  process.env.BENCH_ADVISORIES_CORPUS ?? join(ROOT, "..", "shared", "data", "wolfi-advisories", "advisories");
const GROUP = "0123456789abcdef0123456789abcdef01234567";

/** @returns {Promise<{images:number, advisories:number, queued:number, reports:number, rematchMs:number}>} */
export async function rematchBench({ corpus = CORPUS, imageCount = 1000, repoCount = 10, log = console.log } = {}) {
  const { openDatabase } = await import("../dist/storage/db.js");
  const { migrateAll } = await import("../dist/server/start.js");
  const { parseAdvisoryDocument } = await import("../dist/vulnerabilities/parse.js");
  const { AdvisoriesRepository } = await import("../dist/vulnerabilities/storage/advisories.js");
  const { vulnerabilitiesExports } = await import("../dist/vulnerabilities/exports.js");
  const { matchPackages } = await import("../dist/images/matching/match.js");
  const { imagesRepositories } = await import("../dist/images/module.js");
  const { ReportWorker } = await import("../dist/images/reports.js");
  const { NO_EVENTS } = await import("../dist/platform/events.js");
  const { sql } = await import("kysely");

  const resources = new Resources();
  resources.install();
  const pgDir = await mkdtemp(join(tmpdir(), "bulwark-bench-reports-pg-"));
  const databaseUrl = await resources.pgStart(pgDir);
  const database = await openDatabase({ databaseUrl });
  try {
    const { db } = database;
    await migrateAll(db);
    await sql`insert into groups (uid, name, create_time, update_time) values (${GROUP}, 'bench', date_trunc('milliseconds', now()), date_trunc('milliseconds', now()))`.execute(
      db,
    );
    const advisoriesRepo = new AdvisoriesRepository(db);
    const advisoryExports = vulnerabilitiesExports(advisoriesRepo, [GROUP]);
    const { inventories, reports, advisoryChanges } = imagesRepositories(db);
    // as the images module does: each import records what it changed, in its own transaction
    advisoryExports.onAdvisoriesChanged((change) => advisoryChanges.record(change, new Date()));
    const files = readdirSync(corpus)
      .filter((f) => f.endsWith(".advisories.yaml"))
      .sort();
    const documents = files.map((f) => parseAdvisoryDocument(f, readFileSync(join(corpus, f), "utf8")));
    const importAll = async (origin) => {
      const started = performance.now();
      for (const doc of documents)
        await advisoriesRepo.importDocument(GROUP, doc, { author: "bench", origin, now: new Date() });
      return Math.round(performance.now() - started);
    };
    const advisories = documents.reduce((n, d) => n + d.advisories.length, 0);
    log(`imported ${advisories} advisories of ${files.length} documents in ${await importAll("bench")} ms`);

    // 1,000 inventories with corpus package names, saved as the indexer saves them.
    const origins = files.map((f) => f.replace(/\.advisories\.yaml$/, ""));
    let seed = 28;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const repos = Array.from({ length: repoCount }, (_, i) => `${GROUP}/${(i + 1).toString(16).padStart(16, "0")}`);
    for (const [i, uid] of repos.entries())
      await sql`insert into repos (uid, parent_uid, name, create_time, update_time) values (${uid}, ${GROUP}, ${`app-${i}`}, date_trunc('milliseconds', now()), date_trunc('milliseconds', now()))`.execute(
        db,
      );
    const holding = new Map();
    const digests = [];
    const now = new Date();
    for (let i = 0; i < imageCount; i++) digests.push(`sha256:${i.toString(16).padStart(64, "0")}`);
    await inventories.enqueueMany(digests, now);
    const savedStarted = performance.now();
    for (let i = 0; i < imageCount; i++) {
      const lease = await inventories.claim(now, 60_000);
      const { digest } = lease;
      const count = 40 + Math.floor(random() * 41);
      const packages = [];
      const names = new Set();
      while (packages.length < count) {
        const origin = origins[Math.floor(random() * origins.length)];
        const name = packages.length % 3 === 2 ? `${origin}-libs` : origin;
        if (names.has(name)) continue;
        names.add(name);
        const version = random() < 0.5 ? "0.0.1-r0" : "99999-r0";
        packages.push({
          type: "apk",
          name,
          version,
          arch: "x86_64",
          origin,
          license: "MIT",
          purl: `pkg:apk/wolfi/${name}@${version}?arch=x86_64`,
        });
      }
      await inventories.save(
        lease,
        {
          os: "linux",
          architecture: "amd64",
          variant: "",
          created: now,
          config: {},
          sizeCompressed: 0,
          sizeUncompressed: 0,
          packageSource: "apk",
          distro: "wolfi",
          distroVersion: "20230201",
          packages,
        },
        now,
      );
      holding.set(digest, [repos[i % repoCount]]);
    }
    log(`saved ${imageCount} inventories in ${Math.round(performance.now() - savedStarted)} ms`);

    const worker = new ReportWorker({
      db,
      reports,
      inventories,
      advisoryChanges,
      advisories: advisoryExports,
      registry: { reposHoldingMany: async (digests) => new Map(digests.map((d) => [d, holding.get(d) ?? []])) },
      match: matchPackages,
      events: NO_EVENTS,
      now: () => new Date(),
      logger: pino({ level: "silent" }),
    });
    const reportCount = async () => Number((await sql`select count(*) as n from vuln_reports`.execute(db)).rows[0].n);
    // The first reports: every image queued as the indexer queues it.
    await reports.enqueue(
      digests.map((digest) => ({ repoUid: holding.get(digest)[0], digest })),
      new Date(),
    );
    // checkAdvisories wakes the worker's own loop too: both take batches until the queue is empty.
    const untilEmpty = async () => {
      await worker.drain();
      while ((await reports.queued()) > 0) await new Promise((r) => setTimeout(r, 20));
    };
    const firstStarted = performance.now();
    await worker.checkAdvisories();
    await untilEmpty();
    const first = await reportCount();
    log(`first reports: ${first} in ${Math.round(performance.now() - firstStarted)} ms (advisory cache load included)`);

    log(`re-imported the corpus (every advisory changed) in ${await importAll("bench-reimport")} ms`);
    const started = performance.now();
    const queued = await worker.checkAdvisories();
    await untilEmpty();
    const rematchMs = Math.round(performance.now() - started);
    await worker.close();
    const left = await reports.queued();
    const written = (await reportCount()) - first;
    log(
      `re-match after the re-import: ${queued} images queued, ${written} reports written (findings changed), ` +
        `queue ${left === 0 ? "empty" : `left with ${left}`} in ${rematchMs} ms (goal ≤ 60,000 ms on PostgreSQL)`,
    );
    return { images: imageCount, advisories, queued, reports: written, rematchMs };
  } finally {
    await database.close();
    await resources.cleanup();
    resources.uninstall();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await rematchBench();
