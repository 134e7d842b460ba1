// One rule for every text a client sends (RPC fields, query filters, form and query parameters of
// plain routes): valid Unicode (no unpaired surrogate: it cannot be encoded as UTF-8), no NUL
// (PostgreSQL text cannot hold U+0000) and a maximum length per field. Checked before
// authorization, so bad text never reaches the database or an error message.
import {
  ScalarType,
  getOption,
  hasOption,
  type DescField,
  type DescMessage,
  type DescMethod,
} from "@bufbuild/protobuf";
import { http } from "../gen/google/api/annotations_pb.js";
import { invalidArgument } from "./errors.js";

/** Maximum length, in characters (Unicode code points), of any string field not listed below. */
export const DEFAULT_MAX_STRING_LENGTH = 1024;

/**
 * Fields that may be longer than the default, by proto field name. Names, uids, emails, URLs,
 * patterns and claim values keep the default.
 */
export const MAX_STRING_LENGTH: Readonly<Record<string, number>> = {
  description: 4096,
  /** a JWKS document (an identity's static keys) */
  issuer_keys: 65536,
  /** an uploaded scanner report given inline (CreateVulnReport; images/scanner-reports.ts) */
  raw_report_filepath: 1048576,
  /** an invite code */
  code: 4096,
  page_token: 2048,
  filter: 2048,
  /** a repo's README (also keyring and certificate contents in a repo's custom overlay) */
  content: 262144,
};

/** Most entries a repeated or map field may have. */
export const MAX_ENTRIES = 1000;

/** Most characters of a client's value an error message repeats. */
export const MAX_ECHO_LENGTH = 64;

/** A client's value for an error message: quoted, and cut short when long. */
export function quote(value: string): string {
  // Code points, so a pair is never cut; 2 × MAX units always hold MAX whole code points.
  const head = [...value.slice(0, MAX_ECHO_LENGTH * 2)].slice(0, MAX_ECHO_LENGTH).join("");
  return JSON.stringify(head.length < value.length ? head + "…" : value);
}

/** A library's error message with every long quoted value in it cut short as `quote` does. */
export function shortenQuotedValues(message: string): string {
  return message.replace(/"((?:[^"\\]|\\.){65,})"/g, (_, value: string) => quote(value));
}

/** A decoder that refuses malformed sequences rather than replacing them with U+FFFD (Connect's JSON uses it). */
export const STRICT_UTF8_DECODER = new TextDecoder("utf-8", { fatal: true });

/**
 * A body's bytes as text, when they are valid UTF-8 (JSON must be: RFC 8259 §8.1); undefined when
 * not. A lenient decoder would turn bad bytes into U+FFFD and store text the client never sent.
 */
export function strictUtf8(bytes: Uint8Array): string | undefined {
  try {
    return STRICT_UTF8_DECODER.decode(bytes);
  } catch {
    return undefined;
  }
}

/** What is wrong with a string under the rule, if anything. */
export function stringProblem(value: string, max: number): string | undefined {
  if (value.includes("\u0000")) return "must not contain NUL (U+0000)";
  if (!isWellFormed(value)) return "must be valid UTF-8 (it contains an unpaired surrogate)";
  // Code points are never more than UTF-16 units, so only long strings need counting.
  if (value.length > max && codePoints(value) > max) return `must be at most ${max} characters`;
  return undefined;
}

/** Throws INVALID_ARGUMENT naming the field when `value` breaks the rule. */
export function checkString(field: string, value: string, max = DEFAULT_MAX_STRING_LENGTH): void {
  const problem = stringProblem(value, max);
  if (problem) throw invalidArgument({ field, description: problem });
}

/** The request field holding the resource (its HTTP body), whose name violations leave out. */
const resourceFields = new WeakMap<DescMethod, string>();
function resourceFieldOf(method: DescMethod): string {
  let name = resourceFields.get(method);
  if (name === undefined) {
    const body = hasOption(method, http) ? getOption(method, http).body : "";
    name = body === "*" ? "" : body;
    resourceFields.set(method, name);
  }
  return name;
}

/**
 * Checks every string of an RPC's request. Fields inside the resource are named relative to it
 * (`description`, not `group.description`), as services name their own violations.
 */
export function checkRequestStrings(method: DescMethod, request: object): void {
  const resource = resourceFieldOf(method);
  const fields = request as Record<string, unknown>;
  for (const field of method.input.fields) {
    if (field.name === resource && field.fieldKind === "message" && !field.oneof) {
      const value = fields[field.localName];
      if (value && typeof value === "object" && "$typeName" in value) checkMessageStrings(field.message, value);
      else if (value !== undefined) checkField(field, value, field.name);
    } else {
      checkOne(field, fields, "");
    }
  }
}

