import { sql, type Kysely } from "kysely";

// The public URLs the server runs with (issuer, API audience, registry audience), recorded each
// time a server starts listening, so tools that open the database (`bulwark admin token`) mint
// tokens the running server accepts whatever port or URLs it was started with. One row.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table issuer_urls (
      singleton boolean primary key default true check (singleton),
      issuer text not null,
      api_audience text not null,
      registry_audience text not null,
      record_time timestamptz not null default now()
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table issuer_urls`.execute(db);
}
