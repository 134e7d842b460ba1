// Advisory documents → ParsedDocument (documents.ts): the advisory YAML of wolfi-dev/advisories
// (schema-version 2 and 2.x.y) and OSV JSON records. Everything a document gets wrong is a
// DocumentError with a path and, where the document has lines we can point at, the line; no other
// error escapes, whatever the input.
import { createHash } from "node:crypto";
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Pair, type YAMLMap } from "yaml";
import { AdvisoryEvent_FalsePositiveDetermination_TypeSchema } from "../gen/chainguard/platform/vulnerabilities/v2beta1/advisories_pb.js";
import {
  DocumentError,
  EVENT_KINDS,
  type EventKind,
  type ParsedAdvisory,
  type ParsedDocument,
  type ParsedEvent,
  type ParsedSeverity,
} from "./documents.js";
import { ADVISORY_YAML_ECOSYSTEM, advisoryYamlPurl } from "./ecosystems.js";

/** Largest document accepted, in UTF-8 bytes (the biggest corpus document is about 120 KB). */
export const MAX_DOCUMENT_BYTES = 4 * 1024 * 1024;

const CGA_ALPHABET = "23456789cfghjmpqrvwx";
const CGA_ID = /^CGA-[23456789cfghjmpqrvwx]{4}-[23456789cfghjmpqrvwx]{4}-[23456789cfghjmpqrvwx]{4}$/;
/** Ids worth keeping among the aliases when a legacy document used one as its own id. */
const VULNERABILITY_ID = /^(CVE|GHSA|GO)-/;

/** Whether `id` is a Chainguard advisory id: `CGA-xxxx-xxxx-xxxx` over CGA_ALPHABET. */
export function isCgaId(id: string): boolean {
  return CGA_ID.test(id);
}

/**
 * The CGA id an advisory with an old-style id (a CVE id, ...) is stored under: derived from the
 * package and that id, so importing the same document again finds the same advisory.
 */
export function legacyCgaId(packageName: string, legacyId: string): string {
  const digest = createHash("sha256").update(`${packageName}\n${legacyId}`, "utf8").digest("hex");
  // 256 bits read as one number, its base-20 digits from the least significant: uniform enough
  let n = BigInt(`0x${digest}`);
  let chars = "";
  for (let i = 0; i < 12; i++) {
    chars += CGA_ALPHABET[Number(n % 20n)];
    n /= 20n;
  }
  return `CGA-${chars.slice(0, 4)}-${chars.slice(4, 8)}-${chars.slice(8, 12)}`;
}

/**
 * Parses one advisory document: OSV JSON when its first non-space character is `{`, advisory
 * YAML otherwise. `name` is the document's name as sent (the caller reports it with the error).
 */
