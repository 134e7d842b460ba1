// Tags aggregate: a name in a repo pointing at a digest. (repo_uid, name) is unique; a tag goes
// with its repo. Every create or move is appended to tag_history by the database itself,
// whichever path wrote it (this repository, or a push moving the tag with its own SQL).
import { sql } from "kysely";
import { newChildUidp } from "../../core/uidp.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, constraintOf, sqlState } from "../../storage/errors.js";
import { conflict, missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, getByUid } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";
import { RegistryRepository, type RegistryDb, type Row } from "./tables.js";

export type TagRow = Row<"tags">;

export interface NewTag {
  uid: string;
  repoUid: string;
  name: string;
  digest: string;
  deprecated?: boolean;
  bundles?: string[];
  now: Date;
}

export interface TagFilter {
  uidp?: UIDPFilter;
  name: string;
  digest: string;
  updatedSince?: Date;
}

export class TagsRepository extends RegistryRepository {
  /** Inserts a tag: missing when the repo does not exist, conflict when the repo has a tag of that name. */
  async insert(t: NewTag): Promise<WriteResult<TagRow>> {
    try {
      return ok(
        await this.db
          .insertInto("tags")
          .values({
            uid: t.uid,
            repo_uid: t.repoUid,
            name: t.name,
            digest: t.digest,
            deprecated: t.deprecated ?? false,
            bundles: JSON.stringify(t.bundles ?? []),
            update_time: t.now,
          })
          .returningAll()
          .executeTakeFirstOrThrow(),
      );
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return missing("repo", t.repoUid);
      if (sqlState(err) === UNIQUE_VIOLATION && (constraintOf(err) ?? "").includes("name"))
        return conflict("tag", t.repoUid, `a tag named "${t.name}" already exists in this repo`);
      throw err;
    }
  }

  get(uid: string, freshness?: Freshness): Promise<TagRow | undefined> {
    return getByUid(this.db, "tags", uid, freshness);
  }

  findByName(repoUid: string, name: string): Promise<TagRow | undefined> {
    return this.db
      .selectFrom("tags")
      .selectAll()
      .where("repo_uid", "=", repoUid)
      .where("name", "=", name)
      .executeTakeFirst();
  }

  /** Sets or lifts a tag's deprecation; update_time moves only on a change. */
  async setDeprecated(uid: string, deprecated: boolean, now: Date): Promise<WriteResult<TagRow>> {
    const row = await this.db
      .updateTable("tags")
      .set((eb) => ({
        deprecated,
        update_time: eb.case().when("deprecated", "=", deprecated).then(eb.ref("update_time")).else(now).end(),
      }))
      .where("uid", "=", uid)
      .returningAll()
      .executeTakeFirst();
    return updated(row, "tag", uid);
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "tags", uid);
  }

  /**
   * FROM + WHERE of a tag listing, for the list engine. A tag's parent is its repo (repo_uid, not
   * parent_uid): children_of names a repo, and no tag is a root.
   */
  listQuery(filter: TagFilter) {
    return () => {
      const uidp = filter.uidp;
      let q = applyUidpFilter(this.db.selectFrom("tags"), uidp && { ...uidp, childrenOf: "", inRoot: false });
      if (uidp?.childrenOf) q = q.where("repo_uid", "=", uidp.childrenOf);
      if (uidp?.inRoot) q = q.where((eb) => eb.val(false));
      if (filter.name !== "") q = q.where("name", "=", filter.name);
      if (filter.digest !== "") q = q.where("digest", "=", filter.digest);
      if (filter.updatedSince) q = q.where("update_time", ">=", filter.updatedSince);
      return q;
    };
  }

  // --- the OCI distribution API's view ---

  /** The digest the tag `name` of a repo points at. */
  async digestOf(repoUid: string, name: string): Promise<string | undefined> {
    const r = await sql<{ digest: string }>`
      select digest from tags where repo_uid = ${repoUid} and name = ${name}`.execute(this.db);
    return r.rows[0]?.digest;
  }

  /** Tag names after `last`, in byte order; one more than `limit` tells whether more remain. */
  async names(repoUid: string, last: string | undefined, limit: number): Promise<string[]> {
    // One JSON array instead of a row per tag: thousands of rows cost PGlite far more than one value.
    const r = await sql<{ names: string[] | string | null }>`
      select json_agg(name order by name) as names from (
        select name from tags where repo_uid = ${repoUid} ${last === undefined ? sql`` : sql`and name > ${last}`}
        order by name limit ${limit}) page`.execute(this.db);
    const names = r.rows[0]?.names ?? [];
    return typeof names === "string" ? (JSON.parse(names) as string[]) : names;
  }

  /**
   * Points `tag` at `digest` (creating it with a fresh uid), in `db` (a push's transaction); the
   * tag_history trigger records the move.
   */
  async move(repoUid: string, tag: string, digest: string, now: Date, db: RegistryDb = this.db): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await sql`
          insert into tags (uid, repo_uid, name, digest, update_time)
          values (${newChildUidp(repoUid)}, ${repoUid}, ${tag}, ${digest}, ${now})
          on conflict (repo_uid, name) do update set digest = excluded.digest, update_time = excluded.update_time
          where tags.digest is distinct from excluded.digest`.execute(db);
        return;
      } catch (err) {
        // A uid collision (64 random bits) is retried; anything else is not ours to handle.
        if (sqlState(err) !== UNIQUE_VIOLATION || attempt > 2) throw err;
      }
    }
  }

  /** Deletes the tag `name` of a repo; false when there was none. */
  async deleteByName(repoUid: string, name: string): Promise<boolean> {
    const r = await sql`delete from tags where repo_uid = ${repoUid} and name = ${name}`.execute(this.db);
    return Number(r.numAffectedRows ?? 0) > 0;
  }

  /** Where a tag pointed, oldest first, within [start, end]. */
  async history(
    repoUid: string,
    tag: string,
    start: Date | undefined,
    end: Date | undefined,
    limit: number,
  ): Promise<{ digest: string; update_time: Date }[]> {
    const r = await sql<{ digest: string; update_time: Date }>`
      select digest, update_time from tag_history
      where repo_uid = ${repoUid} and tag = ${tag}
        ${start ? sql`and update_time >= ${start}` : sql``} ${end ? sql`and update_time <= ${end}` : sql``}
      order by update_time, id limit ${limit}`.execute(this.db);
    return r.rows;
  }
}
