// Advisories in words: each event kind's name, an advisory's status (its newest event), what an
// event says, and a severity level from a CVSS v3 vector (its base score, FIRST's formula).
import {
  AdvisoryEvent_FalsePositiveDetermination_Type as FalsePositiveType,
  EventTypeFilter,
  ReviewState,
  Severity_Type,
  type Advisory,
  type AdvisoryEvent,
  type Severity,
} from "../../../../src/gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { SeverityBadge } from "../../ui/misc";

type EventCase = NonNullable<AdvisoryEvent["type"]["case"]>;

export const EVENT_KINDS: { case: EventCase; filter: EventTypeFilter; label: string }[] = [
  { case: "detection", filter: EventTypeFilter.DETECTION, label: "Detected" },
  { case: "truePositiveDetermination", filter: EventTypeFilter.TRUE_POSITIVE_DETERMINATION, label: "Affected" },
  { case: "fixed", filter: EventTypeFilter.FIXED, label: "Fixed" },
  {
    case: "falsePositiveDetermination",
    filter: EventTypeFilter.FALSE_POSITIVE_DETERMINATION,
    label: "Not affected",
  },
  { case: "analysisNotPlanned", filter: EventTypeFilter.ANALYSIS_NOT_PLANNED, label: "Analysis not planned" },
  { case: "fixNotPlanned", filter: EventTypeFilter.FIX_NOT_PLANNED, label: "Fix not planned" },
  { case: "pendingUpstreamFix", filter: EventTypeFilter.PENDING_UPSTREAM_FIX, label: "Pending upstream fix" },
  { case: "patched", filter: EventTypeFilter.PATCHED, label: "Patched" },
];

export const REVIEW_STATES: { state: ReviewState; label: string }[] = [
  { state: ReviewState.PENDING, label: "Pending" },
  { state: ReviewState.APPROVED, label: "Approved" },
  { state: ReviewState.REQUEST_CHANGES, label: "Changes requested" },
  { state: ReviewState.REJECTED, label: "Rejected" },
];

export function eventLabel(event: AdvisoryEvent): string {
  return EVENT_KINDS.find((k) => k.case === event.type.case)?.label ?? "Unknown event";
}

export function reviewLabel(state: ReviewState): string {
  return REVIEW_STATES.find((r) => r.state === state)?.label ?? "—";
}

const eventTime = (e: AdvisoryEvent) => (e.createTime ? timestampMs(e.createTime) : 0);

/** The events oldest first. */
export function timeline(advisory: Advisory): AdvisoryEvent[] {
  return [...advisory.events].sort((a, b) => eventTime(a) - eventTime(b));
}

/** The advisory's status: its newest event's kind. */
export function status(advisory: Advisory): string {
  const events = timeline(advisory);
  const latest = events[events.length - 1];
  if (advisory.deleteTime) return "Withdrawn";
  return latest ? eventLabel(latest) : "No events";
}

const FALSE_POSITIVE_WORDS: Record<number, string> = {
  [FalsePositiveType.VULNERABILITY_RECORD_ANALYSIS_CONTESTED]: "the vulnerability record's analysis is contested",
  [FalsePositiveType.COMPONENT_VULNERABILITY_MISMATCH]: "the component is not the one the vulnerability is about",
  [FalsePositiveType.VULNERABLE_CODE_VERSION_NOT_USED]: "the vulnerable version is not used",
  [FalsePositiveType.VULNERABLE_CODE_NOT_INCLUDED_IN_PACKAGE]: "the vulnerable code is not in the package",
  [FalsePositiveType.VULNERABLE_CODE_NOT_IN_EXECUTION_PATH]: "the vulnerable code is not in the execution path",
  [FalsePositiveType.VULNERABLE_CODE_CANNOT_BE_CONTROLLED_BY_ADVERSARY]:
    "the vulnerable code cannot be controlled by an adversary",
  [FalsePositiveType.INLINE_MITIGATIONS_EXIST]: "inline mitigations exist",
};

