// Upload sessions: blob bytes staged in the blob store while a push sends them, the acknowledged
// size here. A session goes with its repo; completing it (BlobsRepository.store) ends it.
import { sql } from "kysely";
import { RegistryRepository } from "./tables.js";

export interface UploadRow {
  id: string;
  repo_uid: string;
  size: number;
  update_time: Date;
}

const num = (v: unknown) => Number(v);

export class UploadsRepository extends RegistryRepository {
  async create(id: string, repoUid: string, now: Date): Promise<void> {
    await sql`insert into uploads (id, repo_uid, size, create_time, update_time)
      values (${id}, ${repoUid}, 0, ${now}, ${now})`.execute(this.db);
  }

  async get(id: string, repoUid: string): Promise<UploadRow | undefined> {
    const r = await sql<UploadRow>`
      select id, repo_uid, size, update_time from uploads where id = ${id} and repo_uid = ${repoUid}`.execute(this.db);
    const row = r.rows[0];
    return row && { ...row, size: num(row.size) };
  }

  /** Records bytes appended to an upload, if nobody else moved it meanwhile. */
  async advance(id: string, from: number, to: number, now: Date): Promise<boolean> {
    const r = await sql`update uploads set size = ${to}, update_time = ${now}
      where id = ${id} and size = ${from}`.execute(this.db);
    return num(r.numAffectedRows ?? 0) === 1;
  }

  async delete(id: string): Promise<boolean> {
    const r = await sql`delete from uploads where id = ${id}`.execute(this.db);
    return num(r.numAffectedRows ?? 0) === 1;
  }
}
