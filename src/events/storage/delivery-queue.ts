// The delivery worker's SQL (events/delivery.ts): which replica delivers to a subscription (a lease
// on the subscription row, claimed with FOR NO KEY UPDATE SKIP LOCKED so replicas never wait on
// each other), its pending deliveries in event order, and the outcome of each attempt.
import { sql } from "kysely";
import { compiledOnce } from "../../storage/compiled.js";
import type { Db } from "../../storage/db.js";
import { eventsDb, type EventActorJson, type EventsDb } from "./schema.js";

export interface LeasedSubscription {
  uid: string;
  /** the subscription's group: the delivery token's `sub` is webhook:<this> */
  parentUid: string;
  sink: string;
  /** who created it (an identity uid, the operator's subject; null when unknown): it receives only what they may see */
  creator: string | null;
  leaseUntil: Date;
}

/** A pending delivery with the event it delivers. */
export interface DueDelivery {
  seq: string;
  attempts: number;
  nextAttemptTime: Date;
  /** when a redelivery queued it again: its retry period counts from then, not from the event's time */
  retryFrom: Date | null;
  event: {
    uid: string;
    group: string | null;
    type: string;
    source: string;
    subject: string;
    actor: EventActorJson | null;
    body: unknown;
    traceparent: string;
    time: Date;
  };
}

export interface DeliveredOutcome {
  seq: string;
  statusCode: number;
  time: Date;
}

export interface FailedAttempt {
  seq: string;
  /** the receiver's HTTP status; null when no answer came (refused, timed out, address refused) */
  statusCode: number | null;
  error: string;
  time: Date;
  nextAttemptTime: Date;
  /** the retry period is over: the delivery is failed and the next one goes */
  gaveUp: boolean;
}

const sinkOf = compiledOnce((db: EventsDb, uid: string) =>
  db.selectFrom("event_subscriptions").select("sink").where("uid", "=", uid),
);

export class DeliveryQueue {
  private readonly db: EventsDb;
  constructor(db: Db) {
    this.db = eventsDb(db);
  }

  /**
   * Leases up to `limit` subscriptions (not leased, or whose lease expired, and not in `exclude`)
   * whose first pending delivery is due, to `owner` until `now + leaseMs`.
   */
  async claim(
    owner: string,
    leaseMs: number,
    limit: number,
    now: Date,
    exclude: string[],
  ): Promise<LeasedSubscription[]> {
    if (limit <= 0) return [];
    const until = new Date(now.getTime() + leaseMs);
    const { rows } = await sql<{
      uid: string;
      parent_uid: string;
      sink: string;
      creator: string | null;
      lease_until: Date;
    }>`
      update event_subscriptions s set lease_owner = ${owner}, lease_until = ${until}
      from (
        select c.uid from event_subscriptions c
        where (c.lease_until is null or c.lease_until < ${now})
          and not (c.uid = any(${exclude}::text[]))
          and (select d.next_attempt_time from event_deliveries d
               where d.subscription_uid = c.uid and d.state = 'pending'
               order by d.event_seq limit 1) <= ${now}
        limit ${limit}
        -- Not FOR UPDATE: every uncommitted insert of a delivery holds FOR KEY SHARE on its
        -- subscription (the foreign key), and a busy subscription would be skipped until it paused.
        -- The lease columns are no key, so the update below takes no stronger lock either.
        for no key update skip locked
      ) picked
      where s.uid = picked.uid
      returning s.uid, s.parent_uid, s.sink, s.creator, s.lease_until`.execute(this.db);
    return rows.map((r) => ({
      uid: r.uid,
      parentUid: r.parent_uid,
      sink: r.sink,
      creator: r.creator,
      leaseUntil: new Date(r.lease_until),
    }));
  }

  /** Extends `owner`'s lease; undefined when it no longer holds it (expired and taken, or the subscription is gone). */
  async renew(uid: string, owner: string, leaseMs: number, now: Date): Promise<Date | undefined> {
    const until = new Date(now.getTime() + leaseMs);
    const row = await this.db
      .updateTable("event_subscriptions")
      .set({ lease_until: until })
      .where("uid", "=", uid)
      .where("lease_owner", "=", owner)
      .returning("lease_until")
      .executeTakeFirst();
    return row ? until : undefined;
  }

