// REST JSON writers (src/core/rest-json.ts) must write exactly what the reflective mapping
// writes — protobuf-es's toJson with implicit fields, timestamps cut to milliseconds, an empty
// next_page_token dropped — for every response type the server has, on seeded random messages.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  ScalarType,
  create,
  toJson,
  type DescField,
  type DescMessage,
  type JsonObject,
  type JsonValue,
} from "@bufbuild/protobuf";
import { isoMillis, toRestJson, toRestJsonText } from "../../src/core/rest-json.js";
import { markShared } from "../../src/core/shared-lists.js";
import { MODULES } from "../../src/server/modules.js";
import { seededRandom as random } from "../support/seeded.js";

// The mapping as it was written before the writers, kept here as the reference.
const TIMESTAMP = "google.protobuf.Timestamp";
function millisTimestamp(value: string): string {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(value);
  if (!m) return value;
  return `${m[1]}.${(m[2] ?? "").padEnd(3, "0").slice(0, 3)}Z`;
}
function normalizeMessage(desc: DescMessage, value: JsonValue): JsonValue {
  if (desc.typeName === TIMESTAMP && typeof value === "string") return millisTimestamp(value);
  if (desc.typeName.startsWith("google.protobuf.")) return value;
  if (value && typeof value === "object" && !Array.isArray(value)) {
    for (const field of desc.fields) {
      const v = value[field.jsonName];
      if (v === undefined || v === null) continue;
      if (field.fieldKind === "message") value[field.jsonName] = normalizeMessage(field.message, v);
      else if (field.fieldKind === "list" && field.listKind === "message" && Array.isArray(v))
        value[field.jsonName] = v.map((x) => normalizeMessage(field.message, x));
      else if (field.fieldKind === "map" && field.mapKind === "message" && typeof v === "object" && !Array.isArray(v))
        for (const [k, x] of Object.entries(v)) (v as JsonObject)[k] = normalizeMessage(field.message, x as JsonValue);
    }
  }
  return value;
}
function reference(desc: DescMessage, message: unknown): JsonValue {
  const json = normalizeMessage(desc, toJson(desc, message as never, { alwaysEmitImplicit: true }));
  const token = desc.fields.find((f) => f.name === "next_page_token");
  if (token && json && typeof json === "object" && !Array.isArray(json) && json[token.jsonName] === "")
    delete json[token.jsonName];
  return json;
}

/** A random message of `desc`: every kind of field, set or not, nested to `depth`. */
function randomMessage(desc: DescMessage, next: () => number, depth: number): any {
  const int = (n: number) => Math.floor(next() * n);
  const text = () => ["", "a", "ünï ☃", "x".repeat(int(40)), 'quote"back\\slash\nline'][int(5)]!;
  if (desc.typeName === TIMESTAMP)
    return create(desc, { seconds: BigInt(int(4_000_000_000) - 1_000_000_000), nanos: int(1_000_000_000) } as never);
  if (desc.typeName.startsWith("google.protobuf.")) return create(desc);
  const scalar = (f: DescField & { scalar: ScalarType }): unknown => {
    switch (f.scalar) {
      case ScalarType.STRING:
        return text();
      case ScalarType.BOOL:
        return next() < 0.5;
      case ScalarType.BYTES:
        return new Uint8Array(Array.from({ length: int(9) }, () => int(256)));
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return [0, -1.5, 3.25, NaN, Infinity, -Infinity, 1e21][int(7)];
      case ScalarType.INT64:
      case ScalarType.SINT64:
      case ScalarType.SFIXED64:
        return BigInt(int(2 ** 31)) * BigInt(int(2 ** 20)) - 5n;
      case ScalarType.UINT64:
      case ScalarType.FIXED64:
        return BigInt(int(2 ** 31)) * 3n;
      case ScalarType.UINT32:
      case ScalarType.FIXED32:
        return int(2 ** 31);
      default:
        return int(2 ** 31) - 2 ** 30;
    }
  };
  const value = (f: DescField, kind: string): unknown => {
    if (kind === "scalar") return scalar(f as never);
    if (kind === "enum") {
      const values = (f as { enum: { values: { number: number }[] } }).enum.values;
      return next() < 0.1 ? 999 : values[int(values.length)]!.number;
    }
    return randomMessage((f as { message: DescMessage }).message, next, depth - 1);
  };
  const init: Record<string, unknown> = {};
  for (const f of desc.fields) {
    if (next() < 0.3) continue;
    if ((f.fieldKind === "message" || f.fieldKind === "list" || f.fieldKind === "map") && depth <= 0) continue;
    let v: unknown;
    if (f.fieldKind === "list") v = Array.from({ length: int(3) }, () => value(f, f.listKind));
    else if (f.fieldKind === "map") {
      const m: Record<string, unknown> = {};
      for (let i = int(3); i > 0; i--)
        m[f.mapKey === ScalarType.STRING ? text() || "k" : String(int(100))] = value(f, f.mapKind);
      v = m;
    } else v = value(f, f.fieldKind);
    if (f.oneof) {
      if (init[f.oneof.localName] === undefined) init[f.oneof.localName] = { case: f.localName, value: v };
    } else init[f.localName] = v;
  }
  return create(desc, init as never);
}

