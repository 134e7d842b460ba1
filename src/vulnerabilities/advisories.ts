// AdvisoriesService: advisories and their events as the reference names them, with every filter
// of ListAdvisoriesRequest over the list engine.
import { create, fromJson, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  AdvisoriesService,
  AdvisoryEventSchema,
  AdvisorySchema,
  EventTypeFilter,
  ListAdvisoriesRequestSchema,
  ListAdvisoriesResponseSchema,
  ReviewState,
  SeveritySchema,
  Severity_Type,
  type Advisory,
  type AdvisoryEvent,
  type ListAdvisoriesRequest,
} from "../gen/chainguard/platform/vulnerabilities/v2beta1/advisories_pb.js";
import type { FieldViolation } from "../core/errors.js";
import type { ListableResource, ListEngineDeps } from "../core/list.js";
import { LruCache } from "../core/lru.js";
import { bindService } from "../core/service.js";
import { requireUid, throwIfViolations } from "../core/validate.js";
import { listResponse } from "../platform/list.js";
import { found } from "../platform/outcomes.js";
import type { EventKind } from "./documents.js";
import type { ListAdvisoriesCache } from "./list-cache.js";
import type { AdvisoriesRepository, AdvisoryEventRow, AdvisoryFilter, AdvisoryRow } from "./storage/advisories.js";

export const advisoryListing: ListableResource = {
  sortable: {
    advisory_id: { column: "advisory_id", kind: "text" },
    artifact_name: { column: "artifact_name", kind: "text" },
    component_name: { column: "component_name", kind: "text" },
    create_time: { column: "create_time", kind: "timestamp" },
    update_time: { column: "update_time", kind: "timestamp" },
  },
  aliases: {
    advisoryId: "advisory_id",
    artifactName: "artifact_name",
    componentName: "component_name",
    created_at: "create_time",
    updated_at: "update_time",
    createTime: "create_time",
    updateTime: "update_time",
  },
  defaultOrder: "advisory_id",
};

/** EventTypeFilter values and the event kinds they stand for. */
export const KIND_OF_FILTER: ReadonlyMap<EventTypeFilter, EventKind> = new Map([
  [EventTypeFilter.DETECTION, "detection"],
  [EventTypeFilter.TRUE_POSITIVE_DETERMINATION, "true-positive-determination"],
  [EventTypeFilter.FIXED, "fixed"],
  [EventTypeFilter.FALSE_POSITIVE_DETERMINATION, "false-positive-determination"],
  [EventTypeFilter.ANALYSIS_NOT_PLANNED, "analysis-not-planned"],
  [EventTypeFilter.FIX_NOT_PLANNED, "fix-not-planned"],
  [EventTypeFilter.PENDING_UPSTREAM_FIX, "pending-upstream-fix"],
  [EventTypeFilter.PATCHED, "patched"],
]);

/** The AdvisoryEvent oneof member (JSON name) each kind is stored as. */
export const MEMBER_OF_KIND: Readonly<Record<EventKind, string>> = {
  detection: "detection",
  "true-positive-determination": "truePositiveDetermination",
  fixed: "fixed",
  "false-positive-determination": "falsePositiveDetermination",
  "analysis-not-planned": "analysisNotPlanned",
  "fix-not-planned": "fixNotPlanned",
  "pending-upstream-fix": "pendingUpstreamFix",
  patched: "patched",
};

// Stored values are the server's own JSON; a field a later version dropped is no reason to fail.
const LENIENT = { ignoreUnknownFields: true } as const;

/**
 * Events as messages, by their content: reflective fromJson of an event was the largest cost of a
 * page of advisories. The key holds every column the message is made of (the data by its digest
 * in event_key), so an entry never answers for other content; bounded, a few pages' worth.
 */
const eventMessages = new LruCache<string, AdvisoryEvent>(4096);

function toEvent(row: AdvisoryEventRow): AdvisoryEvent {
  const key = `${row.uid}\n${row.event_key}\n${row.kind}\n${row.create_time.getTime()}\n${row.author}\n${row.reviewer}\n${row.review_state}\n${row.issue ?? "\u0000"}`;
  let event = eventMessages.get(key);
  if (!event) eventMessages.set(key, (event = parseEvent(row)));
  return event;
}

function parseEvent(row: AdvisoryEventRow): AdvisoryEvent {
  const json: JsonObject = {
    uid: row.uid,
    createTime: row.create_time.toISOString(),
    author: row.author,
    reviewer: row.reviewer,
    reviewState: row.review_state,
    [MEMBER_OF_KIND[row.kind]]: row.data as JsonObject,
  };
  if (row.issue !== null) json.issue = row.issue;
  return fromJson(AdvisoryEventSchema, json, LENIENT);
}

