// Partial updates (AIP-134) for every Update RPC.
// - An explicit mask changes exactly the listed fields (nested paths allowed); other fields of the
//   patch are ignored. "*" replaces every mutable field. Unknown or output-only paths are rejected.
// - No mask: the populated fields of the patch change (the REST transcoder fills the mask from the
//   JSON keys present, so over REST "present" means present, not non-default).
// Output-only fields are never written from a patch. Immutable fields may be named or resent,
// but a patch that would change one is rejected (AIP-203), at any depth.
// Copies go through protobuf reflection, so oneof members, lists and maps behave as fields.
import {
  clone,
  equals,
  getOption,
  isFieldSet,
  type DescField,
  type DescMessage,
  type MessageShape,
} from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import type { FieldMask } from "@bufbuild/protobuf/wkt";
import { FieldBehavior, field_behavior } from "../gen/google/api/field_behavior_pb.js";
import { invalidArgument } from "./errors.js";
import { quote } from "./strings.js";

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

function findField(desc: DescMessage, name: string): DescField | undefined {
  return desc.fields.find((f) => f.name === name || f.jsonName === name);
}

type Path = DescField[];

function resolvePaths(
  desc: DescMessage,
  mask: FieldMask | undefined,
  patch: MessageShape<DescMessage>,
  maskField: string,
): Path[] {
  const paths = mask?.paths ?? [];
  if (paths.length === 0) {
    // No mask: the patch's populated, writable top-level fields.
    return desc.fields.filter((f) => isMutable(f) && isFieldSet(patch, f)).map((f) => [f]);
  }
  if (paths.length === 1 && paths[0] === "*") {
    return desc.fields.filter(isMutable).map((f) => [f]);
  }
  return paths.map((text) => {
    const path: Path = [];
    let current: DescMessage | undefined = desc;
    for (const part of text.split(".")) {
      const field: DescField | undefined = current ? findField(current, part) : undefined;
      if (!field) throw invalidArgument({ field: maskField, description: `unknown field ${quote(text)}` });
      if (isOutputOnly(field))
        throw invalidArgument({ field: maskField, description: `field ${quote(text)} is output only` });
      path.push(field);
      current = field.fieldKind === "message" ? field.message : undefined;
    }
    return path;
  });
}

function copyPath(target: ReflectMessage, source: ReflectMessage | undefined, path: Path): void {
  const [head, ...rest] = path;
  if (!head) return;
  if (rest.length === 0) {
    if (source?.isSet(head)) target.set(head, source.get(head) as never);
    else target.clear(head);
    return;
  }
  if (head.fieldKind !== "message") return;
  const from = source?.isSet(head) ? (source.get(head) as ReflectMessage) : undefined;
  if (!target.isSet(head)) {
    if (!from) return;
    target.set(head, reflect(head.message) as never);
  }
  copyPath(target.get(head) as ReflectMessage, from, rest);
}

/** Paths of immutable fields whose value differs between two versions of a message. */
function changedImmutable(before: ReflectMessage, after: ReflectMessage, prefix = ""): string[] {
  const changed: string[] = [];
  for (const field of before.desc.fields) {
    if (isImmutable(field)) {
      if (!sameField(field, before, after)) changed.push(prefix + field.name);
    } else if (field.fieldKind === "message" && !field.message.typeName.startsWith("google.protobuf.")) {
      const a = before.isSet(field) ? (before.get(field) as ReflectMessage) : reflect(field.message);
      const b = after.isSet(field) ? (after.get(field) as ReflectMessage) : reflect(field.message);
      changed.push(...changedImmutable(a, b, prefix + field.name + "."));
    }
  }
  return changed;
}

/** Whether a field holds the same value in two messages of the same type. */
function sameField(field: DescField, a: ReflectMessage, b: ReflectMessage): boolean {
  if (a.isSet(field) !== b.isSet(field)) return false;
  if (!a.isSet(field)) return true;
  // Compare just this field: copy it alone into two fresh messages and let equals() decide.
  const only = (m: ReflectMessage) => {
    const r = reflect(m.desc);
    r.set(field, m.get(field) as never);
    return r.message;
  };
  return equals(a.desc, only(a), only(b));
}

/**
 * Returns a copy of `existing` with the masked fields taken from `patch`. `maskField` names the
 * request's mask field in error messages.
 */
export function applyFieldMask<D extends DescMessage>(
  desc: D,
  existing: MessageShape<D>,
  patch: MessageShape<D>,
  mask: FieldMask | undefined,
  maskField = "update_mask",
): { updated: MessageShape<D>; changed: string[] } {
  const paths = resolvePaths(desc, mask, patch, maskField);
  const updated = clone(desc, existing);
  const target = reflect(desc, updated);
  const source = reflect(desc, patch);
  for (const path of paths) copyPath(target, source, path);
  const immutable = changedImmutable(reflect(desc, existing), target);
  if (immutable.length > 0) {
    throw invalidArgument(immutable.map((field) => ({ field, description: "is immutable and cannot be changed" })));
  }
  return { updated, changed: paths.map((p) => p.map((f) => f.name).join(".")) };
}
