// Our vulnerability reports, kept current: the recompute worker and the advisories' changes.
//
// An image's report in repo R is its inventory matched against the advisories R's organization
// may consider: the public advisory groups' and those of R's organization (the root group of R's
// uid). A new row is written only when the findings changed from the latest one (history kept,
// so "since when" has an answer), with its `vuln_report.created` event in the same transaction.
// What to recompute comes from image_report_queue: the indexer queues an image once its
// inventory is read, and each advisory change (a row of advisory_changes, written inside the
// import's transaction) queues every image holding the packages it names — no layer is read again.
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { isAncestorOrSelf, parentOf } from "../core/uidp.js";
import { VERSION } from "../core/version.js";
import type { EventJournal } from "../platform/events.js";
import { recoverable, withinTransaction } from "../storage/ambient-transaction.js";
import type { Db } from "../storage/db.js";
import { AdvisoryCache, type AdvisoryView } from "./advisory-cache.js";
import type { InstalledPackage } from "./inventory/types.js";
import { purlTypeAndName } from "./storage/inventories.js";
import type { AdvisoryChange } from "./storage/advisory-changes.js";
import {
  ADVISORY_UID_KEY,
  queueKey,
  type QueuedReport,
  type ReportRow,
  type ReportsRepository,
  type StoredVulnerability,
} from "./storage/reports.js";

export const VULN_REPORT_CREATED = "dev.chainguard.api.platform.registry.vuln_report.created.v1";

/** Our scanner as reports name it: Scanner.Name UNKNOWN (the enum has no entry for us) and this version. */
export const OUR_SCANNER_NAME = 0;
export const OUR_SCANNER_VERSION = `bulwark ${VERSION}`;

/**
 * How far behind its last stamp the advisory cache's refresh by update time looks (imports begun
 * earlier may commit later). That refresh is for freshness only: an image queued by an advisory
 * change carries the changed names and purls, read again before it is matched.
 */
const CACHE_LOOKBACK_MS = 30_000;
/** Images recomputed in one transaction. */
const BATCH = 100;
/** Advisory changes turned into queued reports in one transaction. */
const CHANGES_BATCH = 100;

/** What the worker needs of an advisory (img-match's MatchableAdvisory, the fields used here). */
export interface CandidateAdvisory {
  uid: string;
  parentUid: string;
  artifactName: string;
  purl: string;
}

/** One finding (img-match's Finding). */
export interface ReportFinding {
  advisoryUid: string;
  vulnerability: object;
}

/** An image's inventory row as the worker reads it (img-index's InventoryRow, the fields used here). */
export interface InventoryForReport {
  digest: string;
  state: "pending" | "done" | "failed";
  packages: readonly InstalledPackage[];
}

export interface ReportDeps<A extends CandidateAdvisory = CandidateAdvisory> {
  db: Db;
  reports: ReportsRepository;
  advisoryChanges: { claim(limit: number): Promise<AdvisoryChange[]> };
  inventories: {
    get(digests: string[]): Promise<InventoryForReport[]>;
    packagesConcerned(names: string[], purls: string[]): Promise<Map<string, { names: string[]; purls: string[] }>>;
  };
  advisories: {
    advisoriesForPackages(names: string[], purls: string[]): Promise<A[]>;
    advisoriesChangedSince(after: Date | undefined): Promise<{ names: string[]; purls: string[] }>;
    lastChange(): Promise<Date | undefined>;
    publicGroups: readonly string[];
  };
  registry: { reposHoldingMany(digests: readonly string[]): Promise<Map<string, string[]>> };
  match(packages: readonly InstalledPackage[], advisories: readonly A[]): ReportFinding[];
  events: EventJournal;
  now(): Date;
  logger: Logger;
}

/** The VulnReport event body and API answer of a stored report (proto JSON). */
export function vulnReportJson(report: ReportRow, vulnerabilities: StoredVulnerability[]): Record<string, unknown> {
  return {
    digest: report.digest,
    scanner: {
      name: scannerNameJson(report.scannerName),
      version: report.scannerVersion,
      ...(report.dbBuildTime ? { dbBuildTime: report.dbBuildTime.toISOString() } : {}),
    },
    createdAt: report.createdAt.toISOString(),
    vulnerabilities,
  };
}

function scannerNameJson(n: number): string {
  return n === 1 ? "GRYPE" : n === 2 ? "TRIVY" : "UNKNOWN";
}

