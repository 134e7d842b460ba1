// The images module's table types (migration 014). Column names are snake_case as in SQL.
import type { ColumnType, Generated, Kysely } from "kysely";
import { viewOf, type Db } from "../../storage/db.js";
import type { ImageRuntimeConfig, InstalledPackage } from "./inventory-types.js";

type JsonColumn<T> = ColumnType<T, string, string>;
type Time = ColumnType<Date, Date, Date>;

export interface ImageInventoriesTable {
  digest: string;
  state: ColumnType<"pending" | "done" | "failed", "pending" | "done" | "failed" | undefined>;
  attempts: ColumnType<number, number | undefined, number>;
  lease_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
  lease_token: ColumnType<string | null, string | null | undefined, string | null>;
  error: ColumnType<string | null, string | null | undefined, string | null>;
  error_kind: ColumnType<
    "image" | "transient" | null,
    "image" | "transient" | null | undefined,
    "image" | "transient" | null
  >;
  os: ColumnType<string, string | undefined, string>;
  architecture: ColumnType<string, string | undefined, string>;
  variant: ColumnType<string, string | undefined, string>;
  created: ColumnType<Date | null, Date | null | undefined, Date | null>;
  config: ColumnType<ImageRuntimeConfig | null, string | null | undefined, string | null>;
  size_compressed: ColumnType<string | null, number | null | undefined, number | null>;
  size_uncompressed: ColumnType<string | null, number | null | undefined, number | null>;
  package_source: ColumnType<string, string | undefined, string>;
  distro: ColumnType<string, string | undefined, string>;
  distro_version: ColumnType<string, string | undefined, string>;
  packages: ColumnType<InstalledPackage[], string | undefined, string>;
  discover_time: Time;
  index_time: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface ImagePackagesTable {
  digest: string;
  type: string;
  name: string;
  version: string;
  origin: string;
}

export interface VulnReportsTable {
  id: Generated<string>;
  repo_uid: string;
  digest: string;
  scanner_name: number;
  scanner_version: string;
  origin: "bulwark" | "uploaded";
  db_build_time: Date | null;
  created_at: Time;
  vulnerabilities: JsonColumn<Record<string, unknown>[]>;
  findings_digest: string;
  raw: string | null;
  creator: string | null;
}

export interface ImageReportQueueTable {
  repo_uid: string;
  digest: string;
  queue_time: Time;
  refresh_names: ColumnType<string[], string[] | undefined, string[]>;
  refresh_purls: ColumnType<string[], string[] | undefined, string[]>;
}

export interface AdvisoryChangesTable {
  id: Generated<string>;
  names: string[];
  purls: string[];
  change_time: Time;
}

export interface ImagesStateTable {
  name: string;
  value: string;
}

export interface ImagesTables {
  image_inventories: ImageInventoriesTable;
  image_packages: ImagePackagesTable;
  vuln_reports: VulnReportsTable;
  image_report_queue: ImageReportQueueTable;
  advisory_changes: AdvisoryChangesTable;
  images_state: ImagesStateTable;
}

/** The images tables as its repositories see them. */
export type ImagesDb = Kysely<ImagesTables>;

/** The shared database, seen through the images tables. */
export function imagesDb(db: Db): ImagesDb {
  return viewOf<ImagesTables>(db);
}
