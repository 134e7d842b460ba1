// The v1 Registry's GetVulnReport: an image's newest report of ours in the tenant VulnReport
// shape (one vulnerability match per affected package, as scanners report them), with our raw
// report. The findings are those the caller may see, as ListVulnReports shows them. An index
// answers for its linux/amd64 image, as GetSbom does (the request names no platform).
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { checkDigest } from "./image-manifests.js";
import { failedPrecondition, invalidArgument, notFound } from "../core/errors.js";
import { accessOf } from "../core/service.js";
import { requireUid } from "../core/validate.js";
import { VERSION } from "../core/version.js";
import {
  Fix_State,
  VulnerabilityRecord_Severity,
  VulnReportSchema,
  type VulnerabilityMatchSchema,
} from "../gen/platform/tenant/v1/vuln.platform_pb.js";
import type { RegistryExports, V1ImageMethodHandlers } from "../registry/api.js";
import type { InstalledPackage } from "./inventory/types.js";
import type { CandidateAdvisory, InventoryForReport } from "./reports.js";
import type { StoredVulnerability } from "./storage/reports.js";
import { ourRawReport, visibleFindings, type VulnerabilitiesDeps } from "./vulnerabilities.js";

const INDEX_TYPES = new Set([
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
]);
const DEFAULT_ARCH = "amd64";

export interface VulnReportV1Deps<A extends CandidateAdvisory & { osv: Record<string, unknown> | null }> extends Pick<
  VulnerabilitiesDeps<A>,
  "reports" | "advisories"
> {
  registry: Pick<RegistryExports, "repoName" | "manifestIn">;
  inventories: { get(digests: string[]): Promise<(InventoryForReport & { error?: string | null })[]> };
}

/** The linux/amd64 image of an index (its first image when it has none); the digest itself otherwise. */
function imageDigestOf(digest: string, manifest: { mediaType: string; content: Uint8Array }): string | undefined {
  if (!INDEX_TYPES.has(manifest.mediaType)) return digest;
  let index: { manifests?: { digest?: unknown; platform?: { architecture?: unknown; os?: unknown } }[] };
  try {
    index = JSON.parse(Buffer.from(manifest.content).toString("utf8"));
  } catch {
    return undefined;
  }
  const images = (index.manifests ?? []).filter((m) => typeof m?.digest === "string");
  const amd64 = images.find((m) => m.platform?.architecture === DEFAULT_ARCH && (m.platform.os ?? "linux") === "linux");
  return (amd64 ?? images[0])?.digest as string | undefined;
}

const SEVERITIES: Record<string, VulnerabilityRecord_Severity> = {
  LOW: VulnerabilityRecord_Severity.LOW,
  MEDIUM: VulnerabilityRecord_Severity.MEDIUM,
  HIGH: VulnerabilityRecord_Severity.HIGH,
  CRITICAL: VulnerabilityRecord_Severity.CRITICAL,
};
const FIX_STATES: Record<string, Fix_State> = {
  FIXED: Fix_State.FIXED,
  NOT_FIXED: Fix_State.NOT_FIXED,
  WONT_FIX: Fix_State.WONT_FIX,
};

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x) => typeof x === "string") : []);
const text = (v: unknown): string => (typeof v === "string" ? v : "");

/** "pkg:apk/wolfi/libcrypto3@3.3.0-r6?arch=x86_64" → libcrypto3, 3.3.0-r6 (when the inventory has no such package). */
function packageOfPurl(purl: string): { name: string; version: string } {
  const m = /^pkg:[^/]+\/(?:[^?#@]*\/)?([^/?#@]+)(?:@([^?#]*))?/.exec(purl);
  const decode = (s: string | undefined) => {
    try {
      return decodeURIComponent(s ?? "");
    } catch {
      return s ?? "";
    }
  };
  return { name: decode(m?.[1]), version: decode(m?.[2]) };
}

/** One match per package a stored finding names. */
function matchesOf(
  v: StoredVulnerability,
  packages: readonly InstalledPackage[],
): MessageInitShape<typeof VulnerabilityMatchSchema>[] {
  const id = text(v.id);
  const aliases = strings(v.aliases);
  const fix = v.fix as { versions?: unknown; state?: unknown } | undefined;
  const cvss = Array.isArray(v.cvss) ? (v.cvss as { score?: unknown; version?: unknown }[]) : [];
  return strings(v.purls).map((purl) => {
    const pkg = packages.find((p) => p.purl === purl);
    const { name, version } = pkg ?? packageOfPurl(purl);
    return {
      vulnerability: {
        id,
        // the CVE a reader looks for, when the advisory has one
        displayId: aliases.find((a) => a.startsWith("CVE-")) ?? id,
        description: text(v.description) || text(v.details),
        severity: SEVERITIES[text(v.severity)] ?? VulnerabilityRecord_Severity.UNKNOWN,
        source: "bulwark",
        cvss: cvss.map((c) => ({
          score: String(c.score ?? ""),
          version: text(c.version),
        })),
        cpeUri: [],
        relatedUrls: strings(v.relatedUrls),
        advisories: {},
        relatedVulnerabilities: aliases.map((alias) => ({
          id: alias,
          source: "",
        })),
      },
      pkg: {
        id: purl,
        name,
        version,
        license: pkg?.license ?? "",
        description: "",
        purl,
      },
      fix: {
        versions: strings(fix?.versions),
        state: FIX_STATES[text(fix?.state)] ?? Fix_State.UNKNOWN,
      },
    };
  });
}

export function vulnReportV1Handler<A extends CandidateAdvisory & { osv: Record<string, unknown> | null }>(
  deps: VulnReportV1Deps<A>,
): Pick<V1ImageMethodHandlers, "getVulnReport"> {
  return {
    async getVulnReport(req, call) {
      // Authorized by the v1 rules on repo_id (CAP_REPO_LIST and CAP_TENANT_VULN_REPORTS_LIST there).
      requireUid("repo_id", req.repoId);
      checkDigest("digest", req.digest);
      const repoName = await deps.registry.repoName(req.repoId);
      if (repoName === undefined) throw notFound("repo", req.repoId);
      const manifest = await deps.registry.manifestIn(req.repoId, req.digest);
      if (!manifest) throw notFound("image", `${repoName}@${req.digest}`);
      const digest = imageDigestOf(req.digest, manifest);
      if (!digest) throw notFound("platform", `${DEFAULT_ARCH} of ${repoName}@${req.digest}`);

      const report = await deps.reports.latest(req.repoId, digest, "bulwark");
      const [inventory] = await deps.inventories.get([digest]);
      if (!report) {
        if (inventory?.state === "failed")
          throw failedPrecondition({
            type: "INVENTORY_FAILED",
            description: `the contents of ${digest} could not be read: ${inventory.error ?? "unknown error"}`,
          });
        throw failedPrecondition({
          type: "REPORT_PENDING",
          description: `the vulnerability report of ${digest} is still being computed; try again in a moment`,
        });
      }
      const access = accessOf(call);
      const packages = inventory?.packages ?? [];
      return create(VulnReportSchema, {
        id: report.id,
        vulnerabilityDbLastBuildTime: report.dbBuildTime ? timestampFromDate(report.dbBuildTime) : undefined,
        vulnerabilityMatches: visibleFindings(report, access).flatMap((v) => matchesOf(v, packages)),
        scanner: { name: "bulwark", version: VERSION },
        reportGeneration: timestampFromDate(report.createdAt),
        rawVulnReport: Buffer.from(JSON.stringify(await ourRawReport(deps, report, access)), "utf8"),
      });
    },
  };
}
