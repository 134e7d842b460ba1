// UIDPs: hierarchical resource identifiers. A root is 40 lowercase hex chars (20 random bytes);
// each child appends "/" + 16 lowercase hex chars (8 random bytes). A is an ancestor of B when
// B starts with A + "/".
import { randomHex } from "./random-hex.js";

const UIDP_PATTERN = /^[0-9a-f]{40}(?:\/[0-9a-f]{16})*$/;

export function isValidUidp(value: string): boolean {
  return UIDP_PATTERN.test(value);
}

export function newRootUidp(): string {
  return randomHex(20);
}

export function newChildUidp(parent: string): string {
  return `${parent}/${randomHex(8)}`;
}

/** The parent's UIDP, or undefined for a root. */
export function parentOf(uid: string): string | undefined {
  const i = uid.lastIndexOf("/");
  return i < 0 ? undefined : uid.slice(0, i);
}

/** The proper ancestors of a UIDP, root first. */
export function ancestorsOf(uid: string): string[] {
  const out: string[] = [];
  for (let i = uid.indexOf("/"); i >= 0; i = uid.indexOf("/", i + 1)) out.push(uid.slice(0, i));
  return out;
}

export function isAncestorOrSelf(ancestor: string, uid: string): boolean {
  return uid === ancestor || uid.startsWith(ancestor + "/");
}

/**
 * Whether a resource (a role, an identity) can be referenced from group `at`: root-level ones
 * (built-in roles, humans' identities) from anywhere, others from their own group and below.
 * The database checks the same rule on every reference.
 */
export function isUsableFrom(ref: string, at: string): boolean {
  const owner = parentOf(ref);
  return owner === undefined || isAncestorOrSelf(owner, at);
}
