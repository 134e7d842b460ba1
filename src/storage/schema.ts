// Column types every module's tables use, and the platform's own table (server_secrets).
import type { ColumnType, Generated } from "kysely";

export type Timestamp = ColumnType<Date, Date, Date>;
/** jsonb: read as a value, written as its JSON text */
export type Json<T = unknown> = ColumnType<T, string, string>;

export interface ServerSecretsTable {
  name: string;
  /** plaintext, as versions before migration 012 wrote it; sealed and cleared on first read */
  secret: ColumnType<Buffer | null, Buffer | null | undefined, Buffer | null>;
  /** the secret sealed under the key-encryption key (storage/server-secrets.ts) */
  secret_jwe: ColumnType<string | null, string | null | undefined, string | null>;
  create_time: Generated<Date>;
}

/** The tables of the platform itself (not of a feature). */
export interface StorageTables {
  server_secrets: ServerSecretsTable;
}
