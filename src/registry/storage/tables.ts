// The registry's API tables (repos, tags, tag_history; migration 006). Column names are
// snake_case as in SQL; jsonb columns read as their JS values and are written as JSON text.
import type { ColumnType, Generated, Kysely, Selectable } from "kysely";
import type { JsonValue } from "@bufbuild/protobuf";
import { viewOf, type Db } from "../../storage/db.js";
import type { Json, Timestamp } from "../../storage/schema.js";

export interface ReposTable {
  uid: string;
  parent_uid: string;
  name: string;
  description: ColumnType<string, string | undefined, string>;
  catalog_tier: ColumnType<number, number | undefined, number>;
  bundles: Json<string[]>;
  aliases: Json<string[]>;
  active_tags: Json<string[]>;
  /** a SyncConfig in its proto3 JSON form */
  sync_config: ColumnType<JsonValue | null, string | null | undefined, string | null>;
  /** a CustomOverlay in its proto3 JSON form */
  custom_overlay: ColumnType<JsonValue | null, string | null | undefined, string | null>;
  readme: ColumnType<string, string | undefined, string>;
  public: ColumnType<boolean, boolean | undefined, boolean>;
  create_time: Timestamp;
  update_time: Timestamp;
}

export interface TagsTable {
  uid: string;
  repo_uid: string;
  name: string;
  digest: string;
  deprecated: ColumnType<boolean, boolean | undefined, boolean>;
  bundles: Json<string[]>;
  update_time: Timestamp;
}

/** Appended by the database (a trigger on tags), never written by the API. */
export interface TagHistoryTable {
  /** bigint: a string or a number, as the driver reads int8 */
  id: Generated<string | number>;
  repo_uid: string;
  tag: string;
  digest: string;
  update_time: Timestamp;
}

/** The registry's API tables. */
export interface RegistryTables {
  repos: ReposTable;
  tags: TagsTable;
  tag_history: TagHistoryTable;
}

/** The registry tables as its repositories see them. */
export type RegistryDb = Kysely<RegistryTables>;

/** The shared database, seen through the registry tables. */
export function registryDb(db: Db): RegistryDb {
  return viewOf<RegistryTables>(db);
}

/** What every registry repository starts from: the shared database, seen through the registry tables. */
export abstract class RegistryRepository {
  protected readonly db: RegistryDb;

  constructor(db: Db) {
    this.db = registryDb(db);
  }
}

/** A row of a registry table. */
export type Row<T extends keyof RegistryTables> = Selectable<RegistryTables[T]>;
