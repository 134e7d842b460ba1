// The events module's journal: records an event (in the caller's transaction scope, if any) and,
// once it is committed, tells whoever listens (the audit log file, the delivery worker).
import type { PublicUrls } from "../platform/config.js";
import type { EventJournal, EventRecord } from "../platform/events.js";
import { afterCommit } from "../storage/ambient-transaction.js";
import { isValidUidp } from "../core/uidp.js";
import type { EventsRepository, StoredEvent } from "./storage/events.js";
import { storableJson, storableText } from "./storable.js";
import { traceparentOf } from "./trace-context.js";

export type EventListener = (event: StoredEvent) => void;

export class Journal implements EventJournal {
  readonly #listeners: EventListener[] = [];

  constructor(
    private readonly events: EventsRepository,
    private readonly urls: Readonly<PublicUrls>,
    private readonly now: () => Date,
  ) {}

  /** Called with each event once it is committed (on this replica). */
  onCommitted(listener: EventListener): void {
    this.#listeners.push(listener);
  }

  async record(event: EventRecord & { undelivered?: boolean }): Promise<void> {
    const group = event.group && isValidUidp(event.group) ? event.group : undefined;
    const stored = await this.events.insert({
      type: storableText(event.type),
      source: event.source === "registry" ? this.urls.registryAudience : this.urls.apiAudience,
      subject: storableText(event.subject),
      group,
      actor: event.actor && {
        subject: storableText(event.actor.subject),
        ...(event.actor.act ? { act: storableJson({ ...event.actor.act }) as Record<string, string> } : {}),
      },
      body: storableJson(event.body),
      traceparent: traceparentOf(event.traceparent),
      time: this.now(),
      undelivered: event.undelivered,
    });
    afterCommit(() => {
      for (const listener of this.#listeners) {
        try {
          listener(stored);
        } catch {
          // a listener's failure is its own (it logs); the event is recorded
        }
      }
    });
  }
}
