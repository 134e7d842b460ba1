// Vulnerabilities.ListVulnCountReports and ListCumulativeVulnCountReports: summaries of our
// reports of the image a repo's tag names (each platform's, for an index), by severity.
//
// A reference names its repo by uid or by its full name ("acme/team/app"); references to repos
// the caller may not list reports of answer nothing, like unknown ones (the methods are
// unscoped: the caller's visibility decides). Without `from`, each image's newest report counts;
// with `from` (and `to`), every report of ours created in that range: one summary per report
// (ListVulnCountReports) or one per repo and tag with the CVE ids of the whole range
// (ListCumulativeVulnCountReports). Findings count only when the caller may read their advisory.
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { invalidArgument } from "../core/errors.js";
import type { Access } from "../core/access.js";
import { accessOf, type CallContext } from "../core/service.js";
import { isValidUidp } from "../core/uidp.js";
import {
  Vulnerability_Severity,
  type VulnCountReportFilter,
} from "../gen/platform/registry/v1/vulnerabilities.platform_pb.js";
import { OUR_SCANNER_NAME } from "./reports.js";
import type { ReportRow, ReportsRepository, StoredVulnerability } from "./storage/reports.js";

/** Most references one request may name. */
const MAX_REFERENCES = 100;
/** Most reports read per repo and tag. */
const MAX_REPORTS_PER_REFERENCE = 1000;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const SEVERITIES = ["LOW", "MEDIUM", "HIGH", "CRITICAL", "NEGLIGIBLE", "UNKNOWN"] as const;
type SeverityName = (typeof SEVERITIES)[number];

export interface VulnCountDeps {
  reports: ReportsRepository;
  registry: {
    resolveTag(repoUid: string, tag: string): Promise<string | undefined>;
    repoByName(name: string): Promise<string | undefined>;
  };
  inventories: { get(digests: string[]): Promise<{ digest: string; sizeCompressed?: number | null }[]> };
  /** the platform images a repo's digest names (an index's children; the image itself) */
  imagesIn(repoUid: string, digest: string): Promise<string[]>;
  canSeeRepo(visibility: CallContext["visibility"], repoUid: string): boolean;
  visibleFindings(report: ReportRow, access: Access): StoredVulnerability[];
}

interface Reference {
  repo: string;
  tag: string;
}

function referencesOf(req: VulnCountReportFilter): Reference[] {
  const refs = req.references.length ? req.references : [{ repo: req.repo, tag: req.tag }];
  if (refs.length > MAX_REFERENCES)
    throw invalidArgument({ field: "references", description: `at most ${MAX_REFERENCES} references` });
  refs.forEach((r, i) => {
    const field = req.references.length ? `references[${i}]` : "";
    if (!r.repo) throw invalidArgument({ field: field ? `${field}.repo` : "repo", description: "is required" });
    if (!TAG.test(r.tag))
      throw invalidArgument({ field: field ? `${field}.tag` : "tag", description: "must be a tag" });
  });
  return refs.map((r) => ({ repo: r.repo, tag: r.tag }));
}

function dateOf(ts: Timestamp | undefined, field: string): Date | undefined {
  if (!ts) return undefined;
  const date = timestampDate(ts);
  if (Number.isNaN(date.getTime())) throw invalidArgument({ field, description: "is not a valid time" });
  return date;
}

function severityOf(v: StoredVulnerability): SeverityName {
  const s = v.severity;
  return typeof s === "string" && (SEVERITIES as readonly string[]).includes(s) ? (s as SeverityName) : "UNKNOWN";
}

/** A finding's CVE ids: its id when it is one, and the CVE aliases. */
function cveIdsOf(v: StoredVulnerability): string[] {
  const ids = [v.id, ...(Array.isArray(v.aliases) ? v.aliases : [])];
  return ids.filter((id): id is string => typeof id === "string" && /^CVE-\d{4}-\d+$/.test(id));
}

