// Roles aggregate: built-in roles (no group) and custom roles under a group.
import { sql } from "kysely";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { IamRepository, type Row } from "./schema.js";
import { FOREIGN_KEY_VIOLATION, sqlState } from "../../storage/errors.js";
import { missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, getByUid, updateByUid } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";

export type RoleRow = Row<"roles">;

/** A built-in role as stored: fixed uid, no group. */
export interface BuiltinRoleRow {
  uid: string;
  name: string;
  description: string;
  capabilities: number[];
}

export interface RoleFields {
  name: string;
  description: string;
  capabilities: number[];
}

export class RolesRepository extends IamRepository {
  /**
   * Makes the built-in roles exactly what this version defines. Idempotent and safe for several
   * replicas starting at once; a changed definition is updated in place (same uid).
   */
  async ensureBuiltins(roles: readonly BuiltinRoleRow[], now: Date): Promise<void> {
    if (roles.length === 0) return;
    // Usually they are already exactly so: one read then, instead of a transaction of upserts
    // (each locks its row even when it changes nothing: ~40 ms of every embedded start).
    const stored = await this.db
      .selectFrom("roles")
      .select(["uid", "name", "description", "capabilities"])
      .where("parent_uid", "is", null)
      .where(
        "uid",
        "in",
        roles.map((r) => r.uid),
      )
      .execute();
    const byUid = new Map(stored.map((r) => [r.uid, r]));
    const same = (r: BuiltinRoleRow) => {
      const s = byUid.get(r.uid);
      return (
        s !== undefined &&
        s.name === r.name &&
        s.description === r.description &&
        s.capabilities.length === r.capabilities.length &&
        s.capabilities.every((c, i) => c === r.capabilities[i])
      );
    };
    if (roles.every(same)) return;
    await this.db.transaction().execute(async (trx) => {
      for (const r of roles) {
        await trx
          .insertInto("roles")
          .values({
            uid: r.uid,
            parent_uid: null,
            name: r.name,
            description: r.description,
            capabilities: r.capabilities,
            create_time: now,
            update_time: now,
          })
          .onConflict((oc) =>
            oc
              .column("uid")
              .doUpdateSet({ name: r.name, description: r.description, capabilities: r.capabilities, update_time: now })
              .where(
                sql<boolean>`(roles.name, roles.description, roles.capabilities)
                  is distinct from (${r.name}, ${r.description}, ${sql.val(r.capabilities)}::integer[])`,
              ),
          )
          .execute();
      }
    });
  }

  /** Inserts a custom role; missing when the parent group does not exist. */
  async insert(uid: string, parentUid: string, fields: RoleFields, now: Date): Promise<WriteResult<RoleRow>> {
    try {
      return ok(
        await this.db
          .insertInto("roles")
          .values({ uid, parent_uid: parentUid, ...fields, create_time: now, update_time: now })
          .returningAll()
          .executeTakeFirstOrThrow(),
      );
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return missing("group", parentUid);
      throw err;
    }
  }

  get(uid: string, freshness?: Freshness): Promise<RoleRow | undefined> {
    return getByUid(this.db, "roles", uid, freshness);
  }

  async update(uid: string, change: (current: RoleRow) => RoleFields, now: Date): Promise<WriteResult<RoleRow>> {
    return updated(
      await updateByUid(this.db, "roles", uid, (current) => ({ ...change(current), update_time: now })),
      "role",
      uid,
    );
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "roles", uid);
  }

  listQuery(filter: { uidp?: UIDPFilter; name: string }) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("roles"), filter.uidp);
      if (filter.name !== "") q = q.where("name", "=", filter.name);
      return q;
    };
  }
}
