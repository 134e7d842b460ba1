// The events module: the outbox every mutating RPC records its event in (outbox.ts), the journal
// other modules record theirs in (journal.ts), the subscriptions that receive them and their
// deliveries, and the audit trail of every recorded event.
import { AuditService, DeliveriesService, EventSchema } from "../gen/bulwark/events/v1/events_pb.js";
import type { FeatureModule } from "../platform/module.js";
import type { Db } from "../storage/db.js";
import * as m013 from "./migrations/013_events.js";
import { auditService, eventListing } from "./audit.js";
import { openAuditLog } from "./audit-log.js";
import { deliveriesService } from "./deliveries.js";
import { Journal } from "./journal.js";
import { RpcRecorder } from "./outbox.js";
import { retentionTask } from "./retention.js";
import { DeliveriesRepository } from "./storage/deliveries.js";
import { EventsRepository } from "./storage/events.js";
import { SubscriptionsRepository } from "./storage/subscriptions.js";
import { DEFAULT_RETENTION_EVERY_MS, DEFAULT_RETENTION_MS, type EventsSettings } from "./settings.js";

export function eventsRepositories(db: Db) {
  return {
    events: new EventsRepository(db),
    subscriptions: new SubscriptionsRepository(db),
    deliveries: new DeliveriesRepository(db),
  };
}

export interface EventsExports {
  journal: Journal;
}

export const eventsModule: FeatureModule<ReturnType<typeof eventsRepositories>, EventsExports, EventsSettings> = {
  name: "events",
  migrations: { "013_events": m013 },
  services: [
    // the audit trail and deliveries (bulwark.events.v1 extensions)
    AuditService,
    DeliveriesService,
  ],
  listings: {
    [EventSchema.typeName]: eventListing,
  },
  repositories: eventsRepositories,

  async start(ctx) {
    const { events, subscriptions, deliveries } = ctx.repositoriesOf(eventsModule);
    const settings = ctx.moduleSettings;
    const journal = new Journal(events, ctx.urls, ctx.now);
    const auditLog = settings?.auditLog ? openAuditLog(settings.auditLog, ctx.logger) : undefined;
    if (auditLog) journal.onCommitted((event) => auditLog.write(event));
    return {
      bindings: [
        auditService({ events, lists: ctx.lists }),
        deliveriesService({ deliveries, subscriptions, lists: ctx.lists, now: ctx.now }),
      ],
      recorder: new RpcRecorder(ctx.db, journal),
      journal,
      tasks: [
        retentionTask(
          events,
          settings?.retentionMs ?? DEFAULT_RETENTION_MS,
          settings?.retentionEveryMs ?? DEFAULT_RETENTION_EVERY_MS,
          ctx.now,
        ),
      ],
      exports: { journal },
      close: async () => void (await auditLog?.close()),
    };
  },
};
