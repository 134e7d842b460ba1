// /console/audit: the audit trail (AuditService.ListEvents) — every recorded event of the groups
// where the caller may list subscriptions — with every filter of the request in the URL (group,
// time range, types, subject, actor), ordered by time either way, paged.
import { timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import { toJson } from "@bufbuild/protobuf";
import { AuditService, type Event } from "../../../../src/gen/bulwark/events/v1/events_pb.js";
import { client } from "../../api";
import { useQueryState } from "../../router";
import { ListTable, resetPosition, usePagedList } from "../../ui/list";
import { GroupSelect, pathOf, under, useVisibleGroups } from "../../ui/groups";
import { Page } from "../../ui/misc";
import { Time } from "../../ui/misc";
import { QueryDateTime, QueryText, splitList, utcDate } from "../../ui/filters";

export function AuditPage() {
  const [query, setQuery] = useQueryState();
  const groups = useVisibleGroups();
  const filters = {
    group: query.get("group") ?? "",
    start: query.get("start_time") ?? "",
    end: query.get("end_time") ?? "",
    types: query.get("types") ?? "",
    subject: query.get("subject") ?? "",
    actor: query.get("actor") ?? "",
  };
  const list = usePagedList<Event>(
    async ({ pageSize, pageToken, skip, orderBy }) => {
      const start = utcDate(filters.start);
      const end = utcDate(filters.end);
      const answer = await client(AuditService).listEvents({
        uidp: under(filters.group),
        startTime: start && timestampFromDate(start),
        endTime: end && timestampFromDate(end),
        types: splitList(filters.types),
        subject: filters.subject.trim(),
        actor: filters.actor.trim(),
        pageSize,
        pageToken,
        skip,
        orderBy,
      });
      return { items: answer.events, nextPageToken: answer.nextPageToken, totalCount: answer.totalCount };
    },
    [JSON.stringify(filters)],
    { defaultOrder: "time desc" },
  );
  return (
    <Page title="Audit trail">
      <div role="search" className="filters" aria-label="Filter the audit trail">
        <div className="filter-grid">
          <GroupSelect
            label="Group"
            value={filters.group}
            allowAll="Every group"
            onValue={(uid) => setQuery({ group: uid, ...resetPosition })}
          />
          <QueryText
            name="types"
            label="Event types"
            hint='Comma-separated: exact types, or prefixes ending in "." (dev.chainguard.api.iam.)'
          />
          <QueryText name="subject" label="Subject" hint="The uid of the resource an event is about" />
          <QueryText name="actor" label="Actor" hint="The uid of the identity that caused it" />
          <QueryDateTime name="start_time" label="From (UTC)" />
          <QueryDateTime name="end_time" label="Until (UTC)" />
        </div>
      </div>
      <ListTable
        list={list}
        noun="events"
        caption="Recorded events"
        rowKey={(e) => e.uid}
        empty="No event matches."
        columns={[
          { header: "Time", sort: "time", cell: (e) => <Time value={e.time} /> },
          { header: "Type", cell: (e) => e.type },
          { header: "Subject", cell: (e) => <code className="wrap">{e.subject}</code> },
          { header: "Group", cell: (e) => (e.group ? pathOf(groups.data, e.group) : "—") },
          {
            header: "Actor",
            cell: (e) =>
              e.actor ? (
                <>
                  <code>{e.actor.subject}</code>
                  {e.actor.act.email && <div className="muted">{e.actor.act.email}</div>}
                </>
              ) : (
                "anonymous"
              ),
          },
          {
            header: "Body",
            cell: (e) =>
              e.body ? (
                <details>
                  <summary>Body</summary>
                  <pre>{JSON.stringify(toJson(ValueSchema, e.body), null, 2)}</pre>
                </details>
              ) : (
                "—"
              ),
          },
        ]}
      />
    </Page>
  );
}
