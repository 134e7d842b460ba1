// The registry's tables (migration 006): the API's (repos, tags, tag_history) and the content the
// OCI distribution API stores (blobs, repo_blobs, manifests, manifest_blobs, manifest_children,
// uploads). Column names are snake_case as in SQL; jsonb columns read as their JS values and are
// written as JSON text; bigint columns read as the driver reads int8 (a string or a number).
import type { ColumnType, ExpressionBuilder, Generated, Kysely, Selectable } from "kysely";
import type { JsonValue } from "@bufbuild/protobuf";
import { viewOf, type Db } from "../../storage/db.js";
import type { Timestamp } from "../../storage/schema.js";

/** jsonb with a default: read as a value, written as its JSON text, left out for the default */
type JsonOrDefault<T> = ColumnType<T, string | undefined, string>;
/** bigint: read as a string or a number (as the driver reads int8), written as a number */
type Int8<Insert extends number | undefined = number> = ColumnType<string | number, Insert, number>;

export interface ReposTable {
  uid: string;
  parent_uid: string;
  name: string;
  description: ColumnType<string, string | undefined, string>;
  catalog_tier: ColumnType<number, number | undefined, number>;
  bundles: JsonOrDefault<string[]>;
  aliases: JsonOrDefault<string[]>;
  active_tags: JsonOrDefault<string[]>;
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
  bundles: JsonOrDefault<string[]>;
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

/** Complete blobs (their bytes are in the blob store); touch_time: the last push or mount. */
export interface BlobsTable {
  digest: string;
  size: Int8;
  create_time: Timestamp;
  touch_time: Timestamp;
}

/** A blob held by a repo: pushed or mounted there. */
export interface RepoBlobsTable {
  repo_uid: string;
  digest: string;
  link_time: Timestamp;
}

export interface ManifestsTable {
  repo_uid: string;
  digest: string;
  media_type: string;
  /** the manifest's artifactType, else its config's media type */
  artifact_type: string | null;
  subject_digest: string | null;
  annotations: ColumnType<Record<string, string> | null, string | null, string | null>;
  size: Int8;
  content: Uint8Array;
  create_time: Timestamp;
}

/** The blobs (config and layers) a manifest needs. */
export interface ManifestBlobsTable {
  repo_uid: string;
  manifest_digest: string;
  blob_digest: string;
}

/** The manifests an index needs. */
export interface ManifestChildrenTable {
  repo_uid: string;
  manifest_digest: string;
  child_digest: string;
}

/** Upload sessions: the bytes are staged in the blob store, the acknowledged size is here. */
export interface UploadsTable {
  /** a uuid */
  id: string;
  repo_uid: string;
  size: Int8<number | undefined>;
  create_time: Timestamp;
  update_time: Timestamp;
}

/** The registry's tables. */
export interface RegistryTables {
  repos: ReposTable;
  tags: TagsTable;
  tag_history: TagHistoryTable;
  blobs: BlobsTable;
  repo_blobs: RepoBlobsTable;
  manifests: ManifestsTable;
  manifest_blobs: ManifestBlobsTable;
  manifest_children: ManifestChildrenTable;
  uploads: UploadsTable;
}

/** The registry tables as its repositories see them (a transaction is one too). */
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

/** What a condition on table `T` under alias `A` is built with (a statement's own row, for correlated subqueries). */
export type AliasedBuilder<T extends keyof RegistryTables, A extends string> = ExpressionBuilder<
  RegistryTables & { [K in A]: RegistryTables[T] },
  A
>;
