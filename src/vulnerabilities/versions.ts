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
// apk versions, as apk-tools 3 compares them (its src/version.c, tested by its test/unit/version.data):
//   <digits>{.<digits>}[<letter>]{_<suffix>[<digits>]}[~<hex hash>][-r<digits>]
// read as a run of tokens compared pairwise while both are of the same kind.

const INITIAL_DIGIT = 0;
const DIGIT = 1;
const LETTER = 2;
const SUFFIX = 3;
const SUFFIX_NO = 4;
const COMMIT_HASH = 5;
const REVISION_NO = 6;
const END = 7;
const INVALID = 8;

/** Suffix ranks; no suffix (5) ranks between the pre-releases and the post-releases. */
const SUFFIX_RANK: ReadonlyMap<string, number> = new Map([
  ["alpha", 1],
  ["beta", 2],
  ["pre", 3],
  ["rc", 4],
  ["cvs", 6],
  ["svn", 7],
  ["git", 8],
  ["hg", 9],
  ["p", 10],
]);
const NO_SUFFIX = 5;

/** A position in one version string and the token just read there. */
interface ApkLexer {
  text: string;
  at: number;
  kind: number;
  token: string;
  /** the suffix's rank, for a SUFFIX token */
  rank: number;
}

const isDigit = (c: string | undefined) => c !== undefined && c >= "0" && c <= "9";
const isLower = (c: string | undefined) => c !== undefined && c >= "a" && c <= "z";
const isHex = (c: string | undefined) => isDigit(c) || (c !== undefined && c >= "a" && c <= "f");

function readWhile(lexer: ApkLexer, accept: (c: string | undefined) => boolean): string {
  const start = lexer.at;
  while (accept(lexer.text[lexer.at])) lexer.at++;
  return lexer.text.slice(start, lexer.at);
}

function readDigits(lexer: ApkLexer, kind: number): void {
  lexer.token = readWhile(lexer, isDigit);
  lexer.kind = lexer.token === "" ? INVALID : kind;
}

function firstToken(text: string): ApkLexer {
  const lexer: ApkLexer = { text, at: 0, kind: INITIAL_DIGIT, token: "", rank: 0 };
  readDigits(lexer, INITIAL_DIGIT);
  return lexer;
}

/** Reads the next token; a token that may not follow the previous one (or none known) is INVALID. */
function nextToken(lexer: ApkLexer): void {
  const c = lexer.text[lexer.at];
  const previous = lexer.kind;
  if (c === undefined) {
    lexer.kind = END;
  } else if (isLower(c)) {
    lexer.kind = previous > DIGIT ? INVALID : LETTER;
    lexer.token = c;
    lexer.at++;
  } else if (c === "." || isDigit(c)) {
    if (c === ".") lexer.at++;
    if (previous === INITIAL_DIGIT || previous === DIGIT) readDigits(lexer, DIGIT);
    else if (previous === SUFFIX && c !== ".") readDigits(lexer, SUFFIX_NO);
    else lexer.kind = INVALID;
  } else if (c === "_") {
    lexer.at++;
    lexer.token = readWhile(lexer, isLower);
    const rank = SUFFIX_RANK.get(lexer.token);
    lexer.kind = previous > SUFFIX_NO || rank === undefined ? INVALID : SUFFIX;
    lexer.rank = rank ?? 0;
  } else if (c === "~") {
    lexer.at++;
    lexer.token = readWhile(lexer, isHex);
    lexer.kind = previous >= COMMIT_HASH || lexer.token === "" ? INVALID : COMMIT_HASH;
  } else if (c === "-" && lexer.text[lexer.at + 1] === "r" && previous < REVISION_NO) {
    lexer.at += 2;
    readDigits(lexer, REVISION_NO);
  } else {
    lexer.kind = INVALID;
  }
}

/** Two tokens of the same kind. */
function compareTokens(kind: number, x: ApkLexer, y: ApkLexer): number {
  switch (kind) {
    case DIGIT:
      // a component with a leading zero compares as text (as Gentoo's: 1.02 < 1.1, 1.0 < 1.00)
      if (x.token.startsWith("0") || y.token.startsWith("0")) return compareText(x.token, y.token);
      return compareDigits(x.token, y.token);
    case INITIAL_DIGIT:
    case SUFFIX_NO:
    case REVISION_NO:
      return compareDigits(x.token, y.token);
    case SUFFIX:
      return Math.sign(x.rank - y.rank);
    default:
      // letters and commit hashes
      return compareText(x.token, y.token);
  }
}

/**
 * apk ordering. Where apk-tools stops at a token it cannot read in both versions at the same
 * point (it calls them equal), the two are ordered naturally, so distinct strings still get one
 * order; a version that turns unreadable where the other goes on sorts first, as in apk-tools.
 */
export function compareApk(a: string, b: string): number {
  const x = firstToken(a);
  const y = firstToken(b);
  while (x.kind === y.kind && x.kind < END) {
    const c = compareTokens(x.kind, x, y);
    if (c !== 0) return c;
    nextToken(x);
    nextToken(y);
  }
  if (x.kind === y.kind) return x.kind === INVALID ? compareNatural(a, b) : 0;
  // the version that goes on is the later one, unless what follows is a pre-release suffix
  if (x.kind === SUFFIX && x.rank < NO_SUFFIX) return -1;
  if (y.kind === SUFFIX && y.rank < NO_SUFFIX) return 1;
  return x.kind > y.kind ? -1 : 1;
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
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
