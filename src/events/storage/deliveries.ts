// Each subscription's deliveries, read newest event first and paged by the event's sequence
// number (a delivery has no uid of its own), and queued again on request.
import { sql } from "kysely";
import type { Db } from "../../storage/db.js";
import { eventsDb, type DeliveryRow, type EventsDb } from "./schema.js";

export type DeliveryState = DeliveryRow["state"];

/** A delivery with the attributes of its event. */
export interface DeliveryView extends DeliveryRow {
  event_uid: string;
  event_type: string;
  event_subject: string;
  event_time: Date;
}

/** Which deliveries RedeliverEvents queues again: one event's, or those of a time range. */
export type RedeliverySelection = { eventUid: string } | { start?: Date; end?: Date };

export class DeliveriesRepository {
  private readonly db: EventsDb;
  constructor(db: Db) {
    this.db = eventsDb(db);
  }

  private matching(subscriptionUid: string, states: readonly DeliveryState[]) {
    let q = this.db
      .selectFrom("event_deliveries as d")
      .innerJoin("events as e", "e.seq", "d.event_seq")
      .where("d.subscription_uid", "=", subscriptionUid);
    if (states.length > 0) q = q.where("d.state", "in", states);
    return q;
  }

  /** Up to `limit` deliveries, newest event first, after the event `afterSeq` (a previous page's last). */
  page(
    subscriptionUid: string,
    states: readonly DeliveryState[],
    afterSeq: string | undefined,
    limit: number,
  ): Promise<DeliveryView[]> {
    let q = this.matching(subscriptionUid, states);
    if (afterSeq !== undefined) q = q.where("d.event_seq", "<", afterSeq);
    return q
      .selectAll("d")
      .select(["e.uid as event_uid", "e.type as event_type", "e.subject as event_subject", "e.time as event_time"])
      .orderBy("d.event_seq", "desc")
      .limit(limit)
      .execute() as Promise<DeliveryView[]>;
  }

  async count(subscriptionUid: string, states: readonly DeliveryState[]): Promise<bigint> {
    const row = await this.matching(subscriptionUid, states)
      .select((eb) => eb.fn.countAll().as("n"))
      .executeTakeFirstOrThrow();
    return BigInt(row.n as string | number | bigint);
  }

  /**
   * Puts the selected deliveries back to pending, due now, attempts kept, retried for a whole
   * retry period from now (an event the subscription never got a delivery row for gets none);
   * answers how many.
   */
  async redeliver(subscriptionUid: string, selection: RedeliverySelection, now: Date): Promise<number> {
    const which =
      "eventUid" in selection
        ? sql`e.uid = ${selection.eventUid}`
        : sql.join(
            [
              sql`true`,
              ...(selection.start ? [sql`e.time >= ${selection.start}`] : []),
              ...(selection.end ? [sql`e.time < ${selection.end}`] : []),
            ],
            sql` and `,
          );
    const result = await sql`
      update event_deliveries d
      set state = 'pending', next_attempt_time = ${now}, retry_from = ${now}, delivered_time = null
      from events e
      where e.seq = d.event_seq and d.subscription_uid = ${subscriptionUid} and ${which}`.execute(this.db);
    return Number(result.numAffectedRows ?? 0n);
  }
}
