// Repos aggregate: repositories inside a group. The parent link is a foreign key (a group with
// repos cannot be deleted) and (parent_uid, name) is unique; everything in a repo (tags, their
// history, manifests, blob links, uploads) goes with it. A repo's README is read on its own:
// rows and listings leave it out. Repos are created only here: by the Repos API (`insert`) or by
// a first push (`ensure`).
import type { JsonValue } from "@bufbuild/protobuf";
import { sql } from "kysely";
import { newChildUidp, parentOf } from "../../core/uidp.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { compiledOnce } from "../../storage/compiled.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, constraintOf, sqlState } from "../../storage/errors.js";
import { conflict, missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, takeFreshness, updateByUid, withFreshnessProbe } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";
import { RegistryRepository, type RegistryDb, type Row } from "./tables.js";

/** A repo without its README. */
export type RepoRow = Omit<Row<"repos">, "readme">;

/** Every column but the README, which only GetRepoReadme reads (it may be large). */
const REPO_COLUMNS = [
  "uid",
  "parent_uid",
  "name",
  "description",
  "catalog_tier",
  "bundles",
  "aliases",
  "active_tags",
  "sync_config",
  "custom_overlay",
  "public",
  "create_time",
  "update_time",
] as const satisfies readonly (keyof RepoRow)[];

/** What the API writes of a repo (sync_config and custom_overlay in their proto3 JSON form). */
export interface RepoFields {
  name: string;
  description: string;
  catalogTier: number;
  bundles: string[];
  aliases: string[];
  activeTags: string[];
  syncConfig: JsonValue | null;
  customOverlay: JsonValue | null;
}

export interface NewRepo extends Partial<Omit<RepoFields, "name">> {
  uid: string;
  parentUid: string;
  name: string;
  readme?: string;
  now: Date;
}

/** What the OCI distribution API needs of a repo: where it is, and whether anyone may pull it. */
export interface RepoRef {
  uid: string;
  parent_uid: string;
  name: string;
  public: boolean;
}

export interface RepoReadmeRow {
  uid: string;
  readme: string;
}

const jsonText = (value: unknown) => JSON.stringify(value);
const optionalJson = (value: JsonValue | null | undefined) =>
  value === undefined || value === null ? null : JSON.stringify(value);

function duplicate(parentUid: string, name: string): WriteResult<never> {
  return conflict("repo", parentUid, `a repo named "${name}" already exists in this group`);
}

const isNameConflict = (err: unknown) =>
  sqlState(err) === UNIQUE_VIOLATION && (constraintOf(err) ?? "").includes("name");

export class ReposRepository extends RegistryRepository {
  /** Inserts a repo: missing when the group does not exist, conflict when it has a repo of that name. */
  async insert(r: NewRepo): Promise<WriteResult<RepoRow>> {
    try {
      return ok(
        await this.db
          .insertInto("repos")
          .values({
            uid: r.uid,
            parent_uid: r.parentUid,
            name: r.name,
            description: r.description ?? "",
            catalog_tier: r.catalogTier ?? 0,
            bundles: jsonText(r.bundles ?? []),
            aliases: jsonText(r.aliases ?? []),
            active_tags: jsonText(r.activeTags ?? []),
            sync_config: optionalJson(r.syncConfig),
            custom_overlay: optionalJson(r.customOverlay),
            readme: r.readme ?? "",
            create_time: r.now,
            update_time: r.now,
          })
          .returning(REPO_COLUMNS)
          .executeTakeFirstOrThrow(),
      );
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return missing("group", r.parentUid);
      if (isNameConflict(err)) return duplicate(r.parentUid, r.name);
      throw err;
    }
  }

  async get(uid: string, freshness?: Freshness): Promise<RepoRow | undefined> {
    const query = this.db.selectFrom("repos").select(REPO_COLUMNS).where("uid", "=", uid);
    const row = await withFreshnessProbe(query, freshness).executeTakeFirst();
    return row && takeFreshness(row, freshness);
  }

  /** The repo named `name` in group `parentUid`. */
  findByName(parentUid: string, name: string): Promise<RepoRow | undefined> {
    return this.db
      .selectFrom("repos")
      .select(REPO_COLUMNS)
      .where("parent_uid", "=", parentUid)
      .where("name", "=", name)
      .executeTakeFirst();
  }

