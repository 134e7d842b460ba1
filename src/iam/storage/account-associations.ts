// Account associations aggregate: at most one per group. Its uid is the group's uid (a foreign
// key to groups, so a group with an association cannot be deleted) and parent_uid the group's
// parent (null for an organization). The provider blocks are stored as canonical JSON.
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { IamRepository, type Row } from "./schema.js";
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, sqlState } from "../../storage/errors.js";
import { conflict, missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, getByUid, updateByUid } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";

export type AccountAssociationRow = Row<"account_associations">;

export interface AccountAssociationFields {
  name: string;
  description: string;
  /** { amazon?: ..., google?: ..., ... }: each present block's canonical JSON */
  providers: Record<string, unknown>;
}

function columns(f: AccountAssociationFields) {
  return { name: f.name, description: f.description, providers: JSON.stringify(f.providers) };
}

export class AccountAssociationsRepository extends IamRepository {
  /** Inserts the association of group `uid` (whose parent is `parentUid`). */
  async insert(
    uid: string,
    parentUid: string | null,
    fields: AccountAssociationFields,
    now: Date,
  ): Promise<WriteResult<AccountAssociationRow>> {
    try {
      const row = await this.db
        .insertInto("account_associations")
        .values({ uid, parent_uid: parentUid, ...columns(fields), create_time: now, update_time: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      return ok(row);
    } catch (err) {
      const state = sqlState(err);
      if (state === FOREIGN_KEY_VIOLATION) return missing("group", uid);
      if (state === UNIQUE_VIOLATION)
        return conflict("account association", uid, `group ${uid} already has an account association`);
      throw err;
    }
  }

  get(uid: string, freshness?: Freshness): Promise<AccountAssociationRow | undefined> {
    return getByUid(this.db, "account_associations", uid, freshness);
  }

  /** Read-modify-write under a row lock; `change` may throw to refuse. */
  async update(
    uid: string,
    change: (current: AccountAssociationRow) => AccountAssociationFields,
    now: Date,
  ): Promise<WriteResult<AccountAssociationRow>> {
    const row = await updateByUid(this.db, "account_associations", uid, (current) => ({
      ...columns(change(current)),
      update_time: now,
    }));
    return updated(row, "account association", uid);
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
