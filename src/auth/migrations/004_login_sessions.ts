import { sql, type Kysely } from "kysely";

// Human sign-in in progress: one row per attempt, browser (authorization code + PKCE to the CLI's
// loopback redirect) or device (a user code approved in a browser elsewhere). Codes handed to
// clients are stored only as SHA-256 hashes; rows expire within minutes and are deleted when used.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table login_sessions (
      id text primary key,
      kind text not null check (kind in ('browser', 'device')),
      status text not null default 'pending' check (status in ('pending', 'signed_in', 'failed', 'used')),
      -- the CLI's side (browser kind)
      client_redirect_uri text,
      client_state text,
      code_challenge text,
      code_hash bytea unique,
      -- the device kind
      device_code_hash bytea unique,
      user_code text unique,
      last_poll_time timestamptz,
      -- the upstream sign-in: which provider (null = the platform's default) and its checks
      identity_provider_uid text references identity_providers (uid) on delete cascade,
      invite_uid text references group_invites (uid) on delete cascade,
      upstream_started boolean not null default false,
      upstream_nonce text not null,
      upstream_verifier text not null,
      -- the outcome
      identity_uid text references identities (uid) on delete cascade,
      error text,
      create_time timestamptz not null,
      expire_time timestamptz not null,
      check (kind = 'device' or (client_redirect_uri is not null and client_state is not null and code_challenge is not null)),
      check (kind = 'browser' or (device_code_hash is not null and user_code is not null))
    )`.execute(db);
  await sql`create index login_sessions_expire_time on login_sessions (expire_time)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table login_sessions`.execute(db);
}