/** What an event says beyond its kind, as short lines. */
export function eventDetails(event: AdvisoryEvent): string[] {
  const t = event.type;
  const lines: string[] = [];
  const note = (n: string) => n && lines.push(n);
  switch (t.case) {
    case "detection": {
      const d = t.value.type;
      if (d.case === "manual") lines.push("Found by hand");
      if (d.case === "nvdapi") lines.push(`Found through the NVD API: ${d.value.cpeFound || d.value.cpeSearched}`);
      if (d.case === "scanv1")
        lines.push(
          `Found by ${d.value.scanner || "a scanner"}${d.value.scannerVersion ? ` ${d.value.scannerVersion}` : ""}: ` +
            `${d.value.component} ${d.value.componentVersion} (${d.value.componentType})` +
            (d.value.artifactVersion ? ` in ${d.value.artifactVersion}` : ""),
        );
      break;
    }
    case "fixed":
      lines.push(`Fixed in ${t.value.fixedVersion}`);
      note(t.value.note);
      break;
    case "patched":
      lines.push(`Patched in ${t.value.patchedVersions.join(", ")}`);
      note(t.value.note);
      break;
    case "falsePositiveDetermination":
      if (FALSE_POSITIVE_WORDS[t.value.type]) lines.push(`Not affected: ${FALSE_POSITIVE_WORDS[t.value.type]}`);
      note(t.value.note);
      break;
    case "truePositiveDetermination":
    case "analysisNotPlanned":
    case "fixNotPlanned":
    case "pendingUpstreamFix":
      note(t.value.note);
      break;
  }
  return lines;
}

const SEVERITY_TYPES: Record<number, string> = {
  [Severity_Type.CVSS_V2]: "CVSS v2",
  [Severity_Type.CVSS_V3]: "CVSS v3",
  [Severity_Type.CVSS_V4]: "CVSS v4",
};

export function severityTypeLabel(s: Severity): string {
  return SEVERITY_TYPES[s.type] ?? "Score";
}

const roundUp = (n: number) => {
  const i = Math.round(n * 100000);
  return i % 10000 === 0 ? i / 100000 : (Math.floor(i / 10000) + 1) / 10;
};

/** A CVSS v3.x vector's base score, or undefined when it is not one. */
export function cvss3BaseScore(vector: string): number | undefined {
  if (!/^CVSS:3\.[01]\//.test(vector)) return undefined;
  const m = Object.fromEntries(
    vector
      .split("/")
      .slice(1)
      .map((p) => p.split(":") as [string, string]),
  );
  const AV = { N: 0.85, A: 0.62, L: 0.55, P: 0.2 }[m.AV as string];
  const AC = { L: 0.77, H: 0.44 }[m.AC as string];
  const UI = { N: 0.85, R: 0.62 }[m.UI as string];
  const scopeChanged = m.S === "C";
  if (m.S !== "U" && !scopeChanged) return undefined;
  const PR = (scopeChanged ? { N: 0.85, L: 0.68, H: 0.5 } : { N: 0.85, L: 0.62, H: 0.27 })[m.PR as string];
  const cia = (k: string) => ({ H: 0.56, L: 0.22, N: 0 })[m[k] as string];
  const [C, I, A] = [cia("C"), cia("I"), cia("A")];
  if ([AV, AC, UI, PR, C, I, A].some((v) => v === undefined)) return undefined;
  const iss = 1 - (1 - C!) * (1 - I!) * (1 - A!);
  const impact = scopeChanged ? 7.52 * (iss - 0.029) - 3.25 * Math.pow(iss - 0.02, 15) : 6.42 * iss;
  if (impact <= 0) return 0;
  const exploitability = 8.22 * AV! * AC! * PR! * UI!;
  return roundUp(Math.min((scopeChanged ? 1.08 : 1) * (impact + exploitability), 10));
}

export function levelOf(score: number): string {
  if (score === 0) return "None";
  if (score < 4) return "Low";
  if (score < 7) return "Medium";
  if (score < 9) return "High";
  return "Critical";
}

/** The advisory's highest CVSS v3 level as a badge; "—" when it has no v3 score. */
export function AdvisorySeverity({ advisory }: { advisory: Advisory }) {
  const scores = advisory.severities.map((s) => cvss3BaseScore(s.score)).filter((n): n is number => n !== undefined);
  if (scores.length === 0) return <span className="muted">—</span>;
  const top = Math.max(...scores);
  return (
    <span>
      <SeverityBadge severity={levelOf(top)} /> {top.toFixed(1)}
    </span>
  );
}
