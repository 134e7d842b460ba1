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
import { withinTransaction } from "../storage/ambient-transaction.js";
import type { Db } from "../storage/db.js";
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
    digestsWithPackages(names: string[], purls: string[]): Promise<string[]>;
  };
  advisories: {
    advisoriesForPackages(names: string[], purls: string[]): Promise<A[]>;
    lastChange(): Promise<Date | undefined>;
    publicGroups: readonly string[];
  };
  registry: { reposHoldingMany(digests: readonly string[]): Promise<Map<string, string[]>> };
  match(packages: readonly InstalledPackage[], advisories: readonly A[]): ReportFinding[];
  events: EventJournal;
  now(): Date;
  logger: Logger;
}

/** "pkg:deb/debian/openssl@3.0?arch=amd64" → "deb/openssl": what a versionless advisory purl and a package share. */
export function purlKey(purl: string): string | undefined {
  const p = purlTypeAndName(purl);
  return p && `${p.type}/${p.name}`;
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

  constructor(private readonly deps: ReportDeps<A>) {}

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

      const names = new Set<string>();
      const purls = new Set<string>();
      for (const inv of inventories.values())
        for (const p of inv.packages) {
          names.add(p.name);
          names.add(p.origin);
          if (p.purl) purls.add(p.purl);
        }
      const candidates = await deps.advisories.advisoriesForPackages([...names], [...purls]);
      const byName = new Map<string, A[]>();
      const byPurl = new Map<string, A[]>();
      for (const a of candidates) {
        if (a.artifactName) push(byName, a.artifactName, a);
        const key = a.purl ? purlKey(a.purl) : undefined;
        if (key) push(byPurl, key, a);
      }
      const dbBuildTime = await deps.advisories.lastChange();
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
          const considered = this.consideredFor(org, inv.packages, byName, byPurl);
          const findings = deps.match(inv.packages, considered);
          const vulnerabilities = findings.map((f) => ({ ...f.vulnerability, [ADVISORY_UID_KEY]: f.advisoryUid }));
          result = { vulnerabilities, digest: findingsDigest(vulnerabilities) };
          computed.set(memo, result);
        }
        if (previous.get(queueKey(item.repoUid, item.digest)) === result.digest) continue;
        await this.write(item, result.vulnerabilities, result.digest, dbBuildTime, now);
      }
      return claimed.length;
    });
  }

  /** The candidates an image in organization `org` considers: its packages' advisories of public groups and of `org`. */
  private consideredFor(
    org: string,
    packages: readonly InstalledPackage[],
    byName: Map<string, A[]>,
    byPurl: Map<string, A[]>,
  ): A[] {
    const seen = new Set<string>();
    const out: A[] = [];
    const allowed = (a: A) =>
      isAncestorOrSelf(org, a.uid) || this.deps.advisories.publicGroups.some((g) => isAncestorOrSelf(g, a.uid));
    const take = (list: A[] | undefined) => {
      for (const a of list ?? []) if (!seen.has(a.uid) && allowed(a)) (seen.add(a.uid), out.push(a));
    };
    for (const p of packages) {
      take(byName.get(p.origin));
      take(byName.get(p.name));
      const key = p.purl ? purlTypeAndName(p.purl) : undefined;
      // An OSV record names the binary or the source package (deb: the source).
      if (key) (take(byPurl.get(`${key.type}/${key.name}`)), take(byPurl.get(`${key.type}/${p.origin}`)));
    }
    return out;
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
    await this.deps.events.record({
      type: VULN_REPORT_CREATED,
      subject: item.repoUid,
      group: parentOf(item.repoUid),
      body: vulnReportJson(row, vulnerabilities.map(publicVulnerability)),
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
        const digests = await deps.inventories.digestsWithPackages(names, purls);
        const holding = await deps.registry.reposHoldingMany(digests);
        const images: QueuedReport[] = [];
        for (const digest of digests) for (const repoUid of holding.get(digest) ?? []) images.push({ repoUid, digest });
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

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** sha256 of the findings as stored: an unchanged recomputation writes nothing. */
export function findingsDigest(vulnerabilities: readonly StoredVulnerability[]): string {
  return createHash("sha256").update(JSON.stringify(vulnerabilities)).digest("hex");
}

/** What the reports use of the vulnerabilities module's exports (img-match adds them there). */
export type ReportAdvisories<
  A extends CandidateAdvisory = CandidateAdvisory & { osv: Record<string, unknown> | null },
> = ReportDeps<A>["advisories"];
