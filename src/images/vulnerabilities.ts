// chainguard.platform.registry.Vulnerabilities: the vulnerability reports of images, ours
// (reports.ts keeps them current) and uploaded ones (CreateVulnReport), history kept.
//
// Visibility: a caller lists only reports in repos where it holds CAP_VULN_REPORT_LIST (the
// method is unscoped: its visibility), and a report of ours shows only the findings whose
// advisory the caller may see (CAP_ADVISORIES_LIST at the advisory's group): a report never
// names an advisory of a group the viewer cannot read.
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Access, Visibility } from "../core/access.js";
import { invalidArgument, notFound, type FieldViolation } from "../core/errors.js";
import { accessOf, bindService, declareScope, type CallContext, type ServiceBinding } from "../core/service.js";
import { isAncestorOrSelf, isValidUidp } from "../core/uidp.js";
import { throwIfViolations, timeOf } from "../core/validate.js";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import {
  Scanner_Name,
  Vulnerabilities,
  VulnerabilitySchema,
  type Vulnerability,
} from "../gen/platform/registry/v1/vulnerabilities.platform_pb.js";
import type { InstalledPackage } from "./inventory/types.js";
import { lookupKeysOf } from "./matching/match.js";
import {
  OUR_SCANNER_NAME,
  findingsDigest,
  publicVulnerability,
  type CandidateAdvisory,
  type InventoryForReport,
} from "./reports.js";
import {
  ADVISORY_UID_KEY,
  type ReportRow,
  type ReportsRepository,
  type StoredVulnerability,
} from "./storage/reports.js";
import { parseScannerReport, RawReportError } from "./scanner-reports.js";
import { vulnCountHandlers } from "./vuln-counts.js";

// The public proto marks no iam_scope on CreateVulnReport: the repo it names is its scope.
declareScope(Vulnerabilities.method.createVulnReport, { field: "repo_id", noun: "repo" });

/** Most reports one list answers (the proto has no paging). */
export const MAX_REPORTS = 1000;
/** An index lists at most this many platform images whose reports are answered. */
const MAX_PLATFORMS = 64;

const DIGEST = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const INDEX_TYPES = new Set([
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
]);

export interface VulnerabilitiesDeps<A extends CandidateAdvisory & { osv: Record<string, unknown> | null }> {
  reports: ReportsRepository;
  registry: {
    manifestIn(repoUid: string, digest: string): Promise<{ mediaType: string; content: Uint8Array } | undefined>;
    resolveTag(repoUid: string, tag: string): Promise<string | undefined>;
    reposHolding(digest: string): Promise<string[]>;
    repoByName(name: string): Promise<string | undefined>;
  };
  inventories: { get(digests: string[]): Promise<(InventoryForReport & { sizeCompressed?: number | null })[]> };
  advisories: { advisoriesForPackages(names: string[], purls: string[]): Promise<A[]> };
  now(): Date;
}

export function canSeeRepo(visibility: Visibility | undefined, repoUid: string): boolean {
  if (visibility === undefined) return false;
  return visibility === "all" || visibility.some((root) => isAncestorOrSelf(root, repoUid));
}

/** A stored report's findings the caller may see, as the API shows them. */
export function visibleFindings(report: ReportRow, access: Access): StoredVulnerability[] {
  return report.vulnerabilities
    .filter((v) => {
      const advisory = v[ADVISORY_UID_KEY];
      return typeof advisory !== "string" || access.can([Capability.CAP_ADVISORIES_LIST], advisory);
    })
    .map(publicVulnerability);
}

function vulnerabilityMessages(stored: StoredVulnerability[]): Vulnerability[] {
  return stored.map((v) => fromJson(VulnerabilitySchema, v as JsonValue, { ignoreUnknownFields: true }));
}

/** A stored report's scanner, as VulnReport and RawVulnReport show it. */
function scannerMessage(report: ReportRow) {
  return {
    name: report.scannerName,
    version: report.scannerVersion,
    dbBuildTime: report.dbBuildTime ? timestampFromDate(report.dbBuildTime) : undefined,
  };
}

function reportMessage(report: ReportRow, access: Access) {
  return {
    digest: report.digest,
    scanner: scannerMessage(report),
    createdAt: timestampFromDate(report.createdAt),
    vulnerabilities: vulnerabilityMessages(visibleFindings(report, access)),
  };
}

