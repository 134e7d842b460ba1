// Column types every module's tables use, and the platform's own table (server_secrets).
import type { ColumnType, Generated } from "kysely";

export type Timestamp = ColumnType<Date, Date, Date>;
/** jsonb: read as a value, written as its JSON text */
export type Json<T = unknown> = ColumnType<T, string, string>;

export interface ServerSecretsTable {
  name: string;
  secret: Buffer;
  create_time: Generated<Date>;
}

/** The tables of the platform itself (not of a feature). */
export interface StorageTables {
  server_secrets: ServerSecretsTable;
}
