// fast-check arbitraries of request messages, built generically from a message descriptor: every
// field kind (scalars at their edges, strings with NUL, lone surrogates, bidi and very long runs,
// enums with unknown numbers, nested messages, repeated, maps, oneofs, Timestamps, Durations,
// FieldMasks), biased toward plausible values (real uids and names from the seed data, "-",
// filter and order strings, real page tokens) so that requests reach real rows sometimes.
//
// Every message produced encodes to proto3 JSON (out-of-range Timestamps and irreversible
// FieldMask paths are left to the binary attack cases), so one case can go over any protocol.
import fc from "fast-check";
import { ScalarType, create, toJson, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { wellFormed } from "./wire.js";

/** Plausible values, gathered from the seeded data before the arbitraries are built. */
export interface Plausible {
  /** uids of real resources (groups, identities, roles, bindings, ...) */
  uids: string[];
  /** names of real resources */
  names: string[];
  /** page tokens returned by real List calls */
  pageTokens: string[];
  /** issuer URLs: loopback only, so nothing the fuzzer makes the server fetch leaves the machine */
  issuers: string[];
  /** capability names ("CAP_IAM_GROUPS_LIST", ...) */
  capabilities: string[];
  /** any other strings worth trying everywhere */
  extra: string[];
  /** real rows for plausible requests (plausibleInit): without them requests are random only */
  baseline?: Baseline;
}

export interface Baseline {
  group: string;
  identity: string;
  role: string;
  /** a loopback issuer */
  issuer: string;
}

const INT32_EDGES = [0, 1, -1, 2, 10, 100, 1000, 2147483647, -2147483648, 2147483646, -2147483647];
const UINT32_EDGES = [0, 1, 2, 100, 4294967295, 4294967294, 2147483648];
const INT64_EDGES = [0n, 1n, -1n, 9223372036854775807n, -9223372036854775808n, 9007199254740993n, -9007199254740993n];
const UINT64_EDGES = [0n, 1n, 18446744073709551615n, 9223372036854775808n, 9007199254740993n];
// Timestamps and Durations: the proto3 JSON range, edges first.
const TS_MIN = -62135596800n;
const TS_MAX = 253402300799n;
const DUR_MAX = 315576000000n;

/** Characters that break naive code: NUL, lone surrogates, bidi, separators, quotes, escapes. */
const NASTY = [
  "\u0000",
  "\ud800",
  "\udfff",
  "\ufffd",
  "\ufeff",
  "\u202e",
  "\u200b",
  "\u0085",
  "\u2028",
  "%",
  "%00",
  "%2F",
  "%ZZ",
  "/",
  "//",
  "\\",
  "'",
  '"',
  "`",
  "\n",
  "\r\n",
  "\t",
  "*",
  "-",
  ".",
  "..",
  "../",
  "${x}",
  "{{x}}",
  "<script>",
  "é",
  "\u{1F600}",
  ",",
  ";",
  "=",
  "&",
  "?",
  "#",
  ":",
  " ",
  "'; drop table groups; --",
  "\\u0000",
  "[",
  "]",
  "(a+)+$",
];

const FILTERS = [
  "name",
  "name desc",
  "name asc",
  "create_time",
  "create_time desc",
  "update_time desc, name",
  "uid",
  "no_such_field",
  "name desc desc",
  "name,,",
  "NAME DESC",
  "-name",
  "name desc; drop table groups",
];

// Made once: fast-check works out a new string arbitrary's biases at its first use.
const FIELD_MASK_PATH = fc.stringMatching(/^[a-z][a-z0-9]{0,10}(\.[a-z][a-z0-9]{0,10}){0,2}$/);
const TAG = fc.stringMatching(/^[a-z0-9]{6}$/);

/**
 * The string arbitraries made so far, per plausible set and the hints a field's name gave: one for
 * every string field of every RPC cost ~15 s of CPU a run, fast-check working out each new string
 * arbitrary's biases anew.
 */
const stringArbs = new WeakMap<Plausible, Map<string, fc.Arbitrary<string>>>();

/** Strings: mostly plausible, often hostile, sometimes huge (up to ~200 KB). */
export function stringArb(p: Plausible, fieldName = ""): fc.Arbitrary<string> {
  const hints = {
    token: /token/.test(fieldName),
    filter: /order|filter/.test(fieldName),
    issuer: /issuer|url|aud/.test(fieldName),
    capability: /cap|scope/.test(fieldName),
    email: /email/.test(fieldName),
  };
  const key = JSON.stringify(hints);
  let made = stringArbs.get(p);
  if (!made) stringArbs.set(p, (made = new Map()));
  let arb = made.get(key);
  if (!arb) made.set(key, (arb = newStringArb(p, hints)));
  return arb;
}

function newStringArb(
  p: Plausible,
  hints: { token: boolean; filter: boolean; issuer: boolean; capability: boolean; email: boolean },
): fc.Arbitrary<string> {
  const plausible = [
    ...p.uids,
    ...p.uids.map((u) => `${u}/-`),
    ...p.uids.map((u) => `${u}/0123456789abcdef`),
    ...p.names,
    ...p.extra,
    "",
    "-",
    "groups/-",
    "0123456789abcdef0123456789abcdef01234567",
    "ffffffffffffffffffffffffffffffffffffffff",
    "0123456789ABCDEF0123456789ABCDEF01234567",
  ];
  const hinted: string[] = [];
  if (hints.token) hinted.push(...p.pageTokens);
  if (hints.filter) hinted.push(...FILTERS);
  if (hints.issuer) hinted.push(...p.issuers);
  if (hints.capability) hinted.push(...p.capabilities);
  if (hints.email) hinted.push("someone@example.com", "a@b", "@", "x@y.z\u0000");
  const pool = hinted.length ? [...hinted, ...plausible] : plausible;
  const hostilePiece = fc.oneof(
    { arbitrary: fc.constantFrom(...NASTY), weight: 3 },
    { arbitrary: fc.constantFrom(...pool), weight: 2 },
    { arbitrary: fc.string({ unit: "binary", maxLength: 4 }), weight: 2 },
    { arbitrary: fc.string({ maxLength: 6 }), weight: 1 },
  );
  const longRun = fc
    .record({
      n: fc.oneof(fc.integer({ min: 101, max: 4096 }), fc.integer({ min: 4097, max: 200_000 })),
      c: fc.constantFrom("a", "\u0000", "é", "/", "0", "%", "\ud800", "ab/"),
    })
    .map(({ n, c }) => c.repeat(Math.ceil(n / c.length)).slice(0, n));
  // Messages hold well-formed UTF-16 only (protobuf-es refuses lone surrogates): each becomes
  // U+FFFD here, and the JSON senders turn U+FFFD back into a lone surrogate escape when the case
  // says so (see `withSurrogates` in wire.ts).
  return fc
    .oneof(
      { arbitrary: fc.constantFrom(...pool), weight: 12 },
      { arbitrary: fc.array(hostilePiece, { minLength: 1, maxLength: 6 }).map((a) => a.join("")), weight: 6 },
      { arbitrary: fc.string({ unit: "binary", maxLength: 30 }), weight: 3 },
      { arbitrary: fc.string({ unit: "grapheme", maxLength: 30 }), weight: 1 },
      { arbitrary: longRun, weight: 1 },
    )
    .map(wellFormed);
}

function scalarArb(type: ScalarType, p: Plausible, fieldName: string, longAsString: boolean): fc.Arbitrary<unknown> {
  const long = (a: fc.Arbitrary<bigint>) => (longAsString ? a.map((v) => v.toString()) : a);
  switch (type) {
    case ScalarType.STRING:
      return stringArb(p, fieldName);
    case ScalarType.BOOL:
      return fc.boolean();
    case ScalarType.BYTES:
      return fc.oneof(fc.uint8Array({ maxLength: 32 }), fc.uint8Array({ minLength: 1000, maxLength: 70_000 }));
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return fc.oneof(fc.constantFrom(...INT32_EDGES), fc.integer());
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return fc.oneof(fc.constantFrom(...UINT32_EDGES), fc.integer({ min: 0, max: 4294967295 }));
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return long(fc.oneof(fc.constantFrom(...INT64_EDGES), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })));
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return long(fc.oneof(fc.constantFrom(...UINT64_EDGES), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })));
    case ScalarType.DOUBLE:
      return fc.double();
    case ScalarType.FLOAT:
      return fc.float();
  }
}