  /** Read-modify-write under a row lock; `change` may throw to refuse. A new name must be free in the group. */
  async update(uid: string, change: (current: RepoRow) => RepoFields, now: Date): Promise<WriteResult<RepoRow>> {
    let name = "";
    try {
      return updated(
        await updateByUid(this.db, "repos", uid, (current) => {
          const next = change(current);
          name = next.name;
          return {
            name: next.name,
            description: next.description,
            catalog_tier: next.catalogTier,
            bundles: jsonText(next.bundles),
            aliases: jsonText(next.aliases),
            active_tags: jsonText(next.activeTags),
            sync_config: optionalJson(next.syncConfig),
            custom_overlay: optionalJson(next.customOverlay),
            update_time: now,
          };
        }),
        "repo",
        uid,
      );
    } catch (err) {
      if (isNameConflict(err)) return duplicate(parentOf(uid) ?? "", name);
      throw err;
    }
  }

  /** Deletes the repo and everything in it (tags, manifests, blob links, uploads: all cascade). */
  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "repos", uid);
  }

  async getReadme(uid: string, freshness?: Freshness): Promise<RepoReadmeRow | undefined> {
    const query = this.db.selectFrom("repos").select(["uid", "readme"]).where("uid", "=", uid);
    const row = await withFreshnessProbe(query, freshness).executeTakeFirst();
    return row && takeFreshness(row, freshness);
  }

  /** Read-modify-write of the README under the repo's row lock; the repo counts as updated. */
  async updateReadme(uid: string, change: (current: string) => string, now: Date): Promise<WriteResult<RepoReadmeRow>> {
    const row = await updateByUid(this.db, "repos", uid, (current) => ({
      readme: change(current.readme),
      update_time: now,
    }));
    return updated(row && { uid: row.uid, readme: row.readme }, "repo", uid);
  }

  /** Makes a repo public (pulled without credentials) or private; update_time moves only on a change. */
  async setPublic(uid: string, isPublic: boolean, now: Date): Promise<WriteResult<RepoRow>> {
    const row = await this.db
      .updateTable("repos")
      .set({
        public: isPublic,
        update_time: sql<Date>`case when public = ${isPublic} then update_time else ${now}::timestamptz end`,
      })
      .where("uid", "=", uid)
      .returning(REPO_COLUMNS)
      .executeTakeFirst();
    return updated(row, "repo", uid);
  }

  /** FROM + WHERE of a repo listing, for the list engine: every column but the README. */
  listQuery(filter: { uidp?: UIDPFilter; name?: string }) {
    return () => {
      const columns = this.db.selectFrom("repos").select(REPO_COLUMNS);
      let q = applyUidpFilter(this.db.selectFrom(columns.as("repos")), filter.uidp);
      if (filter.name) q = q.where("name", "=", filter.name);
      return q;
    };
  }

  // --- the OCI distribution API's view ---

  /** The repo named `name` in group `parentUid`, as name resolution needs it. */
  async ref(parentUid: string, name: string): Promise<RepoRef | undefined> {
    return (await repoRef(this.db, parentUid, name))[0];
  }

  /**
   * The repo, created by the first push (a new uid, every other field its default); concurrent
   * first pushes agree on one. Undefined when the group does not exist (any more).
   */
  async ensure(parentUid: string, name: string, now: Date): Promise<RepoRef | undefined> {
    try {
      await this.db
        .insertInto("repos")
        .values({ uid: newChildUidp(parentUid), parent_uid: parentUid, name, create_time: now, update_time: now })
        .onConflict((oc) => oc.columns(["parent_uid", "name"]).doNothing())
        .execute();
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return undefined;
      throw err;
    }
    return this.ref(parentUid, name);
  }

  /** Every repo under the given subtrees ("all": everywhere): its path and group. */
  catalog(visibility: "all" | readonly string[]): Promise<{ name: string; parent_uid: string }[]> {
    const q = this.db.selectFrom("repos").select(["name", "parent_uid"]);
    if (visibility === "all") return q.execute();
    const escaped = (uid: string) => uid.replace(/[\\%_]/g, "\\$&");
    return q.where((eb) => eb.or(visibility.map((v) => eb("uid", "like", `${escaped(v)}/%`)))).execute();
  }
}

/** Every /v2/ request under a name resolves it: compiled once. */
const repoRef = compiledOnce((db: RegistryDb, parentUid: string, name: string) =>
  db
    .selectFrom("repos")
    .select(["uid", "parent_uid", "name", "public"])
    .where("parent_uid", "=", parentUid)
    .where("name", "=", name),
);
