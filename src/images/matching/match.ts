// Which advisories affect an image's installed packages (pure: the caller reads the candidates
// with the vulnerabilities module's `advisoriesForPackages(lookupKeysOf(packages))` and keeps the
// groups its viewer may see).
//
// - An advisory YAML advisory (Wolfi / Chainguard, no OSV record) concerns an apk package of a
//   Wolfi or Chainguard image whose ORIGIN is the advisory's package: `P:libcrypto3` with
//   `o:openssl` is affected by openssl's advisories. Its latest event decides:
//     fixed / patched          affected while the installed version sorts below the (lowest)
//                              fixed version in apk order: fix FIXED, versions = the fix(es)
//     false-positive           never
//     detection, true-positive,
//     pending-upstream-fix     NOT_FIXED
//     fix-not-planned          WONT_FIX
//     analysis-not-planned     NOT_FIXED: nobody decided it does not apply, so it is reported
// - An OSV record (any other import) concerns a package whose package URL — type, namespace and
//   name, no version — is the record's, or is its origin's (distributions' records name source
//   packages); its `versions` and ranges decide, evaluated as the OSV feeds evaluate them. Fix
//   FIXED with the record's fixed versions above the installed one, else NOT_FIXED. Withdrawn
//   records (imported as a false-positive determination) never apply.
//
// One finding per advisory: every affected installed package's purl in `purls`.
import type { InstalledPackage } from "../inventory/types.js";
import { parsePurl } from "../storage/purl.js";
import {
  compareApk,
  compareVersions,
  isAffected,
  type MatchableAdvisory,
  type OsvRange,
} from "../../vulnerabilities/api.js";
import { severityOf, type CvssScore, type SeverityName } from "./severity.js";

export type { MatchableAdvisory };

export type FixState = "FIXED" | "NOT_FIXED" | "WONT_FIX";

/** chainguard.platform.registry.Vulnerability in proto JSON. */
export interface VulnerabilityJson {
  /** the advisory id (CGA-…, GHSA-…, RUSTSEC-…) */
  id: string;
  /** CVE / GHSA ids */
  aliases: string[];
  /** the affected installed packages */
  purls: string[];
  description: string;
  details: string;
  severity: SeverityName;
  cvss: CvssScore[];
  fix: { versions: string[]; state: FixState };
  relatedUrls: string[];
  locations: string[];
}

export interface Finding {
  advisoryUid: string;
  advisoryParentUid: string;
  vulnerability: VulnerabilityJson;
}

/** Ecosystems whose advisory YAML advisories concern Wolfi/Chainguard apks by origin. */
const APK_ADVISORY_ECOSYSTEMS: ReadonlySet<string> = new Set(["wolfi", "chainguard"]);
/** purl namespaces of apks those advisories concern ("": a distribution the reader could not name). */
const WOLFI_NAMESPACES: ReadonlySet<string> = new Set(["wolfi", "chainguard", ""]);
/** Types whose namespace is case-insensitive (the purl specification's apk and deb). */
const LOWER_CASE_NAMESPACE: ReadonlySet<string> = new Set(["apk", "deb", "rpm"]);

interface PurlParts {
  type: string;
  namespace: string;
  name: string;
}

/** type, namespace and name of a package URL (version, qualifiers and subpath dropped); undefined if not one. */
export function purlParts(purl: string): PurlParts | undefined {
  const parsed = parsePurl(purl);
  if (!parsed) return undefined;
  const { type, name } = parsed;
  const namespace = LOWER_CASE_NAMESPACE.has(type) ? parsed.namespace.toLowerCase() : parsed.namespace;
  return { type, namespace, name };
}

function keyOf({ type, namespace, name }: PurlParts): string {
  return namespace === "" ? `pkg:${type}/${name}` : `pkg:${type}/${namespace}/${name}`;
}

/** The package URL keys (no version) under which OSV records may name a package: its own and its origin's. */
function packageKeys(pkg: InstalledPackage): string[] {
  const parts = purlParts(pkg.purl);
  if (!parts) return [];
  const names = [parts.name, ...(pkg.origin && pkg.origin !== parts.name ? [pkg.origin] : [])];
  // Chainguard's apks are built on Wolfi's: Wolfi's records concern them too (as the OSV API answers)
  const namespaces =
    parts.type === "apk" && parts.namespace === "chainguard" ? ["chainguard", "wolfi"] : [parts.namespace];
  return namespaces.flatMap((namespace) => names.map((name) => keyOf({ ...parts, namespace, name })));
}

function isWolfiApk(pkg: InstalledPackage): boolean {
  if (pkg.type !== "apk") return false;
  const parts = purlParts(pkg.purl);
  return WOLFI_NAMESPACES.has(parts?.namespace ?? "");
}

const ecosystemBase = (ecosystem: string) => (ecosystem.split(":")[0] ?? "").trim().toLowerCase();

/** Advisory YAML advisories (by origin name) apart from OSV records (by purl key). */
function isAdvisoryYaml(advisory: MatchableAdvisory): boolean {
  return advisory.osv === null && APK_ADVISORY_ECOSYSTEMS.has(ecosystemBase(advisory.ecosystem));
}

/**
 * What to ask `advisoriesForPackages` for these packages: the origins of Wolfi/Chainguard apks
 * (advisory YAML advisories' artifact names) and every package's purl keys.
 */
export function lookupKeysOf(packages: readonly InstalledPackage[]): { names: string[]; purls: string[] } {
  const names = new Set<string>();
  const purls = new Set<string>();
  for (const pkg of packages) {
    if (isWolfiApk(pkg)) names.add(pkg.origin || pkg.name);
    for (const key of packageKeys(pkg)) purls.add(key);
  }
  return { names: [...names].sort(), purls: [...purls].sort() };
}

