// Conformance: our .proto sources (and the descriptors embedded in src/gen) must
// match the published API surface in reference/api-surface.json exactly.
//
// Two descriptor sources are checked with the same comparison:
//   1. `buf build` of proto/ + third_party/ (the source of truth), and
//   2. the file descriptors embedded in the generated code under src/gen
//      (what the server actually uses at runtime).
// Failures list the first mismatches as "<path>: expected X, got Y".
// Every file of proto/ must be a reference file, except the documented extensions: packages
// `bulwark.*` under proto/bulwark/ (proto/README.md), which must keep the project's RPC rules.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

import {
  createFileRegistry,
  fromBinary,
  getOption,
  hasOption,
  ScalarType,
  type DescEnum,
  type DescExtension,
  type DescField,
  type DescFile,
  type DescMessage,
  type DescMethod,
  type DescService,
} from "@bufbuild/protobuf";
import { FileDescriptorSetSchema, MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";

import { http } from "../../src/gen/google/api/annotations_pb.js";
import { field_behavior, FieldBehavior } from "../../src/gen/google/api/field_behavior_pb.js";
import { resource, resource_reference } from "../../src/gen/google/api/resource_pb.js";
import type { HttpRule } from "../../src/gen/google/api/http_pb.js";
import { iam, iam_scope } from "../../src/gen/annotations/auth_pb.js";
import { events, EventAttributes_Audience } from "../../src/gen/annotations/events_pb.js";
import { bit, Capability, internal_only, name as capName } from "../../src/gen/capabilities/capabilities_pb.js";
import { REPO_ROOT, moduleUrl } from "../support/paths.js";

const ROOT = REPO_ROOT;
const BUF = join(ROOT, "node_modules", ".bin", "buf");

// ---------------------------------------------------------------------------
// Reference JSON shapes (only the parts we compare).

type Reserved = number | [number, number];
interface RefField {
  name: string;
  number: number;
  type: string;
  label: "" | "repeated" | "map" | "optional";
  oneof?: string;
  fieldBehavior?: string[];
  iamScope?: boolean;
  mapKey?: string;
  mapValue?: string;
  deprecated?: boolean;
  jsonName?: string;
  resourceReference?: { type?: string; childType?: string };
}
interface RefEnum {
  file?: string;
  fullName: string;
  values: { name: string; number: number; deprecated?: boolean }[];
  reservedNumbers?: Reserved[];
}
interface RefMessage {
  file?: string;
  fullName: string;
  fields: RefField[];
  oneofs?: string[];
  reservedNumbers?: Reserved[];
  reservedNames?: string[];
  resource?: { type: string; pattern: string[]; plural?: string; singular?: string } | null;
  nested?: Record<string, RefMessage>;
  enums?: Record<string, RefEnum>;
}
interface RefHttp {
  verb: string;
  path: string;
  body: string;
  additionalBindings?: RefHttp[];
}
interface RefMethod {
  input: string;
  output: string;
  grpcPath: string;
  http: RefHttp | null;
  iam: { mode: "enabled" | "disabled"; capabilities: string[]; unscoped: boolean; scopeFields: string[] } | null;
  events?: { type: string; extensions: string[]; audience: string };
}
interface RefService {
  file: string;
  fullName: string;
  methods: Record<string, RefMethod>;
}
interface RefPackage {
  files: string[];
  services: Record<string, RefService>;
  messages: Record<string, RefMessage>;
  enums: Record<string, RefEnum>;
}
interface RefExtension {
  extendee: string;
  number: number;
  type: string;
  label: string;
  file: string;
}
interface Reference {
  counts: { perPackage: Record<string, { services: number; rpcs: number; messages: number; enums: number }> };
  packages: Record<string, RefPackage>;
  extensions: Record<string, RefExtension>;
  capabilities: Record<string, number>;
  capabilityStrings: Record<string, string>;
  capabilityBits: Record<string, number>;
  capabilityInternalOnly: string[];
  capabilityDeprecated: string[];
  capabilityReservedNumbers: number[];
}

const ref = JSON.parse(readFileSync(join(ROOT, "reference", "api-surface.json"), "utf8")) as Reference & {
  relatedPackages: Record<string, string>;
};

// The GA packages: the reference records them in prose only ("relatedPackages": structurally
// identical to v2beta1, `/v2/` in the HTTP paths), so their expected surface is the v2beta1
// package's with "v2" for "v2beta1" in every name, file and path.
const GA_PACKAGES = [
  "chainguard.platform.iam.v2",
  "chainguard.platform.registry.v2",
  "chainguard.platform.vulnerabilities.v2",
];
for (const ga of GA_PACKAGES) {
  const beta = `${ga}beta1`;
  assert.match(ref.relatedPackages[ga] ?? "", /identical to .*v2beta1|identical to v2beta1/, `reference on ${ga}`);
  ref.packages[ga] = JSON.parse(JSON.stringify(ref.packages[beta]).replaceAll("v2beta1", "v2"));
  ref.counts.perPackage[ga] = ref.counts.perPackage[beta]!;
}

// Packages whose .proto files this project owns, plus google.rpc (verbatim
// third_party copies, checked too since the API returns google.rpc.Status).
const PACKAGES = [
  "chainguard.platform.iam.v2beta1",
  "chainguard.platform.registry.v2beta1",
  "chainguard.platform.vulnerabilities.v2beta1",
  ...GA_PACKAGES,
  "chainguard.platform.common",
  "chainguard.platform.iam",
  "chainguard.platform.registry",
  "chainguard.platform.auth",
  "chainguard.platform.oidc",
  "chainguard.capabilities",
  "chainguard.annotations",
  "google.rpc",
];
// The `mcp` method option's schema is not recorded by the reference; it is not implemented.
const SKIPPED_EXTENSIONS = new Set(["chainguard.annotations.mcp"]);
// Bulwark's documented extensions (proto/README.md, "Extensions"): the only packages of proto/
// the reference does not have, each in its own files under proto/bulwark/.
const EXTENSION_PACKAGE_PREFIX = "bulwark.";
// Files the reference does not record, vendored unchanged from the public SDK
// (chainguard-dev/sdk at the reference's commit; proto/README.md, "Trees"): the events
// subscriptions services (their v2 twin derived like the other GA packages) and the `mcp`
// method option they use.
// The images files: the SBOM and vulnerability report messages of the tenant package, the
// Vulnerabilities service (with CreateVulnReport restored from the SDK's earlier version of the
// file), and ImagesService (v2beta1, which the reference lists in `alsoExists`, and its v2 twin).
const SDK_VENDORED = new Map([
  ["annotations/mcp.proto", "chainguard.annotations"],
  ["chainguard/platform/events/v2beta1/subscriptions.proto", "chainguard.platform.events.v2beta1"],
  ["chainguard/platform/events/v2/subscriptions.proto", "chainguard.platform.events.v2"],
  ["platform/events/v1/subscriptions.platform.proto", "chainguard.platform.events"],
  ["platform/tenant/v1/sbom.platform.proto", "chainguard.platform.tenant"],
  ["platform/tenant/v1/vuln.platform.proto", "chainguard.platform.tenant"],
  ["platform/registry/v1/vulnerabilities.platform.proto", "chainguard.platform.registry"],
  ["chainguard/platform/registry/v2beta1/images.proto", "chainguard.platform.registry.v2beta1"],
  ["chainguard/platform/registry/v2/images.proto", "chainguard.platform.registry.v2"],
]);
// The v1 Registry methods restored unchanged from the SDK's registry.platform.proto (the images
// module serves them): the reference names them among the file's "methods outside scope" in
// `alsoExists` without recording their shapes. They, and exactly the messages of the package
// they need (plus DiffImageResponse: a message of the same SDK file, no RPC's there, which the
// extension's DiffImages answers), are what the package may hold beyond the reference.
const RESTORED_V1_PACKAGE = "chainguard.platform.registry";
const RESTORED_V1_SERVICE = "Registry";
const RESTORED_V1_METHODS = [
  "GetSbom",
  "GetImageConfig",
  "GetArchs",
  "GetSize",
  "GetRawSbom",
  "GetVulnReport",
  "ListManifestMetadata",
];
const RESTORED_V1_MESSAGE_ROOTS = ["DiffImageResponse"];
const OUTSIDE_SCOPE = "platform/registry/v1/registry.platform.proto (methods outside scope)";
{
  const also = (
    ref as unknown as { alsoExists: Record<string, { package: string; services: Record<string, string[]> }> }
  ).alsoExists;
  const listed = also[OUTSIDE_SCOPE];
  assert.equal(listed?.package, RESTORED_V1_PACKAGE, `reference alsoExists["${OUTSIDE_SCOPE}"]`);
  for (const m of RESTORED_V1_METHODS)
    assert.ok(listed.services[RESTORED_V1_SERVICE]?.includes(m), `the reference lists ${RESTORED_V1_SERVICE}.${m}`);
}
const EXTENSION_DIR = "bulwark/";

// ---------------------------------------------------------------------------
// Descriptor -> reference-format helpers.

const scalarName = (t: ScalarType): string => ScalarType[t].toLowerCase();

function typeString(f: DescField | DescExtension): string {
  switch (f.fieldKind) {
    case "scalar":
      return scalarName(f.scalar);
    case "enum":
      return f.enum.typeName;
    case "message":
      return f.message.typeName;
    case "list":
      return f.listKind === "scalar"
        ? scalarName(f.scalar)
        : f.listKind === "enum"
          ? f.enum.typeName
          : f.message.typeName;
    case "map": {
      const v =
        f.mapKind === "scalar" ? scalarName(f.scalar) : f.mapKind === "enum" ? f.enum.typeName : f.message.typeName;
      return `map<${scalarName(f.mapKey)}, ${v}>`;
    }
  }
}

function labelOf(f: DescField | DescExtension): string {
  if (f.fieldKind === "list") return "repeated";
  if (f.fieldKind === "map") return "map";
  if (f.proto.proto3Optional) return "optional";
  return "";
}

/** protoc's default JSON name: drop '_' and upper-case the following letter. */
function defaultJsonName(name: string): string {
  let out = "";
  let upper = false;
  for (const c of name) {
    if (c === "_") upper = true;
    else {
      out += upper ? c.toUpperCase() : c;
      upper = false;
    }
  }
  return out;
}

/** Reserved ranges in the reference notation: n for a single number, [a, b] inclusive. */
function reservedOf(ranges: { start: number; end: number }[], endExclusive: boolean): Reserved[] {
  return ranges.map(({ start, end }) => {
    const last = endExclusive ? end - 1 : end;
    return last === start ? start : ([start, last] as [number, number]);
  });
}

function httpOf(rule: HttpRule): RefHttp {
  const c = rule.pattern.case;
  let verb: string;
  let path: string;
  if (c === "custom") {
    verb = rule.pattern.value.kind.toUpperCase();
    path = rule.pattern.value.path;
  } else if (c === undefined) {
    verb = "";
    path = "";
  } else {
    verb = c.toUpperCase();
    path = rule.pattern.value;
  }
  const out: RefHttp = { verb, path, body: rule.body };
  if (rule.additionalBindings.length > 0) out.additionalBindings = rule.additionalBindings.map(httpOf);
  return out;
}

/** Scope fields as the reference derives them: iam_scope fields of the request, descending into scoped messages. */
function scopeFields(msg: DescMessage, prefix = "", seen: ReadonlySet<string> = new Set()): string[] {
  const out: string[] = [];
  for (const f of msg.fields) {
    if (!getOption(f, iam_scope)) continue;
    out.push(prefix + f.name);
    if (f.fieldKind === "message" && !seen.has(msg.typeName)) {
      out.push(...scopeFields(f.message, `${prefix}${f.name}.`, new Set([...seen, msg.typeName])));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Comparison.

class Diff {
  readonly problems: string[] = [];
  eq(path: string, expected: unknown, actual: unknown): void {
    const e = JSON.stringify(expected);
    const a = JSON.stringify(actual);
    if (e !== a) this.problems.push(`${path}: expected ${e}, got ${a}`);
  }
  /** Compare name sets; returns the names present on both sides. */
  names(path: string, expected: Iterable<string>, actual: Iterable<string>): string[] {
    const e = new Set(expected);
    const a = new Set(actual);
    const missing = [...e].filter((n) => !a.has(n));
    const extra = [...a].filter((n) => !e.has(n));
    if (missing.length) this.problems.push(`${path}: missing ${missing.join(", ")}`);
    if (extra.length) this.problems.push(`${path}: unexpected ${extra.join(", ")}`);
    return [...e].filter((n) => a.has(n));
  }
  assertClean(label: string): void {
    if (this.problems.length === 0) return;
    const shown = this.problems.slice(0, 40).map((p) => `  - ${p}`);
    const more = this.problems.length > 40 ? `\n  ... and ${this.problems.length - 40} more` : "";
    assert.fail(
      `${label}: ${this.problems.length} mismatch(es) with reference/api-surface.json\n${shown.join("\n")}${more}`,
    );
  }
}

function compareField(d: Diff, path: string, r: RefField, f: DescField): void {
  d.eq(`${path} number`, r.number, f.number);
  d.eq(`${path} type`, r.type, typeString(f));
  d.eq(`${path} label`, r.label, labelOf(f));
  d.eq(`${path} oneof`, r.oneof ?? null, f.oneof?.name ?? null);
  const fb = hasOption(f, field_behavior) ? getOption(f, field_behavior).map((b) => FieldBehavior[b]) : [];
  d.eq(`${path} field_behavior`, r.fieldBehavior ?? [], fb);
  d.eq(`${path} iam_scope`, r.iamScope ?? false, getOption(f, iam_scope));
  d.eq(`${path} deprecated`, r.deprecated ?? false, f.deprecated);
  d.eq(`${path} json_name`, r.jsonName ?? defaultJsonName(r.name), f.jsonName);
  const rr = hasOption(f, resource_reference) ? getOption(f, resource_reference) : undefined;
  d.eq(
    `${path} resource_reference`,
    r.resourceReference
      ? { type: r.resourceReference.type ?? "", childType: r.resourceReference.childType ?? "" }
      : null,
    rr ? { type: rr.type, childType: rr.childType } : null,
  );
}

function compareEnum(d: Diff, path: string, r: RefEnum, e: DescEnum): void {
  d.eq(`${path} fullName`, r.fullName, e.typeName);
  const byName = new Map(e.values.map((v) => [v.name, v]));
  d.eq(
    `${path} value order`,
    r.values.map((v) => v.name),
    e.values.map((v) => v.name),
  );
  for (const name of d.names(
    `${path} values`,
    r.values.map((v) => v.name),
    byName.keys(),
  )) {
    const rv = r.values.find((v) => v.name === name)!;
    const v = byName.get(name)!;
    d.eq(`${path}.${name} number`, rv.number, v.number);
    d.eq(`${path}.${name} deprecated`, rv.deprecated ?? false, v.deprecated);
  }
  d.eq(`${path} reserved`, r.reservedNumbers ?? [], reservedOf(e.proto.reservedRange, false));
}

function compareMessage(d: Diff, path: string, r: RefMessage, m: DescMessage): void {
  d.eq(`${path} fullName`, r.fullName, m.typeName);
  if (r.file !== undefined) d.eq(`${path} file`, r.file, m.file.proto.name);
  const fields = new Map(m.fields.map((f) => [f.name, f]));
  d.eq(
    `${path} field order`,
    r.fields.map((f) => f.name),
    m.fields.map((f) => f.name),
  );
  for (const name of d.names(
    `${path} fields`,
    r.fields.map((f) => f.name),
    fields.keys(),
  )) {
    compareField(
      d,
      `${path}.${name}`,
      r.fields.find((f) => f.name === name)!,
      fields.get(name)!,
    );
  }
  d.eq(
    `${path} oneofs`,
    r.oneofs ?? [],
    m.oneofs.map((o) => o.name),
  );
  d.eq(`${path} reserved numbers`, r.reservedNumbers ?? [], reservedOf(m.proto.reservedRange, true));
  d.eq(`${path} reserved names`, r.reservedNames ?? [], m.proto.reservedName);
  const res = hasOption(m, resource) ? getOption(m, resource) : undefined;
  const refRes = r.resource
    ? {
        type: r.resource.type,
        pattern: r.resource.pattern,
        plural: r.resource.plural ?? "",
        singular: r.resource.singular ?? "",
      }
    : null;
  d.eq(
    `${path} google.api.resource`,
    refRes,
    res ? { type: res.type, pattern: res.pattern, plural: res.plural, singular: res.singular } : null,
  );
  const nested = new Map(m.nestedMessages.filter((n) => !n.proto.options?.mapEntry).map((n) => [n.name, n]));
  for (const name of d.names(`${path} nested messages`, Object.keys(r.nested ?? {}), nested.keys())) {
    compareMessage(d, `${path}.${name}`, r.nested![name]!, nested.get(name)!);
  }
  const enums = new Map(m.nestedEnums.map((e) => [e.name, e]));
  for (const name of d.names(`${path} nested enums`, Object.keys(r.enums ?? {}), enums.keys())) {
    compareEnum(d, `${path}.${name}`, r.enums![name]!, enums.get(name)!);
  }
  d.eq(
    `${path} nested extensions`,
    [],
    m.nestedExtensions.map((x) => x.name),
  );
}

/**
 * `restored`: methods the service may hold beyond the reference's (RESTORED_V1_METHODS), whose
 * shapes the reference does not record; they must keep the project's RPC rules.
 */
function compareService(d: Diff, path: string, r: RefService, s: DescService, restored: readonly string[] = []): void {
  d.eq(`${path} fullName`, r.fullName, s.typeName);
  d.eq(`${path} file`, r.file, s.file.proto.name);
  const methods = new Map(s.methods.map((m) => [m.name, m]));
  const present = d.names(`${path} methods`, [...Object.keys(r.methods), ...restored], methods.keys());
  for (const name of present.filter((n) => restored.includes(n))) checkRpcRules(d, methods.get(name)!, "");
  for (const name of present.filter((n) => !restored.includes(n))) {
    const rm = r.methods[name]!;
    const m = methods.get(name)!;
    const p = `${path}/${name}`;
    d.eq(`${p} grpc path`, rm.grpcPath, `/${s.typeName}/${m.name}`);
    d.eq(`${p} kind`, "unary", m.methodKind);
    d.eq(`${p} input`, rm.input, m.input.typeName);
    d.eq(`${p} output`, rm.output, m.output.typeName);
    d.eq(`${p} google.api.http`, rm.http, hasOption(m, http) ? httpOf(getOption(m, http)) : null);
    // Our convention (not part of the reference): GET-bound RPCs are side-effect free,
    // which also enables Connect GET requests.
    const isGet = rm.http?.verb === "GET";
    d.eq(
      `${p} idempotency_level`,
      isGet ? "NO_SIDE_EFFECTS" : "IDEMPOTENCY_UNKNOWN",
      MethodOptions_IdempotencyLevel[m.idempotency],
    );
    let gotIam: RefMethod["iam"] = null;
    if (hasOption(m, iam)) {
      const o = getOption(m, iam);
      const rules = o.mode.case === "enabled" ? o.mode.value : undefined;
      gotIam = {
        mode: o.mode.case === "enabled" ? "enabled" : "disabled",
        capabilities: (rules?.capabilities ?? []).map((c) => Capability[c] ?? String(c)),
        unscoped: rules?.unscoped ?? false,
        scopeFields: scopeFields(m.input),
      };
      if (o.mode.case === undefined) d.problems.push(`${p} iam: option set but neither enabled nor disabled`);
    }
    d.eq(`${p} chainguard.annotations.iam`, rm.iam, gotIam);
    let gotEvents: RefMethod["events"] | null = null;
    if (hasOption(m, events)) {
      const ev = getOption(m, events);
      gotEvents = { type: ev.type, extensions: ev.extensions, audience: EventAttributes_Audience[ev.audience] ?? "" };
    }
    d.eq(`${p} chainguard.annotations.events`, rm.events ?? null, gotEvents);
  }
}

function compareExtension(d: Diff, fullName: string, r: RefExtension, x: DescExtension): void {
  const p = `extension ${fullName}`;
  d.eq(`${p} extendee`, r.extendee, x.extendee.typeName);
  d.eq(`${p} number`, r.number, x.number);
  d.eq(`${p} type`, r.type, typeString(x));
  d.eq(`${p} label`, r.label, labelOf(x));
  d.eq(`${p} file`, r.file, x.file.proto.name);
}

function compareCapabilities(d: Diff, e: DescEnum): void {
  const internal = new Set(ref.capabilityInternalOnly);
  const deprecated = new Set(ref.capabilityDeprecated);
  d.names(
    "Capability values",
    Object.keys(ref.capabilities),
    e.values.map((v) => v.name),
  );
  for (const v of e.values) {
    const p = `Capability.${v.name}`;
    d.eq(`${p} number`, ref.capabilities[v.name], v.number);
    d.eq(`${p} (name)`, ref.capabilityStrings[v.name] ?? null, hasOption(v, capName) ? getOption(v, capName) : null);
    d.eq(`${p} (bit)`, ref.capabilityBits[v.name] ?? null, hasOption(v, bit) ? getOption(v, bit) : null);
    d.eq(`${p} (internal_only)`, internal.has(v.name), hasOption(v, internal_only) && getOption(v, internal_only));
    d.eq(`${p} deprecated`, deprecated.has(v.name), v.deprecated);
  }
  const reserved: number[] = [];
  for (const { start, end } of e.proto.reservedRange) for (let n = start; n <= end; n++) reserved.push(n);
  d.eq(
    "Capability reserved numbers",
    ref.capabilityReservedNumbers,
    reserved.sort((a, b) => a - b),
  );
}

function countPackage(files: DescFile[], topLevel: DescMessage[] = []) {
  let messages = 0;
  let enums = 0;
  const walk = (m: DescMessage): void => {
    messages++;
    enums += m.nestedEnums.length;
    m.nestedMessages.filter((n) => !n.proto.options?.mapEntry).forEach(walk);
  };
  let services = 0;
  let rpcs = 0;
  topLevel.forEach(walk);
  for (const f of files) {
    f.messages.forEach(walk);
    enums += f.enums.length;
    services += f.services.length;
    rpcs += f.services.reduce((n, s) => n + s.methods.length, 0);
  }
  return { services, rpcs, messages, enums };
}

/**
 * The package's top-level messages the restored v1 methods need, beyond the reference's
 * (`recorded`): their requests and answers in `files`, and every message of `files` those reach
 * through fields, starting also from RESTORED_V1_MESSAGE_ROOTS.
 */
function restoredMessagesOf(files: DescFile[], recorded: readonly string[]): DescMessage[] {
  const topLevel = new Map(files.flatMap((f) => f.messages).map((m) => [m.typeName, m]));
  const service = files.flatMap((f) => f.services).find((s) => s.name === RESTORED_V1_SERVICE);
  const roots = [
    ...(service?.methods ?? []).filter((m) => RESTORED_V1_METHODS.includes(m.name)).flatMap((m) => [m.input, m.output]),
    ...RESTORED_V1_MESSAGE_ROOTS.map((n) => topLevel.get(`${RESTORED_V1_PACKAGE}.${n}`)).filter((m) => m !== undefined),
  ];
  const reached = new Set<string>();
  const visit = (m: DescMessage): void => {
    if (reached.has(m.typeName)) return;
    reached.add(m.typeName);
    for (const f of m.fields) {
      const target =
        f.fieldKind === "message" ? f.message : (f.fieldKind === "list" || f.fieldKind === "map") && f.message;
      if (target) visit(target);
    }
    m.nestedMessages.forEach(visit);
  };
  roots.forEach(visit);
  return [...topLevel.values()].filter((m) => reached.has(m.typeName) && !recorded.includes(m.name));
}

/** Compare everything in scope; `getFile` resolves a .proto path to its descriptor. */
function compareAll(getFile: (path: string) => DescFile | undefined): Diff {
  const d = new Diff();
  for (const pkgName of PACKAGES) {
    const pkg = ref.packages[pkgName];
    if (!pkg) {
      d.problems.push(`package ${pkgName}: not in reference`);
      continue;
    }
    const files: DescFile[] = [];
    for (const path of pkg.files) {
      const f = getFile(path);
      if (!f) {
        d.problems.push(`package ${pkgName}: file ${path} not found`);
        continue;
      }
      d.eq(`${path} package`, pkgName, f.proto.package);
      d.eq(`${path} syntax`, "proto3", f.edition === 999 ? "proto3" : String(f.edition));
      files.push(f);
    }
    const messages = new Map(files.flatMap((f) => f.messages).map((m) => [m.name, m]));
    const restoredMethods = pkgName === RESTORED_V1_PACKAGE ? RESTORED_V1_METHODS : [];
    const restoredMessages =
      pkgName === RESTORED_V1_PACKAGE ? restoredMessagesOf(files, Object.keys(pkg.messages)) : [];
    const expectedMessages = [...Object.keys(pkg.messages), ...restoredMessages.map((m) => m.name)];
    for (const name of d.names(`${pkgName} messages`, expectedMessages, messages.keys())) {
      if (!pkg.messages[name]) continue; // restored: the reference does not record its shape
      compareMessage(d, `${pkgName}.${name}`, pkg.messages[name]!, messages.get(name)!);
    }
    const enums = new Map(files.flatMap((f) => f.enums).map((e) => [e.name, e]));
    for (const name of d.names(`${pkgName} enums`, Object.keys(pkg.enums), enums.keys())) {
      compareEnum(d, `${pkgName}.${name}`, pkg.enums[name]!, enums.get(name)!);
    }
    const services = new Map(files.flatMap((f) => f.services).map((s) => [s.name, s]));
    for (const name of d.names(`${pkgName} services`, Object.keys(pkg.services), services.keys())) {
      const restored = name === RESTORED_V1_SERVICE ? restoredMethods : [];
      compareService(d, `${pkgName}.${name}`, pkg.services[name]!, services.get(name)!, restored);
    }
    const want = ref.counts.perPackage[pkgName];
    if (want) {
      // the reference's counts, plus exactly what was restored
      const extra = countPackage([], restoredMessages);
      d.eq(
        `${pkgName} counts`,
        {
          ...want,
          rpcs: want.rpcs + restoredMethods.length,
          messages: want.messages + extra.messages,
          enums: want.enums + extra.enums,
        },
        countPackage(files),
      );
    }
  }

  const capFile = getFile("capabilities/capabilities.proto");
  const capEnum = capFile?.enums.find((e) => e.name === "Capability");
  if (capEnum) compareCapabilities(d, capEnum);
  else d.problems.push("chainguard.capabilities.Capability not found");

  for (const [fullName, r] of Object.entries(ref.extensions)) {
    if (SKIPPED_EXTENSIONS.has(fullName)) continue;
    const x = getFile(r.file)?.extensions.find((e) => e.typeName === fullName);
    if (!x) d.problems.push(`extension ${fullName}: not found in ${r.file}`);
    else compareExtension(d, fullName, r, x);
  }

  // Every file of proto/ is a reference file of its package, or a documented extension.
  for (const path of PROTO_FILES) {
    const f = getFile(path);
    if (!f) {
      d.problems.push(`${path}: not found`);
      continue;
    }
    const pkg = f.proto.package;
    if (SDK_VENDORED.has(path)) {
      d.eq(`${path} package`, SDK_VENDORED.get(path), pkg);
      const listed = alsoExistsOf(path);
      if (listed)
        d.eq(
          `${path} services (reference alsoExists)`,
          listed,
          Object.fromEntries(f.services.map((s) => [s.name, s.methods.map((m) => m.name)])),
        );
    } else if (pkg.startsWith(EXTENSION_PACKAGE_PREFIX)) {
      if (!path.startsWith(EXTENSION_DIR)) d.problems.push(`${path}: extension package ${pkg} outside proto/bulwark/`);
      checkExtensionFile(d, f);
    } else if (!ref.packages[pkg]) {
      d.problems.push(`${path}: package ${pkg} is neither in the reference nor a documented extension (bulwark.*)`);
    } else if (!ref.packages[pkg]!.files.includes(path)) {
      d.problems.push(`${path}: the reference has no such file in package ${pkg}`);
    } else if (path.startsWith(EXTENSION_DIR)) {
      d.problems.push(`${path}: proto/bulwark/ holds extension packages only, not ${pkg}`);
    }
  }
  return d;
}

/** The services and methods the reference's `alsoExists` lists for a file (a GA file: its v2beta1 twin's). */
function alsoExistsOf(path: string): Record<string, string[]> | undefined {
  const also = (ref as unknown as { alsoExists: Record<string, { services: Record<string, string[]> }> }).alsoExists;
  const ga = GA_PACKAGES.find((p) => path.startsWith(`${p.replaceAll(".", "/")}/`));
  return also[ga ? path.replace("/v2/", "/v2beta1/") : path]?.services;
}

/** The .proto files of proto/ (the project's module; third_party/ is the other one), as import paths. */
const PROTO_FILES: string[] = (() => {
  const dir = join(ROOT, "proto");
  const walk = (d: string): string[] =>
    readdirSync(d).flatMap((n) => {
      const p = join(d, n);
      return statSync(p).isDirectory() ? walk(p) : p.endsWith(".proto") ? [relative(dir, p).split("\\").join("/")] : [];
    });
  return walk(dir).sort();
})();

/**
 * An extension file keeps the project's rules the reference cannot check for it: every RPC is
 * unary, has an HTTP rule under /bulwark/ and an iam option, and is side-effect free exactly when
 * it is a GET.
 */
function checkExtensionFile(d: Diff, f: DescFile): void {
  for (const s of f.services) for (const m of s.methods) checkRpcRules(d, m, "/bulwark/");
}

/** The project's RPC rules: unary, an HTTP rule (under `pathPrefix`), an iam option, NO_SIDE_EFFECTS exactly on GETs. */
function checkRpcRules(d: Diff, m: DescMethod, pathPrefix: string): void {
  const p = `${m.parent.typeName}/${m.name}`;
  d.eq(`${p} kind`, "unary", m.methodKind);
  if (!hasOption(m, http)) d.problems.push(`${p}: no google.api.http rule`);
  else if (!httpOf(getOption(m, http)).path.startsWith(pathPrefix))
    d.problems.push(`${p}: HTTP path outside ${pathPrefix}: ${httpOf(getOption(m, http)).path}`);
  if (!hasOption(m, iam)) d.problems.push(`${p}: no chainguard.annotations.iam option`);
  const isGet = hasOption(m, http) && getOption(m, http).pattern.case === "get";
  d.eq(
    `${p} idempotency_level`,
    isGet ? "NO_SIDE_EFFECTS" : "IDEMPOTENCY_UNKNOWN",
    MethodOptions_IdempotencyLevel[m.idempotency],
  );
}

// ---------------------------------------------------------------------------

test("buf build of proto/ matches reference/api-surface.json", () => {
  const dir = mkdtempSync(join(tmpdir(), "bulwark-conformance-"));
  try {
    const out = join(dir, "image.binpb");
    execFileSync(BUF, ["build", "-o", out], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
    const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(out)));
    compareAll((p) => registry.getFile(p)).assertClean("buf build");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("descriptors embedded in src/gen match reference/api-surface.json", async () => {
  const genDir = join(ROOT, "src", "gen");
  const files = new Map<string, DescFile>();
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((n) => {
      const p = join(dir, n);
      return statSync(p).isDirectory() ? walk(p) : p.endsWith("_pb.ts") ? [p] : [];
    });
  for (const p of walk(genDir)) {
    const mod = (await import(moduleUrl(relative(ROOT, p)))) as Record<string, unknown>;
    const expectedName = relative(genDir, p)
      .split("\\")
      .join("/")
      .replace(/_pb\.ts$/, ".proto");
    const descs = Object.entries(mod)
      .filter(([k]) => k.startsWith("file_"))
      .map(([, v]) => v as DescFile);
    assert.equal(descs.length, 1, `${p}: expected exactly one file_* export`);
    assert.equal(descs[0]!.proto.name, expectedName, `${p}: embedded file name`);
    files.set(expectedName, descs[0]!);
  }
  compareAll((p) => files.get(p)).assertClean("src/gen");
});