export function toAdvisory(row: AdvisoryRow, events: readonly AdvisoryEventRow[]): Advisory {
  return create(AdvisorySchema, {
    uid: row.uid,
    advisoryId: row.advisory_id,
    createTime: timestampFromDate(row.create_time),
    updateTime: timestampFromDate(row.update_time),
    author: row.author,
    artifactName: row.artifact_name,
    artifactType: row.artifact_type,
    artifactArchitecture: row.artifact_architecture,
    componentName: row.component_name,
    componentType: row.component_type,
    componentLocation: row.component_location,
    aliases: row.aliases,
    events: events.map(toEvent),
    legacyAdvisoryId: row.legacy_advisory_id ?? undefined,
    severities: row.severities.map((s) =>
      create(SeveritySchema, {
        type: Severity_Type[s.type.replace(/^TYPE_/, "") as keyof typeof Severity_Type] ?? Severity_Type.UNSPECIFIED,
        score: s.score,
      }),
    ),
  });
}

/** Rows and their events, in one query for the events. */
export async function toAdvisories(repo: AdvisoriesRepository, rows: readonly AdvisoryRow[]): Promise<Advisory[]> {
  const events = await repo.eventsOf(rows.map((r) => r.uid));
  return rows.map((r) => toAdvisory(r, events.get(r.uid) ?? []));
}

const EVENT_TYPE_CHOICES = `must be one of ${[...KIND_OF_FILTER.keys()]
  .map((k) => `EVENT_TYPE_FILTER_${EventTypeFilter[k]}`)
  .join(", ")}`;

/** The kinds the filter values stand for; the first value that stands for none is a violation. */
function kindsOf(values: readonly EventTypeFilter[], v: FieldViolation[]): EventKind[] {
  const bad = values.findIndex((value) => !KIND_OF_FILTER.has(value));
  if (bad >= 0) v.push({ field: `event_types[${bad}]`, description: EVENT_TYPE_CHOICES });
  return values.flatMap((value) => KIND_OF_FILTER.get(value) ?? []);
}

/** The request's filters as the repository applies them; unknown enum values are refused. */
export function advisoryFilter(req: ListAdvisoriesRequest): AdvisoryFilter {
  const v: FieldViolation[] = [];
  const kinds = kindsOf(req.eventTypes, v);
  let latestEventType: EventKind | undefined;
  if (req.latestEventType !== undefined) {
    latestEventType = KIND_OF_FILTER.get(req.latestEventType);
    if (!latestEventType) v.push({ field: "latest_event_type", description: EVENT_TYPE_CHOICES });
  }
  const badState = req.eventReviewStates.findIndex(
    (s) => s === ReviewState.UNSPECIFIED || ReviewState[s] === undefined,
  );
  if (badState >= 0)
    v.push({
      field: `event_review_states[${badState}]`,
      description:
        "must be one of REVIEW_STATE_PENDING, REVIEW_STATE_APPROVED, REVIEW_STATE_REQUEST_CHANGES, REVIEW_STATE_REJECTED",
    });
  throwIfViolations(v);
  return {
    uidp: req.uidp,
    advisoryIds: req.advisoryIds,
    legacyAdvisoryIds: req.legacyAdvisoryIds,
    artifactNames: req.artifactNames,
    artifactTypes: req.artifactTypes,
    artifactArchitectures: req.artifactArchitectures,
    componentNames: req.componentNames,
    componentTypes: req.componentTypes,
    componentLocations: req.componentLocations,
    aliases: req.aliases,
    origin: req.origin,
    event: {
      kinds,
      reviewStates: req.eventReviewStates,
      authors: req.eventAuthors,
      excludeAuthors: req.excludeEventAuthors,
      reviewers: req.eventReviewers,
    },
    latestEventType,
    query: req.query.trim().toLowerCase(),
  };
}

export interface AdvisoriesDeps {
  advisories: AdvisoriesRepository;
  lists: ListEngineDeps;
  /** ListAdvisories answers kept while the advisories do not change */
  answers: ListAdvisoriesCache;
}

export function advisoriesService({ advisories, lists, answers }: AdvisoriesDeps) {
  return bindService(AdvisoriesService, {
    async getAdvisory(req, call) {
      requireUid("uid", req.uid);
      const row = found(await advisories.get(req.uid, call.freshness), "advisory", req.uid);
      return (await toAdvisories(advisories, [row]))[0]!;
    },

    async listAdvisories(req, call) {
      const filter = advisoryFilter(req);
      // The counter first: an answer kept under it was made from data at least this new.
      const epoch = await advisories.epoch(call.freshness);
      const answer = await answers.answer(req, call.visibility ?? [], epoch, async () => {
        const { items, ...page } = await listResponse({
          lists,
          resource: advisoryListing,
          schema: ListAdvisoriesRequestSchema,
          request: req,
          query: advisories.listQuery(filter),
          // counts are kept per group, so they serve any caller, restricted as the rows are
          visibleCount: (restrict) => advisories.maintainedCount(filter, restrict),
          toItems: (rows: AdvisoryRow[]) => toAdvisories(advisories, rows),
          call,
        });
        return { advisories: items, ...page };
      });
      const response = create(ListAdvisoriesResponseSchema, { ...answer, advisories: [] });
      // the kept list itself, not a copy (as create makes): the REST layer keeps its JSON text with it
      response.advisories = answer.advisories;
      return response;
    },
  });
}
