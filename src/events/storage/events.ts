// The outbox and audit trail: each event is one row, inserted together with one delivery row per
// subscription it matches (a subscription at the event's group or an ancestor, whose type filter,
// if any, names the type exactly or by a prefix ending in "."), in one statement.
import { randomHex } from "../../core/random-hex.js";
import { sql, type RawBuilder, type SqlBool } from "kysely";
import type { Db } from "../../storage/db.js";
import { ancestorsOf } from "../../core/uidp.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { eventsDb, type EventActorJson, type EventsDb } from "./schema.js";

export interface NewEvent {
  type: string;
  source: string;
  subject: string;
  group: string | undefined;
  actor: EventActorJson | undefined;
  body: unknown;
  traceparent: string;
  time: Date;
  /** delivered to no subscription (an INTERNAL event): kept in the audit trail only */
  undelivered?: boolean;
}

export interface StoredEvent extends NewEvent {
  uid: string;
  seq: string;
  /** how many subscriptions it is to be delivered to */
  deliveries: number;
}

/** What an event's insert answers. */
interface InsertedRow {
  event_seq: string;
  event_deliveries: number;
}

/** ListEvents' filters, validated. */
export interface EventFilter {
  uidp?: UIDPFilter;
  /** recorded at or after */
  start?: Date;
  /** recorded before */
  end?: Date;
  /** exact types, or prefixes ending in "."; empty: every type */
  types: readonly string[];
  subject?: string;
  actor?: string;
}

/**
 * Whether subscription `s` takes event `e`'s type: no type filter, the type named exactly, or a
 * prefix ending in "." (one rule for every statement that makes deliveries).
 */
const SUBSCRIPTION_WANTS_TYPE = sql<boolean>`(cardinality(s.types) = 0 or e.type = any(s.types)
  or exists (select 1 from unnest(s.types) t where right(t, 1) = '.' and starts_with(e.type, t)))`;

/** A new event's uid: a child of its group's UIDP, or a root UIDP for an event of no group. */
function eventUid(group: string | undefined): string {
  return group ? `${group}/${randomHex(8)}` : randomHex(20);
}

export class EventsRepository {
  private readonly db: EventsDb;
  constructor(db: Db) {
    this.db = eventsDb(db);
  }

  /** Inserts the event and its deliveries; answers it with its uid and sequence number. */
  async insert(event: NewEvent): Promise<StoredEvent> {
    const { statement, stored } = this.insertStatement(event);
    return stored(await statement.execute(this.db));
  }

  /**
   * The statement `insert` runs, for a caller that sends it itself; `stored` makes the stored
   * event from its result.
   */
  insertStatement(event: NewEvent): {
    statement: RawBuilder<InsertedRow>;
    stored: (result: { rows: readonly unknown[] }) => StoredEvent;
  } {
    const { stored, ctes, columns } = this.insertWithin(event, sql`true`);
    return {
      statement: sql<InsertedRow>`with ${ctes} select ${columns}`,
      stored: ({ rows }) => {
        const row = rows[0] as InsertedRow;
        return { ...stored, seq: String(row.event_seq), deliveries: Number(row.event_deliveries) };
      },
    };
  }

  /**
   * The event's insert and its deliveries' as data-modifying WITH queries for a caller's
   * statement (`insert` is one of its own), made only if `condition` holds there; its final select list takes
   * `columns` (`event_seq`, null when not inserted, and `event_deliveries`). `stored` is the event
   * but for those two.
   */
  insertWithin(
    event: NewEvent,
    condition: RawBuilder<unknown>,
  ): { stored: Omit<StoredEvent, "seq" | "deliveries">; ctes: RawBuilder<unknown>; columns: RawBuilder<unknown> } {
    const uid = eventUid(event.group);
    // Every value cast: an INSERT … SELECT's parameters are not typed by the columns they fill.
    const ancestors = event.group && !event.undelivered ? [...ancestorsOf(event.group), event.group] : [];
    const ctes = sql`event_e as (
        insert into events (uid, parent_uid, type, source, subject, actor_subject, actor, body, traceparent, time)
        select ${uid}::text, ${event.group ?? null}::text, ${event.type}::text, ${event.source}::text, ${event.subject}::text,
          ${event.actor?.subject ?? null}::text, ${event.actor ? JSON.stringify(event.actor) : null}::jsonb,
          ${JSON.stringify(event.body ?? null)}::jsonb, ${event.traceparent}::text, ${event.time}::timestamptz
        where ${condition}
        returning seq, type
      ),
      event_d as (
        insert into event_deliveries (subscription_uid, event_seq)
        select s.uid, e.seq from event_e e join event_subscriptions s on s.parent_uid = any(${ancestors}::text[])
        where ${SUBSCRIPTION_WANTS_TYPE}
        returning 1
      )`;
    const columns = sql`(select seq from event_e) as event_seq, (select count(*) from event_d)::int as event_deliveries`;
    return { stored: { ...event, uid }, ctes, columns };
  }

