// Upload sessions: blob bytes staged in the blob store while a push sends them, the acknowledged
// size here. A session goes with its repo; completing it (BlobsRepository.store) ends it.
import { sql } from "kysely";
import { compiledOnce } from "../../storage/compiled.js";
import { RegistryRepository, type RegistryDb } from "./tables.js";

export interface UploadRow {
  id: string;
  repo_uid: string;
  size: number;
  update_time: Date;
}

export class UploadsRepository extends RegistryRepository {
  async create(id: string, repoUid: string, now: Date): Promise<void> {
    await insertUpload(this.db, id, repoUid, now);
  }

  async get(id: string, repoUid: string): Promise<UploadRow | undefined> {
    const [row] = await uploadIn(this.db, id, repoUid);
    return row && { ...row, size: Number(row.size) };
  }

  /** Records bytes appended to an upload, if nobody else moved it meanwhile. */
  async advance(id: string, from: number, to: number, now: Date): Promise<boolean> {
    return (await advanceUpload(this.db, id, from, to, now)).length === 1;
  }

  async delete(id: string): Promise<boolean> {
    const r = await this.db.deleteFrom("uploads").where("id", "=", id).executeTakeFirst();
    return r.numDeletedRows === 1n;
  }

  async exists(id: string): Promise<boolean> {
    const row = await this.db
      .selectFrom("uploads")
      .select(sql<number>`1`.as("one"))
      .where("id", "=", id)
      .executeTakeFirst();
    return row !== undefined;
  }

  // --- garbage collection ---

  /** How many sessions were last moved before `cutoff`. */
  async countExpired(cutoff: Date): Promise<number> {
    const row = await this.db
      .selectFrom("uploads")
      .select((eb) => eb.fn.countAll<string | number>().as("n"))
      .where("update_time", "<", cutoff)
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** Deletes up to `limit` sessions last moved before `cutoff`, oldest first; their ids. */
  async deleteExpired(cutoff: Date, limit: number): Promise<string[]> {
    const rows = await this.db
      .deleteFrom("uploads")
      .where(
        "id",
        "in",
        this.db
          .selectFrom("uploads")
          .select("id")
          .where("update_time", "<", cutoff)
          .orderBy("update_time")
          .limit(limit),
      )
      .returning("id")
      .execute();
    return rows.map((r) => r.id);
  }
}

/** Every request on an upload session reads it: compiled once. */
const uploadIn = compiledOnce((db: RegistryDb, id: string, repoUid: string) =>
  db
    .selectFrom("uploads")
    .select(["id", "repo_uid", "size", "update_time"])
    .where("id", "=", id)
    .where("repo_uid", "=", repoUid),
);

/** Every upload session starts with it: compiled once. */
const insertUpload = compiledOnce((db: RegistryDb, id: string, repoUid: string, now: Date) =>
  db.insertInto("uploads").values({ id, repo_uid: repoUid, size: sql<number>`0`, create_time: now, update_time: now }),
);

/** Every chunk records its size with it: compiled once. */
const advanceUpload = compiledOnce((db: RegistryDb, id: string, from: number, to: number, now: Date) =>
  db
    .updateTable("uploads")
    .set({ size: to, update_time: now })
    .where("id", "=", id)
    .where("size", "=", from)
    .returning("id"),
);
