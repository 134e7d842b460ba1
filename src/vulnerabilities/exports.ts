// What the running vulnerabilities module offers other modules (its `exports`, taken with
// `ctx.exportsOf(vulnerabilitiesModule)`): the advisories as the images module matches installed
// packages against them, a hook told what each import changed (inside its transaction), and the
// public advisory groups.
import type { EventKind } from "./storage/model.js";
import type { AdvisoriesChangedListener, AdvisoriesRepository, MatchRow } from "./storage/advisories.js";

/** One advisory as image matching reads it (one row: an advisory YAML advisory, or one OSV `affected` entry). */
export interface MatchableAdvisory {
  uid: string;
  /** the group that published it: callers keep only the groups a viewer may see */
  parentUid: string;
  /** CGA-…, or the OSV record's id */
  advisoryId: string;
  /** CVE / GHSA ids */
  aliases: string[];
  /** the package (for advisory YAML: the origin package) it concerns */
  artifactName: string;
  /** where in the package the scan that detected it found the vulnerable component ("" when unknown) */
  componentLocation: string;
  /** OSV ecosystem: "Wolfi" / "Chainguard" for advisory YAML, the record's for OSV */
  ecosystem: string;
  /** package URL of the artifact, without version */
  purl: string;
  latestEventType: EventKind;
  /** the latest event's fixed version(s) (a fixed event's one, a patched event's list) */
  fixedVersions: string[];
  /** as imported: the vector (or score) of each CVSS version */
  severities: { type: "TYPE_CVSS_V2" | "TYPE_CVSS_V3" | "TYPE_CVSS_V4"; score: string }[];
  /** for OSV imports, the record's fields (summary, details, references, affected: [this entry], ...); else null */
  osv: Record<string, unknown> | null;
}

export interface VulnerabilitiesExports {
  /**
   * Advisories of every group (callers restrict to what a viewer sees) whose artifact name is one
   * of `names` or whose package URL (without version) is one of `purls`: the candidates for a
   * package list, which the matcher then decides on.
   */
  advisoriesForPackages(names: readonly string[], purls: readonly string[]): Promise<MatchableAdvisory[]>;
  /**
   * `listener` runs inside every transaction that creates or updates advisories (each imported
   * document), before it commits, with the changed advisories' artifact names and package URLs
   * (without version): what it writes commits with the change, however late, or not at all.
   */
  onAdvisoriesChanged(listener: AdvisoriesChangedListener): void;
  /**
   * Names and purls of the advisories updated after `after` (all when undefined): what a cache of
   * them refreshes by. Update times are the importing server's clock when its import began, so
   * this is not exact about late commits; `onAdvisoriesChanged` is.
   */
  advisoriesChangedSince(after: Date | undefined): Promise<{ names: string[]; purls: string[] }>;
  /** When the advisories last changed (a report's `db_build_time`); undefined while there are none. */
  lastChange(): Promise<Date | undefined>;
  /** The public advisory groups (`--public-advisories`), whose advisories every caller may read. */
  publicGroups: readonly string[];
}

export function matchableAdvisoryOf(row: MatchRow): MatchableAdvisory {
  return {
    uid: row.uid,
    parentUid: row.parent_uid,
    advisoryId: row.advisory_id,
    aliases: row.aliases,
    artifactName: row.artifact_name,
    componentLocation: row.component_location,
    ecosystem: row.ecosystem,
    purl: row.purl,
    latestEventType: row.latest_event_type,
    fixedVersions: row.fixed_versions,
    severities: row.severities,
    osv: row.osv,
  };
}

export function vulnerabilitiesExports(
  advisories: AdvisoriesRepository,
  publicGroups: readonly string[],
): VulnerabilitiesExports {
  return {
    async advisoriesForPackages(names, purls) {
      return (await advisories.forPackages(names, purls)).map(matchableAdvisoryOf);
    },
    onAdvisoriesChanged: (listener) => advisories.onChanged(listener),
    advisoriesChangedSince: (after) => advisories.changedSince(after),
    lastChange: () => advisories.lastChange(),
    publicGroups,
  };
}