/** The summary of findings (by CVE id, the highest severity a CVE was seen with). */
function summaryOf(findings: StoredVulnerability[]) {
  const bySeverity = new Map<SeverityName, Set<string>>(SEVERITIES.map((s) => [s, new Set()]));
  const seen = new Set<string>();
  for (const v of findings) {
    const ids = cveIdsOf(v);
    // a finding without a CVE id still counts, under its own id
    for (const id of ids.length ? ids : [String(v.id ?? "")]) {
      if (!id || seen.has(id)) continue;
      seen.add(id);
      bySeverity.get(severityOf(v))!.add(id);
    }
  }
  const ids = (s: SeverityName) => [...bySeverity.get(s)!].sort();
  const cves = (list: string[]) => list.filter((id) => id.startsWith("CVE-"));
  return {
    vulnCounts: SEVERITIES.map((s) => ({ severity: Vulnerability_Severity[s], count: bySeverity.get(s)!.size })).filter(
      (c) => c.count > 0,
    ),
    cveIds: cves([...seen].sort()),
    lowCveIds: cves(ids("LOW")),
    medCveIds: cves(ids("MEDIUM")),
    highCveIds: cves(ids("HIGH")),
    critCveIds: cves(ids("CRITICAL")),
    negligibleCveIds: cves(ids("NEGLIGIBLE")),
    unknownCveIds: cves(ids("UNKNOWN")),
  };
}

export function vulnCountHandlers(deps: VulnCountDeps) {
  /** Per reference the caller may read: the reports of ours it concerns (newest first) and the image sizes. */
  async function reportsOf(req: VulnCountReportFilter, call: CallContext) {
    const from = dateOf(req.from, "from");
    const to = dateOf(req.to, "to");
    const out: { ref: Reference; reports: ReportRow[]; sizes: Map<string, number> }[] = [];
    for (const ref of referencesOf(req)) {
      const repoUid = isValidUidp(ref.repo) ? ref.repo : await deps.registry.repoByName(ref.repo);
      if (!repoUid || !deps.canSeeRepo(call.visibility, repoUid)) continue;
      const digest = await deps.registry.resolveTag(repoUid, ref.tag);
      if (!digest) continue;
      const digests = await deps.imagesIn(repoUid, digest);
      let reports = await deps.reports.list({
        digests,
        repoUids: [repoUid],
        scannerName: OUR_SCANNER_NAME,
        createdSince: from,
        limit: MAX_REPORTS_PER_REFERENCE,
      });
      if (to) reports = reports.filter((r) => r.createdAt <= to);
      // without a range: each platform's newest report
      if (!from && !to) reports = digests.flatMap((d) => reports.find((r) => r.digest === d) ?? []);
      const sizes = new Map(
        (await deps.inventories.get(digests)).map((i) => [i.digest, Number(i.sizeCompressed ?? 0)] as const),
      );
      out.push({ ref, reports, sizes });
    }
    return out;
  }

  return {
    async listVulnCountReports(req: VulnCountReportFilter, call: CallContext) {
      const access = accessOf(call);
      const items = (await reportsOf(req, call)).flatMap(({ ref, reports, sizes }) =>
        reports.map((report) => ({
          repo: ref.repo,
          tag: ref.tag,
          date: timestampFromDate(report.createdAt),
          sizeBytes: BigInt(sizes.get(report.digest) ?? 0),
          ...summaryOf(deps.visibleFindings(report, access)),
        })),
      );
      return { items };
    },

    async listCumulativeVulnCountReports(req: VulnCountReportFilter, call: CallContext) {
      const access = accessOf(call);
      const items = (await reportsOf(req, call))
        .filter(({ reports }) => reports.length > 0)
        .map(({ ref, reports, sizes }) => ({
          repo: ref.repo,
          tag: ref.tag,
          date: timestampFromDate(reports[0]!.createdAt),
          sizeBytes: BigInt(sizes.get(reports[0]!.digest) ?? 0),
          ...summaryOf(reports.flatMap((r) => deps.visibleFindings(r, access))),
        }));
      return { items };
    },
  };
}
