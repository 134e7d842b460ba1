// The events module: the outbox every mutating RPC records its event in (outbox.ts), the journal
// other modules record theirs in (journal.ts), the subscriptions that receive them and their
// deliveries, and the audit trail of every recorded event.
import type { FeatureModule } from "../platform/module.js";
import type { Db } from "../storage/db.js";
import * as m013 from "./migrations/013_events.js";
import { Journal } from "./journal.js";
import { RpcRecorder } from "./outbox.js";
import { EventsRepository } from "./storage/events.js";
import { SubscriptionsRepository } from "./storage/subscriptions.js";
import type { EventsSettings } from "./settings.js";

export function eventsRepositories(db: Db) {
  return { events: new EventsRepository(db), subscriptions: new SubscriptionsRepository(db) };
}

export interface EventsExports {
  journal: Journal;
}

export const eventsModule: FeatureModule<ReturnType<typeof eventsRepositories>, EventsExports, EventsSettings> = {
  name: "events",
  migrations: { "013_events": m013 },
  services: [],
  listings: {},
  repositories: eventsRepositories,

  async start(ctx) {
    const { events } = ctx.repositoriesOf(eventsModule);
    const journal = new Journal(events, ctx.urls, ctx.now);
    return {
      bindings: [],
      recorder: new RpcRecorder(ctx.db, journal),
      journal,
      exports: { journal },
    };
  },
};