export function parseAdvisoryDocument(name: string, content: string): ParsedDocument {
  try {
    if (typeof content !== "string") throw new DocumentError("the document must be text");
    // length first: cheap, and a string of more UTF-16 units than the limit is over it in bytes too
    if (content.length > MAX_DOCUMENT_BYTES || Buffer.byteLength(content, "utf8") > MAX_DOCUMENT_BYTES)
      throw new DocumentError(`the document is larger than ${MAX_DOCUMENT_BYTES} bytes`);
    const text = content.startsWith("\uFEFF") ? content.slice(1) : content;
    return text.trimStart().startsWith("{") ? parseOsv(text) : parseAdvisoryYaml(text);
  } catch (err) {
    if (err instanceof DocumentError) throw err;
    // A library choking on hostile input (nesting deep enough to exhaust the stack, ...) is still
    // this document's problem only.
    const reason = err instanceof Error ? err.message : String(err);
    throw new DocumentError(`the document cannot be read: ${reason}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Timestamps

const TIMESTAMP =
  /^(\d{4})-(\d{2})-(\d{2})(?:(?:[Tt]|[ \t]+)(\d{2}):(\d{2}):(\d{2})(\.\d+)?[ \t]*(Z|z|[+-]\d{2}(?::?\d{2})?)?)?$/;

/** An ISO 8601 / RFC 3339 timestamp (a date alone is midnight UTC); undefined when invalid. */
export function parseTimestamp(value: string): Date | undefined {
  const m = TIMESTAMP.exec(value.trim());
  if (!m) return undefined;
  const num = (i: number) => Number(m[i] ?? 0);
  const [year, month, day, hour, minute, second] = [num(1), num(2), num(3), num(4), num(5), num(6)];
  const millis = m[7] ? Number(m[7].slice(1, 4).padEnd(3, "0")) : 0;
  const daysInMonth = [31, isLeapYear(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59)
    return undefined;
  let offsetMinutes = 0;
  const zone = m[8];
  if (zone && zone.toUpperCase() !== "Z") {
    const digits = zone.slice(1).replace(":", "");
    const hours = Number(digits.slice(0, 2));
    const minutes = Number(digits.slice(2) || 0);
    if (hours > 23 || minutes > 59) return undefined;
    offsetMinutes = (zone.startsWith("-") ? -1 : 1) * (hours * 60 + minutes);
  }
  // setUTCFullYear, not Date.UTC: Date.UTC maps years 0-99 onto 1900-1999
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, millis);
  return new Date(date.getTime() - offsetMinutes * 60_000);
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

/** Oldest first; stable, so events at the same time keep the document's order. */
function byTime(events: ParsedEvent[]): ParsedEvent[] {
  return events.sort((a, b) => a.time.getTime() - b.time.getTime());
}

// ---------------------------------------------------------------------------------------------
// Advisory YAML

/** The false-positive types by their proto JSON names (TYPE_...), without TYPE_UNSPECIFIED. */
const FALSE_POSITIVE_TYPES: ReadonlySet<string> = new Set(
  AdvisoryEvent_FalsePositiveDetermination_TypeSchema.values.map((v) => v.name).filter((n) => n !== "TYPE_UNSPECIFIED"),
);

/** scan/v1 detection data: YAML key → ScanV1 field (proto JSON name). */
const SCAN_V1_FIELDS: Readonly<Record<string, string>> = {
  scanner: "scanner",
  subpackageName: "subpackage",
  componentID: "componentId",
  componentName: "component",
  componentVersion: "componentVersion",
  componentType: "componentType",
  componentLocation: "componentLocation",
  artifactVersion: "artifactVersion",
  scannerVersion: "scannerVersion",
  grypeDbBuilt: "grypeDbBuilt",
  grypeDbChecksum: "grypeDbChecksum",
};

const NVDAPI_FIELDS: Readonly<Record<string, string>> = { cpeSearched: "cpeSearched", cpeFound: "cpeFound" };

/** Kinds whose data is a note and nothing else. */
const NOTE_ONLY: ReadonlySet<EventKind> = new Set([
  "true-positive-determination",
  "analysis-not-planned",
  "fix-not-planned",
  "pending-upstream-fix",
]);

const KINDS: ReadonlySet<string> = new Set<EventKind>(EVENT_KINDS);

/** Plain scalars YAML reads as null (the failsafe schema used here reads them as text). */
const NULLS: ReadonlySet<string> = new Set(["", "~", "null", "Null", "NULL"]);

const SCHEMA_VERSION = /^2(\.\d+){0,2}$/;

/** Reads a parsed YAML document, failing with the path and the line of what is wrong. */
class YamlReader {
  constructor(private readonly lines: LineCounter) {}

  line(node: unknown): number | undefined {
    const start = (node as { range?: [number, number, number] | null } | null | undefined)?.range?.[0];
    return start === undefined ? undefined : Math.max(1, this.lines.linePos(start).line);
  }

  fail(path: string, node: unknown, problem: string): never {
    throw new DocumentError(`${path}: ${problem}`, this.line(node));
  }

  /** The node, or undefined for an absent or null value. */
  value(node: unknown, path: string): unknown {
    if (node === undefined || node === null) return undefined;
    // Aliases would let a small document expand without bound, and advisory documents never use them.
    if (isAlias(node)) this.fail(path, node, "YAML aliases are not supported");
    if (isScalar(node) && node.type === "PLAIN" && NULLS.has(String(node.value))) return undefined;
    return node;
  }

  map(node: unknown, path: string): YAMLMap | undefined {
    const v = this.value(node, path);
    if (v === undefined) return undefined;
    if (!isMap(v)) this.fail(path, v, "must be a mapping");
    return v;
  }

  list(node: unknown, path: string): unknown[] {
    const v = this.value(node, path);
    if (v === undefined) return [];
    if (!isSeq(v)) this.fail(path, v, "must be a list");
    return v.items;
  }

  text(node: unknown, path: string): string | undefined {
    const v = this.value(node, path);
    if (v === undefined) return undefined;
    if (!isScalar(v)) this.fail(path, v, "must be a string");
    return String(v.value);
  }

  /** A required, non-empty string; `at` is what to point at when it is missing. */
  required(node: unknown, path: string, at: unknown): string {
    const s = this.text(node, path);
    if (s === undefined || s.trim() === "") this.fail(path, node ?? at, "is required");
    return s;
  }

  strings(node: unknown, path: string): string[] {
    return this.list(node, path).map((item, i) => this.required(item, `${path}[${i}]`, item));
  }
}

/** The entry of `map` named `key` (keys are text under the failsafe schema). */
function entry(map: YAMLMap | undefined, key: string): Pair | undefined {
  return map?.items.find((p) => isScalar(p.key) && p.key.value === key) as Pair | undefined;
}

function field(map: YAMLMap | undefined, key: string): unknown {
  return entry(map, key)?.value;
}

function parseAdvisoryYaml(text: string): ParsedDocument {
  const lines = new LineCounter();
  // failsafe: every scalar is text, so versions like 1.10 or 2.0 arrive as written
  const doc = parseDocument(text, { lineCounter: lines, schema: "failsafe", prettyErrors: false, uniqueKeys: true });
  const syntax = doc.errors[0];
  if (syntax)
    throw new DocumentError(`invalid YAML: ${syntax.message}`, Math.max(1, lines.linePos(syntax.pos[0]).line));
  const r = new YamlReader(lines);

  const root = r.map(doc.contents, "document");
  if (!root) throw new DocumentError("the document is empty");

  const versionEntry = entry(root, "schema-version");
  const version = r.required(versionEntry?.value, "schema-version", root);
  if (!SCHEMA_VERSION.test(version.trim()))
    r.fail("schema-version", versionEntry?.value, `unsupported version "${version}" (2 and 2.x.y are supported)`);

  const pkgEntry = entry(root, "package");
  const pkg = r.map(pkgEntry?.value, "package");
  if (!pkg) r.fail("package", pkgEntry?.key ?? root, "is required");
  const packageName = r.required(field(pkg, "name"), "package.name", pkgEntry?.key).trim();

  const advisories: ParsedAdvisory[] = [];
  const seen = new Map<string, number | undefined>();
  r.list(field(root, "advisories"), "advisories").forEach((item, i) => {
    const advisory = parseYamlAdvisory(r, item, `advisories[${i}]`, packageName);
    const idNode = field(r.map(item, `advisories[${i}]`), "id");
    for (const id of new Set([advisory.advisoryId, advisory.legacyAdvisoryId ?? advisory.advisoryId])) {
      if (seen.has(id)) {
        const first = seen.get(id);
        r.fail(
          `advisories[${i}].id`,
          idNode,
          `duplicate advisory id "${id}"${first ? ` (first at line ${first})` : ""}`,
        );
      }
      seen.set(id, advisory.line);
    }
    advisories.push(advisory);
  });
  return { format: "advisory-yaml", advisories };
}

function parseYamlAdvisory(r: YamlReader, item: unknown, path: string, packageName: string): ParsedAdvisory {
  const adv = r.map(item, path);
  if (!adv) r.fail(path, item, "must be a mapping");
  const line = r.line(adv) ?? 1;
  const id = r.required(field(adv, "id"), `${path}.id`, adv).trim();
  const aliases = r.strings(field(adv, "aliases"), `${path}.aliases`).map((a) => a.trim());

  const eventsEntry = entry(adv, "events");
  const events = byTime(
    r.list(eventsEntry?.value, `${path}.events`).map((e, j) => parseYamlEvent(r, e, `${path}.events[${j}]`)),
  );
  if (events.length === 0) r.fail(`${path}.events`, eventsEntry?.value ?? adv, "at least one event is required");

  let advisoryId = id;
  let legacyAdvisoryId: string | undefined;
  if (!isCgaId(id)) {
    legacyAdvisoryId = id;
    advisoryId = legacyCgaId(packageName, id);
    if (VULNERABILITY_ID.test(id) && !aliases.includes(id)) aliases.push(id);
  }

  // the component the latest scan saw; a package-level advisory otherwise
  const scan = [...events]
    .reverse()
    .map((e) => (e.kind === "detection" ? (e.data.scanv1 as Record<string, string> | undefined) : undefined))
    .find((s) => s !== undefined);

  return {
    advisoryId,
    ...(legacyAdvisoryId === undefined ? {} : { legacyAdvisoryId }),
    aliases,
    artifactName: packageName,
    artifactType: "apk",
    artifactArchitecture: "",
    componentName: scan ? (scan.component ?? "") : packageName,
    componentType: scan ? (scan.componentType ?? "") : "apk",
    componentLocation: scan ? (scan.componentLocation ?? "") : "",
    severities: [],
    events,
    ecosystem: ADVISORY_YAML_ECOSYSTEM,
    purl: advisoryYamlPurl(packageName),
    line,
  };
}

function parseYamlEvent(r: YamlReader, node: unknown, path: string): ParsedEvent {
  const ev = r.map(node, path);
  if (!ev) r.fail(path, node, "must be a mapping");

  const stampNode = field(ev, "timestamp");
  const stamp = r.required(stampNode, `${path}.timestamp`, ev);
  const time = parseTimestamp(stamp);
  if (!time) r.fail(`${path}.timestamp`, stampNode, `invalid timestamp "${stamp}"`);

  const typeNode = field(ev, "type");
  const kind = r.required(typeNode, `${path}.type`, ev).trim();
  if (!KINDS.has(kind)) r.fail(path, typeNode, `unknown event type "${kind}"`);

  const dataEntry = entry(ev, "data");
  const data = r.map(dataEntry?.value, `${path}.data`);
  // where to point when something the data needs is missing: its `data:` line, else the event
  const dataAt = dataEntry?.key ?? ev;
  return { time, kind: kind as EventKind, data: eventData(r, kind as EventKind, data, `${path}.data`, dataAt) };
}

function eventData(
  r: YamlReader,
  kind: EventKind,
  data: YAMLMap | undefined,
  path: string,
  at: unknown,
): Record<string, unknown> {
  const note = r.text(field(data, "note"), `${path}.note`);
  const withNote = (fields: Record<string, unknown>) => (note ? { ...fields, note } : fields);
  if (NOTE_ONLY.has(kind)) return withNote({});
  switch (kind) {
    case "detection": {
      if (!data) return { manual: {} };
      const typeNode = field(data, "type");
      const type = r.required(typeNode, `${path}.type`, at).trim();
      if (type === "manual") return { manual: {} };
      const fieldsOf = type === "scan/v1" ? SCAN_V1_FIELDS : type === "nvdapi" ? NVDAPI_FIELDS : undefined;
      if (!fieldsOf) r.fail(`${path}.type`, typeNode, `unknown detection type "${type}"`);
      const inner = r.map(field(data, "data"), `${path}.data`);
      const out: Record<string, string> = {};
      for (const [key, name] of Object.entries(fieldsOf)) {
        const v = r.text(field(inner, key), `${path}.data.${key}`);
        if (v) out[name] = v;
      }
      return type === "scan/v1" ? { scanv1: out } : { nvdapi: out };
    }
    case "fixed": {
      const version = r.required(field(data, "fixed-version"), `${path}.fixed-version`, at).trim();
      return withNote({ fixedVersion: version });
    }
    case "patched": {
      const versionsNode = field(data, "patched-versions");
      const versions = r.strings(versionsNode, `${path}.patched-versions`).map((v) => v.trim());
      if (versions.length === 0)
        r.fail(`${path}.patched-versions`, versionsNode ?? at, "at least one version is required");
      return withNote({ patchedVersions: versions });
    }
    case "false-positive-determination": {
      const typeNode = field(data, "type");
      const type = r.required(typeNode, `${path}.type`, at).trim();
      const name = `TYPE_${type.toUpperCase().replace(/-/g, "_")}`;
      if (!FALSE_POSITIVE_TYPES.has(name)) r.fail(`${path}.type`, typeNode, `unknown false-positive type "${type}"`);
      return withNote({ type: name });
    }
    default:
      // every kind is handled above; reaching here means KINDS and this switch disagree
      throw new DocumentError(`${path}: unsupported event type "${kind}"`, r.line(at));
  }
}

// ---------------------------------------------------------------------------------------------
// OSV JSON

const SEVERITY_TYPES: Readonly<Record<string, ParsedSeverity["type"]>> = {
  CVSS_V2: "TYPE_CVSS_V2",
  CVSS_V3: "TYPE_CVSS_V3",
  CVSS_V4: "TYPE_CVSS_V4",
};

/** purl types of the OSV ecosystems whose names are not their purl type. */
const PURL_TYPES: Readonly<Record<string, string>> = {
  "crates.io": "cargo",
  go: "golang",
  pypi: "pypi",
  rubygems: "gem",
  packagist: "composer",
  npm: "npm",
  maven: "maven",
  nuget: "nuget",
};

/** The record fields kept as they came, for the OSV feed to give back. */
const OSV_KEPT = ["summary", "details", "published", "modified", "withdrawn", "references"] as const;

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function osvFail(path: string, problem: string): never {
  throw new DocumentError(`${path}: ${problem}`);
}

function osvString(obj: Json, key: string, path: string, required: boolean): string | undefined {
  const v = obj[key];
  if (v === undefined || v === null) {
    if (required) osvFail(path, "is required");
    return undefined;
  }
  if (typeof v !== "string") osvFail(path, "must be a string");
  if (required && v.trim() === "") osvFail(path, "is required");
  return v;
}

function osvTime(obj: Json, key: string, required: boolean): Date | undefined {
  const s = osvString(obj, key, key, required);
  if (s === undefined) return undefined;
  const time = parseTimestamp(s);
  if (!time) osvFail(key, `invalid timestamp "${s}"`);
  return time;
}

function osvArray(obj: Json, key: string, path: string): unknown[] | undefined {
  const v = obj[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) osvFail(path, "must be a list");
  return v;
}

function osvStrings(obj: Json, key: string, path: string): string[] {
  return (osvArray(obj, key, path) ?? []).map((v, i) => {
    if (typeof v !== "string") osvFail(`${path}[${i}]`, "must be a string");
    return v;
  });
}

/** The line of a JSON syntax error, from the position V8 reports. */
function jsonErrorLine(text: string, message: string): number | undefined {
  const lineCol = /line (\d+) column \d+/.exec(message);
  if (lineCol) return Number(lineCol[1]);
  const position = /at position (\d+)/.exec(message);
  const offset = position ? Number(position[1]) : /end of JSON input/.test(message) ? text.length : undefined;
  if (offset === undefined) return undefined;
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

function parseOsv(text: string): ParsedDocument {
  let record: unknown;
  try {
    record = JSON.parse(text);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new DocumentError(`invalid JSON: ${message}`, jsonErrorLine(text, message));
  }
  if (!isObject(record)) throw new DocumentError("the OSV record must be a JSON object", 1);

  const id = osvString(record, "id", "id", true)!.trim();
  const modifiedTime = osvTime(record, "modified", true)!;
  const publishedTime = osvTime(record, "published", false);
  const withdrawnTime = osvTime(record, "withdrawn", false);
  const aliases = osvStrings(record, "aliases", "aliases");
  osvStrings(record, "related", "related");
  for (const key of ["summary", "details"]) osvString(record, key, key, false);
  osvArray(record, "references", "references");
  osvArray(record, "credits", "credits");
  if (record.database_specific !== undefined && !isObject(record.database_specific))
    osvFail("database_specific", "must be an object");

  const severities = osvSeverities(record, "severity", "severity");
  const affected = osvArray(record, "affected", "affected") ?? [];
  if (affected.length === 0) osvFail("affected", "at least one affected package is required");

  const advisories = affected.map((entry, i): ParsedAdvisory => {
    const path = `affected[${i}]`;
    if (!isObject(entry)) osvFail(path, "must be an object");
    const pkg = entry.package;
    if (!isObject(pkg)) osvFail(`${path}.package`, "is required");
    const ecosystem = osvString(pkg, "ecosystem", `${path}.package.ecosystem`, true)!.trim();
    const name = osvString(pkg, "name", `${path}.package.name`, true)!.trim();
    const purl =
      osvString(pkg, "purl", `${path}.package.purl`, false) ||
      `pkg:${PURL_TYPES[ecosystem.toLowerCase()] ?? ecosystem.toLowerCase()}/${name}`;
    const fixed = fixedVersions(entry, path);

    const events: ParsedEvent[] = [{ time: publishedTime ?? modifiedTime, kind: "detection", data: { manual: {} } }];
    // A withdrawal is the record's last word: a fix is dated no later than it (a record touched
    // after its withdrawal would otherwise read as fixed), and is pushed first at the same time.
    const fixTime = withdrawnTime && withdrawnTime < modifiedTime ? withdrawnTime : modifiedTime;
    if (fixed.length === 1) events.push({ time: fixTime, kind: "fixed", data: { fixedVersion: fixed[0] } });
    if (fixed.length > 1) events.push({ time: fixTime, kind: "patched", data: { patchedVersions: fixed } });
    if (withdrawnTime)
      events.push({
        time: withdrawnTime,
        kind: "false-positive-determination",
        data: { type: "TYPE_VULNERABILITY_RECORD_ANALYSIS_CONTESTED", note: "withdrawn" },
      });

    const osv: Json = {};
    for (const key of OSV_KEPT) if (record[key] !== undefined) osv[key] = record[key];
    osv.affected = [entry];
    for (const key of ["database_specific", "related", "credits"])
      if (record[key] !== undefined) osv[key] = record[key];

    const artifactType = ecosystem.toLowerCase();
    return {
      advisoryId: id,
      aliases: [...aliases],
      artifactName: name,
      artifactType,
      artifactArchitecture: "",
      componentName: name,
      componentType: artifactType,
      componentLocation: "",
      // the record's severity, else this package's (OSV allows either, never both)
      severities: severities.length > 0 ? severities : osvSeverities(entry, "severity", `${path}.severity`),
      events: byTime(events),
      ecosystem,
      purl,
      osv,
      line: 1,
    };
  });
  return { format: "osv", advisories };
}

function osvSeverities(obj: Json, key: string, path: string): ParsedSeverity[] {
  return (osvArray(obj, key, path) ?? []).flatMap((s, i): ParsedSeverity[] => {
    if (!isObject(s)) osvFail(`${path}[${i}]`, "must be an object");
    const type = osvString(s, "type", `${path}[${i}].type`, true)!;
    const score = osvString(s, "score", `${path}[${i}].score`, true)!;
    const known = SEVERITY_TYPES[type];
    return known ? [{ type: known, score }] : [];
  });
}

/**
 * The distinct fixed versions of an affected entry's ranges, validating the ranges on the way
 * (they are evaluated later, by the feeds). GIT ranges are left out: their fixes are commits.
 */
function fixedVersions(entry: Json, path: string): string[] {
  const fixed: string[] = [];
  (osvArray(entry, "ranges", `${path}.ranges`) ?? []).forEach((range, i) => {
    const rangePath = `${path}.ranges[${i}]`;
    if (!isObject(range)) osvFail(rangePath, "must be an object");
    const type = osvString(range, "type", `${rangePath}.type`, true)!;
    (osvArray(range, "events", `${rangePath}.events`) ?? []).forEach((event, j) => {
      const eventPath = `${rangePath}.events[${j}]`;
      if (!isObject(event)) osvFail(eventPath, "must be an object");
      for (const key of ["introduced", "fixed", "last_affected", "limit"])
        osvString(event, key, `${eventPath}.${key}`, false);
      const version = event.fixed as string | undefined;
      if (type !== "GIT" && version !== undefined && version !== "" && !fixed.includes(version)) fixed.push(version);
    });
  });
  osvStrings(entry, "versions", `${path}.versions`);
  return fixed;
}
