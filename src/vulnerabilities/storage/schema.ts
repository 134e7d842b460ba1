// The vulnerabilities module's table types (migration 007). Column names are snake_case as in SQL.
import type { ColumnType, Kysely } from "kysely";
import { viewOf, type Db } from "../../storage/db.js";
import type { Timestamp } from "../../storage/schema.js";
import type { EventKind, ParsedSeverity } from "./model.js";

type JsonColumn<T> = ColumnType<T, string, string>;

export interface AdvisoriesTable {
  uid: string;
  parent_uid: string;
  advisory_id: string;
  legacy_advisory_id: string | null;
  author: string;
  origin: string;
  artifact_name: string;
  artifact_type: string;
  artifact_architecture: string;
  component_name: string;
  component_type: string;
  component_location: string;
  aliases: string[];
  severities: JsonColumn<ParsedSeverity[]>;
  ecosystem: string;
  purl: string;
  osv: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  latest_event_type: EventKind;
  latest_event_time: Timestamp;
  fixed_versions: string[];
  first_event_time: Timestamp;
  search_text: string;
  source_digest: string;
  create_time: Timestamp;
  update_time: Timestamp;
}

export interface AdvisoryEventsTable {
  uid: string;
  advisory_uid: string;
  event_key: string;
  create_time: Timestamp;
  seq: number;
  kind: EventKind;
  data: JsonColumn<Record<string, unknown>>;
  author: string;
  reviewer: string;
  review_state: number;
  issue: string | null;
}

/** Advisories per publishing group and latest event type (migration 016), kept by the import. */
export interface AdvisoryCountsTable {
  uid: string;
  latest_event_type: EventKind;
  count: ColumnType<string, number, number>;
}

export interface VulnerabilityTables {
  advisories: AdvisoriesTable;
  advisory_counts: AdvisoryCountsTable;
  advisory_events: AdvisoryEventsTable;
}

/** The vulnerability tables as its repository sees them. */
export type VulnerabilityDb = Kysely<VulnerabilityTables>;

/** The shared database, seen through the vulnerability tables. */
export function vulnerabilityDb(db: Db): VulnerabilityDb {
  return viewOf<VulnerabilityTables>(db);
}