/** A stored finding without our internal key: what an answer shows. */
export function publicVulnerability(v: StoredVulnerability): StoredVulnerability {
  if (!(ADVISORY_UID_KEY in v)) return v;
  const { [ADVISORY_UID_KEY]: _uid, ...rest } = v;
  return rest;
}

export class ReportWorker<A extends CandidateAdvisory = CandidateAdvisory> {
  #running: Promise<void> | undefined;
  #again = false;
  #closed = false;

  /** every matchable advisory, kept in this process (advisory-cache.ts) */
  readonly #advisories: AdvisoryCache<A>;

  constructor(private readonly deps: ReportDeps<A>) {
    this.#advisories = new AdvisoryCache(deps.advisories, CACHE_LOOKBACK_MS);
  }

  /** Advisory rows this worker read so far (the steady state reads none: the bench and tests). */
  get advisoryRowsRead(): number {
    return this.#advisories.rowsRead;
  }

  /** Recomputes what is queued now, in the background (the indexer calls this after queueing). */
  wake(): void {
    if (this.#closed) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = (async () => {
      try {
        do {
          this.#again = false;
          while (!this.#closed && (await this.runBatch()) > 0);
        } while (this.#again && !this.#closed);
      } catch (err) {
        this.deps.logger.error({ err }, "vulnerability report recomputation failed");
      } finally {
        this.#running = undefined;
      }
    })();
  }

  /** Waits for the work in progress and takes no more (before the database closes). */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#running;
  }

  /** Recomputes everything queued, batch after batch (the periodic task; tests). Answers how many. */
  async drain(): Promise<number> {
    let total = 0;
    for (let n = await this.runBatch(); n > 0; n = await this.runBatch()) total += n;
    return total;
  }

  /**
   * One batch in one transaction: claim up to BATCH queued images, match each against its
   * candidate advisories, write the reports whose findings changed and their events. A crash
   * before the commit leaves the batch queued. Answers how many images it took.
   */
  async runBatch(): Promise<number> {
    const { deps } = this;
    return withinTransaction(deps.db, async () => {
      const claimed = await deps.reports.claim(BATCH);
      if (claimed.length === 0) return 0;
      const digests = [...new Set(claimed.map((c) => c.digest))];
      const inventories = new Map(
        (await deps.inventories.get(digests)).filter((i) => i.state === "done").map((i) => [i.digest, i]),
      );
      // A pending inventory is queued again by the indexer once read; a failed one gets no report.
      const ready = claimed.filter((c) => inventories.has(c.digest));
      if (ready.length === 0) return claimed.length;

      for (const item of claimed) if (item.refresh) this.#advisories.invalidate(item.refresh.names, item.refresh.purls);
      const { byName, byPurl, lastChange: dbBuildTime } = await this.#advisories.current();
      const previous = await deps.reports.latestFindingsDigests(ready);
      const now = deps.now();
      // The same image in repos of one organization matches the same advisories: computed once.
      const computed = new Map<string, { vulnerabilities: StoredVulnerability[]; digest: string }>();
      for (const item of ready) {
        const org = item.repoUid.slice(0, 40);
        const memo = `${org}@${item.digest}`;
        let result = computed.get(memo);
        if (!result) {
          const inv = inventories.get(item.digest)!;
          const considered = consideredAdvisories(org, deps.advisories.publicGroups, inv.packages, { byName, byPurl });
          const findings = deps.match(inv.packages, considered);
          const vulnerabilities = findings.map((f) => ({ ...f.vulnerability, [ADVISORY_UID_KEY]: f.advisoryUid }));
          result = { vulnerabilities, digest: findingsDigest(vulnerabilities) };
          computed.set(memo, result);
        }
        if (previous.get(queueKey(item.repoUid, item.digest)) === result.digest) continue;
        const { vulnerabilities, digest } = result;
        // One image that cannot be written (its repo deleted meanwhile, ...) is skipped, logged;
        // the batch's other images are not held back by it.
        try {
          await recoverable(() => this.write(item, vulnerabilities, digest, dbBuildTime, now));
        } catch (err) {
          deps.logger.error({ err, repo: item.repoUid, digest: item.digest }, "vulnerability report not written");
        }
      }
      return claimed.length;
    });
  }

