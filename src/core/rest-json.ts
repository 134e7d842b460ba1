// JSON for REST responses: the proto3 canonical mapping with implicit fields emitted (so
// `skipped: 0`, `verified: false`, `resourceLimits: {}` are present, as the hosted API shows),
// timestamps always with millisecond precision, and an empty next_page_token omitted.
//
// Each message type gets a writer compiled once from its descriptor (fields in number order, as
// protobuf-es writes them), since the reflective toJson was the largest cost of a List page
// (~9 µs a group). Writers produce exactly what toJson and the normalization below produce
// (test/unit/rest-json.test.ts compares them on every response type); well-known types other
// than Timestamp, and messages carrying unknown fields, are handed to toJson.
import {
  ScalarType,
  toJson,
  type DescEnum,
  type DescField,
  type DescMessage,
  type JsonObject,
  type JsonValue,
  type MessageShape,
  type Registry,
} from "@bufbuild/protobuf";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";
import { randomBytes } from "node:crypto";
import { isShared } from "./shared-lists.js";

const TIMESTAMP = "google.protobuf.Timestamp";

function millisTimestamp(value: string): string {
  // protobuf-es writes 0, 3, 6 or 9 fractional digits; the API promises exactly 3.
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(value);
  if (!m) return value;
  return `${m[1]}.${(m[2] ?? "").padEnd(3, "0").slice(0, 3)}Z`;
}

function normalize(desc: DescMessage, json: JsonObject): void {
  for (const field of desc.fields) {
    const value = json[field.jsonName];
    if (value === undefined || value === null) continue;
    if (field.fieldKind === "message") {
      json[field.jsonName] = normalizeMessage(field.message, value);
    } else if (field.fieldKind === "list" && field.listKind === "message" && Array.isArray(value)) {
      json[field.jsonName] = value.map((v) => normalizeMessage(field.message, v));
    } else if (
      field.fieldKind === "map" &&
      field.mapKind === "message" &&
      typeof value === "object" &&
      !Array.isArray(value)
    ) {
      for (const [k, v] of Object.entries(value))
        (value as JsonObject)[k] = normalizeMessage(field.message, v as JsonValue);
    }
  }
}

function normalizeMessage(desc: DescMessage, value: JsonValue): JsonValue {
  if (desc.typeName === TIMESTAMP && typeof value === "string") return millisTimestamp(value);
  if (desc.typeName.startsWith("google.protobuf.")) return value;
  if (value && typeof value === "object" && !Array.isArray(value)) normalize(desc, value);
  return value;
}

const tokenFields = new WeakMap<DescMessage, string | null>();
function nextPageTokenField(desc: DescMessage): string | null {
  let name = tokenFields.get(desc);
  if (name === undefined) {
    name = desc.fields.find((f) => f.name === "next_page_token")?.jsonName ?? null;
    tokenFields.set(desc, name);
  }
  return name;
}

/** The reflective path: protobuf-es's canonical JSON, then the REST normalization. */
function reflectiveJson(desc: DescMessage, message: unknown, registry: Registry | undefined): JsonValue {
  return normalizeMessage(
    desc,
    toJson(desc, message as MessageShape<DescMessage>, { alwaysEmitImplicit: true, registry }),
  );
}

type Writer = (message: any, registry: Registry | undefined) => JsonValue;

/** google.protobuf.FeatureSet.FieldPresence.IMPLICIT */
const IMPLICIT = 2;
const MIN_TIMESTAMP_SECONDS = -62135596800; // 0001-01-01T00:00:00Z
const MAX_TIMESTAMP_SECONDS = 253402300799; // 9999-12-31T23:59:59Z

const writers = new WeakMap<DescMessage, Writer>();

function writerOf(desc: DescMessage): Writer {
  let writer = writers.get(desc);
  if (!writer) {
    // Set first: a recursive message type refers to its own writer.
    writers.set(desc, (m, r) => writer!(m, r));
    writer = compileWriter(desc);
    writers.set(desc, writer);
  }
  return writer;
}

function timestampJson(ts: { seconds: bigint; nanos: number }, registry: Registry | undefined): JsonValue {
  const seconds = Number(ts.seconds);
  if (seconds < MIN_TIMESTAMP_SECONDS || seconds > MAX_TIMESTAMP_SECONDS || !(ts.nanos >= 0 && ts.nanos <= 999_999_999))
    return reflectiveJson(TimestampSchema, ts, registry); // out of range: the same error toJson gives
  return isoMillis(seconds * 1000 + Math.floor(ts.nanos / 1_000_000));
}

const DAY_MS = 86_400_000;
/** "YYYY-MM-DDT" by day number: a page's timestamps mostly share a few days. */
const dayPrefixes = new Map<number, string>();
const TWO_DIGITS = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, "0"));
const THREE_DIGITS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, "0"));

/** What Date.prototype.toISOString gives for years 0001–9999, without a Date per call. */
export function isoMillis(ms: number): string {
  const day = Math.floor(ms / DAY_MS);
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    prefix = new Date(day * DAY_MS).toISOString().slice(0, 11);
    if (dayPrefixes.size >= 4096) dayPrefixes.clear();
    dayPrefixes.set(day, prefix);
  }
  let rest = ms - day * DAY_MS;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const secs = Math.floor(rest / 1000);
  return `${prefix}${TWO_DIGITS[hours]}:${TWO_DIGITS[minutes]}:${TWO_DIGITS[secs]}.${THREE_DIGITS[rest - secs * 1000]}Z`;
}

