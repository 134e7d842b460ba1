// Kysely table types. Column names are snake_case as in SQL.
import type { ColumnType, Generated } from "kysely";

type Timestamp = ColumnType<Date, Date, Date>;

export interface GroupsTable {
  uid: string;
  parent_uid: string | null;
  name: string;
  description: string;
  resource_limits: ColumnType<Record<string, number>, string, string>;
  verified: boolean;
  kind: number;
  status: number;
  create_time: Timestamp;
  update_time: Timestamp;
}

export interface ServerSecretsTable {
  name: string;
  secret: Buffer;
  create_time: Generated<Date>;
}

export interface Database {
  groups: GroupsTable;
  server_secrets: ServerSecretsTable;
}
