import { sql, type Kysely } from "kysely";

// The registry: repos (children of groups), tags (children of repos), the tag history, and the
// content the OCI distribution API stores (blobs, their links into repos, manifests, the
// references between them, upload sessions). Integrity lives here: a manifest cannot name a blob
// its repo does not hold, an index cannot name a manifest its repo does not hold, a group with
// repos cannot be deleted, and deleting a repo removes everything in it.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table repos (
      uid text collate "C" primary key check (uid ~ '^[0-9a-f]{40}(/[0-9a-f]{16})+$'),
      -- no action: a group with repos cannot be deleted ("cannot delete group with child repos")
      parent_uid text collate "C" not null references groups (uid),
      -- the repository path inside its group: OCI path components joined by "/"
      name text collate "C" not null
        check (name ~ '^[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*)*$'
               and length(name) <= 255),
      description text not null default '',
      catalog_tier integer not null default 0,
      bundles jsonb not null default '[]'::jsonb,
      aliases jsonb not null default '[]'::jsonb,
      active_tags jsonb not null default '[]'::jsonb,
      sync_config jsonb,
      custom_overlay jsonb,
      readme text not null default '',
      -- a documented extension: public repos are pulled without credentials
      public boolean not null default false,
      create_time timestamptz not null check (create_time = date_trunc('milliseconds', create_time)),
      update_time timestamptz not null check (update_time = date_trunc('milliseconds', update_time)),
      unique (parent_uid, name),
      check (uid = parent_uid || '/' || right(uid, 16))
    )`.execute(db);
  await sql`create index repos_name_uid on repos (name, uid)`.execute(db);
  await sql`create index repos_create_time_uid on repos (create_time, uid)`.execute(db);
  await sql`create index repos_update_time_uid on repos (update_time, uid)`.execute(db);

  await sql`
    create table tags (
      uid text collate "C" primary key check (uid ~ '^[0-9a-f]{40}(/[0-9a-f]{16})+$'),
      repo_uid text collate "C" not null references repos (uid) on delete cascade,
      name text collate "C" not null check (name ~ '^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$'),
      digest text collate "C" not null check (digest ~ '^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$'),
      deprecated boolean not null default false,
      bundles jsonb not null default '[]'::jsonb,
      update_time timestamptz not null check (update_time = date_trunc('milliseconds', update_time)),
      unique (repo_uid, name),
      check (uid = repo_uid || '/' || right(uid, 16))
    )`.execute(db);
  await sql`create index tags_repo_digest on tags (repo_uid, digest)`.execute(db);
  await sql`create index tags_name_uid on tags (name, uid)`.execute(db);
  await sql`create index tags_update_time_uid on tags (update_time, uid)`.execute(db);

  // Every digest a tag has pointed at, appended by the database itself whenever a tag is created
  // or moved, whichever path wrote it (a push, the API); kept when the tag is deleted.
  await sql`
    create table tag_history (
      id bigint generated always as identity primary key,
      repo_uid text collate "C" not null references repos (uid) on delete cascade,
      tag text collate "C" not null,
      digest text collate "C" not null,
      update_time timestamptz not null
    )`.execute(db);
  await sql`create index tag_history_tag_time on tag_history (repo_uid, tag, update_time, id)`.execute(db);
  await sql`
    create function record_tag_history() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' or new.digest is distinct from old.digest then
        insert into tag_history (repo_uid, tag, digest, update_time)
        values (new.repo_uid, new.name, new.digest, new.update_time);
      end if;
      return new;
    end $$`.execute(db);
  await sql`
    create trigger tags_history after insert or update of digest on tags
    for each row execute function record_tag_history()`.execute(db);

  // Blob bytes live in the blob store under their digest; a row here says they are complete.
  // touch_time: the last time a push linked the blob anywhere (garbage collection's grace clock).
  await sql`
    create table blobs (
      digest text collate "C" primary key check (digest ~ '^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$'),
      size bigint not null check (size >= 0),
      create_time timestamptz not null,
      touch_time timestamptz not null
    )`.execute(db);
  // A repo holds a blob once it was pushed or mounted there: pulls through that repo may read it.
  await sql`
    create table repo_blobs (
      repo_uid text collate "C" not null references repos (uid) on delete cascade,
      digest text collate "C" not null references blobs (digest),
      link_time timestamptz not null,
      primary key (repo_uid, digest)
    )`.execute(db);
  await sql`create index repo_blobs_digest on repo_blobs (digest)`.execute(db);

  await sql`
    create table manifests (
      repo_uid text collate "C" not null references repos (uid) on delete cascade,
      digest text collate "C" not null check (digest ~ '^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$'),
      media_type text not null,
      -- the manifest's artifactType, else its config's media type (what the referrers API reports)
      artifact_type text,
      subject_digest text collate "C",
      annotations jsonb,
      size bigint not null check (size >= 0),
      content bytea not null,
      create_time timestamptz not null,
      primary key (repo_uid, digest)
    )`.execute(db);
  await sql`create index manifests_subject on manifests (repo_uid, subject_digest) where subject_digest is not null`.execute(
    db,
  );
  await sql`create index manifests_create_time on manifests (create_time)`.execute(db);
  // What a manifest needs to stay pullable: its config and layers (blobs) ...
  await sql`
    create table manifest_blobs (
      repo_uid text collate "C" not null,
      manifest_digest text collate "C" not null,
      blob_digest text collate "C" not null,
      primary key (repo_uid, manifest_digest, blob_digest),
      foreign key (repo_uid, manifest_digest) references manifests (repo_uid, digest) on delete cascade,
      foreign key (repo_uid, blob_digest) references repo_blobs (repo_uid, digest)
    )`.execute(db);
  await sql`create index manifest_blobs_blob on manifest_blobs (repo_uid, blob_digest)`.execute(db);
  // ... and an index's child manifests.
  await sql`
    create table manifest_children (
      repo_uid text collate "C" not null,
      manifest_digest text collate "C" not null,
      child_digest text collate "C" not null,
      primary key (repo_uid, manifest_digest, child_digest),
      foreign key (repo_uid, manifest_digest) references manifests (repo_uid, digest) on delete cascade,
      foreign key (repo_uid, child_digest) references manifests (repo_uid, digest)
    )`.execute(db);
  await sql`create index manifest_children_child on manifest_children (repo_uid, child_digest)`.execute(db);

  // Blob uploads in progress: bytes staged in the blob store, the acknowledged size here.
  await sql`
    create table uploads (
      id uuid primary key,
      repo_uid text collate "C" not null references repos (uid) on delete cascade,
      size bigint not null default 0 check (size >= 0),
      create_time timestamptz not null,
      update_time timestamptz not null
    )`.execute(db);
  await sql`create index uploads_update_time on uploads (update_time)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [
    "uploads",
    "manifest_children",
    "manifest_blobs",
    "manifests",
    "repo_blobs",
    "blobs",
    "tag_history",
    "tags",
    "repos",
  ])
    await sql`drop table ${sql.table(table)}`.execute(db);
  await sql`drop function record_tag_history()`.execute(db);
}
