// Blobs: complete content by digest (the bytes live in the blob store), and their links into
// repos (a repo holds a blob once it was pushed or mounted there; pulls through that repo may
// read it). A manifest's blobs are held by foreign keys, so a link in use cannot be removed.
import { sql } from "kysely";
import { FOREIGN_KEY_VIOLATION, sqlState } from "../../storage/errors.js";
import { RegistryRepository } from "./tables.js";

export interface BlobRow {
  digest: string;
  size: number;
}

export type UnlinkBlobResult = { kind: "deleted" } | { kind: "not_found" } | { kind: "referenced"; by: string };

const num = (v: unknown) => Number(v);

export class BlobsRepository extends RegistryRepository {
  /** The blob if `repo` holds it. */
  async inRepo(repoUid: string, digest: string): Promise<BlobRow | undefined> {
    const r = await sql<BlobRow>`
      select b.digest, b.size from repo_blobs l join blobs b on b.digest = l.digest
      where l.repo_uid = ${repoUid} and l.digest = ${digest}`.execute(this.db);
    const row = r.rows[0];
    return row && { digest: row.digest, size: num(row.size) };
  }

  /**
   * Records a complete blob and links it into a repo, ending the upload session if any; false when
   * the repo was deleted meanwhile. `placeBytes` moves the bytes into place last, while this
   * transaction holds the blob's row: a garbage collector removing the same digest either finished
   * first (its row and bytes are gone, and these bytes arrive afresh) or waits until the link
   * stands and then keeps the blob. A push stays whole however short the grace window.
   */
  async store(
    repoUid: string,
    digest: string,
    size: number,
    now: Date,
    uploadId: string | undefined,
    placeBytes: () => Promise<void>,
  ): Promise<boolean> {
    try {
      await this.db.transaction().execute(async (trx) => {
        await sql`
          insert into blobs (digest, size, create_time, touch_time) values (${digest}, ${size}, ${now}, ${now})
          on conflict (digest) do update set touch_time = excluded.touch_time`.execute(trx);
        await sql`
          insert into repo_blobs (repo_uid, digest, link_time) values (${repoUid}, ${digest}, ${now})
          on conflict (repo_uid, digest) do update set link_time = excluded.link_time`.execute(trx);
        if (uploadId) await sql`delete from uploads where id = ${uploadId}`.execute(trx);
        // Last, so nothing can roll back after the bytes are in place but the commit itself.
        await placeBytes();
      });
      return true;
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return false;
      throw err;
    }
  }

  /** Cross-repository mount: links `digest` into `repoUid` if `fromUid` holds it. */
  async mount(repoUid: string, fromUid: string, digest: string, now: Date): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      // Locked, so a collector cannot take the source link (and then the blob) before this link stands.
      const held = await sql`
        select 1 from repo_blobs where repo_uid = ${fromUid} and digest = ${digest} for share`.execute(trx);
      if (!held.rows.length) return false;
      await sql`update blobs set touch_time = ${now} where digest = ${digest}`.execute(trx);
      await sql`
        insert into repo_blobs (repo_uid, digest, link_time) values (${repoUid}, ${digest}, ${now})
        on conflict (repo_uid, digest) do update set link_time = excluded.link_time`.execute(trx);
      return true;
    });
  }

  /** Unlinks a blob from a repo; refused while a manifest there needs it. */
  async unlink(repoUid: string, digest: string): Promise<UnlinkBlobResult> {
    try {
      const r = await sql`delete from repo_blobs where repo_uid = ${repoUid} and digest = ${digest}`.execute(this.db);
      return num(r.numAffectedRows ?? 0) > 0 ? { kind: "deleted" } : { kind: "not_found" };
    } catch (err) {
      if (sqlState(err) !== FOREIGN_KEY_VIOLATION) throw err;
      const by = await sql<{ manifest_digest: string }>`
        select manifest_digest from manifest_blobs where repo_uid = ${repoUid} and blob_digest = ${digest} limit 1`.execute(
        this.db,
      );
      return { kind: "referenced", by: by.rows[0]?.manifest_digest ?? "a manifest" };
    }
  }
}