  private async write(
    item: QueuedReport,
    vulnerabilities: StoredVulnerability[],
    digest: string,
    dbBuildTime: Date | undefined,
    now: Date,
  ): Promise<void> {
    const row = await this.deps.reports.insert({
      repoUid: item.repoUid,
      digest: item.digest,
      scannerName: OUR_SCANNER_NAME,
      scannerVersion: OUR_SCANNER_VERSION,
      origin: "bulwark",
      dbBuildTime,
      createdAt: now,
      vulnerabilities,
      findingsDigest: digest,
    });
    const group = parentOf(item.repoUid);
    await this.deps.events.record({
      type: VULN_REPORT_CREATED,
      subject: item.repoUid,
      group,
      body: vulnReportJson(row, this.#deliverable(vulnerabilities, group).map(publicVulnerability)),
    });
  }

  /**
   * The findings an event in `group` may name: those of public advisories and of advisories in
   * `group`'s subtree. A report also considers the rest of its organization's advisories, which a
   * subscriber to `group` may not be allowed to read; ListVulnReports shows them to who may.
   */
  #deliverable(vulnerabilities: StoredVulnerability[], group: string | undefined): StoredVulnerability[] {
    const { publicGroups } = this.deps.advisories;
    return vulnerabilities.filter((v) => {
      const advisory = v[ADVISORY_UID_KEY];
      if (typeof advisory !== "string") return true;
      return (
        (group !== undefined && isAncestorOrSelf(group, advisory)) ||
        publicGroups.some((g) => isAncestorOrSelf(g, advisory))
      );
    });
  }

  /**
   * Queues the images the recorded advisory changes concern, a batch of changes per transaction:
   * the changes are claimed (SKIP LOCKED: replicas take different ones) and deleted in the
   * transaction that queues the images, so a crash before the commit leaves them recorded.
   * Answers how many images it queued.
   */
  async checkAdvisories(): Promise<number> {
    const { deps } = this;
    let queued = 0;
    for (;;) {
      const taken = await withinTransaction(deps.db, async () => {
        const changes = await deps.advisoryChanges.claim(CHANGES_BATCH);
        if (changes.length === 0) return undefined;
        const names = [...new Set(changes.flatMap((c) => c.names))];
        const purls = [...new Set(changes.flatMap((c) => c.purls))];
        // Each image is queued with the changed names and purls it has: whichever replica
        // recomputes it reads those advisories again first (its copy may predate the change).
        const concerned = await deps.inventories.packagesConcerned(names, purls);
        const holding = await deps.registry.reposHoldingMany([...concerned.keys()]);
        const images: QueuedReport[] = [];
        for (const [digest, refresh] of concerned)
          for (const repoUid of holding.get(digest) ?? []) images.push({ repoUid, digest, refresh });
        await deps.reports.enqueue(images, deps.now());
        return images.length;
      });
      if (taken === undefined) break;
      queued += taken;
    }
    if (queued > 0) this.wake();
    return queued;
  }
}

/**
 * The advisories an image in organization `org` considers: its packages' candidates (by origin,
 * name and purl) among the advisories of the public groups and of `org`.
 */
export function consideredAdvisories<A extends CandidateAdvisory>(
  org: string,
  publicGroups: readonly string[],
  packages: readonly InstalledPackage[],
  advisories: Pick<AdvisoryView<A>, "byName" | "byPurl">,
): A[] {
  const seen = new Set<string>();
  const out: A[] = [];
  const allowed = (a: A) => isAncestorOrSelf(org, a.uid) || publicGroups.some((g) => isAncestorOrSelf(g, a.uid));
  const take = (list: readonly A[] | undefined) => {
    for (const a of list ?? []) if (!seen.has(a.uid) && allowed(a)) (seen.add(a.uid), out.push(a));
  };
  for (const p of packages) {
    take(advisories.byName.get(p.origin));
    take(advisories.byName.get(p.name));
    const key = p.purl ? purlTypeAndName(p.purl) : undefined;
    // An OSV record names the binary or the source package (deb: the source).
    if (key)
      (take(advisories.byPurl.get(`${key.type}/${key.name}`)), take(advisories.byPurl.get(`${key.type}/${p.origin}`)));
  }
  return out;
}

/** sha256 of the findings as stored: an unchanged recomputation writes nothing. */
export function findingsDigest(vulnerabilities: readonly StoredVulnerability[]): string {
  return createHash("sha256").update(JSON.stringify(vulnerabilities)).digest("hex");
}

/** What the reports use of the vulnerabilities module's exports (img-match adds them there). */
export type ReportAdvisories<
  A extends CandidateAdvisory = CandidateAdvisory & { osv: Record<string, unknown> | null },
> = ReportDeps<A>["advisories"];
