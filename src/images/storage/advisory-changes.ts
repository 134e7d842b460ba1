// The advisories' changes the reports have yet to follow (advisory_changes): written by the
// vulnerabilities module's hook inside each import's transaction, consumed by the report worker
// (claimed with SKIP LOCKED and deleted in the transaction that queues the images concerned, so
// replicas share them and a crash leaves them for the next claim).
import { sql } from "kysely";
import type { ImagesDb } from "./schema.js";

/** What changed: the changed advisories' artifact names and package URLs (without version). */
export interface AdvisoryChange {
  names: readonly string[];
  purls: readonly string[];
}

export class AdvisoryChangesRepository {
  constructor(private readonly db: ImagesDb) {}

  /** Records a change; call inside the transaction that makes it, so it commits with it or not at all. */
  async record(change: AdvisoryChange, now: Date): Promise<void> {
    if (change.names.length === 0 && change.purls.length === 0) return;
    await this.db
      .insertInto("advisory_changes")
      .values({ names: [...change.names], purls: [...change.purls], change_time: now })
      .execute();
  }

  /**
   * Takes up to `limit` changes, oldest first, locking (SKIP LOCKED: another replica takes
   * others) and deleting them; call inside a transaction, so a crash before the commit leaves
   * them recorded.
   */
  async claim(limit: number): Promise<AdvisoryChange[]> {
    const { rows } = await sql<{ names: string[]; purls: string[] }>`
      delete from advisory_changes
      where id in (select id from advisory_changes order by id limit ${limit} for update skip locked)
      returning names, purls`.execute(this.db);
    return rows;
  }

  /** How many changes wait (tests). */
  async pending(): Promise<number> {
    const row = await this.db
      .selectFrom("advisory_changes")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
}
