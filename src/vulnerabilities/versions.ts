// Version ordering and OSV range evaluation, for the feeds' "is this version affected" questions:
// SEMVER ranges by SemVer 2.0 precedence, ECOSYSTEM ranges by the ecosystem's own ordering (apk
// for Chainguard, Wolfi and Alpine; SemVer where the ecosystem uses it; natural order otherwise).
import semver from "semver";

export interface OsvRangeEvent {
  introduced?: string;
  fixed?: string;
  last_affected?: string;
  limit?: string;
}

export interface OsvRange {
  type: string;
  events: OsvRangeEvent[];
}

/** Ecosystems (before any `:release` suffix, lower-cased) whose packages are apks. */
const APK_ECOSYSTEMS: ReadonlySet<string> = new Set(["chainguard", "wolfi", "alpine"]);
/** Ecosystems whose versions are SemVer (Go's with a leading v, which loose parsing accepts). */
const SEMVER_ECOSYSTEMS: ReadonlySet<string> = new Set(["crates.io", "npm", "go", "hex", "pub", "swifturl"]);

/**
 * Whether `version` falls in any of `ranges`, per the OSV schema's evaluation: events sorted by
 * version, `introduced` opens (`"0"` before every version), `fixed` closes before itself,
 * `last_affected` closes after itself, and `limit` events bound the whole range. GIT ranges need
 * the repository and are not evaluated; a range whose versions cannot be compared (not SemVer in
 * a SEMVER range, ...) does not count as affecting.
 */
export function isAffected(ranges: readonly OsvRange[], version: string, ecosystem: string): boolean {
  return ranges.some((range) => {
    const compare = comparatorFor(range.type, ecosystem);
    return compare !== undefined && Array.isArray(range.events) && inRange(range.events, version, compare);
  });
}

/** -1, 0 or 1 as `a` sorts before, with or after `b` in `ecosystem`. Never throws. */
export function compareVersions(ecosystem: string, a: string, b: string): number {
  const eco = ecosystemKey(ecosystem);
  if (APK_ECOSYSTEMS.has(eco)) return compareApk(a, b);
  if (SEMVER_ECOSYSTEMS.has(eco)) {
    const x = semverOf(a);
    const y = semverOf(b);
    if (x && y) return semver.compare(x, y);
  }
  return compareNatural(a, b);
}

/** undefined: the two cannot be compared. */
type Comparator = (a: string, b: string) => number | undefined;

function comparatorFor(type: string, ecosystem: string): Comparator | undefined {
  if (type === "SEMVER")
    return (a, b) => {
      const x = semverOf(a);
      const y = semverOf(b);
      return x && y ? semver.compare(x, y) : undefined;
    };
  if (type === "ECOSYSTEM") return (a, b) => compareVersions(ecosystem, a, b);
  return undefined;
}

function ecosystemKey(ecosystem: string): string {
  return (ecosystem.split(":")[0] ?? "").trim().toLowerCase();
}

const ZERO = Symbol("before every version");

function inRange(events: readonly OsvRangeEvent[], version: string, compare: Comparator): boolean {
  let comparable = true;
  const cmp = (a: string | typeof ZERO, b: string | typeof ZERO): number => {
    if (a === ZERO || b === ZERO) return a === b ? 0 : a === ZERO ? -1 : 1;
    const c = compare(a, b);
    if (c === undefined) comparable = false;
    return c ?? 0;
  };

  const limits = events.map((e) => e?.limit).filter((l): l is string => typeof l === "string");
  // "*" in a limit is infinity; without limits, an implicit "*" is assumed
  if (limits.length > 0 && !limits.some((l) => l.includes("*") || cmp(version, l) < 0)) return false;
  if (!comparable) return false;

  const points: { kind: "introduced" | "fixed" | "last_affected"; at: string | typeof ZERO }[] = [];
  for (const e of events) {
    if (typeof e?.introduced === "string")
      points.push({ kind: "introduced", at: e.introduced === "0" ? ZERO : e.introduced });
    if (typeof e?.fixed === "string") points.push({ kind: "fixed", at: e.fixed });
    if (typeof e?.last_affected === "string") points.push({ kind: "last_affected", at: e.last_affected });
  }
  points.sort((p, q) => cmp(p.at, q.at));

  let affected = false;
  for (const p of points) {
    const c = cmp(version, p.at);
    if (p.kind === "introduced" && c >= 0) affected = true;
    else if (p.kind === "fixed" && c >= 0) affected = false;
    else if (p.kind === "last_affected" && c > 0) affected = false;
  }
  return comparable && affected;
}

