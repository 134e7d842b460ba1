// OSV ecosystem names, as the OSV schema defines them (ossf/osv-schema's ecosystems.json, 2026-03),
// and how the OSV API matches a queried ecosystem or package URL against the records it holds.
import { invalidArgument } from "../core/errors.js";

/** The ecosystems of the OSV schema, spelled as it spells them. */
export const OSV_ECOSYSTEMS: readonly string[] = [
  "AlmaLinux",
  "Alpaquita",
  "Alpine",
  "Android",
  "Azure Linux",
  "BellSoft Hardened Containers",
  "Bioconductor",
  "Bitnami",
  "Chainguard",
  "CleanStart",
  "ConanCenter",
  "CRAN",
  "crates.io",
  "Debian",
  "Docker Hardened Images",
  "Echo",
  "FreeBSD",
  "GHC",
  "GitHub Actions",
  "Go",
  "Hackage",
  "Hex",
  "Julia",
  "Kubernetes",
  "Linux",
  "Mageia",
  "Maven",
  "MinimOS",
  "npm",
  "NuGet",
  "opam",
  "openEuler",
  "openSUSE",
  "OSS-Fuzz",
  "Packagist",
  "Photon OS",
  "Pub",
  "PyPI",
  "Red Hat",
  "Rocky Linux",
  "Root",
  "RubyGems",
  "SUSE",
  "SwiftURL",
  "TuxCare",
  "Ubuntu",
  "VSCode",
  "Wolfi",
];

/** Advisory YAML documents (wolfi-dev/advisories) are Wolfi's, as osv.dev publishes them. */
export const ADVISORY_YAML_ECOSYSTEM = "Wolfi";

/** The package URL of a package of the advisory YAML documents (without a version). */
export function advisoryYamlPurl(packageName: string): string {
  return `pkg:apk/wolfi/${packageName}`;
}

/** The ecosystems whose apks the secdb lists. */
export const APK_FEED_ECOSYSTEMS: readonly string[] = ["Wolfi", "Chainguard"];

/**
 * Records of these ecosystems answer a query for the key's too: Chainguard's packages are built
 * on Wolfi's, so a Chainguard query (what scanners of Chainguard images send) also reads Wolfi's.
 */
const ALSO_MATCHED: Readonly<Record<string, readonly string[]>> = { Chainguard: ["Wolfi"] };

const BY_LOWER_CASE = new Map(OSV_ECOSYSTEMS.map((e) => [e.toLowerCase(), e]));

/**
 * `ecosystem` with its name spelled as OSV spells it (any `:<release>` suffix kept); INVALID_ARGUMENT
 * naming the known ecosystems when it is none of them.
 */
export function canonicalEcosystem(field: string, ecosystem: string): string {
  const colon = ecosystem.indexOf(":");
  const base = colon < 0 ? ecosystem : ecosystem.slice(0, colon);
  const known = BY_LOWER_CASE.get(base.trim().toLowerCase());
  if (!known) {
    const shown = base.length > 40 ? `${base.slice(0, 40)}…` : base;
    throw invalidArgument({
      field,
      description: `unknown ecosystem ${JSON.stringify(shown)}; known: ${OSV_ECOSYSTEMS.join(", ")}`,
    });
  }
  return colon < 0 ? known : known + ecosystem.slice(colon);
}

/**
 * Whether a record of `recordEcosystem` answers a query for (canonical) `queried`: the same
 * ecosystem, any release of it when the query names none, or one ALSO_MATCHED names.
 */
export function ecosystemMatches(queried: string, recordEcosystem: string): boolean {
  if (recordEcosystem === queried) return true;
  const recordBase = recordEcosystem.split(":")[0]!;
  if (!queried.includes(":") && recordBase === queried) return true;
  return (ALSO_MATCHED[queried] ?? []).includes(recordEcosystem);
}

/**
 * The package URLs (without version) whose records answer a query for `purl`: itself, and for
 * `pkg:apk/chainguard/<name>` the Wolfi package of that name (type and namespace are matched
 * case-insensitively, as the purl specification has them for apk).
 */
export function purlsMatching(purl: string): string[] {
  const m = /^pkg:([^/]+)\/([^/]+)\/(.+)$/.exec(purl);
  if (!m || m[1]!.toLowerCase() !== "apk") return [purl];
  const namespace = m[2]!.toLowerCase();
  const own = `pkg:apk/${namespace}/${m[3]}`;
  return namespace === "chainguard" ? [own, `pkg:apk/wolfi/${m[3]}`] : [own];
}
