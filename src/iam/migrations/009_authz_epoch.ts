import { sql, type Kysely } from "kysely";

// The authorization change counter. Servers cache each identity's grants and answer from the
// cache only while this counter still has the value they read with them; every statement that
// can change what a token may do moves it in the same transaction, so the first request after
// the commit — on any replica — sees the new value and reads the grants again.
// What changes grants: bindings (any change), roles' capabilities, identities (deleted, or
// moved between a group and the root, which decides human or workload).
export async function up(db: Kysely<any>): Promise<void> {
  // One statement per query: PGlite's query() runs a single statement.
  await sql`
    create table authz_epoch (
      singleton boolean primary key default true check (singleton),
      value bigint not null default 0
    )`.execute(db);
  await sql`insert into authz_epoch default values`.execute(db);
  await sql`
    create function bump_authz_epoch() returns trigger language plpgsql as $$
    begin
      update authz_epoch set value = value + 1;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger role_bindings_authz_epoch after insert or update or delete or truncate on role_bindings
      for each statement execute function bump_authz_epoch()`.execute(db);
  // Row-level for updates, so only a real change counts: the server's start-up upserts of the
  // built-in roles, and the last-seen times of identities, move nothing.
  await sql`
    create trigger roles_authz_epoch_update after update of capabilities on roles
      for each row when (old.capabilities is distinct from new.capabilities) execute function bump_authz_epoch()`.execute(
    db,
  );
  await sql`
    create trigger roles_authz_epoch_delete after delete or truncate on roles
      for each statement execute function bump_authz_epoch()`.execute(db);
  await sql`
    create trigger identities_authz_epoch_update after update of uid, parent_uid on identities
      for each row when (old.uid is distinct from new.uid or old.parent_uid is distinct from new.parent_uid)
      execute function bump_authz_epoch()`.execute(db);
  await sql`
    create trigger identities_authz_epoch_delete after delete or truncate on identities
      for each statement execute function bump_authz_epoch()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger identities_authz_epoch_delete on identities`.execute(db);
  await sql`drop trigger identities_authz_epoch_update on identities`.execute(db);
  await sql`drop trigger roles_authz_epoch_delete on roles`.execute(db);
  await sql`drop trigger roles_authz_epoch_update on roles`.execute(db);
  await sql`drop trigger role_bindings_authz_epoch on role_bindings`.execute(db);
  await sql`drop function bump_authz_epoch()`.execute(db);
  await sql`drop table authz_epoch`.execute(db);
}