function enumArb(values: readonly number[]): fc.Arbitrary<number> {
  return fc.oneof(
    { arbitrary: fc.constantFrom(...values), weight: 6 },
    { arbitrary: fc.integer({ min: -3, max: 200 }), weight: 1 },
    { arbitrary: fc.constantFrom(2147483647, -2147483648), weight: 1 },
  );
}

const FIELD_MASK_PATHS = new Set<string>(["*", "uid", "name", "description", "no_such_field", "create_time"]);

/** Registers every field name of the inputs as a plausible FieldMask path (call before building). */
export function learnFieldNames(desc: DescMessage, prefix = "", depth = 0): void {
  if (depth > 2) return;
  for (const f of desc.fields) {
    FIELD_MASK_PATHS.add(prefix + f.name);
    if (f.fieldKind === "message") learnFieldNames(f.message, `${prefix}${f.name}.`, depth + 1);
  }
}

function wellKnownArb(desc: DescMessage, p: Plausible): fc.Arbitrary<unknown> | undefined {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      return fc.record({
        seconds: fc.oneof(
          fc.constantFrom(0n, TS_MIN, TS_MAX, -1n, 1700000000n),
          fc.bigInt({ min: TS_MIN, max: TS_MAX }),
        ),
        nanos: fc.oneof(fc.constant(0), fc.constantFrom(999_999_999, 1), fc.integer({ min: 0, max: 999_999_999 })),
      });
    case "google.protobuf.Duration":
      return fc
        .record({
          seconds: fc.oneof(
            fc.constantFrom(0n, 1n, 3600n, DUR_MAX, -DUR_MAX, -1n),
            fc.bigInt({ min: -DUR_MAX, max: DUR_MAX }),
          ),
          nanos: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 999_999_999 })),
        })
        .map(({ seconds, nanos }) => ({ seconds, nanos: seconds < 0n ? -nanos : nanos }));
    case "google.protobuf.FieldMask":
      return fc.record({
        paths: fc.array(
          fc.oneof(
            { arbitrary: fc.constantFrom(...FIELD_MASK_PATHS), weight: 4 },
            { arbitrary: FIELD_MASK_PATH, weight: 1 },
          ),
          { maxLength: 4 },
        ),
      });
    case "google.protobuf.Empty":
      return fc.constant({});
    case "google.protobuf.Any":
      return fc.constant(undefined);
    case "google.protobuf.StringValue":
      return fc.record({ value: stringArb(p) });
    case "google.protobuf.BoolValue":
      return fc.record({ value: fc.boolean() });
    case "google.protobuf.Int32Value":
    case "google.protobuf.UInt32Value":
    case "google.protobuf.Int64Value":
    case "google.protobuf.UInt64Value":
    case "google.protobuf.DoubleValue":
    case "google.protobuf.FloatValue":
    case "google.protobuf.BytesValue":
      return fc.record({ value: scalarArb(desc.fields[0]!.scalar!, p, "value", false) });
    case "google.protobuf.Struct":
    case "google.protobuf.Value":
    case "google.protobuf.ListValue":
      return fc.constant(undefined);
  }
  return undefined;
}

