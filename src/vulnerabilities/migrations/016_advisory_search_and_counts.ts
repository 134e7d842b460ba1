import { sql, type Kysely } from "kysely";

// ListAdvisories without reading every advisory:
// - `query` (a substring of search_text, LIKE '%…%') through a trigram index (pg_trgm, which
//   PostgreSQL's contrib and PGlite both ship; storage/db.ts loads it into PGlite). Where the
//   extension is not installed the index is left out: the same LIKE answers, by reading the table.
// - totalCount of a listing filtered by nothing but the latest event's type (or nothing at all)
//   from maintained counts per publishing group and latest event type. Only imports write
//   advisories (none are deleted): each import appends its changes (+n/−n per type) in its own
//   transaction; a count is the sum of its rows. Append-only, so concurrent imports into one
//   group lock nothing of each other (an upsert of shared rows deadlocked with the rest of the
//   imports' locks on PostgreSQL).
export async function up(db: Kysely<any>): Promise<void> {
  // One statement per query: PGlite's query() runs a single statement.
  const available = await sql<{ one: number }>`
    select 1 as one from pg_available_extensions where name = 'pg_trgm'`.execute(db);
  if (available.rows.length > 0) {
    await sql`create extension if not exists pg_trgm`.execute(db);
    await sql`create index advisories_search_text_trgm on advisories using gin (search_text gin_trgm_ops)`.execute(db);
  }
  await sql`
    create table advisory_counts (
      -- the publishing group (the advisories' parent_uid): visibility applies to it as to them
      uid text collate "C" not null references groups (uid) on delete cascade,
      latest_event_type text collate "C" not null,
      -- a change (negative when advisories left this type) or, from this migration, a total
      count bigint not null
    )`.execute(db);
  await sql`create index advisory_counts_uid_type on advisory_counts (uid, latest_event_type) include (count)`.execute(
    db,
  );
  await sql`
    insert into advisory_counts (uid, latest_event_type, count)
    select parent_uid, latest_event_type, count(*) from advisories group by 1, 2`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table advisory_counts`.execute(db);
  await sql`drop index if exists advisories_search_text_trgm`.execute(db);
}
