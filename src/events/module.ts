// The events module: the outbox every mutating RPC records its event in (outbox.ts), the journal
// other modules record theirs in (journal.ts), the subscriptions that receive them and their
// deliveries, and the audit trail of every recorded event.
import { authModule } from "../auth/api.js";
import {
  AuditService,
  DeliveriesService,
  EventSchema,
  SubscriptionFiltersService,
} from "../gen/bulwark/events/v1/events_pb.js";
import {
  SubscriptionSchema,
  SubscriptionsService,
} from "../gen/chainguard/platform/events/v2beta1/subscriptions_pb.js";
import { file_chainguard_platform_events_v2_subscriptions } from "../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import { Subscriptions as V1Subscriptions } from "../gen/platform/events/v1/subscriptions.platform_pb.js";
import type { ServiceBinding } from "../core/service.js";
import { GaTwins } from "../platform/ga-twins.js";
import type { FeatureModule } from "../platform/module.js";
import type { Db } from "../storage/db.js";
import * as m013 from "./migrations/013_events.js";
import { auditService, eventListing } from "./audit.js";
import { openAuditLog } from "./audit-log.js";
import { deliveriesService } from "./deliveries.js";
import { DELIVERY_DEFAULTS, DeliveryWorker } from "./delivery.js";
import { Journal } from "./journal.js";
import { eventsMetrics } from "./metrics.js";
import { RpcRecorder } from "./outbox.js";
import { retentionTask } from "./retention.js";
import { DeliveriesRepository } from "./storage/deliveries.js";
import { DeliveryQueue } from "./storage/delivery-queue.js";
import { EventsRepository } from "./storage/events.js";
import { SubscriptionsRepository } from "./storage/subscriptions.js";
import { DEFAULT_RETENTION_EVERY_MS, DEFAULT_RETENTION_MS, type EventsSettings } from "./settings.js";
import {
  subscriptionFiltersService,
  subscriptionListing,
  subscriptionsService,
  v1SubscriptionsService,
} from "./subscriptions.js";

export function eventsRepositories(db: Db) {
  return {
    events: new EventsRepository(db),
    subscriptions: new SubscriptionsRepository(db),
    deliveries: new DeliveriesRepository(db),
    queue: new DeliveryQueue(db),
  };
}

/** chainguard.platform.events.v2: the same service under the GA name, from the same handlers */
const GA = new GaTwins([SubscriptionsService], [file_chainguard_platform_events_v2_subscriptions]);

/** the bindings plus the v1 Subscriptions adapter onto them */
function withV1(bindings: ServiceBinding[]): ServiceBinding[] {
  return [...bindings, v1SubscriptionsService(bindings)];
}

/** How long a delivery's token is valid. */
const DELIVERY_TOKEN_LIFETIME_MS = 5 * 60_000;

export interface EventsExports {
  journal: Journal;
}

export const eventsModule: FeatureModule<ReturnType<typeof eventsRepositories>, EventsExports, EventsSettings> = {
  name: "events",
  migrations: { "013_events": m013 },
  // in the order `start` binds them (the extensions are bulwark.events.v1's)
  services: [
    SubscriptionsService,
    SubscriptionFiltersService,
    ...GA.services,
    V1Subscriptions,
    AuditService,
    DeliveriesService,
  ],
  listings: {
    ...GA.listings({ [SubscriptionSchema.typeName]: subscriptionListing }),
    [EventSchema.typeName]: eventListing,
  },
  repositories: eventsRepositories,

  async start(ctx) {
    const { events, subscriptions, deliveries, queue } = ctx.repositoriesOf(eventsModule);
    const settings = ctx.moduleSettings;
    const retentionMs = settings?.retentionMs ?? DEFAULT_RETENTION_MS;
    const retryForMs = settings?.deliveryRetryForMs ?? DELIVERY_DEFAULTS.deliveryRetryForMs;
    // Pruning an event takes its pending deliveries with it: keep events while they may be retried.
    if (retentionMs < retryForMs)
      throw new Error(
        `the event retention (${retentionMs} ms) is shorter than the delivery retry period (${retryForMs} ms): ` +
          `events would be deleted while their deliveries are still retried`,
      );
    const journal = new Journal(ctx.db, events, ctx.urls, ctx.now, ctx.logger);
    const deps = {
      subscriptions,
      lists: ctx.lists,
      sinks: { allowInsecure: settings?.allowInsecureSinks ?? false },
      now: ctx.now,
    };
    const auditLog = settings?.auditLog ? openAuditLog(settings.auditLog, ctx.logger) : undefined;
    if (auditLog) journal.onCommitted((event) => auditLog.write(event));
    const { issuer, capabilitiesOf } = ctx.exportsOf(authModule);
    const worker = new DeliveryWorker({
      queue,
      tokens: async (req) => (await issuer.mint({ ...req, lifetimeMs: DELIVERY_TOKEN_LIFETIME_MS })).token,
      capabilitiesOf,
      settings: ctx.moduleSettings,
      logger: ctx.logger,
      now: ctx.now,
      metrics: eventsMetrics(ctx.metrics, queue),
    });
    // A subscription with a new delivery is looked at now, not at the next poll; an event no
    // subscription matched wakes nothing.
    journal.onCommitted((event) => {
      if (event.deliveries > 0) worker.wake();
    });
    return {
      bindings: [
        ...withV1(GA.bind([subscriptionsService(deps), subscriptionFiltersService(deps)])),
        auditService({ events, lists: ctx.lists }),
        deliveriesService({ deliveries, subscriptions, lists: ctx.lists, now: ctx.now }),
      ],
      recorder: new RpcRecorder(ctx.db, journal),
      journal,
      tasks: [retentionTask(events, retentionMs, settings?.retentionEveryMs ?? DEFAULT_RETENTION_EVERY_MS, ctx.now)],
      exports: { journal },
      // The delivery tokens name the issuer, whose URL is final once the server listens.
      listening: async () => worker.start(),
      close: async () => {
        await journal.flush();
        await worker.stop();
        await auditLog?.close();
      },
    };
  },
};
