// Retention: events older than the retention period are deleted in the background, oldest first,
// their deliveries with them (foreign key cascade). Every replica runs it; rows another replica
// is deleting are skipped (SKIP LOCKED), so they share the work.
import type { PeriodicTask } from "../platform/module.js";
import type { EventsRepository } from "./storage/events.js";

/** Rows per statement: short enough that a stop waiting for the run is not held up. */
export const PRUNE_BATCH = 1000;
/** Statements per run: a backlog (a lowered retention) is worked off over the next runs. */
const BATCHES_PER_RUN = 20;

/** Deletes events recorded before now − retention; answers how many. */
export async function pruneEvents(events: EventsRepository, retentionMs: number, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - retentionMs);
  let total = 0;
  for (let i = 0; i < BATCHES_PER_RUN; i++) {
    const deleted = await events.pruneBefore(cutoff, PRUNE_BATCH);
    total += deleted;
    if (deleted < PRUNE_BATCH) break;
  }
  return total;
}

export function retentionTask(
  events: EventsRepository,
  retentionMs: number,
  everyMs: number,
  now: () => Date,
): PeriodicTask {
  return { name: "events retention", everyMs, run: async () => void (await pruneEvents(events, retentionMs, now())) };
}
