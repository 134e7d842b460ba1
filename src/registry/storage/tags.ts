// Tags aggregate: a name in a repo pointing at a digest. (repo_uid, name) is unique; a tag goes
// with its repo. Every write of a tag is here, the Tags API's and the OCI API's alike (a push
// moves its tag by a statement made here, inside the push's own; a manifest delete removes its
// tags in the caller's transaction); every
// create or move is appended to tag_history by the database itself.
import { sql, type RawBuilder, type SelectQueryBuilder } from "kysely";
import { newChildUidp } from "../../core/uidp.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { compiledOnce } from "../../storage/compiled.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, constraintOf, sqlState } from "../../storage/errors.js";
import { conflict, missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, getByUid } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";
import { RegistryRepository, type RegistryDb, type RegistryTables, type Row } from "./tables.js";

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
    return (await digestOfTag(this.db, repoUid, name))[0]?.digest;
  }

  /** Tag names after `last`, in byte order; one more than `limit` tells whether more remain. */
  async names(repoUid: string, last: string | undefined, limit: number): Promise<string[]> {
    const rows =
      last === undefined
        ? await firstTagNames(this.db, repoUid, limit)
        : await tagNamesAfter(this.db, repoUid, last, limit);
    const names = rows[0]?.names ?? [];
    return typeof names === "string" ? (JSON.parse(names) as string[]) : names;
  }

  /**
   * The statement that points `tag` at `digest`, creating it with a fresh uid (a collision of its
   * 64 random bits fails as a unique violation of `tags_pkey`: run it again), for a push's one
   * statement to include as a data-modifying WITH query: once, or once for each row of the WITH
   * query `source` (none: nothing). A tag that already points at `digest` is left as it is (no
   * write, no history); the tag_history trigger records a create or a move.
   */
  moveStatement(
    repoUid: string,
    tag: string,
    digest: string,
    now: Date,
    source: RawBuilder<unknown> = sql`(select 1) as once`,
  ): RawBuilder<unknown> {
    // Every value cast: an INSERT … SELECT's parameters are not typed by the columns they fill.
    return sql`insert into tags (uid, repo_uid, name, digest, update_time)
      select ${newChildUidp(repoUid)}::text, ${repoUid}::text, ${tag}::text, ${digest}::text, ${now}::timestamptz from ${source}
      on conflict (repo_uid, name) do update set digest = excluded.digest, update_time = excluded.update_time
        where tags.digest is distinct from excluded.digest`;
  }

  /** Deletes the tag `name` of a repo; false when there was none. */
  async deleteByName(repoUid: string, name: string): Promise<boolean> {
    const r = await this.db
      .deleteFrom("tags")
      .where("repo_uid", "=", repoUid)
      .where("name", "=", name)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  }

  /** Deletes every tag of a repo pointing at `digest`, in `db` (a manifest delete's transaction). */
  async deleteByDigest(repoUid: string, digest: string, db: RegistryDb = this.db): Promise<void> {
    await db.deleteFrom("tags").where("repo_uid", "=", repoUid).where("digest", "=", digest).execute();
  }

  /** Where a tag pointed, oldest first, within [start, end]. */
  history(
    repoUid: string,
    tag: string,
    start: Date | undefined,
    end: Date | undefined,
    limit: number,
  ): Promise<{ digest: string; update_time: Date }[]> {
    return this.db
      .selectFrom("tag_history")
      .select(["digest", "update_time"])
      .where("repo_uid", "=", repoUid)
      .where("tag", "=", tag)
      .$if(start !== undefined, (q) => q.where("update_time", ">=", start!))
      .$if(end !== undefined, (q) => q.where("update_time", "<=", end!))
      .orderBy("update_time")
      .orderBy("id")
      .limit(limit)
      .execute();
  }
}

// The reads of manifest GETs by tag and of tags/list: compiled once.

const digestOfTag = compiledOnce((db: RegistryDb, repoUid: string, name: string) =>
  db.selectFrom("tags").select("digest").where("repo_uid", "=", repoUid).where("name", "=", name),
);

/** One JSON array instead of a row per tag: thousands of rows cost PGlite far more than one value. */
function namesOf<Page extends SelectQueryBuilder<RegistryTables, "tags", { name: string }>>(
  db: RegistryDb,
  page: Page,
) {
  return db.selectFrom(page.as("page")).select(sql<string[] | string | null>`json_agg(name order by name)`.as("names"));
}

const firstTagNames = compiledOnce((db: RegistryDb, repoUid: string, limit: number) =>
  namesOf(db, db.selectFrom("tags").select("name").where("repo_uid", "=", repoUid).orderBy("name").limit(limit)),
);

const tagNamesAfter = compiledOnce((db: RegistryDb, repoUid: string, last: string, limit: number) =>
  namesOf(
    db,
    db
      .selectFrom("tags")
      .select("name")
      .where("repo_uid", "=", repoUid)
      .where("name", ">", last)
      .orderBy("name")
      .limit(limit),
  ),
);
