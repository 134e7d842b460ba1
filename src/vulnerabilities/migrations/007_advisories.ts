import { sql, type Kysely } from "kysely";

// Vulnerability advisories: one row per (publisher group, advisory id, artifact) and its events,
// oldest first. The latest event (the advisory's status) and a lower-cased search text are kept
// on the advisory row by the import, so status filters and `query` read one table. A group that
// publishes advisories cannot be deleted; an advisory's events go with it.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table advisories (
      uid text collate "C" primary key check (uid ~ '^[0-9a-f]{40}(/[0-9a-f]{16})+$'),
      -- no action: a group with advisories cannot be deleted
      parent_uid text collate "C" not null references groups (uid),
      advisory_id text collate "C" not null check (length(advisory_id) between 1 and 256),
      legacy_advisory_id text collate "C",
      author text not null,
      origin text not null default '',
      artifact_name text collate "C" not null check (length(artifact_name) between 1 and 1024),
      artifact_type text collate "C" not null,
      artifact_architecture text collate "C" not null,
      component_name text collate "C" not null,
      component_type text collate "C" not null,
      component_location text collate "C" not null,
      aliases text[] collate "C" not null default '{}',
      -- [{type, score}] with type the Severity.Type name
      severities jsonb not null default '[]'::jsonb,
      -- the OSV ecosystem and package URL the feeds publish the artifact under
      ecosystem text collate "C" not null,
      purl text collate "C" not null,
      -- OSV fields kept as imported (summary, details, references, affected ranges)
      osv jsonb,
      latest_event_type text collate "C" not null,
      latest_event_time timestamptz not null,
      -- the versions the latest event says fix it (fixed: one, patched: several), and the first
      -- event's time: what the feeds need, without reading the events
      fixed_versions text[] collate "C" not null default '{}',
      first_event_time timestamptz not null,
      -- lower-cased ids, aliases and names: what ListAdvisories' query matches
      search_text text not null,
      -- a digest of the imported document part: an unchanged re-import writes nothing
      source_digest text not null,
      create_time timestamptz not null check (create_time = date_trunc('milliseconds', create_time)),
      update_time timestamptz not null check (update_time = date_trunc('milliseconds', update_time)),
      unique (parent_uid, advisory_id, artifact_name),
      check (uid = parent_uid || '/' || right(uid, 16))
    )`.execute(db);
  await sql`create index advisories_advisory_id_uid on advisories (advisory_id, uid)`.execute(db);
  await sql`create index advisories_artifact_name_uid on advisories (artifact_name, uid)`.execute(db);
  await sql`create index advisories_create_time_uid on advisories (create_time, uid)`.execute(db);
  await sql`create index advisories_update_time_uid on advisories (update_time, uid)`.execute(db);
  await sql`create index advisories_latest_event_type on advisories (latest_event_type)`.execute(db);
  await sql`create index advisories_legacy_advisory_id on advisories (legacy_advisory_id)`.execute(db);
  await sql`create index advisories_aliases on advisories using gin (aliases)`.execute(db);
  await sql`create index advisories_purl on advisories (purl)`.execute(db);

  await sql`
    create table advisory_events (
      uid text collate "C" primary key check (uid ~ '^[0-9a-f]{40}(/[0-9a-f]{16})+$'),
      advisory_uid text collate "C" not null references advisories (uid) on delete cascade,
      -- identifies the event across imports: digest of (time, kind, data) and its occurrence
      event_key text collate "C" not null,
      -- the event's own time (AdvisoryEvent.create_time); seq orders events of the same time
      create_time timestamptz not null,
      seq integer not null,
      kind text collate "C" not null check (kind in (
        'detection', 'true-positive-determination', 'fixed', 'false-positive-determination',
        'analysis-not-planned', 'fix-not-planned', 'pending-upstream-fix', 'patched')),
      -- the oneof member in canonical proto JSON
      data jsonb not null,
      author text collate "C" not null,
      reviewer text collate "C" not null default '',
      review_state integer not null,
      issue text,
      unique (advisory_uid, event_key),
      check (uid = advisory_uid || '/' || right(uid, 16))
    )`.execute(db);
  await sql`create index advisory_events_advisory_order on advisory_events (advisory_uid, create_time, seq)`.execute(
    db,
  );
  await sql`create index advisory_events_kind on advisory_events (kind, advisory_uid)`.execute(db);
  await sql`create index advisory_events_author on advisory_events (author, advisory_uid)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table advisory_events`.execute(db);
  await sql`drop table advisories`.execute(db);
}