function listArb<T>(elem: fc.Arbitrary<T>): fc.Arbitrary<T[]> {
  return fc.oneof(
    { arbitrary: fc.array(elem, { maxLength: 4 }), weight: 12 },
    { arbitrary: fc.array(elem, { minLength: 20, maxLength: 300 }), weight: 1 },
  );
}

function mapKeyArb(key: ScalarType, p: Plausible): fc.Arbitrary<string> {
  switch (key) {
    case ScalarType.STRING:
      return stringArb(p, "key");
    case ScalarType.BOOL:
      return fc.constantFrom("true", "false");
    default:
      return (scalarArb(key, p, "key", true) as fc.Arbitrary<number | bigint | string>).map(String);
  }
}

function fieldArb(f: DescField, p: Plausible, depth: number): fc.Arbitrary<unknown> {
  switch (f.fieldKind) {
    case "scalar":
      return scalarArb(f.scalar, p, f.name, f.longAsString);
    case "enum":
      return enumArb(f.enum.values.map((v) => v.number));
    case "message":
      return initArb(f.message, p, depth + 1);
    case "list":
      if (f.listKind === "scalar") return listArb(scalarArb(f.scalar, p, f.name, f.longAsString));
      if (f.listKind === "enum") return listArb(enumArb(f.enum.values.map((v) => v.number)));
      return listArb(initArb(f.message, p, depth + 1));
    case "map": {
      const value =
        f.mapKind === "scalar"
          ? scalarArb(f.scalar, p, f.name, false)
          : f.mapKind === "enum"
            ? enumArb(f.enum.values.map((v) => v.number))
            : initArb(f.message, p, depth + 1);
      return fc.dictionary(mapKeyArb(f.mapKey, p), value, { maxKeys: 4 });
    }
  }
}

