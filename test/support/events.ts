// Reading and arranging the events a test causes: the newest event's sequence number, a
// subscription written straight through its repository (no API, no creator check), and a
// subscription's deliveries joined with their events.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { eventsModule } from "../../src/events/api.js";
import { SubscriptionsRepository } from "../../src/events/storage/subscriptions.js";
import type { TestServer } from "./server.js";
import { until } from "./wait.js";

/** The newest recorded event's `seq` ("0" when there is none), what was gathered recorded first. */
export async function lastEventSeq(server: Pick<TestServer, "db" | "exportsOf">): Promise<string> {
  await flushEvents(server);
  const row = (await server.db
    .selectFrom("events")
    .select((eb: any) => eb.fn.max("seq").as("seq"))
    .executeTakeFirst()) as { seq: string | number | null } | undefined;
  return String(row?.seq ?? 0);
}

/** A subscription of `group` to `sink`, written through its repository; answers its uid. */
export async function subscribeDirectly(
  server: Pick<TestServer, "db">,
  group: string,
  sink: string,
  options: { types?: string[]; creator?: string } = {},
): Promise<string> {
  const uid = `${group}/${randomBytes(8).toString("hex")}`;
  const result = await new SubscriptionsRepository(server.db).insert(
    uid,
    group,
    { sink, types: options.types ?? [] },
    options.creator,
    new Date(),
  );
  assert.equal(result.kind, "ok");
  return uid;
}

/** A delivery with its event's columns, as the tests read them. */
export interface DeliveryView {
  event_seq: string;
  state: string;
  attempts: number;
  next_attempt_time: Date;
  last_attempt_time: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  uid: string;
  parent_uid: string | null;
  type: string;
  source: string;
  subject: string;
  actor: unknown;
  body: unknown;
  traceparent: string;
  time: Date;
}

/** A subscription's deliveries, in event order. */
export async function deliveriesOf(server: Pick<TestServer, "db">, subscription: string): Promise<DeliveryView[]> {
  return (await server.db
    .selectFrom("event_deliveries as d")
    .innerJoin("events as e", "e.seq", "d.event_seq")
    .select([
      "d.event_seq",
      "d.state",
      "d.attempts",
      "d.next_attempt_time",
      "d.last_attempt_time",
      "d.last_status_code",
      "d.last_error",
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
    .where("d.subscription_uid", "=", subscription)
    .orderBy("d.event_seq")
    .execute()) as DeliveryView[];
}

/** The subscription's deliveries once `ready` holds for them. */
export async function deliveriesWhen(
  server: Pick<TestServer, "db">,
  subscription: string,
  ready: (rows: DeliveryView[]) => boolean,
  what: string,
): Promise<DeliveryView[]> {
  let rows: DeliveryView[] = [];
  await until(async () => ready((rows = await deliveriesOf(server, subscription))), what);
  return rows;
}

/** Records now what the server gathered to record in a moment (registry pulls). */
export async function flushEvents(server: Pick<TestServer, "exportsOf">): Promise<void> {
  await server.exportsOf(eventsModule).journal.flush();
}
