import { sql, type Kysely } from "kysely";

// The platform's shared secrets (server_secrets; 001 made the table) are stored sealed, like the
// signing keys (005): secret_jwe is a JWE under the key-encryption key, so the key that encrypts
// IdP client secrets no longer sits in plaintext beside the ciphertexts it protects. The plaintext
// column stays for rows earlier versions wrote: the server seals those when it first reads them
// (it holds the key-encryption key; a migration does not) and clears them.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table server_secrets add column secret_jwe text`.execute(db);
  await sql`alter table server_secrets alter column secret drop not null`.execute(db);
  await sql`
    alter table server_secrets add constraint server_secrets_sealed_or_plain
      check (secret is not null or secret_jwe is not null)`.execute(db);
}

// The earlier layout cannot read sealed secrets: they go, and it makes new ones (page tokens then
// restart their walk; IdP client secrets must be set again).
export async function down(db: Kysely<any>): Promise<void> {
  await sql`delete from server_secrets where secret is null`.execute(db);
  await sql`alter table server_secrets drop constraint server_secrets_sealed_or_plain`.execute(db);
  await sql`alter table server_secrets alter column secret set not null`.execute(db);
  await sql`alter table server_secrets drop column secret_jwe`.execute(db);
}