  /**
   * Inserts deliverable events together, with their deliveries, in one statement (what
   * recordSoon gathered); answers them with their uids and sequence numbers, in order, and how
   * many deliveries they made in all.
   */
  async insertMany(events: readonly NewEvent[]): Promise<{ stored: StoredEvent[]; deliveries: number }> {
    if (events.length === 0) return { stored: [], deliveries: 0 };
    const uids = events.map((e) => eventUid(e.group));
    // One array a column, so the statement's text is the same for every batch size (parsed and
    // planned once on PostgreSQL; one short text on PGlite) however many events it carries.
    const column = <T>(of: (e: NewEvent, i: number) => T) => events.map(of);
    // A subscription matches an event of its group or of a group below it (as insert's ancestors).
    const { rows } = await sql<{ uid: string; seq: string; deliveries: number }>`
      with v as (
        select * from unnest(
          ${uids}::text[], ${column((e) => e.group ?? null)}::text[], ${column((e) => e.type)}::text[],
          ${column((e) => e.source)}::text[], ${column((e) => e.subject)}::text[],
          ${column((e) => e.actor?.subject ?? null)}::text[],
          ${column((e) => (e.actor ? JSON.stringify(e.actor) : null))}::text[],
          ${column((e) => JSON.stringify(e.body ?? null))}::text[], ${column((e) => e.traceparent)}::text[],
          ${column((e) => e.time.toISOString())}::text[]
        ) with ordinality as v (uid, parent_uid, type, source, subject, actor_subject, actor, body, traceparent, time, i)
      ),
      e as (
        insert into events (uid, parent_uid, type, source, subject, actor_subject, actor, body, traceparent, time)
        select uid, parent_uid, type, source, subject, actor_subject, actor::jsonb, body::jsonb, traceparent,
          time::timestamptz
        from v order by i
        returning seq, uid, parent_uid, type
      ),
      d as (
        insert into event_deliveries (subscription_uid, event_seq)
        select s.uid, e.seq from e join event_subscriptions s
          on e.parent_uid = s.parent_uid or starts_with(e.parent_uid, s.parent_uid || '/')
        where ${SUBSCRIPTION_WANTS_TYPE}
        returning 1
      )
      select uid, seq, (select count(*) from d)::int as deliveries from e`.execute(this.db);
    const seqOf = new Map(rows.map((r) => [r.uid, String(r.seq)]));
    return {
      stored: events.map((event, i) => ({ ...event, uid: uids[i]!, seq: seqOf.get(uids[i]!)!, deliveries: 0 })),
      deliveries: Number(rows[0]?.deliveries ?? 0),
    };
  }

  /** The FROM + WHERE the list engine pages (it adds the selection and the count). */
  listQuery(filter: EventFilter) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("events"), filter.uidp);
      if (filter.start) q = q.where("time", ">=", filter.start);
      if (filter.end) q = q.where("time", "<", filter.end);
      if (filter.subject) q = q.where("subject", "=", filter.subject);
      if (filter.actor) q = q.where("actor_subject", "=", filter.actor);
      if (filter.types.length > 0) {
        const exact = filter.types.filter((t) => !t.endsWith("."));
        const prefixes = filter.types.filter((t) => t.endsWith("."));
        q = q.where((eb) =>
          eb.or([
            ...(exact.length ? [eb("type", "in", exact)] : []),
            ...prefixes.map((p) => sql<SqlBool>`starts_with(type, ${p})`),
          ]),
        );
      }
      return q;
    };
  }

  /**
   * Deletes up to `limit` events recorded before `cutoff`, oldest first (their deliveries
   * cascade); answers how many. Rows another replica is pruning are skipped, not waited for.
   */
  async pruneBefore(cutoff: Date, limit: number): Promise<number> {
    const result = await sql`
      delete from events where seq in (
        select seq from events where time < ${cutoff} order by time limit ${limit} for update skip locked
      )`.execute(this.db);
    return Number(result.numAffectedRows ?? 0n);
  }
}
