// Subscriptions: the published SubscriptionsService (chainguard.platform.events.v2beta1; its v2
// twin is bound in module.ts), the extension SubscriptionFiltersService (the same resource with
// the event types it receives) and the v1 Subscriptions service as adapters onto the published
// one. Creating, changing and deleting one records its event through the outbox (the methods'
// `chainguard.annotations.events`), not here.
import { create } from "@bufbuild/protobuf";
import {
  ListSubscriptionsRequestSchema,
  SubscriptionSchema,
  SubscriptionsService,
  type Subscription,
} from "../gen/chainguard/platform/events/v2beta1/subscriptions_pb.js";
import {
  FilteredSubscriptionSchema,
  SubscriptionFiltersService,
  type FilteredSubscription,
} from "../gen/bulwark/events/v1/events_pb.js";
import * as v1 from "../gen/platform/events/v1/subscriptions.platform_pb.js";
import { invalidArgument, type FieldViolation } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import type { ListableResource, ListEngineDeps } from "../core/list.js";
import { accessOf, bindService, type CallContext, type ServiceBinding } from "../core/service.js";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { newChildUidp } from "../core/uidp.js";
import { requireUid, throwIfViolations } from "../core/validate.js";
import { listResponse } from "../platform/list.js";
import { deleted, found, written } from "../platform/outcomes.js";
import { delegateTo, listAll, oneOrNone } from "../platform/v1.js";
import { sinkViolations, type SinkRules } from "./sinks.js";
import type { SubscriptionFields, SubscriptionsRepository } from "./storage/subscriptions.js";
import type { SubscriptionRow } from "./storage/schema.js";

/** A Subscription has only `uid` and `sink`: it sorts by its sink (and by uid, the default). */
export const subscriptionListing: ListableResource = {
  sortable: { sink: { column: "sink", kind: "text" } },
  defaultOrder: "uid",
};

/** Most entries of a type filter. */
export const MAX_TYPE_FILTERS = 50;
/** Most characters of one entry. */
export const MAX_TYPE_FILTER_LENGTH = 200;
/**
 * An event type as CloudEvents types are spelled here (reverse-DNS, lower case:
 * `dev.chainguard.api.iam.group.created.v1`), or a prefix of one ending in "." (`dev.chainguard.registry.`).
 */
const TYPE_FILTER = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/;

export function typeFilterViolations(types: readonly string[], field = "types"): FieldViolation[] {
  if (types.length > MAX_TYPE_FILTERS) return [{ field, description: `must have at most ${MAX_TYPE_FILTERS} entries` }];
  const v: FieldViolation[] = [];
  const seen = new Set<string>();
  types.forEach((type, i) => {
    const at = `${field}[${i}]`;
    if (type === "") v.push({ field: at, description: "must not be empty" });
    else if (type.length > MAX_TYPE_FILTER_LENGTH)
      v.push({ field: at, description: `must be at most ${MAX_TYPE_FILTER_LENGTH} characters` });
    else if (!TYPE_FILTER.test(type))
      v.push({
        field: at,
        description:
          'must be an event type ("dev.chainguard.api.iam.group.created.v1") or a prefix ending in "." ("dev.chainguard.registry."): dot-separated words of a-z, 0-9, "_" and "-"',
      });
    else if (seen.has(type)) v.push({ field: at, description: "is listed twice" });
    seen.add(type);
  });
  return v;
}

function toSubscription(row: SubscriptionRow): Subscription {
  return create(SubscriptionSchema, { uid: row.uid, sink: row.sink });
}

function toFiltered(row: SubscriptionRow): FilteredSubscription {
  return create(FilteredSubscriptionSchema, { uid: row.uid, sink: row.sink, types: row.types });
}

export interface SubscriptionsDeps {
  subscriptions: SubscriptionsRepository;
  lists: ListEngineDeps;
  sinks: SinkRules;
  now: () => Date;
}

/** The fields of a subscription to store, validated (the field names are the request's). */
function validated(sink: string, types: readonly string[], sinks: SinkRules, prefix: string): SubscriptionFields {
  throwIfViolations([
    ...sinkViolations(sink, sinks, `${prefix}sink`),
    ...typeFilterViolations(types, `${prefix}types`),
  ]);
  return { sink, types: [...types] };
}

/**
 * A subscription receives only what its creator may see: creating one also asks to be able to
 * list the parent's subscriptions (the capability that sees its events); the delivery worker
 * checks it again at each run.
 */
