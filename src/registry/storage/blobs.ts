// Blobs: complete content by digest (the bytes live in the blob store), and their links into
// repos (a repo holds a blob once it was pushed or mounted there; pulls through that repo may
// read it). A manifest's blobs are held by foreign keys, so a link in use cannot be removed.
import { sql } from "kysely";
import { FOREIGN_KEY_VIOLATION, sqlState } from "../../storage/errors.js";
import { RegistryRepository, type RegistryDb } from "./tables.js";

export interface BlobRow {
  digest: string;
  size: number;
}

export type UnlinkBlobResult = { kind: "deleted" } | { kind: "not_found" } | { kind: "referenced"; by: string };

export class BlobsRepository extends RegistryRepository {
  /** The blob if `repo` holds it. */
  async inRepo(repoUid: string, digest: string): Promise<BlobRow | undefined> {
    const row = await this.db
      .selectFrom("repo_blobs as l")
      .innerJoin("blobs as b", "b.digest", "l.digest")
      .select(["b.digest", "b.size"])
      .where("l.repo_uid", "=", repoUid)
      .where("l.digest", "=", digest)
      .executeTakeFirst();
    return row && { digest: row.digest, size: Number(row.size) };
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
        await trx
          .insertInto("blobs")
          .values({ digest, size, create_time: now, touch_time: now })
          .onConflict((oc) => oc.column("digest").doUpdateSet((eb) => ({ touch_time: eb.ref("excluded.touch_time") })))
          .execute();
        await link(trx, repoUid, digest, now);
        if (uploadId) await trx.deleteFrom("uploads").where("id", "=", uploadId).execute();
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
      const held = await trx
        .selectFrom("repo_blobs")
        .select(sql<number>`1`.as("held"))
        .where("repo_uid", "=", fromUid)
        .where("digest", "=", digest)
        .forShare()
        .executeTakeFirst();
      if (!held) return false;
      await trx.updateTable("blobs").set({ touch_time: now }).where("digest", "=", digest).execute();
      await link(trx, repoUid, digest, now);
      return true;
    });
  }

  /** Unlinks a blob from a repo; refused while a manifest there needs it. */
  async unlink(repoUid: string, digest: string): Promise<UnlinkBlobResult> {
    try {
      const r = await this.db
        .deleteFrom("repo_blobs")
        .where("repo_uid", "=", repoUid)
        .where("digest", "=", digest)
        .executeTakeFirst();
      return r.numDeletedRows > 0n ? { kind: "deleted" } : { kind: "not_found" };
    } catch (err) {
      if (sqlState(err) !== FOREIGN_KEY_VIOLATION) throw err;
      const by = await this.db
        .selectFrom("manifest_blobs")
        .select("manifest_digest")
        .where("repo_uid", "=", repoUid)
        .where("blob_digest", "=", digest)
        .limit(1)
        .executeTakeFirst();
      return { kind: "referenced", by: by?.manifest_digest ?? "a manifest" };
    }
  }
}

/** Links a blob into a repo (again: the link's time moves). */
async function link(db: RegistryDb, repoUid: string, digest: string, now: Date): Promise<void> {
  await db
    .insertInto("repo_blobs")
    .values({ repo_uid: repoUid, digest, link_time: now })
    .onConflict((oc) =>
      oc.columns(["repo_uid", "digest"]).doUpdateSet((eb) => ({ link_time: eb.ref("excluded.link_time") })),
    )
    .execute();
}