/**
 * A SemVer, read leniently: loose parsing (a leading v or =, ...), and one or two numeric
 * components padded with zeros ("1.2" is 1.2.0). null when it is not a version at all.
 */
function semverOf(version: string): semver.SemVer | null {
  const v = version.trim();
  try {
    const parsed = semver.parse(v, { loose: true });
    if (parsed) return parsed;
    const short = /^[v=]?(\d+)(?:\.(\d+))?([-+].*)?$/.exec(v);
    return short ? semver.parse(`${short[1]}.${short[2] ?? 0}.0${short[3] ?? ""}`, { loose: true }) : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// apk versions: <digits>(.<digits>)*[letter](_suffix[digits])*[~hash](-r<digits>)

const APK_VERSION =
  /^(\d+(?:\.\d+)*)([a-z])?((?:_(?:alpha|beta|pre|rc|cvs|svn|git|hg|p)\d*)*)(?:~[0-9a-f]+)?(?:-r(\d+))?$/;
const APK_SUFFIX = /_(alpha|beta|pre|rc|cvs|svn|git|hg|p)(\d*)/g;
/** Suffix ranks; no suffix ranks between the pre-releases and the post-releases. */
const SUFFIX_RANK: Readonly<Record<string, number>> = {
  alpha: 0,
  beta: 1,
  pre: 2,
  rc: 3,
  cvs: 5,
  svn: 6,
  git: 7,
  hg: 8,
  p: 9,
};
const NO_SUFFIX = { rank: 4, number: "0" };

interface ApkVersion {
  numbers: string[];
  letter: string;
  suffixes: { rank: number; number: string }[];
  revision: string;
}

function parseApk(version: string): ApkVersion | undefined {
  const m = APK_VERSION.exec(version.trim());
  if (!m) return undefined;
  return {
    numbers: m[1]!.split("."),
    letter: m[2] ?? "",
    suffixes: [...(m[3] ?? "").matchAll(APK_SUFFIX)].map((s) => ({ rank: SUFFIX_RANK[s[1]!]!, number: s[2] || "0" })),
    revision: m[4] ?? "0",
  };
}

/** apk ordering; anything it cannot read is ordered naturally. The ~hash part has no order. */
function compareApk(a: string, b: string): number {
  const x = parseApk(a);
  const y = parseApk(b);
  if (!x || !y) return compareNatural(a, b);
  for (let i = 0; i < Math.max(x.numbers.length, y.numbers.length); i++) {
    const p = x.numbers[i];
    const q = y.numbers[i];
    // 1.2 < 1.2.0: the version with more components is the later one
    if (p === undefined || q === undefined) return p === undefined ? -1 : 1;
    const c = compareDigits(p, q);
    if (c !== 0) return c;
  }
  if (x.letter !== y.letter) return x.letter < y.letter ? -1 : 1;
  for (let i = 0; i < Math.max(x.suffixes.length, y.suffixes.length); i++) {
    const p = x.suffixes[i] ?? NO_SUFFIX;
    const q = y.suffixes[i] ?? NO_SUFFIX;
    if (p.rank !== q.rank) return p.rank < q.rank ? -1 : 1;
    const c = compareDigits(p.number, q.number);
    if (c !== 0) return c;
  }
  return compareDigits(x.revision, y.revision);
}

/** Two runs of digits by numeric value, however long. */
function compareDigits(a: string, b: string): number {
  const p = a.replace(/^0+/, "");
  const q = b.replace(/^0+/, "");
  if (p.length !== q.length) return p.length < q.length ? -1 : 1;
  return p < q ? -1 : p > q ? 1 : 0;
}

/** Runs of digits compared as numbers, everything else by code unit; the shorter prefix first. */
function compareNatural(a: string, b: string): number {
  const x = a.trim().match(/\d+|\D+/g) ?? [];
  const y = b.trim().match(/\d+|\D+/g) ?? [];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const p = x[i];
    const q = y[i];
    if (p === undefined || q === undefined) return p === undefined ? -1 : 1;
    const digits = /^\d/.test(p) && /^\d/.test(q);
    const c = digits ? compareDigits(p, q) : p < q ? -1 : p > q ? 1 : 0;
    if (c !== 0) return c;
  }
  return 0;
}
