// The events module's journal: records an event (in the caller's transaction scope, if any) and,
// once it is committed, tells whoever listens (the audit log file, the delivery worker). Events
// that are no change (pulls) are gathered for a moment and recorded together (recordSoon).
import type { Logger } from "pino";
import { sql, type RawBuilder } from "kysely";
import { AsyncLocalStorage } from "node:async_hooks";
import type { PublicUrls } from "../platform/config.js";
import type { EventInsert, EventJournal, EventRecord } from "../platform/events.js";
import { afterCommit, beforeCommit, withinTransaction } from "../storage/ambient-transaction.js";
import { backendOf, type Db } from "../storage/db.js";
import { isValidUidp } from "../core/uidp.js";
import type { EventsRepository, NewEvent, StoredEvent } from "./storage/events.js";
import { storableJson, storableText } from "./storable.js";
import { traceparentOf } from "./trace-context.js";

export type EventListener = (event: StoredEvent) => void;

/** How long recordSoon gathers events, and how many at most, before they are recorded together. */
const SOON_MS = 50;
const SOON_MAX = 500;

export class Journal implements EventJournal {
  readonly #listeners: EventListener[] = [];
  readonly #soon: Array<EventRecord & { time: Date }> = [];
  #soonTimer: NodeJS.Timeout | undefined;
  #flushed: Promise<void> = Promise.resolve();

  /** on PostgreSQL, gathered events are committed without waiting for the disk (see flush) */
  private readonly asynchronousCommit: boolean;
  /** runs a function outside whatever transaction scope its caller is in (see recordSoon) */
  readonly #outsideScopes = AsyncLocalStorage.snapshot();

  constructor(
    private readonly db: Db,
    private readonly events: EventsRepository,
    private readonly urls: Readonly<PublicUrls>,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {
    let backend: string | undefined;
    try {
      backend = backendOf(db);
    } catch {
      backend = undefined; // a database opened otherwise (tests): synchronous, as a change is
    }
    this.asynchronousCommit = backend === "postgres";
  }

  recordSoon(event: EventRecord): void {
    // The trace is the recording request's: taken now, not when the batch is written.
    this.#soon.push({ ...event, traceparent: traceparentOf(event.traceparent), time: this.now() });
    // The batch is its own transaction, never the recording caller's (a timer or a call made in
    // the caller's async context would join its scope).
    if (this.#soon.length >= SOON_MAX) void this.#outsideScopes(() => this.flush());
    else if (!this.#soonTimer) {
      this.#soonTimer = setTimeout(() => void this.#outsideScopes(() => this.flush()), SOON_MS);
      this.#soonTimer.unref();
    }
  }

  /** Records what recordSoon gathered, now; resolves once everything gathered so far is recorded. */
  flush(): Promise<void> {
    clearTimeout(this.#soonTimer);
    this.#soonTimer = undefined;
    const batch = this.#soon.splice(0);
    if (batch.length > 0)
      this.#flushed = this.#flushed
        .then(() =>
          withinTransaction(this.db, async () => {
            // Nobody waits for these: on PostgreSQL the commit does not wait for the disk either
            // (its WAL writer syncs it within a moment). Not on the embedded database: it has no
            // WAL writer, so the pulls could stay unsynced until the next change.
            if (this.asynchronousCommit) await sql`set local synchronous_commit = off`.execute(this.db);
            const { stored, deliveries } = await this.events.insertMany(
              batch.map((e) => this.#newEvent(e, e.traceparent)),
            );
            // the listeners learn the batch's deliveries once, from its last event
            if (stored.length) stored[stored.length - 1]!.deliveries = deliveries;
            afterCommit(() => this.#committed(stored));
          }),
        )
        .catch((err: unknown) =>
          this.logger.error({ err, events: batch.length }, "events: recording gathered events failed"),
        );
    return this.#flushed;
  }

  /** Called with each event once it is committed (on this replica). */
  onCommitted(listener: EventListener): void {
    this.#listeners.push(listener);
  }

  async record(event: EventRecord & { undelivered?: boolean; time?: Date }): Promise<void> {
    const stored = await this.events.insert(this.#newEvent(event));
    afterCommit(() => this.#committed([stored]));
  }

  /**
   * Records an event as the open transaction scope's last statement, sent with its commit (one
   * round trip on PostgreSQL, see storage/ambient-transaction.ts beforeCommit): for the outbox,
   * whose event is the last thing an RPC's transaction writes. Throws outside a scope.
   */
  recordLast(event: EventRecord & { undelivered?: boolean }): void {
    const { statement, stored } = this.events.insertStatement(this.#newEvent(event));
    beforeCommit(statement.compile(this.db), (result) => this.#committed([stored(result)]));
  }

  insertWithin(event: EventRecord, condition: RawBuilder<unknown>): EventInsert {
    const { stored, ctes, columns } = this.events.insertWithin(this.#newEvent(event), condition);
    return {
      ctes,
      columns,
      inserted: (row) => {
        if (row?.event_seq === null || row?.event_seq === undefined) return;
        const recorded = { ...stored, seq: String(row.event_seq), deliveries: Number(row.event_deliveries ?? 0) };
        afterCommit(() => this.#committed([recorded]));
      },
    };
  }

  /** What the repository stores for a recorded event: its text made storable, its source and time. */
  #newEvent(event: EventRecord & { undelivered?: boolean; time?: Date }, traceparent?: string): NewEvent {
    const group = event.group && isValidUidp(event.group) ? event.group : undefined;
    return {
      type: storableText(event.type),
      source: event.source === "registry" ? this.urls.registryAudience : this.urls.apiAudience,
      subject: storableText(event.subject),
      group,
      actor: event.actor && {
        subject: storableText(event.actor.subject),
        ...(event.actor.act ? { act: storableJson({ ...event.actor.act }) as Record<string, string> } : {}),
      },
      body: storableJson(event.body),
      traceparent: traceparent ?? traceparentOf(event.traceparent),
      time: event.time ?? this.now(),
      undelivered: event.undelivered,
    };
  }

  #committed(stored: StoredEvent[]): void {
    for (const event of stored)
      for (const listener of this.#listeners) {
        try {
          listener(event);
        } catch {
          // a listener's failure is its own (it logs); the event is recorded
        }
      }
  }
}
