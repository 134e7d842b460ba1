import { sql, type Kysely } from "kysely";

// Signing keys' private parts are stored sealed (private_key_jwe: a JWE under the key-encryption
// key, for the kid). The plaintext column stays for keys earlier versions wrote: the server seals
// those at start (it holds the key-encryption key; a migration does not) and clears them.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table signing_keys add column private_key_jwe text`.execute(db);
  await sql`alter table signing_keys alter column private_jwk drop not null`.execute(db);
  await sql`
    alter table signing_keys add constraint signing_keys_private_key
      check (private_jwk is not null or private_key_jwe is not null)`.execute(db);
}

// The earlier layout cannot read sealed keys: they go (the server makes a new key at start).
export async function down(db: Kysely<any>): Promise<void> {
  await sql`delete from signing_keys where private_jwk is null`.execute(db);
  await sql`alter table signing_keys drop constraint signing_keys_private_key`.execute(db);
  await sql`alter table signing_keys alter column private_jwk set not null`.execute(db);
  await sql`alter table signing_keys drop column private_key_jwe`.execute(db);
}