function requireCreatorSees(parent: string, call: CallContext): void {
  accessOf(call).require(
    [Capability.CAP_EVENTS_SUBSCRIPTION_CREATE, Capability.CAP_EVENTS_SUBSCRIPTION_LIST],
    parent,
    "group",
  );
}

export function subscriptionsService({ subscriptions, lists, sinks, now }: SubscriptionsDeps) {
  return bindService(SubscriptionsService, {
    async getSubscription(req, call) {
      requireUid("uid", req.uid);
      return toSubscription(found(await subscriptions.get(req.uid, call.freshness), "subscription", req.uid));
    },

    async createSubscription(req, call) {
      requireUid("parent", req.parent);
      requireCreatorSees(req.parent, call);
      if (!req.subscription) throw invalidArgument({ field: "subscription", description: "is required" });
      const fields = validated(req.subscription.sink, [], sinks, "subscription.");
      const row = written(
        await subscriptions.insert(newChildUidp(req.parent), req.parent, fields, call.principal?.uid, now()),
      );
      return toSubscription(row);
    },

    async listSubscriptions(req, call) {
      const { items, ...page } = await listResponse({
        lists,
        resource: subscriptionListing,
        schema: ListSubscriptionsRequestSchema,
        request: req,
        query: subscriptions.listQuery(req.uidp),
        toItems: (rows: SubscriptionRow[]) => rows.map(toSubscription),
        call,
      });
      return { subscriptions: items, ...page };
    },

    async deleteSubscription(req) {
      requireUid("uid", req.uid);
      // Its pending deliveries go with it (event_deliveries' foreign key); its events stay in the audit trail.
      return deleted(await subscriptions.delete(req.uid), "subscription", req.uid);
    },
  });
}

export function subscriptionFiltersService({ subscriptions, sinks, now }: SubscriptionsDeps) {
  return bindService(SubscriptionFiltersService, {
    async createFilteredSubscription(req, call) {
      requireUid("parent", req.parent);
      requireCreatorSees(req.parent, call);
      const s = req.subscription;
      if (!s) throw invalidArgument({ field: "subscription", description: "is required" });
      const fields = validated(s.sink, s.types, sinks, "subscription.");
      const row = written(
        await subscriptions.insert(newChildUidp(req.parent), req.parent, fields, call.principal?.uid, now()),
      );
      return toFiltered(row);
    },

    async getFilteredSubscription(req, call) {
      requireUid("uid", req.uid);
      return toFiltered(found(await subscriptions.get(req.uid, call.freshness), "subscription", req.uid));
    },

    async updateFilteredSubscription(req) {
      const patch = req.subscription;
      if (!patch) throw invalidArgument({ field: "subscription", description: "is required" });
      requireUid("subscription.uid", patch.uid);
      const result = await subscriptions.update(
        patch.uid,
        (current) => {
          const { updated } = applyFieldMask(FilteredSubscriptionSchema, toFiltered(current), patch, req.updateMask);
          return validated(updated.sink, updated.types, sinks, "subscription.");
        },
        now(),
      );
      return toFiltered(written(result));
    },
  });
}

/** v1 `chainguard.platform.events.Subscriptions` onto the published service: `id` for `uid`, `items` lists. */
export function v1SubscriptionsService(bindings: readonly ServiceBinding[]): ServiceBinding {
  const published = delegateTo(SubscriptionsService, bindings);
  const toV1 = (s: Subscription) => create(v1.SubscriptionSchema, { id: s.uid, sink: s.sink });
  return bindService(v1.Subscriptions, {
    async create(req, call) {
      const created = await published(
        "createSubscription",
        { parent: req.parentId, subscription: req.subscription ? { sink: req.subscription.sink } : undefined },
        call,
      );
      return toV1(created);
    },

    async list(req, call) {
      const items = req.id
        ? await oneOrNone(() => published("getSubscription", { uid: req.id }, call))
        : await listAll(async (pageSize, pageToken) => {
            const page = await published("listSubscriptions", { uidp: req.uidp, pageSize, pageToken }, call);
            return { items: page.subscriptions, nextPageToken: page.nextPageToken };
          });
      return create(v1.SubscriptionListSchema, { items: items.map(toV1) });
    },

    async delete(req, call) {
      return published("deleteSubscription", { uid: req.id }, call);
    },
  });
}