/** Whether `pkg` is affected by `advisory`, and the fix; undefined when not affected. */
type Verdict = { fix: { versions: string[]; state: FixState } } | undefined;

function advisoryYamlVerdict(advisory: MatchableAdvisory, version: string): Verdict {
  switch (advisory.latestEventType) {
    case "false-positive-determination":
      return undefined;
    case "fixed":
    case "patched": {
      const fixes = [...advisory.fixedVersions].sort(compareApk);
      if (fixes.length === 0) return { fix: { versions: [], state: "NOT_FIXED" } };
      return compareApk(version, fixes[0]!) < 0 ? { fix: { versions: fixes, state: "FIXED" } } : undefined;
    }
    case "fix-not-planned":
      return { fix: { versions: [], state: "WONT_FIX" } };
    case "detection":
    case "true-positive-determination":
    case "pending-upstream-fix":
    case "analysis-not-planned":
      return { fix: { versions: [], state: "NOT_FIXED" } };
    default:
      return { fix: { versions: [], state: "NOT_FIXED" } };
  }
}

interface OsvAffected {
  package?: { ecosystem?: unknown; name?: unknown; purl?: unknown };
  ranges?: unknown;
  versions?: unknown;
}

function osvVerdict(advisory: MatchableAdvisory, version: string): Verdict {
  if (advisory.latestEventType === "false-positive-determination") return undefined;
  const affected = Array.isArray(advisory.osv?.affected) ? (advisory.osv.affected as OsvAffected[]) : [];
  const hit = affected.some((entry) => {
    if (typeof entry !== "object" || entry === null) return false;
    if (Array.isArray(entry.versions) && entry.versions.includes(version)) return true;
    const ecosystem = typeof entry.package?.ecosystem === "string" ? entry.package.ecosystem : advisory.ecosystem;
    return Array.isArray(entry.ranges) && isAffected(entry.ranges as OsvRange[], version, ecosystem);
  });
  if (!hit) return undefined;
  const later = advisory.fixedVersions
    .filter((fixed) => compareVersions(advisory.ecosystem, version, fixed) < 0)
    .sort((a, b) => compareVersions(advisory.ecosystem, a, b));
  return { fix: later.length > 0 ? { versions: later, state: "FIXED" } : { versions: [], state: "NOT_FIXED" } };
}

function stringOf(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function referencesOf(osv: Record<string, unknown> | null): string[] {
  const references = Array.isArray(osv?.references) ? (osv.references as unknown[]) : [];
  const urls = references.map((r) =>
    typeof r === "object" && r !== null ? stringOf((r as { url?: unknown }).url) : "",
  );
  return [...new Set(urls.filter((u) => u !== ""))];
}

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The findings for `packages` among `advisories`, one per affecting advisory, ordered by id, then
 * publishing group, then advisory uid.
 */
export function matchPackages(
  packages: readonly InstalledPackage[],
  advisories: readonly MatchableAdvisory[],
): Finding[] {
  // Index the advisories once: by origin name (advisory YAML) and by purl key (OSV records).
  const byOrigin = new Map<string, MatchableAdvisory[]>();
  const byPurl = new Map<string, MatchableAdvisory[]>();
  for (const advisory of advisories) {
    if (advisory.latestEventType === "false-positive-determination") continue;
    let index: Map<string, MatchableAdvisory[]>;
    let key: string;
    if (isAdvisoryYaml(advisory)) {
      index = byOrigin;
      key = advisory.artifactName;
    } else if (advisory.osv !== null) {
      const parts = purlParts(advisory.purl);
      if (!parts) continue;
      index = byPurl;
      key = keyOf(parts);
    } else {
      continue;
    }
    const list = index.get(key);
    if (list) list.push(advisory);
    else index.set(key, [advisory]);
  }

  const found = new Map<
    string,
    { advisory: MatchableAdvisory; purls: Set<string>; fix: NonNullable<Verdict>["fix"] }
  >();
  const record = (advisory: MatchableAdvisory, pkg: InstalledPackage, verdict: Verdict) => {
    if (!verdict) return;
    const entry = found.get(advisory.uid);
    if (entry) entry.purls.add(pkg.purl);
    else found.set(advisory.uid, { advisory, purls: new Set([pkg.purl]), fix: verdict.fix });
  };
  for (const pkg of packages) {
    if (isWolfiApk(pkg))
      for (const advisory of byOrigin.get(pkg.origin || pkg.name) ?? [])
        record(advisory, pkg, advisoryYamlVerdict(advisory, pkg.version));
    const seen = new Set<string>();
    for (const key of packageKeys(pkg))
      for (const advisory of byPurl.get(key) ?? []) {
        if (seen.has(advisory.uid)) continue;
        seen.add(advisory.uid);
        record(advisory, pkg, osvVerdict(advisory, pkg.version));
      }
  }

  const findings = [...found.values()].map(({ advisory, purls, fix }): Finding => {
    const { severity, cvss } = severityOf(advisory.severities);
    return {
      advisoryUid: advisory.uid,
      advisoryParentUid: advisory.parentUid,
      vulnerability: {
        id: advisory.advisoryId,
        aliases: [...advisory.aliases],
        purls: [...purls].sort(byText),
        description: stringOf(advisory.osv?.summary),
        details: stringOf(advisory.osv?.details),
        severity,
        cvss,
        fix,
        relatedUrls: referencesOf(advisory.osv),
        locations: advisory.componentLocation ? [advisory.componentLocation] : [],
      },
    };
  });
  return findings.sort(
    (a, b) =>
      byText(a.vulnerability.id, b.vulnerability.id) ||
      byText(a.advisoryParentUid, b.advisoryParentUid) ||
      byText(a.advisoryUid, b.advisoryUid),
  );
}
