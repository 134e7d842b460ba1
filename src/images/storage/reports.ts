// Vulnerability reports (vuln_reports: ours and uploaded ones, rows never updated so the history
// answers "since when"), the queue of reports to recompute (image_report_queue, claimed with
// SKIP LOCKED so replicas share it and a crash leaves the work queued) and the module's small
// named positions (images_state). "Newest" is by id, the order the one database inserted them,
// never by created_at: replicas' clocks differ and an uploaded report's time is the uploader's word.
import { sql } from "kysely";
import type { ImagesDb } from "./schema.js";

/** One stored Vulnerability (chainguard.platform.registry.Vulnerability in proto JSON). */
export type StoredVulnerability = Record<string, unknown>;

/**
 * The key a finding of ours keeps the advisory's uid under inside the stored Vulnerability JSON:
 * what read-time visibility filters on. Stripped before a report is answered.
 */
export const ADVISORY_UID_KEY = "bulwarkAdvisoryUid";

export type ReportOrigin = "bulwark" | "uploaded";

export interface ReportRow {
  id: string;
  repoUid: string;
  digest: string;
  /** chainguard.platform.registry.Scanner.Name (0 UNKNOWN: ours) */
  scannerName: number;
  scannerVersion: string;
  origin: ReportOrigin;
  dbBuildTime: Date | undefined;
  createdAt: Date;
  vulnerabilities: StoredVulnerability[];
  findingsDigest: string;
  raw: string | undefined;
  creator: string | undefined;
}

export interface NewReport {
  repoUid: string;
  digest: string;
  scannerName: number;
  scannerVersion: string;
  origin: ReportOrigin;
  dbBuildTime?: Date;
  createdAt: Date;
  vulnerabilities: StoredVulnerability[];
  findingsDigest: string;
  raw?: string;
  creator?: string;
}

export interface ReportFilter {
  /** only reports of these images; absent: any image (then repoUids is given) */
  digests?: readonly string[];
  /** only reports in repos inside these subtrees (the caller's visibility); absent: anywhere */
  visibleIn?: readonly string[];
  /** only reports in these repos; absent: any repo */
  repoUids?: readonly string[];
  scannerName?: number;
  /** with scannerName: only this version */
  scannerVersion?: string;
  /** only reports created after this time */
  createdSince?: Date;
  /** exactly at this time (GetRawVulnReport's created_at) */
  createdAt?: Date;
  /** newest first; at most this many */
  limit: number;
}

/** An image in a repo whose report is to be recomputed. */
export interface QueuedReport {
  repoUid: string;
  digest: string;
  /**
   * Queued by advisory changes: the changed names and purls the image has, which the recomputing
   * replica reads again before matching (its copy of the advisories may predate the change).
   */
  refresh?: { names: string[]; purls: string[] };
}

type DbRow = {
  id: string;
  repo_uid: string;
  digest: string;
  scanner_name: number;
  scanner_version: string;
  origin: ReportOrigin;
  db_build_time: Date | null;
  created_at: Date;
  vulnerabilities: StoredVulnerability[] | string;
  findings_digest: string;
  raw: string | null;
  creator: string | null;
};

function rowOf(r: DbRow): ReportRow {
  return {
    id: String(r.id),
    repoUid: r.repo_uid,
    digest: r.digest,
    scannerName: r.scanner_name,
    scannerVersion: r.scanner_version,
    origin: r.origin,
    dbBuildTime: r.db_build_time ?? undefined,
    createdAt: r.created_at,
    vulnerabilities: typeof r.vulnerabilities === "string" ? JSON.parse(r.vulnerabilities) : r.vulnerabilities,
    findingsDigest: r.findings_digest,
    raw: r.raw ?? undefined,
    creator: r.creator ?? undefined,
  };
}

export class ReportsRepository {
  constructor(private readonly db: ImagesDb) {}

  /** The newest report of an image in a repo (of one origin when given). */
  async latest(repoUid: string, digest: string, origin?: ReportOrigin): Promise<ReportRow | undefined> {
    let q = this.db.selectFrom("vuln_reports").selectAll().where("repo_uid", "=", repoUid).where("digest", "=", digest);
    if (origin) q = q.where("origin", "=", origin);
    const row = await q.orderBy("id", "desc").limit(1).executeTakeFirst();
    return row ? rowOf(row as DbRow) : undefined;
  }