describe("REST JSON writers", () => {
  const outputs = new Map<string, DescMessage>();
  for (const m of MODULES)
    for (const s of m.services) for (const method of s.methods) outputs.set(method.output.typeName, method.output);

  it(`write what the reflective mapping writes, for all ${outputs.size} response types`, () => {
    const next = random(14);
    let compared = 0;
    for (const desc of outputs.values()) {
      for (let i = 0; i < 40; i++) {
        const message = randomMessage(desc, next, 3);
        let expected: string | Error;
        try {
          expected = JSON.stringify(reference(desc, message));
        } catch (err) {
          expected = err as Error;
        }
        if (expected instanceof Error) {
          assert.throws(() => toRestJson(desc, message), `${desc.typeName}: the reference refuses it`);
          continue;
        }
        assert.equal(JSON.stringify(toRestJson(desc, message)), expected, desc.typeName);
        compared++;
      }
    }
    assert.ok(compared > outputs.size * 20, `compared ${compared}`);
  });

  it("writes shared lists' text once, spliced exactly where the list's JSON goes", () => {
    const next = random(31);
    let spliced = 0;
    for (const desc of outputs.values()) {
      const lists = desc.fields.filter((f) => f.fieldKind === "list" && f.listKind === "message");
      if (lists.length === 0) continue;
      for (let i = 0; i < 10; i++) {
        const message = randomMessage(desc, next, 3) as unknown as Record<string, unknown[]>;
        // a caller's string that looks like the placeholder, but without this process's random part
        for (const f of desc.fields)
          if (f.fieldKind === "scalar" && f.scalar === ScalarType.STRING && !f.oneof)
            (message as Record<string, unknown>)[f.localName] = '\u0000raw:0:0 "0"';
        let expected: string;
        try {
          expected = JSON.stringify(reference(desc, message as never));
        } catch {
          continue;
        }
        for (const f of lists) markShared(message[f.localName]!);
        assert.equal(toRestJsonText(desc, message as never), expected, `${desc.typeName}: the first answer`);
        assert.equal(toRestJsonText(desc, message as never), expected, `${desc.typeName}: from the kept text`);
        spliced++;
      }
    }
    assert.ok(spliced > 50, `spliced ${spliced}`);
  });

  it("keeps a shared list's text with the list: the list is not written again", () => {
    const list = [...outputs.values()].find((d) => d.typeName.endsWith("v2beta1.ListGroupsResponse"))!;
    const groups = markShared([create(list.fields.find((f) => f.name === "groups")!.message!, { uid: "a" } as never)]);
    const message = create(list) as unknown as { groups: unknown[] };
    message.groups = groups; // create() would copy the list
    const first = toRestJsonText(list, message as never);
    (groups[0] as unknown as { uid: string }).uid = "changed"; // a shared list must not change: this shows why
    assert.equal(toRestJsonText(list, message as never), first);
    // unshared, the same message is written afresh
    const fresh = create(list, { groups: [...groups] } as never);
    assert.match(toRestJsonText(list, fresh), /"uid":"changed"/);
  });

  it("formats timestamps as toISOString does, across the whole range", () => {
    const next = random(99);
    const min = Date.parse("0001-01-01T00:00:00.000Z");
    const max = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
    const edges = [0, -1, 1, min, max, Date.UTC(2000, 1, 29, 23, 59, 59, 999), Date.UTC(1969, 11, 31, 23, 59, 59, 999)];
    for (const ms of [...edges, ...Array.from({ length: 20_000 }, () => Math.floor(min + next() * (max - min)))])
      assert.equal(isoMillis(ms), new Date(ms).toISOString(), String(ms));
  });

  it("writes an empty next_page_token not at all, and timestamps with three fractional digits", () => {
    const list = [...outputs.values()].find((d) => d.typeName.endsWith("v2beta1.ListGroupsResponse"))!;
    const group = list.fields.find((f) => f.name === "groups")!;
    const json = toRestJson(
      list,
      create(list, {
        groups: [{ uid: "u", createTime: { seconds: 1n, nanos: 5_000_000 } }],
        nextPageToken: "",
      } as never),
    ) as JsonObject;
    assert.equal("nextPageToken" in json, false);
    assert.equal((json.groups as JsonObject[])[0]!.createTime as string, "1970-01-01T00:00:01.005Z");
    assert.ok(group);
  });
});