/** Checks every string in a decoded message, however deep. */
export function checkMessageStrings(desc: DescMessage, message: object, prefix = ""): void {
  const fields = message as Record<string, unknown>;
  for (const field of desc.fields) checkOne(field, fields, prefix);
}

function checkOne(field: DescField, fields: Record<string, unknown>, prefix: string): void {
  let value: unknown;
  if (field.oneof) {
    const chosen = fields[field.oneof.localName] as { case?: string; value?: unknown } | undefined;
    if (chosen?.case !== field.localName) return;
    value = chosen.value;
  } else {
    value = fields[field.localName];
  }
  if (value !== undefined) checkField(field, value, prefix + field.name);
}

function checkField(field: DescField, value: unknown, path: string): void {
  const max = MAX_STRING_LENGTH[field.name] ?? DEFAULT_MAX_STRING_LENGTH;
  switch (field.fieldKind) {
    case "scalar":
      if (field.scalar === ScalarType.STRING) checkString(path, value as string, max);
      return;
    case "enum":
      return;
    case "message":
      checkNested(field.message, value, path, max);
      return;
    case "list": {
      const items = value as unknown[];
      if (items.length > MAX_ENTRIES) tooMany(path);
      for (const item of items) {
        if (field.listKind === "scalar" && field.scalar === ScalarType.STRING) checkString(path, item as string, max);
        else if (field.listKind === "message") checkNested(field.message, item, path, max);
      }
      return;
    }
    case "map": {
      const entries = Object.entries(value as Record<string, unknown>);
      if (entries.length > MAX_ENTRIES) tooMany(path);
      for (const [key, item] of entries) {
        if (field.mapKey === ScalarType.STRING) checkString(`${path} (key)`, key, DEFAULT_MAX_STRING_LENGTH);
        if (field.mapKind === "scalar" && field.scalar === ScalarType.STRING) checkString(path, item as string, max);
        else if (field.mapKind === "message") checkNested(field.message, item, path, max);
      }
      return;
    }
  }
}

function checkNested(desc: DescMessage, value: unknown, path: string, max: number): void {
  // Wrapper types (StringValue, ...) are unboxed; Struct and Value arrive as plain JSON.
  if (typeof value === "string") checkString(path, value, max);
  else if (value && typeof value === "object" && "$typeName" in value) checkMessageStrings(desc, value, path + ".");
  else if (value && typeof value === "object") checkJsonStrings(value, path, max);
}

function checkJsonStrings(value: unknown, path: string, max: number): void {
  if (typeof value === "string") checkString(path, value, max);
  else if (Array.isArray(value)) for (const item of value) checkJsonStrings(item, path, max);
  else if (value && typeof value === "object")
    for (const [key, item] of Object.entries(value)) {
      checkString(`${path} (key)`, key, DEFAULT_MAX_STRING_LENGTH);
      checkJsonStrings(item, path, max);
    }
}

/** Checks the string values of a plain route's parsed query or form body. */
export function checkParameterStrings(where: string, params: unknown): void {
  if (isParsedParameters(params)) {
    for (const [key, value] of Object.entries(params)) {
      checkString(`${where} parameter name`, key, 64);
      if (typeof value === "string") checkString(key, value, MAX_STRING_LENGTH[key] ?? DEFAULT_MAX_STRING_LENGTH);
      else if (Array.isArray(value))
        for (const item of value) if (typeof item === "string") checkString(key, item, DEFAULT_MAX_STRING_LENGTH);
    }
  }
}

/**
 * Parsed parameters, not a raw body (a Buffer, a stream: the route's own). Fastify's query
 * objects have a prototype of their own (itself without one), so a plain-object test misses them.
 */
function isParsedParameters(params: unknown): params is Record<string, unknown> {
  if (!params || typeof params !== "object" || Array.isArray(params) || ArrayBuffer.isView(params)) return false;
  if (typeof (params as { pipe?: unknown }).pipe === "function") return false;
  const proto: unknown = Object.getPrototypeOf(params);
  return proto === Object.prototype || proto === null || Object.getPrototypeOf(proto) === null;
}

function tooMany(path: string): never {
  throw invalidArgument({ field: path, description: `must have at most ${MAX_ENTRIES} entries` });
}

function isWellFormed(value: string): boolean {
  // String.prototype.isWellFormed (ES2024) is in Node 20; the lib typings may not know it.
  return (value as unknown as { isWellFormed(): boolean }).isWellFormed();
}

function codePoints(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}
