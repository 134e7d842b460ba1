import { sql, type Kysely } from "kysely";

// The advisories change counter. Servers keep ListAdvisories answers and an index of the affected
// packages (for OSV querybatch) in memory and use them only while this counter still has the value
// they were made at; every statement that changes what an advisory answer shows (advisories, their
// events, the maintained counts) moves it in the same transaction, so the first request after the
// commit — on any replica — sees the new value and reads again.
// Imports are the only writers. Each import locks the counter's row first (storage/advisories.ts),
// so concurrent imports queue there instead of deadlocking on it after taking row locks in
// different orders. A group's deletion cascades into advisory_counts only where the group has
// advisories (and then fails: advisories keep their group), so counts' deletions are counted per
// row: deleting any other group moves nothing.
export async function up(db: Kysely<any>): Promise<void> {
  // One statement per query: PGlite's query() runs a single statement.
  await sql`
    create table advisories_epoch (
      singleton boolean primary key default true check (singleton),
      value bigint not null default 0
    )`.execute(db);
  await sql`insert into advisories_epoch default values`.execute(db);
  await sql`
    create function bump_advisories_epoch() returns trigger language plpgsql as $$
    begin
      update advisories_epoch set value = value + 1;
      return null;
    end $$`.execute(db);
  for (const table of ["advisories", "advisory_events"]) {
    await sql`
      create trigger ${sql.raw(`${table}_bump_epoch`)} after insert or update or delete or truncate on ${sql.table(table)}
        for each statement execute function bump_advisories_epoch()`.execute(db);
  }
  await sql`
    create trigger advisory_counts_bump_epoch after insert or update or truncate on advisory_counts
      for each statement execute function bump_advisories_epoch()`.execute(db);
  await sql`
    create trigger advisory_counts_bump_epoch_delete after delete on advisory_counts
      for each row execute function bump_advisories_epoch()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger advisory_counts_bump_epoch_delete on advisory_counts`.execute(db);
  await sql`drop trigger advisory_counts_bump_epoch on advisory_counts`.execute(db);
  await sql`drop trigger advisory_events_bump_epoch on advisory_events`.execute(db);
  await sql`drop trigger advisories_bump_epoch on advisories`.execute(db);
  await sql`drop function bump_advisories_epoch()`.execute(db);
  await sql`drop table advisories_epoch`.execute(db);
}
