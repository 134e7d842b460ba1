// The auth module's table types: the issuer's signing keys and sign-in sessions.
import type { ColumnType, Kysely } from "kysely";
import { viewOf, type Db } from "../../storage/db.js";
import type { Json, Timestamp } from "../../storage/schema.js";

export interface SigningKeysTable {
  kid: string;
  algorithm: string;
  /** the private key in plaintext, as versions before migration 005 stored it; sealed and cleared at start */
  private_jwk: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  /** the private JWK sealed under the database's key-encryption key for the kid (core/secret-box.ts) */
  private_key_jwe: ColumnType<string | null, string | null | undefined, string | null>;
  public_jwk: Json<Record<string, unknown>>;
  create_time: Timestamp;
  sign_until: Timestamp;
  publish_until: Timestamp;
}

export interface LoginSessionsTable {
  id: string;
  kind: "browser" | "device";
  status: ColumnType<
    "pending" | "signed_in" | "failed" | "used",
    "pending" | "signed_in" | "failed" | "used" | undefined,
    "pending" | "signed_in" | "failed" | "used"
  >;
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

/** The public URLs the server last started with (one row). */
export interface IssuerUrlsTable {
  singleton: ColumnType<boolean, boolean | undefined, boolean>;
  issuer: string;
  api_audience: string;
  registry_audience: string;
  record_time: ColumnType<Date, Date | undefined, Date>;
}

/** The auth module's tables. */
export interface AuthTables {
  signing_keys: SigningKeysTable;
  login_sessions: LoginSessionsTable;
  issuer_urls: IssuerUrlsTable;
}

export type AuthDb = Kysely<AuthTables>;

/** The shared database, seen through the auth tables. */
export function authDb(db: Db): AuthDb {
  return viewOf<AuthTables>(db);
}
