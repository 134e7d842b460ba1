// The depths of the images module's work queues, for the metrics' scrape: one statement.
import { sql } from "kysely";
import type { ImagesDb } from "./schema.js";

export interface QueueDepths {
  /** images whose vulnerability report waits to be recomputed */
  reports: number;
  /** inventories waiting to be read */
  inventoriesPending: number;
  /** inventories whose read failed */
  inventoriesFailed: number;
  /** advisory changes not yet turned into queued reports */
  advisoryChanges: number;
}

export async function queueDepths(db: ImagesDb): Promise<QueueDepths> {
  const { rows } = await sql<Record<"reports" | "pending" | "failed" | "changes", string | number>>`
    select (select count(*) from image_report_queue) as reports,
      (select count(*) from image_inventories where state = 'pending') as pending,
      (select count(*) from image_inventories where state = 'failed') as failed,
      (select count(*) from advisory_changes) as changes`.execute(db);
  const row = rows[0];
  return {
    reports: Number(row?.reports ?? 0),
    inventoriesPending: Number(row?.pending ?? 0),
    inventoriesFailed: Number(row?.failed ?? 0),
    advisoryChanges: Number(row?.changes ?? 0),
  };
}
