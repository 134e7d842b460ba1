// Group invites aggregate. An invite's code is "<keyId>.<secret>" (iam/invites.ts): key_id is
// its public half; code_hash holds only sha256(secret). Parent and role are foreign keys (on
// delete restrict), so a group or role an invite names cannot be deleted under it.
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { IamRepository, type Row } from "./schema.js";
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, constraintOf, sqlState } from "../../storage/errors.js";
import type { RoleRow } from "./roles.js";
import { missing, ok, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, getByUid } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";

export type GroupInviteRow = Row<"group_invites">;

/** What an invite shows of its role. */
export type InviteRole = Pick<RoleRow, "uid" | "name" | "description" | "capabilities">;

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

/** A created invite with the role it grants. */
export interface CreatedInvite {
  row: GroupInviteRow;
  role: InviteRole;
}

/** The random key id is already in use: the caller mints another code and tries again. */
export interface KeyIdTaken {
  kind: "key_id_taken";
}

export class GroupInvitesRepository extends IamRepository {
  /**
   * Inserts an invite and reads its role in the same transaction (the insert's foreign-key check
   * holds a key-share lock on the role row, so it cannot disappear in between).
   */
  async insert(i: NewGroupInvite): Promise<WriteResult<CreatedInvite> | KeyIdTaken> {
    try {
      const created = await this.db.transaction().execute(async (trx) => {
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
        return { row, role };
      });
      return ok(created);
    } catch (err) {
      const state = sqlState(err);
      const constraint = constraintOf(err) ?? "";
      if (state === FOREIGN_KEY_VIOLATION && constraint.includes("parent_uid")) return missing("group", i.parentUid);
      if (state === FOREIGN_KEY_VIOLATION && constraint.includes("role_uid")) return missing("role", i.roleUid);
      if (state === UNIQUE_VIOLATION && constraint.includes("key_id")) return { kind: "key_id_taken" };
      throw err;
    }
  }

  get(uid: string, freshness?: Freshness): Promise<GroupInviteRow | undefined> {
    return getByUid(this.db, "group_invites", uid, freshness);
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "group_invites", uid);
  }

  /** The roles the given invites name, by uid: one query however many invites. */
  async rolesOf(rows: readonly GroupInviteRow[]): Promise<Map<string, InviteRole>> {
    const uids = [...new Set(rows.map((r) => r.role_uid))];
    if (uids.length === 0) return new Map();
    const roles = await this.db
      .selectFrom("roles")
      .select(["uid", "name", "description", "capabilities"])
      .where("uid", "in", uids)
      .execute();
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

  /** The invite with this key id (the public half of its code), used or not, expired or not. */
  getByKeyId(keyId: string): Promise<GroupInviteRow | undefined> {
    return this.db.selectFrom("group_invites").selectAll().where("key_id", "=", keyId).executeTakeFirst();
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