function scalarWriter(field: DescField & { scalar: ScalarType }): (v: any) => JsonValue {
  switch (field.scalar) {
    case ScalarType.FLOAT:
    case ScalarType.DOUBLE:
      return (v: number) => (Number.isNaN(v) ? "NaN" : v === Infinity ? "Infinity" : v === -Infinity ? "-Infinity" : v);
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      return (v: bigint | string) => v.toString();
    case ScalarType.BYTES:
      return (v: Uint8Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64");
    default:
      return (v: JsonValue) => v;
  }
}

function enumWriter(desc: DescEnum): (v: number) => JsonValue {
  if (desc.typeName === "google.protobuf.NullValue") return () => null;
  return (v) => desc.value[v]?.name ?? v;
}

/** How one value of a field (or of a list's or map's element) is written. */
function valueWriter(
  field: DescField,
  kind: "scalar" | "enum" | "message",
): (v: any, r: Registry | undefined) => JsonValue {
  if (kind === "scalar") {
    const w = scalarWriter(field as DescField & { scalar: ScalarType });
    return (v) => w(v);
  }
  if (kind === "enum") {
    const w = enumWriter((field as { enum: DescEnum }).enum);
    return (v) => w(v);
  }
  const message = (field as { message: DescMessage }).message;
  return (v, r) => writerOf(message)(v, r);
}

function compileWriter(desc: DescMessage): Writer {
  if (desc.typeName === TIMESTAMP) return (m, r) => timestampJson(m, r);
  if (desc.typeName.startsWith("google.protobuf.")) return (m, r) => reflectiveJson(desc, m, r);
  if (desc.fields.some((f) => f.presence !== IMPLICIT && f.presence !== 1)) return (m, r) => reflectiveJson(desc, m, r);
  const steps = [...desc.fields]
    .sort((a, b) => a.number - b.number)
    .map((f) => {
      const name = f.jsonName;
      const local = f.localName;
      const oneof = f.oneof?.localName;
      let write: (v: any, r: Registry | undefined) => JsonValue;
      if (f.fieldKind === "list") {
        const item = valueWriter(f, f.listKind);
        write = (list: unknown[], r) => {
          if (rawTexts === undefined || r !== undefined || !isShared(list)) return list.map((v) => item(v, r));
          let text = sharedTexts.get(list);
          if (text === undefined) {
            const outer = rawTexts;
            rawTexts = undefined; // a list inside is written out, not spliced
            try {
              text = JSON.stringify(list.map((v) => item(v, r)));
            } finally {
              rawTexts = outer;
            }
            sharedTexts.set(list, text);
          }
          rawTexts.push(text);
          return `${RAW_MARK}${rawTexts.length - 1}`;
        };
      } else if (f.fieldKind === "map") {
        const item = valueWriter(f, f.mapKind);
        write = (map: Record<string, unknown>, r) => {
          const out: JsonObject = {};
          for (const k of Object.keys(map)) out[k] = item(map[k], r);
          return out;
        };
      } else {
        write = valueWriter(f, f.fieldKind);
      }
      if (oneof)
        return (m: any, json: JsonObject, r: Registry | undefined) => {
          const o = m[oneof];
          if (o.case === local) json[name] = write(o.value, r);
        };
      if (f.presence === IMPLICIT)
        return (m: any, json: JsonObject, r: Registry | undefined) => {
          json[name] = write(m[local], r);
        };
      return (m: any, json: JsonObject, r: Registry | undefined) => {
        if (m[local] !== undefined && Object.prototype.hasOwnProperty.call(m, local)) json[name] = write(m[local], r);
      };
    });
  return (m, r) => {
    // Extensions in unknown fields are written from the registry: the reflective path knows how.
    if (r && m.$unknown?.length) return reflectiveJson(desc, m, r);
    const json: JsonObject = {};
    for (const step of steps) step(m, json, r);
    return json;
  };
}

/**
 * JSON text of shared lists (core/shared-lists.ts), kept with the list. Node 20 has no
 * JSON.rawJSON, so while toRestJsonText writes, such a list is written as a placeholder string
 * that names its text, and the placeholders are replaced in the finished text. The placeholder
 * holds a random value of this process, so no string of a caller's can be taken for one.
 */
const sharedTexts = new WeakMap<readonly unknown[], string>();
const RAW_MARK = `\u0000raw:${randomBytes(16).toString("hex")}:`;
const RAW_PLACEHOLDER = new RegExp(`"${JSON.stringify(RAW_MARK).slice(1, -1).replaceAll("\\", "\\\\")}(\\d+)"`, "g");
/** The texts spliced into the answer being written, while toRestJsonText runs. */
let rawTexts: string[] | undefined;

/** JSON.stringify(toRestJson(desc, message)), with shared lists' text written once per list. */
export function toRestJsonText<D extends DescMessage>(desc: D, message: MessageShape<D>): string {
  const texts: string[] = [];
  rawTexts = texts;
  let text: string;
  try {
    text = JSON.stringify(toRestJson(desc, message));
  } finally {
    rawTexts = undefined;
  }
  return texts.length === 0 ? text : text.replace(RAW_PLACEHOLDER, (_, i: string) => texts[Number(i)]!);
}

export function toRestJson<D extends DescMessage>(desc: D, message: MessageShape<D>, registry?: Registry): JsonValue {
  // Writers already give timestamps their three fractional digits (normalizeMessage, for the rest).
  const json = writerOf(desc)(message, registry);
  if (json && typeof json === "object" && !Array.isArray(json)) {
    const tokenField = nextPageTokenField(desc);
    if (tokenField && json[tokenField] === "") delete json[tokenField];
  }
  return json;
}
