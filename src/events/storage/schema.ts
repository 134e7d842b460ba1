// The events module's table types. Column names are snake_case as in SQL.
import type { ColumnType, Generated, Kysely, Selectable } from "kysely";
import { viewOf, type Db } from "../../storage/db.js";
import type { Json } from "../../storage/schema.js";

/** An event's actor as stored (the delivered data's `actor`). */
export interface EventActorJson {
  subject: string;
  act?: Record<string, string>;
}

export interface EventsTable {
  seq: ColumnType<string, never, never>;
  uid: string;
  parent_uid: string | null;
  type: string;
  source: string;
  subject: string;
  actor_subject: string | null;
  actor: ColumnType<EventActorJson | null, string | null, string | null>;
  body: Json;
  traceparent: string;
  time: ColumnType<Date, Date | undefined, Date>;
}

export interface EventSubscriptionsTable {
  uid: string;
  parent_uid: string;
  sink: string;
  types: ColumnType<string[], string[] | undefined, string[]>;
  creator: string | null;
  create_time: ColumnType<Date, Date | undefined, Date>;
  update_time: ColumnType<Date, Date | undefined, Date>;
  lease_owner: string | null;
  lease_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface EventDeliveriesTable {
  subscription_uid: string;
  event_seq: string;
  state: Generated<"pending" | "delivered" | "failed">;
  attempts: Generated<number>;
  next_attempt_time: ColumnType<Date, Date | undefined, Date>;
  last_attempt_time: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  delivered_time: Date | null;
  /** set by a redelivery: the retry period counts from it instead of the event's time */
  retry_from: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface EventTables {
  events: EventsTable;
  event_subscriptions: EventSubscriptionsTable;
  event_deliveries: EventDeliveriesTable;
}

export type EventRow = Selectable<EventsTable>;
export type SubscriptionRow = Selectable<EventSubscriptionsTable>;
export type DeliveryRow = Selectable<EventDeliveriesTable>;

export type EventsDb = Kysely<EventTables>;

/** The shared database seen through the events module's tables. */
export function eventsDb(db: Db): EventsDb {
  return viewOf<EventTables>(db);
}
