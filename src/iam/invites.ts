// Group invites as a domain, in one place: minting codes, deciding whether a code may be used,
// and accepting an invite (GroupInvitesService creates them; sign-in accepts them).
//
// A code is "<keyId>.<secret>": the key id is public (stored, shown on every read), the secret is
// shown once, at creation, and stored only as sha256(secret).
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { isAncestorOrSelf, newChildUidp } from "../core/uidp.js";
import type { GroupInviteRow, GroupInvitesRepository } from "./storage/group-invites.js";
import type { RoleBindingsRepository } from "./storage/role-bindings.js";

export interface InviteCode {
  /** 16 lowercase hex chars (8 random bytes); the public, unique half */
  keyId: string;
  /** 32 random bytes, base64url; never stored */
  secret: string;
  /** what the client receives: `${keyId}.${secret}` */
  code: string;
  /** sha256 of the secret's text: the only form in which it is stored */
  hash: Buffer;
}

export function hashInviteSecret(secret: string): Buffer {
  return createHash("sha256").update(secret, "utf8").digest();
}

export function mintInviteCode(): InviteCode {
  const keyId = randomBytes(8).toString("hex");
  const secret = randomBytes(32).toString("base64url");
  return { keyId, secret, code: `${keyId}.${secret}`, hash: hashInviteSecret(secret) };
}

/** Splits a code into its halves; undefined when it is not of the form `<keyId>.<secret>`. */
export function parseInviteCode(code: string): { keyId: string; secret: string } | undefined {
  const m = /^([0-9a-f]{16})\.([A-Za-z0-9_-]+)$/.exec(code);
  return m ? { keyId: m[1]!, secret: m[2]! } : undefined;
}

/** Whether an invite may be used at `now`: unexpired, and a single-use one not used yet. */
export function isUsable(invite: GroupInviteRow, now: Date): boolean {
  if (invite.expiration_time.getTime() <= now.getTime()) return false;
  return !(invite.single_use && invite.used_time !== null);
}

/**
 * The invite a code's halves name, if it may be used at `now`: the secret's hash matches
 * (compared in constant time) and the invite is usable.
 */
export async function findUsableInvite(
  invites: GroupInvitesRepository,
  keyId: string,
  secret: string,
  now: Date,
): Promise<GroupInviteRow | undefined> {
  const row = await invites.getByKeyId(keyId);
  if (!row) return undefined;
  const stored = Buffer.from(row.code_hash);
  const given = hashInviteSecret(secret);
  if (stored.length !== given.length || !timingSafeEqual(stored, given)) return undefined;
  return isUsable(row, now) ? row : undefined;
}

/** Why an invite could not be accepted; the message is for the person signing in. */
export class InviteRefused extends Error {}

/** Who vouches for the accepting person's email: the platform, or an IdP within its own group. */
export interface VouchedEmails {
  platformEmail: string;
  idpEmail?: { email: string; group: string };
}

/**
 * Accepts an invite for an identity: checks it is still usable and, for an email-restricted
 * invite, that a verified email matches (an IdP's word counts only within the IdP's group);
 * uses up a single-use invite atomically; binds the invite's role at its group.
 */
export async function acceptInvite(
  deps: { invites: GroupInvitesRepository; roleBindings: RoleBindingsRepository },
  inviteUid: string,
  identityUid: string,
  vouched: VouchedEmails,
  at: Date,
): Promise<void> {
  const invite = await deps.invites.get(inviteUid);
  if (!invite || invite.expiration_time <= at) throw new InviteRefused("the invite has expired");
  if (invite.email) {
    const wanted = invite.email.toLowerCase();
    const byPlatform = vouched.platformEmail.toLowerCase() === wanted;
    const idp = vouched.idpEmail;
    const byIdp =
      idp !== undefined && idp.email.toLowerCase() === wanted && isAncestorOrSelf(idp.group, invite.parent_uid);
    if (!byPlatform && !byIdp) {
      throw new InviteRefused("the invite is for another email address (a verified email is required)");
    }
  }
  if (invite.single_use) {
    if (!(await deps.invites.markUsed(invite.uid, at)))
      throw new InviteRefused("the invite code has already been used");
  } else if (!invite.used_time) {
    await deps.invites.markUsed(invite.uid, at);
  }
  const binding = {
    uid: newChildUidp(invite.parent_uid),
    parentUid: invite.parent_uid,
    identityUid,
    roleUid: invite.role_uid,
  };
  await deps.roleBindings.ensure(binding, at);
}
