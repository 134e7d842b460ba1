// AuditService.ListEvents: the audit trail through the list engine. An event's uid is a child of
// its group's UIDP, so the caller's visibility (where it holds CAP_EVENTS_SUBSCRIPTION_LIST) and
// the uidp filter apply as to any resource; an event of no group has a root uid of its own, which
// only the operator (who sees everything) sees.
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate, ValueSchema, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  AuditService,
  EventSchema,
  Event_ActorSchema,
  ListEventsRequestSchema,
  type Event,
  type ListEventsRequest,
} from "../gen/bulwark/events/v1/events_pb.js";
import type { FieldViolation } from "../core/errors.js";
import type { ListableResource, ListEngineDeps } from "../core/list.js";
import { toRestJson } from "../core/rest-json.js";
import { bindService } from "../core/service.js";
import { throwIfViolations, timeOf } from "../core/validate.js";
import { listResponse } from "../platform/list.js";
import type { EventFilter, EventsRepository } from "./storage/events.js";
import type { EventActorJson, EventRow } from "./storage/schema.js";

export const eventListing: ListableResource = {
  sortable: { time: { column: "time", kind: "timestamp" } },
  defaultOrder: "time desc",
};

/** What an event is made of, as stored or as just recorded. */
export interface EventFields {
  uid: string;
  type: string;
  source: string;
  subject: string;
  /** the group's UIDP; null or undefined: none */
  group: string | null | undefined;
  time: Date;
  actor: EventActorJson | null | undefined;
  body: unknown;
}

export function toEvent(e: EventFields): Event {
  return create(EventSchema, {
    uid: e.uid,
    type: e.type,
    source: e.source,
    subject: e.subject,
    group: e.group ?? "",
    time: timestampFromDate(e.time),
    actor: e.actor ? create(Event_ActorSchema, { subject: e.actor.subject, act: { ...e.actor.act } }) : undefined,
    body: fromJson(ValueSchema, (e.body ?? null) as JsonValue),
  });
}

/** An event as ListEvents answers it over REST (the audit log's line, without its traceparent). */
export function eventJson(e: EventFields): JsonValue {
  return toRestJson(EventSchema, toEvent(e));
}

export function eventFromRow(row: EventRow): Event {
  return toEvent({ ...row, group: row.parent_uid });
}

/** A start/end pair: each valid, the end after the start. */
export function timeRange(
  start: Timestamp | undefined,
  end: Timestamp | undefined,
  v: FieldViolation[],
): { start?: Date; end?: Date } {
  const from = timeOf("start_time", start, v);
  const to = timeOf("end_time", end, v);
  if (from && to && to <= from) v.push({ field: "end_time", description: "must be after start_time" });
  return { start: from, end: to };
}

/** The type filter's rule (ListEvents and subscriptions alike): entries are types or prefixes ending in ".". */
function typeViolations(types: readonly string[]): FieldViolation[] {
  const bad = types.findIndex((t) => !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(t));
  return bad < 0
    ? []
    : [
        {
          field: `types[${bad}]`,
          description: 'must be an event type or a prefix of one ending in "." (letters, digits, ".", "_", "-")',
        },
      ];
}

export function eventFilter(req: ListEventsRequest): EventFilter {
  const v: FieldViolation[] = [];
  const range = timeRange(req.startTime, req.endTime, v);
  v.push(...typeViolations(req.types));
  if (req.types.length > 50) v.push({ field: "types", description: "at most 50 entries" });
  throwIfViolations(v);
  return {
    uidp: req.uidp,
    ...range,
    types: req.types,
    subject: req.subject || undefined,
    actor: req.actor || undefined,
  };
}

export function auditService({ events, lists }: { events: EventsRepository; lists: ListEngineDeps }) {
  return bindService(AuditService, {
    async listEvents(req, call) {
      const { items, ...page } = await listResponse({
        lists,
        resource: eventListing,
        schema: ListEventsRequestSchema,
        request: req,
        query: events.listQuery(eventFilter(req)),
        toItems: (rows: EventRow[]) => rows.map(eventFromRow),
        call,
      });
      return { events: items, ...page };
    },
  });
}
