// Partial updates (AIP-134) for every Update RPC.
// - An explicit mask changes exactly the listed fields (nested paths allowed); other fields of the
//   patch are ignored. "*" replaces every mutable field. Unknown or output-only paths are rejected.
// - No mask: the populated fields of the patch change (the REST transcoder fills the mask from the
//   JSON keys present, so over REST "present" means present, not non-default).
// Output-only fields are never written from a patch. Immutable fields may be named or resent,
// but a patch that would change one is rejected (AIP-203), at any depth.
import { equals, getOption, isFieldSet, type DescField, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { scalarZeroValue } from "@bufbuild/protobuf/reflect";
import type { FieldMask } from "@bufbuild/protobuf/wkt";
import { FieldBehavior, field_behavior } from "../gen/google/api/field_behavior_pb.js";
import { invalidArgument } from "./errors.js";

export function fieldBehaviors(field: DescField): FieldBehavior[] {
  return getOption(field, field_behavior) ?? [];
}

export function isOutputOnly(field: DescField): boolean {
  return fieldBehaviors(field).includes(FieldBehavior.OUTPUT_ONLY);
}

function isImmutable(field: DescField): boolean {
  return fieldBehaviors(field).includes(FieldBehavior.IMMUTABLE);
}

function isMutable(field: DescField): boolean {
  return !isOutputOnly(field) && !isImmutable(field);
}

function sameValue(field: DescField, a: unknown, b: unknown): boolean {
  if (field.fieldKind === "message" && a && b) return equals(field.message, a as never, b as never);
  if (field.fieldKind === "scalar" || field.fieldKind === "enum") return a === b;
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Paths of immutable fields whose value differs between two versions of a message. */
function changedImmutable(desc: DescMessage, before: Record<string, unknown> | undefined, after: Record<string, unknown> | undefined, prefix = ""): string[] {
  const changed: string[] = [];
  for (const field of desc.fields) {
    const a = before?.[field.localName];
    const b = after?.[field.localName];
    if (isImmutable(field)) {
      if (!sameValue(field, a ?? defaultOf(field), b ?? defaultOf(field))) changed.push(prefix + field.name);
    } else if (field.fieldKind === "message" && !field.message.typeName.startsWith("google.protobuf.") && (a || b)) {
      changed.push(...changedImmutable(field.message, a as Record<string, unknown>, b as Record<string, unknown>, prefix + field.name + "."));
    }
  }
  return changed;
}

/** The value an absent field reads as (its parent message being unset). */
function defaultOf(field: DescField): unknown {
  if (field.fieldKind === "scalar") return field.getDefaultValue() ?? scalarZeroValue(field.scalar, false);
  if (field.fieldKind === "enum") return field.getDefaultValue() ?? 0;
  return undefined;
}

function findField(desc: DescMessage, name: string): DescField | undefined {
  return desc.fields.find((f) => f.name === name || f.jsonName === name);
}

type Path = DescField[];

function resolvePaths(desc: DescMessage, mask: FieldMask | undefined, patch: Record<string, unknown>, maskField: string): Path[] {
  const paths = mask?.paths ?? [];
  if (paths.length === 0) {
    // No mask: the patch's populated, writable top-level fields.
    return desc.fields
      .filter((f) => isMutable(f) && isFieldSet(patch as MessageShape<DescMessage>, f))
      .map((f) => [f]);
  }
  if (paths.length === 1 && paths[0] === "*") {
    return desc.fields.filter(isMutable).map((f) => [f]);
  }
  return paths.map((text) => {
    const parts = text.split(".");
    const path: Path = [];
    let current: DescMessage | undefined = desc;
    for (const part of parts) {
      const field: DescField | undefined = current ? findField(current, part) : undefined;
      if (!field) {
        throw invalidArgument({ field: maskField, description: `unknown field "${text}"` });
      }
      if (isOutputOnly(field)) {
        throw invalidArgument({ field: maskField, description: `field "${text}" is output only` });
      }
      path.push(field);
      current = field.fieldKind === "message" ? field.message : undefined;
    }
    return path;
  });
}

function copyPath(target: Record<string, unknown>, source: Record<string, unknown>, path: Path): void {
  const [head, ...rest] = path;
  if (!head) return;
  const key = head.localName;
  if (rest.length === 0) {
    target[key] = source[key];
    return;
  }
  if (head.fieldKind !== "message") return;
  const from = source[key] as Record<string, unknown> | undefined;
  let to = target[key] as Record<string, unknown> | undefined;
  if (!to) {
    if (!from) return;
    to = { ...from };
    target[key] = to;
  }
  copyPath(to, from ?? {}, rest);
}

/**
 * Returns `existing` with the masked fields taken from `patch`. `maskField` names the request's
 * mask field in error messages.
 */
export function applyFieldMask<D extends DescMessage>(
  desc: D,
  existing: MessageShape<D>,
  patch: MessageShape<D>,
  mask: FieldMask | undefined,
  maskField = "update_mask",
): { updated: MessageShape<D>; changed: string[] } {
  const paths = resolvePaths(desc, mask, patch as Record<string, unknown>, maskField);
  const updated = { ...(existing as Record<string, unknown>) };
  for (const path of paths) copyPath(updated, patch as Record<string, unknown>, path);
  const immutable = changedImmutable(desc, existing as Record<string, unknown>, updated);
  if (immutable.length > 0) {
    throw invalidArgument(immutable.map((field) => ({ field, description: "is immutable and cannot be changed" })));
  }
  return { updated: updated as MessageShape<D>, changed: paths.map((p) => p.map((f) => f.name).join(".")) };
}
