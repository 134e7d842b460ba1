// The images module's tables: what each pushed image holds (its inventory, read once per
// manifest digest in the background), the packages of every inventory (indexed by name and
// origin, so an advisory change finds the images it concerns), the vulnerability reports of
// each image in each repo (ours and uploaded ones, history kept), and the work queues.
import { sql, type Kysely } from "kysely";

const DIGEST = `'^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$'`;

export async function up(db: Kysely<any>): Promise<void> {
  // One row per image manifest digest (a platform image, not an index): the same image in two
  // repos is read once. `pending` rows are the indexing queue: a replica leases one
  // (lease_until) and a crashed replica's lease runs out, so the work resumes elsewhere.
  await sql`
    create table image_inventories (
      digest text collate "C" primary key check (digest ~ ${sql.raw(DIGEST)}),
      state text collate "C" not null default 'pending' check (state in ('pending', 'done', 'failed')),
      attempts integer not null default 0,
      lease_until timestamptz,
      -- the claim holding the lease: a read whose claim was superseded (requeued, or its lease
      -- ran out and another replica claimed) saves nothing
      lease_token text collate "C",
      -- failed: why (a malformed or hostile layer, a missing blob), for the API to show; never
      -- an internal error's text (that is logged)
      error text,
      -- image: the image itself is bad (stays failed); transient: the store or the reading
      -- process failed (a push of the image reads it again)
      error_kind text collate "C" check (error_kind in ('image', 'transient')),
      os text not null default '',
      architecture text not null default '',
      variant text not null default '',
      created timestamptz,
      -- the config's "config" object (User, Env, Entrypoint, Cmd, ExposedPorts, Volumes,
      -- WorkingDir, Labels, StopSignal) as the image has it
      config jsonb,
      size_compressed bigint,
      size_uncompressed bigint,
      -- apk, dpkg, apk+dpkg, sbom:spdx, sbom:cyclonedx, or '' (no package database)
      package_source text not null default '',
      distro text not null default '',
      distro_version text not null default '',
      -- [{type, name, version, arch, origin, license, purl}], in the order read
      packages jsonb not null default '[]'::jsonb,
      discover_time timestamptz not null,
      index_time timestamptz
    )`.execute(db);
  await sql`create index image_inventories_pending on image_inventories (discover_time, digest) where state = 'pending'`.execute(
    db,
  );

  // The packages of every read inventory, by name and by origin (source package): an advisory
  // names an origin (wolfi) or a package (OSV), and its change re-matches exactly these images.
  await sql`
    create table image_packages (
      digest text collate "C" not null references image_inventories (digest) on delete cascade,
      type text collate "C" not null,
      name text collate "C" not null,
      version text collate "C" not null,
      origin text collate "C" not null,
      primary key (digest, type, name, version)
    )`.execute(db);
  await sql`create index image_packages_origin on image_packages (origin, digest)`.execute(db);
  await sql`create index image_packages_name on image_packages (name, digest)`.execute(db);

  // Vulnerability reports, per repo and image digest: ours (origin bulwark, recomputed when the
  // advisories or the inventory change, a new row only when the findings changed) and uploaded
  // ones (CreateVulnReport). Rows are never updated: the history answers "since when".
  await sql`
    create table vuln_reports (
      id bigint generated always as identity primary key,
      repo_uid text collate "C" not null references repos (uid) on delete cascade,
      digest text collate "C" not null check (digest ~ ${sql.raw(DIGEST)}),
      -- chainguard.platform.registry.Scanner.Name (0 UNKNOWN: ours, 1 GRYPE, 2 TRIVY)
      scanner_name integer not null,
      scanner_version text not null,
      origin text collate "C" not null check (origin in ('bulwark', 'uploaded')),
      db_build_time timestamptz,
      created_at timestamptz not null,
      -- the report's Vulnerability messages in proto JSON; ours also carry the advisory's uid
      -- (what read-time visibility filters on)
      vulnerabilities jsonb not null,
      -- sha256 of the findings: an unchanged recomputation writes nothing
      findings_digest text collate "C" not null,
      -- an uploaded report's raw JSON (Grype or Trivy) as sent
      raw text,
      creator text collate "C"
    )`.execute(db);
  // Newest first is by id (insertion order in the one database), never by created_at: replicas'
  // clocks differ, and an uploaded report's created_at is the uploader's word.
  await sql`create index vuln_reports_repo_digest on vuln_reports (repo_uid, digest, id desc)`.execute(db);
  await sql`create index vuln_reports_digest on vuln_reports (digest, id desc)`.execute(db);

  // Images whose report must be recomputed (their inventory was read, the advisories they
  // contain changed, or they were pushed to another repo): claimed with SKIP LOCKED, deleted
  // when done, so replicas share the work and a crash leaves it queued.
  await sql`
    create table image_report_queue (
      repo_uid text collate "C" not null references repos (uid) on delete cascade,
      digest text collate "C" not null,
      queue_time timestamptz not null,
      -- queued by advisory changes: the changed names and purls it has (read again before matching)
      refresh_names text[] collate "C" not null default '{}',
      refresh_purls text[] collate "C" not null default '{}',
      primary key (repo_uid, digest)
    )`.execute(db);

  // The advisories' changes not yet turned into queued reports: the vulnerabilities module's
  // hook writes one row (the changed advisories' names and versionless purls) inside each
  // import's transaction, so a row exists exactly when its change committed, however late.
  // A replica claims rows (delete ... returning, SKIP LOCKED) in the transaction that queues the
  // images they concern: a crash before the commit leaves them for the next claim.
  await sql`
    create table advisory_changes (
      id bigint generated always as identity primary key,
      names text[] not null,
      purls text[] not null,
      change_time timestamptz not null
    )`.execute(db);

  // Small named positions (whether existing manifests were queued once), shared by the replicas.
  await sql`
    create table images_state (
      name text collate "C" primary key,
      value text not null
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [
    "images_state",
    "advisory_changes",
    "image_report_queue",
    "vuln_reports",
    "image_packages",
    "image_inventories",
  ])
    await sql`drop table if exists ${sql.table(table)}`.execute(db);
}
