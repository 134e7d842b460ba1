// Reports uploaded from CI (CreateVulnReport's `raw_report_filepath`): a Grype or Trivy JSON
// document given inline — the JSON text itself, or a `data:application/json;base64,...` URI —
// kept as the report's raw form, and, when the upload lists no `vulnerabilities`, read into them:
// Grype's `matches[]`, Trivy's `Results[].Vulnerabilities[]`. A path to fetch (gs://, https://)
// is refused: the server fetches nothing on a client's word.
import type { StoredVulnerability } from "./storage/reports.js";

/** Largest raw report accepted (characters of JSON). */
export const MAX_RAW_REPORT = 1 << 20;
/** Most findings one uploaded report may hold. */
const MAX_FINDINGS = 10_000;

const GRYPE = 1;
const TRIVY = 2;

export class RawReportError extends Error {
  override name = "RawReportError";
}

export interface ParsedScannerReport {
  raw: string;
  /** Scanner.Name: GRYPE or TRIVY */
  scanner: number;
  vulnerabilities: StoredVulnerability[];
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}
function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((s): s is string => typeof s === "string") : [];
}

function rawText(given: string): string {
  if (given.startsWith("data:")) {
    const m = /^data:application\/json;base64,([A-Za-z0-9+/]*={0,2})$/.exec(given);
    if (!m) throw new RawReportError("a data: URI must be data:application/json;base64,<JSON in base64>");
    return Buffer.from(m[1]!, "base64").toString("utf8");
  }
  if (given.trimStart().startsWith("{")) return given;
  throw new RawReportError(
    "must be the scanner's JSON report inline (its text, or data:application/json;base64,...); the server fetches no path",
  );
}

/**
 * Reads an inline Grype or Trivy report. `declared` is the upload's Scanner.Name (0: not said):
 * when said, the document must be that scanner's.
 */
export function parseScannerReport(given: string, declared: number): ParsedScannerReport {
  if (given.length > MAX_RAW_REPORT) throw new RawReportError(`is longer than ${MAX_RAW_REPORT} characters`);
  const raw = rawText(given);
  let doc: unknown;
  try {
    doc = JSON.parse(raw);
  } catch {
    throw new RawReportError("is not valid JSON");
  }
  if (!isObject(doc)) throw new RawReportError("must be a JSON object (a Grype or Trivy report)");
  const scanner = Array.isArray(doc.matches) ? GRYPE : Array.isArray(doc.Results) ? TRIVY : 0;
  if (scanner === 0) throw new RawReportError("is neither a Grype report (matches[]) nor a Trivy report (Results[])");
  if (declared !== 0 && declared !== scanner)
    throw new RawReportError(`is a ${scanner === GRYPE ? "Grype" : "Trivy"} report, not the scanner the upload names`);
  const vulnerabilities = scanner === GRYPE ? fromGrype(doc.matches as unknown[]) : fromTrivy(doc.Results as unknown[]);
  if (vulnerabilities.length > MAX_FINDINGS) throw new RawReportError(`holds more than ${MAX_FINDINGS} findings`);
  return { raw, scanner, vulnerabilities };
}

function severity(s: string): string {
  const upper = s.toUpperCase();
  return ["LOW", "MEDIUM", "HIGH", "CRITICAL", "NEGLIGIBLE"].includes(upper) ? upper : "UNKNOWN";
}

function fixState(s: string): string {
  switch (s.toLowerCase().replace(/[-_ ]/g, "")) {
    case "fixed":
      return "FIXED";
    case "notfixed":
    case "affected":
    case "fixdeferred":
      return "NOT_FIXED";
    case "wontfix":
    case "willnotfix":
      return "WONT_FIX";
    default:
      return "UNKNOWN";
  }
}

function fromGrype(matches: unknown[]): StoredVulnerability[] {
  return matches.map((m, i) => {
    if (!isObject(m) || !isObject(m.vulnerability) || !str(m.vulnerability.id))
      throw new RawReportError(`matches[${i}] has no vulnerability.id`);
    const v = m.vulnerability;
    const artifact = isObject(m.artifact) ? m.artifact : {};
    const fix = isObject(v.fix) ? v.fix : {};
    const related = Array.isArray(m.relatedVulnerabilities) ? m.relatedVulnerabilities : [];
    const cvss = Array.isArray(v.cvss) ? v.cvss : [];
    return {
      id: str(v.id),
      aliases: [...new Set(related.map((r) => (isObject(r) ? str(r.id) : "")).filter((id) => id && id !== v.id))],
      purls: str(artifact.purl) ? [str(artifact.purl)] : [],
      description: str(v.description),
      details: "",
      severity: severity(str(v.severity)),
      cvss: cvss.flatMap((c) =>
        isObject(c) && isObject(c.metrics) && typeof c.metrics.baseScore === "number"
          ? [{ score: String(c.metrics.baseScore), version: str(c.version) }]
          : [],
      ),
      fix: { versions: strings(fix.versions), state: fixState(str(fix.state)) },
      relatedUrls: strings(v.urls),
      locations: (Array.isArray(artifact.locations) ? artifact.locations : [])
        .map((l) => (isObject(l) ? str(l.path) : ""))
        .filter(Boolean),
    };
  });
}

function fromTrivy(results: unknown[]): StoredVulnerability[] {
  const out: StoredVulnerability[] = [];
  results.forEach((r, i) => {
    if (!isObject(r)) throw new RawReportError(`Results[${i}] is not an object`);
    if (r.Vulnerabilities === undefined || r.Vulnerabilities === null) return;
    if (!Array.isArray(r.Vulnerabilities)) throw new RawReportError(`Results[${i}].Vulnerabilities is not a list`);
    r.Vulnerabilities.forEach((v, j) => {
      if (!isObject(v) || !str(v.VulnerabilityID))
        throw new RawReportError(`Results[${i}].Vulnerabilities[${j}] has no VulnerabilityID`);
      const ident = isObject(v.PkgIdentifier) ? v.PkgIdentifier : {};
      const cvss = isObject(v.CVSS) ? Object.values(v.CVSS) : [];
      const fixed = str(v.FixedVersion);
      out.push({
        id: str(v.VulnerabilityID),
        aliases: [],
        purls: str(ident.PURL) ? [str(ident.PURL)] : [],
        description: str(v.Title),
        details: str(v.Description),
        severity: severity(str(v.Severity)),
        cvss: cvss.flatMap((c) =>
          isObject(c)
            ? [
                ...(typeof c.V3Score === "number" ? [{ score: String(c.V3Score), version: "3" }] : []),
                ...(typeof c.V2Score === "number" ? [{ score: String(c.V2Score), version: "2" }] : []),
              ]
            : [],
        ),
        fix: {
          versions: fixed ? fixed.split(/,\s*/) : [],
          state: str(v.Status) ? fixState(str(v.Status)) : fixed ? "FIXED" : "NOT_FIXED",
        },
        relatedUrls: strings(v.References),
        locations: str(r.Target) ? [str(r.Target)] : [],
      });
    });
  });
  return out;
}
