// Blobs: complete content by digest (the bytes live in the blob store), and their links into
// repos (a repo holds a blob once it was pushed or mounted there; pulls through that repo may
// read it). A manifest's blobs are held by foreign keys, so a link in use cannot be removed.
import { sql, type RawBuilder } from "kysely";
import { compiledOnce } from "../../storage/compiled.js";
import { FOREIGN_KEY_VIOLATION, sqlState } from "../../storage/errors.js";
import type { InsertWithin } from "./manifests.js";
import { RegistryRepository, type AliasedBuilder, type RegistryDb } from "./tables.js";

export interface BlobRow {
  digest: string;
  size: number;
}

export type UnlinkBlobResult = { kind: "deleted" } | { kind: "not_found" } | { kind: "referenced"; by: string };

export class BlobsRepository extends RegistryRepository {
  /** The blob if `repo` holds it. */
  async inRepo(repoUid: string, digest: string): Promise<BlobRow | undefined> {
    const [row] = await blobInRepo(this.db, repoUid, digest);
    return row && { digest: row.digest, size: Number(row.size) };
  }

  /** The `limit` blobs touched last (by a push or a mount): the likeliest to be in the store. */
  async lastTouched(limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom("blobs")
      .select("digest")
      .orderBy("touch_time", "desc")
      .limit(limit)
      .execute();
    return rows.map((r) => r.digest);
  }

