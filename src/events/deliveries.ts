// DeliveriesService: a subscription's deliveries, newest event first, and sending events again.
// A delivery has no uid of its own: pages are cut on the event's sequence number, with the list
// engine's page tokens (bound to the request's filters), and authorization is on the
// subscription's uid.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  DeliveriesService,
  Delivery_State,
  ListDeliveriesRequestSchema,
  type Delivery,
  type ListDeliveriesRequest,
} from "../gen/bulwark/events/v1/events_pb.js";
import { invalidArgument, type FieldViolation } from "../core/errors.js";
import { DEFAULT_PAGE_SIZE, filterFingerprint, MAX_PAGE_SIZE, type ListEngineDeps } from "../core/list.js";
import { bindService } from "../core/service.js";
import { requireUid, throwIfViolations } from "../core/validate.js";
import { found } from "../platform/outcomes.js";
import { timeRange } from "./audit.js";
import type { DeliveriesRepository, DeliveryState, DeliveryView } from "./storage/deliveries.js";
import type { SubscriptionsRepository } from "./storage/subscriptions.js";

const STATE_OF: ReadonlyMap<Delivery_State, DeliveryState> = new Map([
  [Delivery_State.PENDING, "pending"],
  [Delivery_State.DELIVERED, "delivered"],
  [Delivery_State.FAILED, "failed"],
]);
const ENUM_OF: Readonly<Record<DeliveryState, Delivery_State>> = {
  pending: Delivery_State.PENDING,
  delivered: Delivery_State.DELIVERED,
  failed: Delivery_State.FAILED,
};

/** The walk's order, as its page tokens record it. */
const ORDER = "event_seq desc";

function toDelivery(row: DeliveryView): Delivery {
  return {
    $typeName: "bulwark.events.v1.Delivery",
    subscriptionUid: row.subscription_uid,
    eventId: row.event_uid,
    eventType: row.event_type,
    eventSubject: row.event_subject,
    eventTime: timestampFromDate(row.event_time),
    state: ENUM_OF[row.state],
    attempts: row.attempts,
    lastStatusCode: row.last_status_code ?? 0,
    lastError: row.last_error ?? "",
    lastAttemptTime: row.last_attempt_time ? timestampFromDate(row.last_attempt_time) : undefined,
    nextAttemptTime: row.state === "pending" ? timestampFromDate(row.next_attempt_time) : undefined,
    deliveredTime: row.delivered_time ? timestampFromDate(row.delivered_time) : undefined,
  };
}

function statesOf(values: readonly Delivery_State[]): DeliveryState[] {
  const bad = values.findIndex((s) => !STATE_OF.has(s));
  if (bad >= 0)
    throw invalidArgument({
      field: `states[${bad}]`,
      description: "must be one of STATE_PENDING, STATE_DELIVERED, STATE_FAILED",
    });
  return values.map((s) => STATE_OF.get(s)!);
}

/** The sequence number the previous page ended at, from its token (an expired token restarts). */
async function afterSeqOf(lists: ListEngineDeps, req: ListDeliveriesRequest): Promise<string | undefined> {
  if (req.pageToken === "") return undefined;
  const decoded = await lists.tokens.decode(req.pageToken);
  if (decoded.kind === "expired") return undefined;
  const fingerprint = filterFingerprint(ListDeliveriesRequestSchema, req);
  if (decoded.kind === "invalid") throw invalidArgument({ field: "page_token", description: "invalid page token" });
  const { cursor } = decoded;
  if (cursor.filter !== fingerprint || cursor.order !== ORDER || !/^\d+$/.test(cursor.after[0] ?? ""))
    throw invalidArgument({ field: "page_token", description: "page token was issued for a different request" });
  return cursor.after[0];
}

export interface DeliveriesDeps {
  deliveries: DeliveriesRepository;
  subscriptions: SubscriptionsRepository;
  lists: ListEngineDeps;
  now(): Date;
}

export function deliveriesService({ deliveries, subscriptions, lists, now }: DeliveriesDeps) {
  return bindService(DeliveriesService, {
    async listDeliveries(req, call) {
      requireUid("subscription_uid", req.subscriptionUid);
      if (req.pageSize < 0) throw invalidArgument({ field: "page_size", description: "must not be negative" });
      const states = statesOf(req.states);
      const pageSize = req.pageSize === 0 ? DEFAULT_PAGE_SIZE : Math.min(req.pageSize, MAX_PAGE_SIZE);
      const afterSeq = await afterSeqOf(lists, req);
      found(await subscriptions.get(req.subscriptionUid, call.freshness), "subscription", req.subscriptionUid);
      const [rows, totalCount] = await Promise.all([
        deliveries.page(req.subscriptionUid, states, afterSeq, pageSize + 1),
        deliveries.count(req.subscriptionUid, states),
      ]);
      const page = rows.slice(0, pageSize);
      const nextPageToken =
        rows.length > pageSize
          ? await lists.tokens.encode({
              order: ORDER,
              filter: filterFingerprint(ListDeliveriesRequestSchema, req),
              after: [String(page.at(-1)!.event_seq)],
              skipped: 0,
            })
          : "";
      return { deliveries: page.map(toDelivery), nextPageToken, totalCount };
    },

    async redeliverEvents(req) {
      requireUid("subscription_uid", req.subscriptionUid);
      const v: FieldViolation[] = [];
      const range = timeRange(req.startTime, req.endTime, v);
      const byRange = req.startTime !== undefined || req.endTime !== undefined;
      if (req.eventId !== "" && byRange)
        v.push({ field: "event_id", description: "give event_id or a time range, not both" });
      if (req.eventId === "" && !byRange)
        v.push({ field: "event_id", description: "give event_id, or start_time and/or end_time" });
      throwIfViolations(v);
      found(await subscriptions.get(req.subscriptionUid), "subscription", req.subscriptionUid);
      const count = await deliveries.redeliver(
        req.subscriptionUid,
        req.eventId !== "" ? { eventUid: req.eventId } : range,
        now(),
      );
      return { count: BigInt(count) };
    },
  });
}
