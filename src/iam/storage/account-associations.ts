// Account associations aggregate: at most one per group. Its uid is the group's uid (a foreign
// key to groups, so a group with an association cannot be deleted) and parent_uid the group's
// parent (null for an organization). The provider blocks are stored as canonical JSON.
import type { UIDPFilter } from "../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../core/list.js";
import type { Db } from "./db.js";
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, sqlState } from "./errors.js";
import { deleteByUid, getByUid, updateByUid, type DeleteResult, type Row } from "./table.js";

export type AccountAssociationRow = Row<"account_associations">;

export interface AccountAssociationFields {
  name: string;
  description: string;
  /** { amazon?: ..., google?: ..., ... }: each present block's canonical JSON */
  providers: Record<string, unknown>;
}

export type NewAccountAssociation =
  | { kind: "ok"; row: AccountAssociationRow }
  | { kind: "missing_group" }
  | { kind: "exists" };

function columns(f: AccountAssociationFields) {
  return { name: f.name, description: f.description, providers: JSON.stringify(f.providers) };
}

export class AccountAssociationsRepository {
  constructor(private readonly db: Db) {}

  /** Inserts the association of group `uid` (whose parent is `parentUid`). */
  async insert(uid: string, parentUid: string | null, fields: AccountAssociationFields, now: Date): Promise<NewAccountAssociation> {
    try {
      const row = await this.db
        .insertInto("account_associations")
        .values({ uid, parent_uid: parentUid, ...columns(fields), create_time: now, update_time: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      return { kind: "ok", row };
    } catch (err) {
      const state = sqlState(err);
      if (state === FOREIGN_KEY_VIOLATION) return { kind: "missing_group" };
      if (state === UNIQUE_VIOLATION) return { kind: "exists" };
      throw err;
    }
  }

  get(uid: string): Promise<AccountAssociationRow | undefined> {
    return getByUid(this.db, "account_associations", uid);
  }

  /** Read-modify-write under a row lock; undefined when the association does not exist. */
  update(uid: string, change: (current: AccountAssociationRow) => AccountAssociationFields, now: Date): Promise<AccountAssociationRow | undefined> {
    return updateByUid(this.db, "account_associations", uid, (current) => ({ ...columns(change(current)), update_time: now }));
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "account_associations", uid);
  }

  listQuery(filter: { uidp?: UIDPFilter; name: string }) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("account_associations"), filter.uidp);
      if (filter.name !== "") q = q.where("name", "=", filter.name);
      return q;
    };
  }
}
