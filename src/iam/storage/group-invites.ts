// Group invites aggregate. An invite code is "<keyId>.<secret>": the key id is public (stored in
// key_id, shown on every read), the secret is shown once, at creation, and stored only as
// sha256(secret) in code_hash. Parent and role are foreign keys (on delete restrict), so a group
// or role an invite names cannot be deleted under it.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { UIDPFilter } from "../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../core/list.js";
import type { Db } from "./db.js";
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, constraintOf, sqlState } from "./errors.js";
import type { RoleRow } from "./roles.js";
import { deleteByUid, getByUid, type DeleteResult, type Row } from "./table.js";

export type GroupInviteRow = Row<"group_invites">;

/** What an invite shows of its role. */
export type InviteRole = Pick<RoleRow, "uid" | "name" | "description" | "capabilities">;

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

export interface NewGroupInvite {
  uid: string;
  parentUid: string;
  roleUid: string;
  email: string;
  singleUse: boolean;
  keyId: string;
  codeHash: Buffer;
  expirationTime: Date;
  now: Date;
}

export type InsertResult =
  | { kind: "created"; row: GroupInviteRow; role: InviteRole }
  | { kind: "group_not_found" }
  | { kind: "role_not_found" }
  | { kind: "key_id_taken" };

export class GroupInvitesRepository {
  constructor(private readonly db: Db) {}

  /**
   * Inserts an invite and reads its role in the same transaction (the insert's foreign-key check
   * holds a key-share lock on the role row, so it cannot disappear in between).
   */
  async insert(i: NewGroupInvite): Promise<InsertResult> {
    try {
      return await this.db.transaction().execute(async (trx) => {
        const row = await trx
          .insertInto("group_invites")
          .values({
            uid: i.uid,
            parent_uid: i.parentUid,
            role_uid: i.roleUid,
            email: i.email,
            single_use: i.singleUse,
            key_id: i.keyId,
            code_hash: i.codeHash,
            expiration_time: i.expirationTime,
            used_time: null,
            create_time: i.now,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        const role = await trx
          .selectFrom("roles")
          .select(["uid", "name", "description", "capabilities"])
          .where("uid", "=", row.role_uid)
          .executeTakeFirstOrThrow();
        return { kind: "created", row, role } as const;
      });
    } catch (err) {
      const state = sqlState(err);
      const constraint = constraintOf(err) ?? "";
      if (state === FOREIGN_KEY_VIOLATION && constraint.includes("parent_uid")) return { kind: "group_not_found" };
      if (state === FOREIGN_KEY_VIOLATION && constraint.includes("role_uid")) return { kind: "role_not_found" };
      if (state === UNIQUE_VIOLATION && constraint.includes("key_id")) return { kind: "key_id_taken" };
      throw err;
    }
  }

  get(uid: string): Promise<GroupInviteRow | undefined> {
    return getByUid(this.db, "group_invites", uid);
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "group_invites", uid);
  }

  /** The roles the given invites name, by uid: one query however many invites. */
  async rolesOf(rows: readonly GroupInviteRow[]): Promise<Map<string, InviteRole>> {
    const uids = [...new Set(rows.map((r) => r.role_uid))];
    if (uids.length === 0) return new Map();
    const roles = await this.db.selectFrom("roles").select(["uid", "name", "description", "capabilities"]).where("uid", "in", uids).execute();
    return new Map(roles.map((r) => [r.uid, r]));
  }

  /** FROM + WHERE of an invite listing, for the list engine. */
  listQuery(filter: { uidp?: UIDPFilter; keyId: string }) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("group_invites"), filter.uidp);
      if (filter.keyId !== "") q = q.where("key_id", "=", filter.keyId);
      return q;
    };
  }

  /**
   * The invite a code's halves name, if it may be used at `now`: the secret's hash matches
   * (compared in constant time), it has not expired, and a single-use invite has not been used.
   */
  async findUsable(keyId: string, secret: string, now: Date): Promise<GroupInviteRow | undefined> {
    const row = await this.db.selectFrom("group_invites").selectAll().where("key_id", "=", keyId).executeTakeFirst();
    if (!row) return undefined;
    const stored = Buffer.from(row.code_hash);
    const given = hashInviteSecret(secret);
    if (stored.length !== given.length || !timingSafeEqual(stored, given)) return undefined;
    if (row.expiration_time.getTime() <= now.getTime()) return undefined;
    if (row.single_use && row.used_time !== null) return undefined;
    return row;
  }

  /**
   * Records the first use of an invite. Atomic: of concurrent callers exactly one gets the row;
   * undefined when the invite does not exist or was already used.
   */
  markUsed(uid: string, now: Date): Promise<GroupInviteRow | undefined> {
    return this.db
      .updateTable("group_invites")
      .set({ used_time: now })
      .where("uid", "=", uid)
      .where("used_time", "is", null)
      .returningAll()
      .executeTakeFirst();
  }
}
