import { sql, type Kysely } from "kysely";

// The events outbox and audit trail (events), the subscriptions that receive them, and one
// delivery row per event and matching subscription, written in the same transaction as the event.
export async function up(db: Kysely<any>): Promise<void> {
  // One statement per query: PGlite's query() runs a single statement.
  // `seq` orders deliveries; `uid` is a child of the event's group (a root UIDP for none), so the
  // list engine's visibility and uidp filters apply to events as to any resource. No foreign key
  // to the group: the audit trail outlives what it records.
  await sql`
    create table events (
      seq bigint generated always as identity primary key,
      uid text collate "C" not null unique,
      parent_uid text collate "C",
      type text collate "C" not null,
      source text not null,
      subject text collate "C" not null,
      actor_subject text collate "C",
      actor jsonb,
      body jsonb not null,
      traceparent text not null,
      time timestamptz not null default now()
    )`.execute(db);
  await sql`create index events_time on events (time, uid)`.execute(db);
  await sql`create index events_parent on events (parent_uid, time, uid)`.execute(db);
  await sql`create index events_type on events (type, time, uid)`.execute(db);
  await sql`create index events_subject on events (subject, time, uid)`.execute(db);
  await sql`create index events_actor on events (actor_subject, time, uid)`.execute(db);
  await sql`
    create table event_subscriptions (
      uid text collate "C" primary key,
      parent_uid text collate "C" not null references groups (uid) on delete cascade,
      sink text not null,
      types text[] not null default '{}',
      creator text collate "C",
      create_time timestamptz not null default now(),
      update_time timestamptz not null default now(),
      lease_owner text,
      lease_until timestamptz
    )`.execute(db);
  await sql`create index event_subscriptions_parent on event_subscriptions (parent_uid, uid)`.execute(db);
  // ListSubscriptions sorts by sink.
  await sql`create index event_subscriptions_sink on event_subscriptions (sink, uid)`.execute(db);
  await sql`
    create table event_deliveries (
      subscription_uid text collate "C" not null references event_subscriptions (uid) on delete cascade,
      event_seq bigint not null references events (seq) on delete cascade,
      state text not null default 'pending' check (state in ('pending', 'delivered', 'failed')),
      attempts integer not null default 0,
      next_attempt_time timestamptz not null default now(),
      last_attempt_time timestamptz,
      last_status_code integer,
      last_error text,
      delivered_time timestamptz,
      -- set when RedeliverEvents queues it again: its retry period counts from then, not from the
      -- event's time (else an old event's redelivery would get one attempt only)
      retry_from timestamptz,
      primary key (subscription_uid, event_seq)
    )`.execute(db);
  await sql`create index event_deliveries_event on event_deliveries (event_seq)`.execute(db);
  await sql`
    create index event_deliveries_due on event_deliveries (subscription_uid, event_seq)
    where state = 'pending'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table event_deliveries`.execute(db);
  await sql`drop table event_subscriptions`.execute(db);
  await sql`drop table events`.execute(db);
}
