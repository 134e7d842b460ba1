// Reads of stored manifests by digest across repos, for the images module: an image is read once
// per digest whichever repos hold it (its manifest, the repos holding it), and the SBOMs attached
// to it in any repo (referrers by subject). The existing indexes all lead with the repo.
import { sql, type Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index manifests_digest on manifests (digest)`.execute(db);
  await sql`create index manifests_subject_any_repo on manifests (subject_digest) where subject_digest is not null`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists manifests_subject_any_repo`.execute(db);
  await sql`drop index if exists manifests_digest`.execute(db);
}