/** The platform images of an index's manifest; [digest] itself for an image manifest. */
export function platformDigests(digest: string, manifest: { mediaType: string; content: Uint8Array }): string[] {
  let doc: { mediaType?: unknown; manifests?: unknown };
  try {
    doc = JSON.parse(Buffer.from(manifest.content).toString("utf8"));
  } catch {
    return [digest];
  }
  const mediaType = typeof doc.mediaType === "string" ? doc.mediaType : manifest.mediaType;
  if (!INDEX_TYPES.has(mediaType) || !Array.isArray(doc.manifests)) return [digest];
  const children = doc.manifests
    .map((m: { digest?: unknown }) => m?.digest)
    .filter((d): d is string => typeof d === "string" && DIGEST.test(d));
  return [...new Set(children)].slice(0, MAX_PLATFORMS);
}

function checkDigest(field: string, digest: string): void {
  if (!DIGEST.test(digest))
    throw invalidArgument({ field, description: "must be an image digest: sha256:<64 hex> or sha512:<128 hex>" });
}

export function vulnerabilitiesBinding<A extends CandidateAdvisory & { osv: Record<string, unknown> | null }>(
  deps: VulnerabilitiesDeps<A>,
): ServiceBinding {
  /** The digests a (repo, digest-or-tag) names: an index answers for its platform images. */
  async function imagesIn(repoUid: string, digest: string): Promise<string[]> {
    const manifest = await deps.registry.manifestIn(repoUid, digest);
    return manifest ? platformDigests(digest, manifest) : [digest];
  }

  return bindService(Vulnerabilities, {
    async listVulnReports(req, call) {
      const access = accessOf(call);
      if (!req.digest && !req.repoId)
        throw invalidArgument({ field: "repo_id", description: "one of repo_id and digest is required" });
      if (req.digest) checkDigest("digest", req.digest);
      if (req.repoId && !isValidUidp(req.repoId))
        throw invalidArgument({ field: "repo_id", description: "must be a repo's UIDP" });
      if (!req.digest && req.tag && !TAG.test(req.tag))
        throw invalidArgument({ field: "tag", description: "must be a tag name" });
      const violations: FieldViolation[] = [];
      const createdSince = timeOf("created_since", req.createdSince, violations);
      throwIfViolations(violations);
      const repoUids = req.repoId ? [req.repoId] : undefined;
      if (repoUids && !canSeeRepo(call.visibility, req.repoId)) return { items: [] };
      // An index (by digest or tag) answers for itself and its platform images. A manifest's
      // content is its digest's, so one repo the caller may see that holds it tells the children.
      const withPlatforms = async (repoUid: string, digest: string) => [
        ...new Set([digest, ...(await imagesIn(repoUid, digest))]),
      ];
      let digests: string[] | undefined;
      if (req.digest) {
        digests = [req.digest];
        const repo =
          req.repoId || (await deps.registry.reposHolding(req.digest)).find((r) => canSeeRepo(call.visibility, r));
        if (repo) digests = await withPlatforms(repo, req.digest);
      } else if (req.tag) {
        const digest = await deps.registry.resolveTag(req.repoId, req.tag);
        if (!digest) return { items: [] };
        digests = await withPlatforms(req.repoId, digest);
      }
      const rows = await deps.reports.list({
        digests,
        repoUids,
        scannerName: req.scanner ? req.scanner.name : undefined,
        scannerVersion: req.scanner?.version || undefined,
        createdSince,
        limit: MAX_REPORTS,
        visibleIn: call.visibility === "all" ? undefined : (call.visibility ?? []),
      });
      return { items: rows.map((r) => reportMessage(r, access)) };
    },

    async getRawVulnReport(req, call) {
      const access = accessOf(call);
      checkDigest("digest", req.digest);
      const violations: FieldViolation[] = [];
      const createdAt = timeOf("created_at", req.createdAt, violations);
      throwIfViolations(violations);
      const [report] = await deps.reports.list({
        digests: [req.digest],
        scannerName: req.scanner,
        createdAt,
        limit: 1,
        visibleIn: call.visibility === "all" ? undefined : (call.visibility ?? []),
      });
      if (!report) throw notFound("vulnerability report", req.digest);
      const raw =
        report.origin === "uploaded" ? (report.raw ?? "") : JSON.stringify(await ourRawReport(deps, report, access));
      return {
        digest: report.digest,
        scanner: scannerMessage(report),
        createdAt: timestampFromDate(report.createdAt),
        rawReport: raw,
      };
    },

    async createVulnReport(req, call) {
      // Authorized on repo_id (declared above): CAP_VULN_CREATE and CAP_VULN_REPORT_CREATE there.
      if (!isValidUidp(req.repoId)) throw invalidArgument({ field: "repo_id", description: "must be a repo's UIDP" });
      const upload = req.vulnReport;
      if (!upload) throw invalidArgument({ field: "vuln_report", description: "is required" });
      checkDigest("vuln_report.digest", upload.digest);
      const violations: FieldViolation[] = [];
      const createdAt = timeOf("vuln_report.created_at", upload.createdAt, violations);
      const dbBuildTime = timeOf("vuln_report.scanner.db_build_time", upload.scanner?.dbBuildTime, violations);
      throwIfViolations(violations);
      let vulnerabilities: StoredVulnerability[] = upload.vulnerabilities.map((v) => toJsonVulnerability(v));
      let raw: string | undefined;
      let scannerName = upload.scanner?.name ?? Scanner_Name.UNKNOWN;
      if (req.rawReportFilepath) {
        let parsed;
        try {
          parsed = parseScannerReport(req.rawReportFilepath, scannerName);
        } catch (err) {
          if (err instanceof RawReportError)
            throw invalidArgument({ field: "raw_report_filepath", description: err.message });
          throw err;
        }
        raw = parsed.raw;
        scannerName = parsed.scanner;
        if (vulnerabilities.length === 0) vulnerabilities = parsed.vulnerabilities;
      }
      if (scannerName === OUR_SCANNER_NAME)
        throw invalidArgument({
          field: "vuln_report.scanner.name",
          description: "must name the scanner that made the report (GRYPE or TRIVY)",
        });
      if (!(await deps.registry.manifestIn(req.repoId, upload.digest)))
        throw notFound("image", `${req.repoId}@${upload.digest}`);
      const row = await deps.reports.insert({
        repoUid: req.repoId,
        digest: upload.digest,
        scannerName,
        scannerVersion: upload.scanner?.version ?? "",
        origin: "uploaded",
        dbBuildTime,
        // When the scan ran, as the uploader says; else now.
        createdAt: createdAt ?? deps.now(),
        vulnerabilities,
        findingsDigest: findingsDigest(vulnerabilities),
        raw,
        creator: call.principal?.uid,
      });
      return reportMessage(row, accessOf(call));
    },

    ...vulnCountHandlers({ ...deps, imagesIn, canSeeRepo, visibleFindings }),
  });
}