  /** Whether any repo's push recorded the blob (its bytes then belong to that push). */
  async recorded(digest: string): Promise<boolean> {
    const row = await this.db.selectFrom("blobs").select("digest").where("digest", "=", digest).executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Records a complete blob and links it into a repo, ending the upload session `upload` names if
   * any (which must still hold `size` acknowledged bytes: else `UploadMovedError`, and nothing is
   * recorded), with the push's `event`; false when the repo was deleted meanwhile. One statement
   * records the blob, its link, the session's end and the event. `placeBytes` moves the bytes into
   * place last, while this transaction holds the blob's row: a garbage collector removing the same
   * digest either finished first (its row and bytes are gone, and these bytes arrive afresh) or
   * waits until the link stands and then keeps the blob. A push stays whole however short the
   * grace window. Run it in the caller's transaction scope, so the event is heard once it commits
   * (without `event`, the caller records its own).
   */
  async store(
    repoUid: string,
    digest: string,
    size: number,
    now: Date,
    upload: { id: string; size: number } | undefined,
    placeBytes: () => Promise<void>,
    event: (recorded: RawBuilder<unknown>) => InsertWithin = () => NO_EVENT,
  ): Promise<boolean> {
    try {
      await this.db.transaction().execute(async (trx) => {
        const insert = event(sql`exists (select 1 from l)`);
        const ended = upload
          ? sql`delete from uploads where id = ${upload.id} and size = ${upload.size} returning id`
          : sql`select 1`;
        const { rows } = await sql<{ ended: boolean; event_seq: unknown; event_deliveries: unknown }>`
          with b as (
            insert into blobs (digest, size, create_time, touch_time) values (${digest}, ${size}, ${now}, ${now})
            on conflict (digest) do update set touch_time = excluded.touch_time
            returning digest
          ),
          l as (
            insert into repo_blobs (repo_uid, digest, link_time) values (${repoUid}, ${digest}, ${now})
            on conflict (repo_uid, digest) do update set link_time = excluded.link_time
            returning digest
          ),
          u as (${ended}),
          ${insert.ctes}
          select exists (select 1 from u) as ended, ${insert.columns}`.execute(trx);
        // Rolled back with the blob's record and the event.
        if (rows[0]?.ended !== true) throw new UploadMovedError(upload!.id);
        insert.inserted(rows[0]);
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

  // --- garbage collection ---

  /** How many links no manifest uses were made before `cutoff`. */
  async countUnusedLinks(cutoff: Date): Promise<number> {
    const row = await this.db
      .selectFrom("repo_blobs as l")
      .select((eb) => eb.fn.countAll<string | number>().as("n"))
      .where((eb) => isUnusedLink(eb, cutoff))
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** Deletes the links no manifest uses made before `cutoff` (re-checked in the statement); how many. */
  async deleteUnusedLinks(cutoff: Date): Promise<number> {
    const r = await this.db
      .deleteFrom("repo_blobs as l")
      .where((eb) => isUnusedLink(eb, cutoff))
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** How many blobs no repo links were last touched before `cutoff`, and their bytes. */
  async countUnused(cutoff: Date): Promise<{ blobs: number; bytes: number }> {
    const row = await this.db
      .selectFrom("blobs as b")
      .select((eb) => [
        eb.fn.countAll<string | number>().as("n"),
        eb.fn.coalesce(eb.fn.sum<string | number | null>("size"), sql<number>`0`).as("bytes"),
      ])
      .where((eb) => isUnusedBlob(eb, cutoff))
      .executeTakeFirst();
    return { blobs: Number(row?.n ?? 0), bytes: Number(row?.bytes ?? 0) };
  }

  /** Up to `limit` blobs no repo links, last touched before `cutoff`. */
  async unused(cutoff: Date, limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom("blobs as b")
      .select("digest")
      .where((eb) => isUnusedBlob(eb, cutoff))
      .limit(limit)
      .execute();
    return rows.map((r) => r.digest);
  }

  /**
   * Deletes a blob if it is still unused (re-checked), then `removeBytes` while the row stays
   * locked, so a concurrent push of the same digest waits and then records (and stores) it
   * afresh. The blob's size, or undefined when it was in use.
   */
  async removeUnused(digest: string, cutoff: Date, removeBytes: () => Promise<void>): Promise<number | undefined> {
    try {
      return await this.db.transaction().execute(async (trx) => {
        const row = await trx
          .deleteFrom("blobs as b")
          .where("b.digest", "=", digest)
          .where((eb) => isUnusedBlob(eb, cutoff))
          .returning("size")
          .executeTakeFirst();
        if (!row) return undefined;
        await removeBytes();
        return Number(row.size);
      });
    } catch (err) {
      // A push linked it while this waited for the row (the recheck may not see that link; the
      // foreign key does): the blob is in use, and its bytes were never touched.
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return undefined;
      throw err;
    }
  }
}

/** A link made before `cutoff` that no manifest of its repo uses. */
function isUnusedLink(eb: AliasedBuilder<"repo_blobs", "l">, cutoff: Date) {
  return eb.and([
    eb("l.link_time", "<", cutoff),
    eb.not(
      eb.exists(
        eb
          .selectFrom("manifest_blobs as mb")
          .select(sql<number>`1`.as("one"))
          .whereRef("mb.repo_uid", "=", "l.repo_uid")
          .whereRef("mb.blob_digest", "=", "l.digest"),
      ),
    ),
  ]);
}

/** A blob last touched before `cutoff` that no repo links. */
function isUnusedBlob(eb: AliasedBuilder<"blobs", "b">, cutoff: Date) {
  return eb.and([
    eb("b.touch_time", "<", cutoff),
    eb.not(
      eb.exists(
        eb
          .selectFrom("repo_blobs as l")
          .select(sql<number>`1`.as("one"))
          .whereRef("l.digest", "=", "b.digest"),
      ),
    ),
  ]);
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

/** No event: the caller records one itself. */
const NO_EVENT: InsertWithin = {
  ctes: sql`event_none as (select 1)`,
  columns: sql`null::bigint as event_seq`,
  inserted: () => {},
};

/** The upload session a completion named was cancelled, or fed by another request, meanwhile. */
export class UploadMovedError extends Error {
  constructor(readonly uploadId: string) {
    super(`upload ${uploadId} was moved by a concurrent request`);
  }
}

/** Every blob GET reads it: compiled once. */
const blobInRepo = compiledOnce((db: RegistryDb, repoUid: string, digest: string) =>
  db
    .selectFrom("repo_blobs as l")
    .innerJoin("blobs as b", "b.digest", "l.digest")
    .select(["b.digest", "b.size"])
    .where("l.repo_uid", "=", repoUid)
    .where("l.digest", "=", digest),
);
