// What the advisories tables hold, in the shape imports produce it (documents.ts re-exports it
// for the parsers): an advisory with its events, normalized from whichever document format.

/** The kinds of AdvisoryEvent, by the names the advisory YAML uses for them. */
export const EVENT_KINDS = [
  "detection",
  "true-positive-determination",
  "fixed",
  "false-positive-determination",
  "analysis-not-planned",
  "fix-not-planned",
  "pending-upstream-fix",
  "patched",
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

export interface ParsedEvent {
  time: Date;
  kind: EventKind;
  /**
   * The event's oneof member in canonical proto JSON (AdvisoryEvent.<member> message), e.g.
   * fixed: `{ fixedVersion: "1.2-r3" }`; detection: `{ scanv1: { component: ..., ... } }` or
   * `{ nvdapi: {...} }` or `{ manual: {} }`; false positive:
   * `{ type: "TYPE_COMPONENT_VULNERABILITY_MISMATCH", note: "..." }`. Empty fields are omitted.
   */
  data: Record<string, unknown>;
}

export interface ParsedSeverity {
  type: "TYPE_CVSS_V2" | "TYPE_CVSS_V3" | "TYPE_CVSS_V4";
  score: string;
}

export interface ParsedAdvisory {
  /** a CGA id, or the OSV record's id (RUSTSEC-..., GHSA-...) */
  advisoryId: string;
  /** the document's own id when it was not a CGA id (old CVE-style ids) */
  legacyAdvisoryId?: string;
  aliases: string[];
  artifactName: string;
  artifactType: string;
  artifactArchitecture: string;
  componentName: string;
  componentType: string;
  componentLocation: string;
  severities: ParsedSeverity[];
  /** oldest first */
  events: ParsedEvent[];
  /** OSV ecosystem of the artifact: "Wolfi" for advisory YAML, the record's for OSV */
  ecosystem: string;
  /** package URL of the artifact: pkg:apk/wolfi/<name> for advisory YAML */
  purl: string;
  /** OSV-only fields the OSV feed gives back as they came (summary, details, references, ...) */
  osv?: Record<string, unknown>;
  /** 1-based line in the document where the advisory starts */
  line: number;
}

export interface ParsedDocument {
  format: "advisory-yaml" | "osv";
  advisories: ParsedAdvisory[];
}
