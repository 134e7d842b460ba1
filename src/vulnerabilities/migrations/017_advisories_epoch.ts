import { sql, type Kysely } from "kysely";

// The advisories change counter. Servers keep ListAdvisories answers and an index of the affected
// packages (for OSV querybatch) in memory and use them only while this counter still has the value
// they were made at; every transaction that changes what an advisory answer shows (advisories,
// their events, the maintained counts) moves it as it commits, so the first request after the
// commit — on any replica — sees the new value and reads again.
// Imports are the only writers. The counter is moved at commit (deferred constraint triggers), not
// at each statement: a transaction holding the counter's row is committing and waits for nothing
// else, so concurrent imports never deadlock on it (moved mid-transaction, two imports that lock
// advisories in different orders did), and an import waiting on an advisory's row does not hold
// up the others. Constraint triggers are per row, so the function moves the counter once per
// transaction (a transaction-local setting remembers it did). A group's deletion cascades into
// advisory_counts only where the group has advisories (and then fails: advisories keep their
// group), so deleting any other group moves nothing.
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
      if current_setting('bulwark.advisories_epoch_moved', true) is distinct from 'on' then
        perform set_config('bulwark.advisories_epoch_moved', 'on', true);
        update advisories_epoch set value = value + 1;
      end if;
      return null;
    end $$`.execute(db);
  for (const table of ["advisories", "advisory_events", "advisory_counts"]) {
    await sql`
      create constraint trigger ${sql.raw(`${table}_bump_epoch`)} after insert or update or delete on ${sql.table(table)}
        deferrable initially deferred
        for each row execute function bump_advisories_epoch()`.execute(db);
    await sql`
      create trigger ${sql.raw(`${table}_bump_epoch_truncate`)} after truncate on ${sql.table(table)}
        for each statement execute function bump_advisories_epoch()`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ["advisory_counts", "advisory_events", "advisories"]) {
    await sql`drop trigger ${sql.raw(`${table}_bump_epoch_truncate`)} on ${sql.table(table)}`.execute(db);
    await sql`drop trigger ${sql.raw(`${table}_bump_epoch`)} on ${sql.table(table)}`.execute(db);
  }
  await sql`drop function bump_advisories_epoch()`.execute(db);
  await sql`drop table advisories_epoch`.execute(db);
}
