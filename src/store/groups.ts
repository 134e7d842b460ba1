// Groups aggregate: the group tree. Parent links are foreign keys (on delete restrict), so the
// database itself refuses orphans and deletes of non-empty groups, even under concurrency.
import { sql, type Selectable } from "kysely";
import type { UIDPFilter } from "../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../core/list.js";
import type { Db } from "./db.js";
import type { GroupsTable } from "./schema.js";
import { FOREIGN_KEY_VIOLATION, constraintOf, sqlState } from "./errors.js";

export type GroupRow = Selectable<GroupsTable>;

export interface NewGroup {
  uid: string;
  parentUid: string | null;
  name: string;
  description: string;
  kind: number;
  now: Date;
}

export interface GroupChanges {
  name: string;
  description: string;
  verified: boolean;
  kind: number;
}

export type DeleteResult = { kind: "deleted" } | { kind: "not_found" } | { kind: "not_empty"; blockedBy: string[] };

interface Dependent {
  table: string;
  column: string;
}

export class GroupsRepository {
  #dependents: Promise<Dependent[]> | undefined;

  constructor(private readonly db: Db) {}

  /** Inserts a group; returns undefined when the parent does not exist. */
  async insert(g: NewGroup): Promise<GroupRow | undefined> {
    try {
      return await this.db
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
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION && constraintOf(err)?.includes("parent_uid")) return undefined;
      throw err;
    }
  }

  async get(uid: string): Promise<GroupRow | undefined> {
    return this.db.selectFrom("groups").selectAll().where("uid", "=", uid).executeTakeFirst();
  }

  /** Read-modify-write under a row lock; undefined when the group does not exist. */
  async update(uid: string, change: (current: GroupRow) => GroupChanges, now: Date): Promise<GroupRow | undefined> {
    return this.db.transaction().execute(async (trx) => {
      const current = await trx.selectFrom("groups").selectAll().where("uid", "=", uid).forUpdate().executeTakeFirst();
      if (!current) return undefined;
      const next = change(current);
      return trx
        .updateTable("groups")
        .set({ ...next, update_time: now })
        .where("uid", "=", uid)
        .returningAll()
        .executeTakeFirstOrThrow();
    });
  }

  async delete(uid: string): Promise<DeleteResult> {
    const dependents = await this.dependents();
    try {
      return await this.db.transaction().execute(async (trx) => {
        // FOR UPDATE conflicts with the FOR KEY SHARE lock a concurrent child insert takes on the
        // parent row, so the check below cannot race with a new child.
        const current = await trx.selectFrom("groups").select("uid").where("uid", "=", uid).forUpdate().executeTakeFirst();
        if (!current) return { kind: "not_found" } as const;
        const blockedBy = await this.blockers(trx, dependents, uid);
        if (blockedBy.length > 0) return { kind: "not_empty", blockedBy } as const;
        await trx.deleteFrom("groups").where("uid", "=", uid).execute();
        return { kind: "deleted" } as const;
      });
    } catch (err) {
      if (sqlState(err) !== FOREIGN_KEY_VIOLATION) throw err;
      // A dependent the check did not know about: report what the database says now.
      const blockedBy = await this.blockers(this.db, dependents, uid);
      return { kind: "not_empty", blockedBy: blockedBy.length ? blockedBy : ["child resources"] };
    }
  }

  private async blockers(db: Db, dependents: Dependent[], uid: string): Promise<string[]> {
    if (dependents.length === 0) return [];
    const checks = dependents.map(
      (d) => sql<string>`select ${d.table}::text as label where exists (select 1 from ${sql.table(d.table)} where ${sql.ref(d.column)} = ${uid})`,
    );
    const result = await sql<{ label: string }>`${sql.join(checks, sql` union all `)}`.execute(db);
    return result.rows.map((r) => `child ${r.label.replace(/_/g, " ")}`);
  }

  /** Every table whose foreign key references a group, read from the catalog once. */
  private dependents(): Promise<Dependent[]> {
    this.#dependents ??= sql<Dependent>`
      select cl.relname::text as table, a.attname::text as column
      from pg_constraint c
      join pg_class cl on cl.oid = c.conrelid
      join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
      where c.contype = 'f' and c.confrelid = 'groups'::regclass
      order by cl.relname, a.attname`
      .execute(this.db)
      .then((r) => r.rows);
    return this.#dependents;
  }

  /** FROM + WHERE of a group listing, for the list engine. */
  listQuery(filter: { uidp?: UIDPFilter; name: string }) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("groups"), filter.uidp);
      if (filter.name !== "") q = q.where("name", "=", filter.name);
      return q;
    };
  }
}
