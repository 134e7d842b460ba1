import { sql, type Kysely } from "kysely";

// Advisory YAML advisories (wolfi-dev/advisories' format; the rows without an imported OSV record)
// are published in ecosystem Wolfi as pkg:apk/wolfi/<name>, as osv.dev has them; they were
// Chainguard's before. The feeds still answer Chainguard queries with them.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    update advisories
    set ecosystem = 'Wolfi', purl = 'pkg:apk/wolfi/' || artifact_name
    where osv is null and ecosystem = 'Chainguard'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`
    update advisories
    set ecosystem = 'Chainguard', purl = 'pkg:apk/chainguard/' || artifact_name
    where osv is null and ecosystem = 'Wolfi'`.execute(db);
}
