// The events module: the outbox every mutating RPC records its event in (outbox.ts), the journal
// other modules record theirs in (journal.ts), the subscriptions that receive them and their
// deliveries, and the audit trail of every recorded event.
import type { FeatureModule } from "../platform/module.js";
import type { Db } from "../storage/db.js";
import { SubscriptionFiltersService } from "../gen/bulwark/events/v1/events_pb.js";
import {
  SubscriptionSchema,
  SubscriptionsService,
} from "../gen/chainguard/platform/events/v2beta1/subscriptions_pb.js";
import { file_chainguard_platform_events_v2_subscriptions } from "../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import { Subscriptions as V1Subscriptions } from "../gen/platform/events/v1/subscriptions.platform_pb.js";
import type { ServiceBinding } from "../core/service.js";
import { GaTwins } from "../platform/ga-twins.js";
import * as m013 from "./migrations/013_events.js";
import { Journal } from "./journal.js";
import { RpcRecorder } from "./outbox.js";
import { EventsRepository } from "./storage/events.js";
import { SubscriptionsRepository } from "./storage/subscriptions.js";
import type { EventsSettings } from "./settings.js";
import {
  subscriptionFiltersService,
  subscriptionListing,
  subscriptionsService,
  v1SubscriptionsService,
} from "./subscriptions.js";

export function eventsRepositories(db: Db) {
  return { events: new EventsRepository(db), subscriptions: new SubscriptionsRepository(db) };
}

/** chainguard.platform.events.v2: the same service under the GA name, from the same handlers */
const GA = new GaTwins([SubscriptionsService], [file_chainguard_platform_events_v2_subscriptions]);

/** the bindings plus the v1 Subscriptions adapter onto them */
function withV1(bindings: ServiceBinding[]): ServiceBinding[] {
  return [...bindings, v1SubscriptionsService(bindings)];
}

export interface EventsExports {
  journal: Journal;
}

export const eventsModule: FeatureModule<ReturnType<typeof eventsRepositories>, EventsExports, EventsSettings> = {
  name: "events",
  migrations: { "013_events": m013 },
  services: [SubscriptionsService, SubscriptionFiltersService, ...GA.services, V1Subscriptions],
  listings: GA.listings({ [SubscriptionSchema.typeName]: subscriptionListing }),
  repositories: eventsRepositories,

  async start(ctx) {
    const { events, subscriptions } = ctx.repositoriesOf(eventsModule);
    const journal = new Journal(events, ctx.urls, ctx.now);
    const deps = {
      subscriptions,
      lists: ctx.lists,
      sinks: { allowInsecure: ctx.moduleSettings?.allowInsecureSinks ?? false },
      now: ctx.now,
    };
    return {
      bindings: withV1(GA.bind([subscriptionsService(deps), subscriptionFiltersService(deps)])),
      recorder: new RpcRecorder(ctx.db, journal),
      journal,
      exports: { journal },
    };
  },
};
