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

type Json<T = unknown> = ColumnType<T, string, string>;

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

export interface SigningKeysTable {
  kid: string;
  algorithm: string;
  private_jwk: Json<Record<string, unknown>>;
  public_jwk: Json<Record<string, unknown>>;
  create_time: Timestamp;
  sign_until: Timestamp;
  publish_until: Timestamp;
}

export interface LoginSessionsTable {
  id: string;
  kind: "browser" | "device";
  status: ColumnType<"pending" | "signed_in" | "failed" | "used", "pending" | "signed_in" | "failed" | "used" | undefined, "pending" | "signed_in" | "failed" | "used">;
  client_redirect_uri: string | null;
  client_state: string | null;
  code_challenge: string | null;
  code_hash: Buffer | null;
  device_code_hash: Buffer | null;
  user_code: string | null;
  last_poll_time: Date | null;
  identity_provider_uid: string | null;
  invite_uid: string | null;
  upstream_started: ColumnType<boolean, boolean | undefined, boolean>;
  upstream_nonce: string;
  upstream_verifier: string;
  identity_uid: string | null;
  error: string | null;
  create_time: Timestamp;
  expire_time: Timestamp;
}

export interface Database {
  groups: GroupsTable;
  server_secrets: ServerSecretsTable;
  identities: IdentitiesTable;
  roles: RolesTable;
  role_bindings: RoleBindingsTable;
  identity_providers: IdentityProvidersTable;
  account_associations: AccountAssociationsTable;
  group_invites: GroupInvitesTable;
  signing_keys: SigningKeysTable;
  login_sessions: LoginSessionsTable;
}

/** Tables whose rows are addressed by a UIDP `uid`. */
export type UidTable = Exclude<keyof Database, "server_secrets" | "signing_keys" | "login_sessions">;
