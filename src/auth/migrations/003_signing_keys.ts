import { sql, type Kysely } from "kysely";

// The token issuer's signing keys. Every replica signs with the newest key still in its signing
// window and publishes every key until the last token it may have signed has expired.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table signing_keys (
      kid text primary key,
      algorithm text not null check (algorithm = 'ES256'),
      private_jwk jsonb not null,
      public_jwk jsonb not null,
      create_time timestamptz not null,
      sign_until timestamptz not null,
      publish_until timestamptz not null,
      check (create_time < sign_until and sign_until < publish_until)
    )`.execute(db);
  await sql`create index signing_keys_sign_until on signing_keys (sign_until)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table signing_keys`.execute(db);
}