/** An init object for `desc` (create() turns it into a message); each field present or not. */
export function initArb(desc: DescMessage, p: Plausible, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const wkt = wellKnownArb(desc, p);
  if (wkt) return wkt as fc.Arbitrary<Record<string, unknown>>;
  if (depth > 4) return fc.constant({});
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const f of desc.fields) {
    if (f.oneof) continue;
    model[f.localName] = fieldArb(f, p, depth);
  }
  for (const o of desc.oneofs) {
    model[o.localName] = fc.oneof(
      fc.constant(undefined),
      ...o.fields.map((f) => fieldArb(f, p, depth).map((value) => ({ case: f.localName, value }))),
    );
  }
  return fc.record(model, { requiredKeys: [] }) as fc.Arbitrary<Record<string, unknown>>;
}

type Init = Record<string, unknown>;
const isWkt = (d: DescMessage) => d.typeName.startsWith("google.protobuf.");

function putIn(obj: Init, f: DescField, v: unknown): void {
  if (f.oneof) obj[f.oneof.localName] = { case: f.localName, value: v };
  else obj[f.localName] = v;
}

/**
 * A plausible request: uid-like fields name the seeded group (roles: its role), names are fresh
 * (`tag`), issuers loopback, the first member of each oneof chosen. Valid often enough that a
 * hostile value in one field travels past the validation of the others into the handler.
 */
export function plausibleInit(desc: DescMessage, b: Baseline, tag: string, depth = 0): Init {
  const init: Init = {};
  if (depth > 2) return init;
  for (const f of desc.fields) {
    if (f.oneof && f.oneof.fields[0] !== f) continue;
    let v: unknown;
    if (f.fieldKind === "scalar" && f.scalar === ScalarType.STRING) {
      const n = f.name;
      if (/role/.test(n) && /uid|role$/.test(n)) v = b.role;
      else if (/identity_uid|^identity$/.test(n)) v = b.identity;
      else if (/(^|_)uid$|^parent$|^id$|^group$|_of$/.test(n)) v = b.group;
      else if (/^name$/.test(n)) v = `fuzz-${tag}`;
      else if (/issuer/.test(n)) v = b.issuer;
      else if (/subject/.test(n)) v = "fuzz-subject";
      else if (/email/.test(n)) v = "fuzz@example.com";
      else if (/account/.test(n)) v = "123456789012";
    } else if (f.fieldKind === "message" && !isWkt(f.message)) {
      v = plausibleInit(f.message, b, tag, depth + 1);
    } else if (f.fieldKind === "message" && f.message.typeName === "google.protobuf.Duration") {
      v = { seconds: 3600n, nanos: 0 };
    }
    if (v !== undefined) putIn(init, f, v);
  }
  return init;
}

const isPlain = (v: unknown): v is Init =>
  !!v && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array) && typeof v !== "bigint";

/** `over` laid on `base`, nested messages merged (a oneof of another case replaces). */
export function mergeInit(base: Init, over: Init): Init {
  const out: Init = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    if (v === undefined) continue;
    const sameOneof = isPlain(b) && isPlain(v) && "case" in v ? b.case === v.case : true;
    if (isPlain(b) && isPlain(v) && !("case" in v)) out[k] = mergeInit(b, v);
    else if (isPlain(b) && isPlain(v) && sameOneof && isPlain(b.value) && isPlain(v.value))
      out[k] = { case: v.case, value: mergeInit(b.value, v.value) };
    else out[k] = v;
  }
  return out;
}

/**
 * Request messages of `desc` that encode to JSON (so every protocol can carry them): half of
 * them random throughout, half a plausible request (when the pool has a baseline) with one or
 * two top-level fields replaced, deep-merged, by random ones.
 */
export function messageArb(desc: DescMessage, p: Plausible): fc.Arbitrary<Message> {
  const random = initArb(desc, p);
  const names = desc.members.map((m) => m.localName);
  const b = p.baseline;
  const inits =
    b && names.length
      ? fc.oneof(
          random,
          fc
            .record({
              over: random,
              keys: fc.subarray(names, { minLength: 0, maxLength: Math.min(2, names.length) }),
              tag: TAG,
            })
            .map(({ over, keys, tag }) =>
              mergeInit(plausibleInit(desc, b, tag), Object.fromEntries(keys.map((k) => [k, over[k]]))),
            ),
        )
      : random;
  return inits
    .map((init) => {
      try {
        return create(desc, init as never) as Message;
      } catch {
        return undefined;
      }
    })
    .filter((m): m is Message => {
      if (!m) return false;
      try {
        toJson(desc, m as never);
        return true;
      } catch {
        return false;
      }
    });
}
