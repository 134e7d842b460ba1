// Groups aggregate: the group tree. Parent links are foreign keys (on delete restrict), so the
// database itself refuses orphans and deletes of non-empty groups, even under concurrency.
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { sql } from "kysely";
import { compiledOnce } from "../../storage/compiled.js";
import { applyUidpFilter, confinedSubtree } from "../../storage/list-query.js";
import { IamRepository, type IamDb, type Row } from "./schema.js";
import { FOREIGN_KEY_VIOLATION, constraintOf, sqlState } from "../../storage/errors.js";
import { missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, getByUid, updateByUid } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";

export type GroupRow = Row<"groups">;

export interface NewGroup {
  uid: string;
  parentUid: string | null;
  name: string;
  description: string;
  kind: number;
  now: Date;
  /** bind this identity to this role at the new group, in the same transaction */
  owner?: { bindingUid: string; identityUid: string; roleUid: string };
}

/** A group as others address it: its uid and its name. */
export type GroupRef = Pick<GroupRow, "uid" | "name">;

export interface GroupChanges {
  name: string;
  description: string;
  verified: boolean;
  kind: number;
}

export class GroupsRepository extends IamRepository {
  /** Inserts a group (and its owner's binding); missing when the parent does not exist. */
  async insert(g: NewGroup): Promise<WriteResult<GroupRow>> {
    try {
      const row = await this.db.transaction().execute(async (trx) => {
        const row = await trx
          .insertInto("groups")
          .values({
            uid: g.uid,
            parent_uid: g.parentUid,
            name: g.name,
            description: g.description,
            kind: g.kind,
            verified: false,
            status: 0,
            resource_limits: "{}",
            create_time: g.now,
            update_time: g.now,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        if (g.owner) {
          await trx
            .insertInto("role_bindings")
            .values({
              uid: g.owner.bindingUid,
              parent_uid: g.uid,
              identity_uid: g.owner.identityUid,
              role_uid: g.owner.roleUid,
              create_time: g.now,
              update_time: g.now,
            })
            .execute();
        }
        return row;
      });
      return ok(row);
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION && constraintOf(err)?.includes("parent_uid"))
        return missing("group", g.parentUid ?? "");
      throw err;
    }
  }

  get(uid: string, freshness?: Freshness): Promise<GroupRow | undefined> {
    return getByUid(this.db, "groups", uid, freshness);
  }

  /** Read-modify-write under a row lock; `change` may throw to refuse. */
  async update(uid: string, change: (current: GroupRow) => GroupChanges, now: Date): Promise<WriteResult<GroupRow>> {
    return updated(
      await updateByUid(this.db, "groups", uid, (current) => ({ ...change(current), update_time: now })),
      "group",
      uid,
    );
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "groups", uid);
  }

  /**
   * The total of a listing of one group's children or subtree (and nothing else), from the counts
   * the database maintains (migration 010); undefined for any other filter.
   */
  maintainedCount(filter: { uidp?: UIDPFilter; name: string }) {
    const f = filter.uidp;
    if (!f || filter.name !== "" || f.ancestorsOf !== "" || f.inRoot || f.ids.length > 0) return undefined;
    if ((f.childrenOf === "") === (f.descendantsOf === "")) return undefined; // neither, or both
    const subtree = confinedSubtree(f)!;
    // descendants_of includes the group itself
    const count = f.childrenOf ? sql<string>`children` : sql<string>`descendants + 1`;
    return {
      subtree,
      query: () => this.db.selectFrom("group_counts").select(count.as("count")).where("uid", "=", subtree),
    };
  }

  /** FROM + WHERE of a group listing, for the list engine. */
  listQuery(filter: { uidp?: UIDPFilter; name: string }) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("groups"), filter.uidp);
      if (filter.name !== "") q = q.where("name", "=", filter.name);
      return q;
    };
  }

  // Groups by name or uid, for the group directory (exports.ts).

  /** Root groups whose uid or name is `segment`, by uid, at most two (a name may be shared). */
  rootsByUidOrName(segment: string): Promise<GroupRef[]> {
    return rootsByUidOrName(this.db, segment, segment);
  }

  /** The one child group of `parent` whose name or last uid segment is `segment`. */
  async childByNameOrSegment(parent: string, segment: string): Promise<GroupRef | undefined> {
    const rows = await childByUidOrName(this.db, parent, `${parent}/${segment}`, segment);
    return rows.length === 1 ? rows[0] : undefined;
  }

  /** The groups with these uids (any missing are left out). */
  async byUids(uids: readonly string[]): Promise<GroupRef[]> {
    if (!uids.length) return [];
    return this.db.selectFrom("groups").select(["uid", "name"]).where("uid", "in", uids).execute();
  }

  /** How many root groups carry each of `names` (names no root carries are absent). */
  async rootNameCounts(names: readonly string[]): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    if (!names.length) return counts;
    const rows = await this.db
      .selectFrom("groups")
      .select((eb) => ["name", eb.fn.countAll<string | number>().as("n")])
      .where("parent_uid", "is", null)
      .where("name", "in", names)
      .groupBy("name")
      .execute();
    for (const row of rows) counts.set(row.name, Number(row.n));
    return counts;
  }
}

// The group directory's lookups resolve every registry name: compiled once.
const rootsByUidOrName = compiledOnce((db: IamDb, uid: string, name: string) =>
  db
    .selectFrom("groups")
    .select(["uid", "name"])
    .where("parent_uid", "is", null)
    .where((eb) => eb.or([eb("uid", "=", uid), eb("name", "=", name)]))
    .orderBy("uid")
    .limit(2),
);
const childByUidOrName = compiledOnce((db: IamDb, parent: string, uid: string, name: string) =>
  db
    .selectFrom("groups")
    .select(["uid", "name"])
    .where("parent_uid", "=", parent)
    .where((eb) => eb.or([eb("uid", "=", uid), eb("name", "=", name)]))
    .orderBy("uid")
    .limit(2),
);