  /** The newest findings digest of our report for each (repo, digest) given; absent: none yet. */
  async latestFindingsDigests(images: readonly QueuedReport[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    if (images.length === 0) return found;
    const rows = await this.db
      .selectFrom("vuln_reports")
      .select(["repo_uid", "digest", "findings_digest"])
      .distinctOn(["repo_uid", "digest"])
      .where("origin", "=", "bulwark")
      .where((eb) => eb.or(images.map((i) => eb.and([eb("repo_uid", "=", i.repoUid), eb("digest", "=", i.digest)]))))
      .orderBy("repo_uid")
      .orderBy("digest")
      .orderBy("id", "desc")
      .execute();
    for (const r of rows) found.set(queueKey(r.repo_uid, r.digest), r.findings_digest);
    return found;
  }

  /** Reports matching the filter, newest (last stored) first. */
  async list(filter: ReportFilter): Promise<ReportRow[]> {
    if (filter.digests?.length === 0 || filter.repoUids?.length === 0 || filter.visibleIn?.length === 0) return [];
    let q = this.db.selectFrom("vuln_reports").selectAll();
    if (filter.digests) q = q.where("digest", "in", [...filter.digests]);
    const roots = filter.visibleIn;
    if (roots)
      q = q.where((eb) =>
        eb.or(roots.flatMap((root) => [eb("repo_uid", "=", root), eb("repo_uid", "like", `${root}/%`)])),
      );
    if (filter.repoUids) q = q.where("repo_uid", "in", [...filter.repoUids]);
    if (filter.scannerName !== undefined) {
      q = q.where("scanner_name", "=", filter.scannerName);
      if (filter.scannerVersion) q = q.where("scanner_version", "=", filter.scannerVersion);
    }
    if (filter.createdSince) q = q.where("created_at", ">", filter.createdSince);
    if (filter.createdAt) q = q.where("created_at", "=", filter.createdAt);
    const rows = await q.orderBy("id", "desc").limit(filter.limit).execute();
    return rows.map((r) => rowOf(r as DbRow));
  }

  async insert(report: NewReport): Promise<ReportRow> {
    const row = await this.db
      .insertInto("vuln_reports")
      .values({
        repo_uid: report.repoUid,
        digest: report.digest,
        scanner_name: report.scannerName,
        scanner_version: report.scannerVersion,
        origin: report.origin,
        db_build_time: report.dbBuildTime ?? null,
        created_at: report.createdAt,
        vulnerabilities: JSON.stringify(report.vulnerabilities),
        findings_digest: report.findingsDigest,
        raw: report.raw ?? null,
        creator: report.creator ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return rowOf(row as DbRow);
  }

  /** Queues images for recomputation (one row per repo and digest; already queued: kept). */
  async enqueue(images: readonly QueuedReport[], now: Date): Promise<void> {
    // Bounded statements: a full re-import can queue every image at once.
    for (let i = 0; i < images.length; i += 1000) {
      const chunk = images.slice(i, i + 1000);
      await this.db
        .insertInto("image_report_queue")
        .values(
          chunk.map((c) => ({
            repo_uid: c.repoUid,
            digest: c.digest,
            queue_time: now,
            refresh_names: c.refresh?.names ?? [],
            refresh_purls: c.refresh?.purls ?? [],
          })),
        )
        // queued again before it was taken: it reads again what both queuings changed
        .onConflict((oc) =>
          oc.columns(["repo_uid", "digest"]).doUpdateSet({
            refresh_names: sql`array(select distinct unnest(image_report_queue.refresh_names || excluded.refresh_names))`,
            refresh_purls: sql`array(select distinct unnest(image_report_queue.refresh_purls || excluded.refresh_purls))`,
          }),
        )
        .execute();
    }
  }

  /**
   * Takes up to `limit` queued images, oldest first, locking their rows (SKIP LOCKED: another
   * replica takes others) and deleting them; call inside a transaction, so a crash before the
   * commit leaves them queued. A row queued again while it is held waits for the commit and is
   * then inserted anew.
   */
  async claim(limit: number): Promise<QueuedReport[]> {
    const rows = await sql<{ repo_uid: string; digest: string; refresh_names: string[]; refresh_purls: string[] }>`
      delete from image_report_queue
      where (repo_uid, digest) in (
        select repo_uid, digest from image_report_queue
        order by queue_time, repo_uid, digest
        limit ${limit}
        for update skip locked)
      returning repo_uid, digest, refresh_names, refresh_purls`.execute(this.db);
    return rows.rows.map((r) => ({
      repoUid: r.repo_uid,
      digest: r.digest,
      ...(r.refresh_names.length || r.refresh_purls.length
        ? { refresh: { names: r.refresh_names, purls: r.refresh_purls } }
        : {}),
    }));
  }

  /** How many images wait for their report (tests and the bench). */
  async queued(): Promise<number> {
    const row = await this.db
      .selectFrom("image_report_queue")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async state(name: string): Promise<string | undefined> {
    const row = await this.db.selectFrom("images_state").select("value").where("name", "=", name).executeTakeFirst();
    return row?.value;
  }

  async setState(name: string, value: string): Promise<void> {
    await this.db
      .insertInto("images_state")
      .values({ name, value })
      .onConflict((oc) => oc.column("name").doUpdateSet({ value }))
      .execute();
  }

  /**
   * Locks a named position for the caller's transaction (created when missing): replicas that
   * advance it take turns instead of racing. Answers its value ("" when new).
   */
  async lockState(name: string): Promise<string> {
    await this.db
      .insertInto("images_state")
      .values({ name, value: "" })
      .onConflict((oc) => oc.column("name").doNothing())
      .execute();
    const row = await this.db
      .selectFrom("images_state")
      .select("value")
      .where("name", "=", name)
      .forUpdate()
      .executeTakeFirstOrThrow();
    return row.value;
  }
}

export function queueKey(repoUid: string, digest: string): string {
  return `${repoUid}@${digest}`;
}
