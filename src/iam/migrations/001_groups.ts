import { sql, type Kysely } from "kysely";

// Text keys use the "C" collation so ordering is bytewise and identical on PGlite and
// PostgreSQL, whatever the cluster locale; it also lets prefix ranges use the btree.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table groups (
      uid text collate "C" primary key
        check (uid ~ '^[0-9a-f]{40}(/[0-9a-f]{16})*$'),
      -- restrict: a group with children cannot be deleted, and a child cannot be inserted
      -- under a parent that a concurrent transaction is deleting
      parent_uid text collate "C" references groups (uid) on delete restrict,
      name text collate "C" not null check (name ~ '^[a-z0-9 ._-]{1,}$'),
      description text not null default '',
      resource_limits jsonb not null default '{}'::jsonb,
      verified boolean not null default false,
      kind integer not null default 0,
      status integer not null default 0,
      create_time timestamptz not null check (create_time = date_trunc('milliseconds', create_time)),
      update_time timestamptz not null check (update_time = date_trunc('milliseconds', update_time)),
      -- the parent is exactly the uid minus its last segment
      check (
        (parent_uid is null and position('/' in uid) = 0)
        or (parent_uid is not null and uid = parent_uid || '/' || right(uid, 16))
      )
    )`.execute(db);
  await sql`create index groups_parent_uid on groups (parent_uid, uid)`.execute(db);
  await sql`create index groups_name_uid on groups (name, uid)`.execute(db);
  await sql`create index groups_create_time_uid on groups (create_time, uid)`.execute(db);
  await sql`create index groups_update_time_uid on groups (update_time, uid)`.execute(db);

  // Secrets shared by every replica on this database (e.g. the page-token key), made once.
  await sql`
    create table server_secrets (
      name text primary key,
      secret bytea not null,
      create_time timestamptz not null default now()
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table server_secrets`.execute(db);
  await sql`drop table groups`.execute(db);
}
