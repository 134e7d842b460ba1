// The IAM module's table types. Column names are snake_case as in SQL.
import type { ColumnType, Kysely, Selectable } from "kysely";
import { viewOf, type Db } from "../../storage/db.js";
import type { Json, Timestamp } from "../../storage/schema.js";

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

export interface IdentitiesTable {
  uid: string;
  parent_uid: string | null;
  name: string;
  description: string;
  company: string;
  email: string;
  email_unverified: string;
  relationship_type: number;
  relationship: Json;
  issuer: string | null;
  subject: string | null;
  last_seen_time: Timestamp;
  create_time: Timestamp;
  update_time: Timestamp;
}

export interface RolesTable {
  uid: string;
  parent_uid: string | null;
  name: string;
  description: string;
  capabilities: number[];
  create_time: Timestamp;
  update_time: Timestamp;
}

export interface RoleBindingsTable {
  uid: string;
  parent_uid: string;
  identity_uid: string;
  role_uid: string;
  create_time: Timestamp;
  update_time: Timestamp;
}

export interface IdentityProvidersTable {
  uid: string;
  parent_uid: string;
  name: string;
  description: string;
  default_role_uid: string;
  oidc: Json | null;
  client_secret_encrypted: string | null;
  create_time: Timestamp;
  update_time: Timestamp;
}

export interface AccountAssociationsTable {
  uid: string;
  parent_uid: string | null;
  name: string;
  description: string;
  providers: Json;
  create_time: Timestamp;
  update_time: Timestamp;
}

export interface GroupInvitesTable {
  uid: string;
  parent_uid: string;
  role_uid: string;
  email: string;
  single_use: boolean;
  key_id: string;
  code_hash: Buffer;
  expiration_time: Timestamp;
  used_time: Date | null;
  create_time: Timestamp;
}

/** The authorization change counter (migration 009): one row, moved by triggers only. */
export interface AuthzEpochTable {
  singleton: ColumnType<boolean, never, never>;
  /** bigint: read as text where compared */
  value: ColumnType<string, never, never>;
}

/** Each group's counts of children and descendants (migration 010): maintained by triggers, never written by the server. */
export interface GroupCountsTable {
  uid: string;
  children: string;
  descendants: string;
}

/** The IAM module's tables: every table its migrations make (but server_secrets, the platform's). */
export interface IamTables {
  groups: GroupsTable;
  identities: IdentitiesTable;
  roles: RolesTable;
  role_bindings: RoleBindingsTable;
  identity_providers: IdentityProvidersTable;
  account_associations: AccountAssociationsTable;
  group_invites: GroupInvitesTable;
  authz_epoch: AuthzEpochTable;
  group_counts: GroupCountsTable;
}

/** The IAM tables as its repositories see them. */
export type IamDb = Kysely<IamTables>;

/** The shared database, seen through the IAM tables. */
export function iamDb(db: Db): IamDb {
  return viewOf<IamTables>(db);
}

/** What every IAM repository starts from: the shared database, seen through the IAM tables. */
export abstract class IamRepository {
  protected readonly db: IamDb;

  constructor(db: Db) {
    this.db = iamDb(db);
  }
}

/** A row of an IAM table. */
export type Row<T extends keyof IamTables> = Selectable<IamTables[T]>;