/**
 * Our raw report (documented in the README): the scanner, the image, and for each finding the
 * caller may see its Vulnerability, the advisory as an OSV record and the installed packages
 * it concerns.
 */
export async function ourRawReport<A extends CandidateAdvisory & { osv: Record<string, unknown> | null }>(
  deps: Pick<VulnerabilitiesDeps<A>, "inventories" | "advisories">,
  report: ReportRow,
  access: Access,
) {
  const findings = report.vulnerabilities.filter((v) => {
    const uid = v[ADVISORY_UID_KEY];
    return typeof uid === "string" && access.can([Capability.CAP_ADVISORIES_LIST], uid);
  });
  const [inventory] = await deps.inventories.get([report.digest]);
  const packages: readonly InstalledPackage[] = inventory?.packages ?? [];
  const uids = new Set(findings.map((v) => v[ADVISORY_UID_KEY] as string));
  // What the worker considered for these packages (lookupKeysOf: versionless purl keys).
  const keys = lookupKeysOf(packages);
  const names = [...new Set([...keys.names, ...packages.flatMap((p) => [p.name, p.origin])])];
  const advisories = uids.size
    ? (await deps.advisories.advisoriesForPackages(names, keys.purls)).filter((a) => uids.has(a.uid))
    : [];
  const byUid = new Map(advisories.map((a) => [a.uid, a]));
  return {
    schema: "bulwark.dev/vuln-report/v1",
    scanner: {
      name: "bulwark",
      version: report.scannerVersion,
      dbBuildTime: report.dbBuildTime?.toISOString(),
    },
    digest: report.digest,
    createdAt: report.createdAt.toISOString(),
    matches: findings.map((v) => {
      const advisory = byUid.get(v[ADVISORY_UID_KEY] as string);
      const purls = new Set(Array.isArray(v.purls) ? (v.purls as string[]) : []);
      return {
        vulnerability: publicVulnerability(v),
        advisory: advisory?.osv ?? null,
        packages: packages.filter(
          (p) =>
            purls.has(p.purl) ||
            (advisory !== undefined && (p.origin === advisory.artifactName || p.name === advisory.artifactName)),
        ),
      };
    }),
  };
}

function toJsonVulnerability(v: Vulnerability): StoredVulnerability {
  // Stored in proto JSON, as ours are (one reader for both).
  return toJson(VulnerabilitySchema, v) as StoredVulnerability;
}
