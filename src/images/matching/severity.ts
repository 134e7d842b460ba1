// A finding's severity from its advisory's CVSS: each vector's base score computed by
// ae-cvss-calculator (FIRST's formulas for CVSS 2.0, 3.0, 3.1 and 4.0), and the severity named by
// the CVSS qualitative rating of the newest CVSS version given (3.x/4.0: 0.1–3.9 LOW, 4.0–6.9
// MEDIUM, 7.0–8.9 HIGH, 9.0–10 CRITICAL; 2.0: up to 3.9 LOW, 4.0–6.9 MEDIUM, 7.0–10 HIGH). A 0.0
// score (no impact) is NEGLIGIBLE; no usable vector leaves it UNKNOWN.
import cvss from "ae-cvss-calculator";
import type { MatchableAdvisory } from "../../vulnerabilities/api.js";

export type SeverityName = "UNKNOWN" | "LOW" | "MEDIUM" | "HIGH" | "CRITICAL" | "NEGLIGIBLE";

export interface CvssScore {
  /** the base score, one decimal ("9.8") */
  score: string;
  /** the CVSS version ("3.1") */
  version: string;
}

type Vector = { isBaseFullyDefined(): boolean; calculateScores(): { base?: number } };

/** The calculator class for a vector, by its prefix (CVSS 2.0 vectors have none). */
function vectorOf(type: MatchableAdvisory["severities"][number]["type"], text: string): [Vector, string] | undefined {
  if (text.startsWith("CVSS:4.0/")) return [new cvss.Cvss4P0(text), "4.0"];
  if (text.startsWith("CVSS:3.1/")) return [new cvss.Cvss3P1(text), "3.1"];
  if (text.startsWith("CVSS:3.0/")) return [new cvss.Cvss3P0(text), "3.0"];
  if (type === "TYPE_CVSS_V2" && /^\(?AV:/.test(text)) return [new cvss.Cvss2(text.replace(/^\((.*)\)$/, "$1")), "2.0"];
  return undefined;
}

const MAJOR: Readonly<Record<string, string>> = { TYPE_CVSS_V2: "2", TYPE_CVSS_V3: "3", TYPE_CVSS_V4: "4" };

/** Scores by vector: the same advisories are matched again and again. */
const scored = new Map<string, CvssScore | null>();

function scoreOf(severity: MatchableAdvisory["severities"][number]): CvssScore | undefined {
  const key = `${severity.type}\n${severity.score}`;
  let result = scored.get(key);
  if (result === undefined) {
    result = computeScore(severity) ?? null;
    if (scored.size >= 10_000) scored.clear();
    scored.set(key, result);
  }
  return result ?? undefined;
}

function computeScore({ type, score }: MatchableAdvisory["severities"][number]): CvssScore | undefined {
  const text = score.trim();
  // some publishers give the score itself rather than a vector
  if (/^\d{1,2}(\.\d+)?$/.test(text) && Number(text) <= 10)
    return { score: Number(text).toFixed(1), version: MAJOR[type] ?? "" };
  try {
    const parsed = vectorOf(type, text);
    if (!parsed || !parsed[0].isBaseFullyDefined()) return undefined;
    const base = parsed[0].calculateScores().base;
    return typeof base === "number" && Number.isFinite(base)
      ? { score: base.toFixed(1), version: parsed[1] }
      : undefined;
  } catch {
    // a malformed vector: no score rather than a failed report
    return undefined;
  }
}

function ratingOf(score: number, version: string): SeverityName {
  if (score === 0) return "NEGLIGIBLE";
  if (score < 4) return "LOW";
  if (score < 7) return "MEDIUM";
  if (version.startsWith("2") || score < 9) return "HIGH";
  return "CRITICAL";
}

/** The CVSS scores of an advisory's severities (those that can be scored) and the severity they give. */
export function severityOf(severities: MatchableAdvisory["severities"]): { severity: SeverityName; cvss: CvssScore[] } {
  const scores = severities.map(scoreOf).filter((s): s is CvssScore => s !== undefined);
  if (scores.length === 0) return { severity: "UNKNOWN", cvss: [] };
  const newest = scores.reduce((a, b) => (Number.parseFloat(b.version) > Number.parseFloat(a.version) ? b : a));
  return { severity: ratingOf(Number(newest.score), newest.version), cvss: scores };
}
