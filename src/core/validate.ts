// Field rules several resources share, so each resource states them the same way.
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { invalidArgument, type FieldViolation } from "./errors.js";
import { isValidUidp } from "./uidp.js";
import { quote } from "./strings.js";

export const NAME_PATTERN = /^[a-z0-9 ._-]{1,}$/;
export const MAX_NAME_LENGTH = 256;
export const MAX_DESCRIPTION_LENGTH = 4096;

/** The spec's name rule (groups, identities, roles, ...). */
export function nameViolations(name: string, field = "name"): FieldViolation[] {
  if (!NAME_PATTERN.test(name)) return [{ field, description: `name must match "${NAME_PATTERN.source}"` }];
  if (name.length > MAX_NAME_LENGTH)
    return [{ field, description: `name must be at most ${MAX_NAME_LENGTH} characters` }];
  return [];
}

export function descriptionViolations(description: string, field = "description"): FieldViolation[] {
  return description.length > MAX_DESCRIPTION_LENGTH
    ? [{ field, description: `description must be at most ${MAX_DESCRIPTION_LENGTH} characters` }]
    : [];
}

export function throwIfViolations(violations: FieldViolation[]): void {
  if (violations.length > 0) throw invalidArgument(violations);
}

/** A required UIDP field. */
export function requireUid(field: string, uid: string): void {
  if (uid === "") throw invalidArgument({ field, description: "is required" });
  if (!isValidUidp(uid)) throw invalidArgument({ field, description: `${quote(uid)} is not a valid UIDP` });
}

/** An optional UIDP field ("" allowed). */
export function optionalUid(field: string, uid: string): void {
  if (uid !== "" && !isValidUidp(uid))
    throw invalidArgument({ field, description: `${quote(uid)} is not a valid UIDP` });
}

/** A request timestamp as a Date, or a violation when it names no representable instant. */
export function timeOf(field: string, ts: Timestamp | undefined, v: FieldViolation[]): Date | undefined {
  if (!ts) return undefined;
  const date = timestampDate(ts);
  // RFC 3339's years (and within what the database stores)
  const year = date.getUTCFullYear();
  if (Number.isNaN(date.getTime()) || year < 1 || year > 9999 || ts.nanos < 0 || ts.nanos > 999_999_999) {
    v.push({ field, description: "is not a valid time (years 0001 to 9999)" });
    return undefined;
  }
  return date;
}
