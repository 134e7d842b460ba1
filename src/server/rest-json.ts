// JSON for REST responses: the proto3 canonical mapping with implicit fields emitted (so
// `skipped: 0`, `verified: false`, `resourceLimits: {}` are present, as the hosted API shows),
// timestamps always with millisecond precision, and an empty next_page_token omitted.
import {
  toJson,
  type DescMessage,
  type JsonObject,
  type JsonValue,
  type MessageShape,
  type Registry,
} from "@bufbuild/protobuf";

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

export function toRestJson<D extends DescMessage>(desc: D, message: MessageShape<D>, registry?: Registry): JsonValue {
  const json = toJson(desc, message, { alwaysEmitImplicit: true, registry });
  if (json && typeof json === "object" && !Array.isArray(json)) {
    normalize(desc, json);
    const tokenField = desc.fields.find((f) => f.name === "next_page_token");
    if (tokenField && json[tokenField.jsonName] === "") delete json[tokenField.jsonName];
  }
  return json;
}
