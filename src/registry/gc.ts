// Online garbage collection. While the registry serves, removes what nothing needs and nobody
// touched within the grace window: untagged manifests (not named by a kept index, not a referrer
// of a kept manifest), blob links no manifest uses, blobs no repo links, abandoned uploads. The
// window protects pushes in progress (a blob uploaded but not yet named by a manifest, a
// manifest pushed by digest before its index or tag). Every delete re-checks its conditions in
// the same statement, so a concurrent push wins; foreign keys stand behind that.
import { sql } from "kysely";
import type { Logger } from "pino";
import type { Db } from "../storage/db.js";
import { FOREIGN_KEY_VIOLATION, sqlState } from "../storage/errors.js";
import type { BlobStore } from "./storage/blob-store.js";

export interface GcOptions {
  /** how long anything unreferenced is kept after it was last pushed or linked */
  graceMs: number;
  /** report what would go, remove nothing */
  dryRun?: boolean;
  now?: Date;
  logger?: Logger;
}

export interface GcReport {
  manifests: number;
  blobLinks: number;
  blobs: number;
  bytes: number;
  uploads: number;
}

/** Uploads untouched this long are abandoned (at least a day, at least the grace window). */
const UPLOAD_EXPIRY_MS = 24 * 3600 * 1000;

const num = (v: unknown) => Number(v ?? 0);

export async function collectGarbage(db: Db, store: BlobStore, options: GcOptions): Promise<GcReport> {
  const now = options.now ?? new Date();
  const cutoff = new Date(now.getTime() - options.graceMs);
  const uploadCutoff = new Date(now.getTime() - Math.max(options.graceMs, UPLOAD_EXPIRY_MS));
  const report: GcReport = { manifests: 0, blobLinks: 0, blobs: 0, bytes: 0, uploads: 0 };

  // A manifest is garbage when old, untagged, named by no index and not referring to a kept manifest.
  const garbageManifest = sql`
    m.create_time < ${cutoff}
    and not exists (select 1 from tags t where t.repo_uid = m.repo_uid and t.digest = m.digest)
    and not exists (select 1 from manifest_children c where c.repo_uid = m.repo_uid and c.child_digest = m.digest)
    and not (m.subject_digest is not null and exists (
      select 1 from manifests s where s.repo_uid = m.repo_uid and s.digest = m.subject_digest))`;
  const garbageLink = sql`
    l.link_time < ${cutoff}
    and not exists (select 1 from manifest_blobs mb where mb.repo_uid = l.repo_uid and mb.blob_digest = l.digest)`;

  if (options.dryRun) {
    const m = await sql<{ n: string }>`select count(*) as n from manifests m where ${garbageManifest}`.execute(db);
    const l = await sql<{ n: string }>`select count(*) as n from repo_blobs l where ${garbageLink}`.execute(db);
    const b = await sql<{ n: string; bytes: string }>`
      select count(*) as n, coalesce(sum(size), 0) as bytes from blobs b
      where b.touch_time < ${cutoff} and not exists (select 1 from repo_blobs l where l.digest = b.digest)`.execute(db);
    const u = await sql<{ n: string }>`select count(*) as n from uploads where update_time < ${uploadCutoff}`.execute(
      db,
    );
    // One pass: what a collection would remove first (it then repeats for what that frees).
    return {
      manifests: num(m.rows[0]?.n),
      blobLinks: num(l.rows[0]?.n),
      blobs: num(b.rows[0]?.n),
      bytes: num(b.rows[0]?.bytes),
      uploads: num(u.rows[0]?.n),
    };
  }

  // Removing an index frees its children: repeat until a pass removes nothing.
  for (let pass = 0; pass < 100; pass++) {
    const r = await sql`delete from manifests m where ${garbageManifest}`.execute(db);
    const n = num(r.numAffectedRows);
    report.manifests += n;
    if (n === 0) break;
  }
  const links = await sql`delete from repo_blobs l where ${garbageLink}`.execute(db);
  report.blobLinks = num(links.numAffectedRows);

  // Blobs one at a time: the row stays locked while its bytes are removed, so a concurrent upload
  // of the same digest waits and then records (and stores) it afresh.
  for (;;) {
    const candidates = await sql<{ digest: string }>`
      select digest from blobs b
      where b.touch_time < ${cutoff} and not exists (select 1 from repo_blobs l where l.digest = b.digest)
      limit 500`.execute(db);
    if (!candidates.rows.length) break;
    let removed = 0;
    for (const { digest } of candidates.rows) {
      const size = await db
        .transaction()
        .execute(async (trx) => {
          const r = await sql<{ size: string }>`
            delete from blobs b where b.digest = ${digest} and b.touch_time < ${cutoff}
              and not exists (select 1 from repo_blobs l where l.digest = b.digest)
            returning size`.execute(trx);
          if (!r.rows.length) return undefined;
          await store.delete(digest);
          return num(r.rows[0]!.size);
        })
        .catch((err) => {
          // A push linked it while this waited for the row (the recheck may not see that link; the
          // foreign key does): the blob is in use, and its bytes were never touched.
          if (sqlState(err) === FOREIGN_KEY_VIOLATION) return undefined;
          throw err;
        });
      if (size === undefined) continue;
      removed++;
      report.blobs++;
      report.bytes += size;
    }
    if (removed === 0) break;
  }

  for (;;) {
    const stale = await sql<{ id: string }>`
      delete from uploads where id in (
        select id from uploads where update_time < ${uploadCutoff} order by update_time limit 500)
      returning id`.execute(db);
    for (const { id } of stale.rows) await store.deleteUpload(id);
    report.uploads += stale.rows.length;
    if (stale.rows.length < 500) break;
  }
  // Staged bytes whose session is gone (a crash between the two deletes above, or a cancel).
  for await (const { uploadId, modified } of store.listUploads()) {
    if (modified >= uploadCutoff) continue;
    const known = await sql`select 1 from uploads where id = ${uploadId}`.execute(db);
    if (!known.rows.length) await store.deleteUpload(uploadId);
  }
  options.logger?.info({ ...report, graceMs: options.graceMs }, "registry garbage collection");
  return report;
}