  /** The subscription's sink now; undefined once it is deleted. Read before every send: compiled once. */
  async currentSink(uid: string): Promise<string | undefined> {
    const [row] = await sinkOf(this.db, uid);
    return row?.sink;
  }

  /** Gives the lease up, if `owner` still holds it. */
  async release(uid: string, owner: string): Promise<void> {
    await this.db
      .updateTable("event_subscriptions")
      .set({ lease_owner: null, lease_until: null })
      .where("uid", "=", uid)
      .where("lease_owner", "=", owner)
      .execute();
  }

  /** The first `limit` pending deliveries of a subscription, in event order. */
  async pending(subscriptionUid: string, limit: number): Promise<DueDelivery[]> {
    const rows = await this.db
      .selectFrom("event_deliveries as d")
      .innerJoin("events as e", "e.seq", "d.event_seq")
      .select([
        "d.event_seq",
        "d.attempts",
        "d.next_attempt_time",
        "d.retry_from",
        "e.uid",
        "e.parent_uid",
        "e.type",
        "e.source",
        "e.subject",
        "e.actor",
        "e.body",
        "e.traceparent",
        "e.time",
      ])
      .where("d.subscription_uid", "=", subscriptionUid)
      .where("d.state", "=", "pending")
      .orderBy("d.event_seq")
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      seq: String(r.event_seq),
      attempts: r.attempts,
      nextAttemptTime: new Date(r.next_attempt_time),
      retryFrom: r.retry_from && new Date(r.retry_from),
      event: {
        uid: r.uid,
        group: r.parent_uid,
        type: r.type,
        source: r.source,
        subject: r.subject,
        actor: r.actor,
        body: r.body,
        traceparent: r.traceparent,
        time: new Date(r.time),
      },
    }));
  }

  /**
   * How many deliveries are pending and how long the oldest has waited (since its event, or since
   * a redelivery queued it again), in seconds by the database's clock: one statement, for the
   * metrics' scrape.
   */
  async backlog(): Promise<{ pending: number; oldestAgeSeconds: number }> {
    const { rows } = await sql<{ pending: string | number; oldest_age: number | null }>`
      select count(*) as pending,
        extract(epoch from now() - min(coalesce(d.retry_from, e.time)))::float8 as oldest_age
      from event_deliveries d join events e on e.seq = d.event_seq
      where d.state = 'pending'`.execute(this.db);
    const row = rows[0];
    return { pending: Number(row?.pending ?? 0), oldestAgeSeconds: Math.max(0, row?.oldest_age ?? 0) };
  }

  /** Marks deliveries delivered, in one statement. */
  async delivered(subscriptionUid: string, outcomes: readonly DeliveredOutcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    await sql`
      update event_deliveries d set state = 'delivered', attempts = d.attempts + 1, last_attempt_time = v.time,
        delivered_time = v.time, last_status_code = v.code, last_error = null
      from unnest(${outcomes.map((o) => o.seq)}::bigint[], ${outcomes.map((o) => o.statusCode)}::int[],
        ${outcomes.map((o) => o.time.toISOString())}::timestamptz[]) as v(seq, code, time)
      where d.subscription_uid = ${subscriptionUid} and d.event_seq = v.seq and d.state = 'pending'`.execute(this.db);
  }

  /** Records a failed attempt: retried at its next attempt time, or failed for good. */
  async attemptFailed(subscriptionUid: string, attempt: FailedAttempt): Promise<void> {
    await this.db
      .updateTable("event_deliveries")
      .set((eb) => ({
        state: attempt.gaveUp ? "failed" : "pending",
        attempts: eb("attempts", "+", 1),
        last_attempt_time: attempt.time,
        last_status_code: attempt.statusCode,
        last_error: attempt.error,
        next_attempt_time: attempt.nextAttemptTime,
      }))
      .where("subscription_uid", "=", subscriptionUid)
      .where("event_seq", "=", attempt.seq)
      .where("state", "=", "pending")
      .execute();
  }
}
