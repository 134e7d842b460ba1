// /console/advisories: the advisories the caller may read, searched and filtered with every filter
// ListAdvisories takes (each in the URL), sorted by the columns the list engine orders by, paged.
import { useState } from "react";
import {
  AdvisoriesService,
  type Advisory,
} from "../../../../src/gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { client } from "../../api";
import { href, Link, useQueryState } from "../../router";
import { ListTable, resetPosition, usePagedList } from "../../ui/list";
import { SelectField } from "../../ui/forms";
import { GroupSelect } from "../../ui/groups";
import { Page, Time } from "../../ui/misc";
import { AdvisorySeverity, EVENT_KINDS, REVIEW_STATES, status } from "./advisory-words";
import { QueryChecks, QueryText, splitList } from "../../ui/filters";

/** The query keys of the list fields, with their labels: each is comma-separated in the URL. */
const LIST_FILTERS = [
  { key: "advisory_ids", label: "Advisory ids" },
  { key: "aliases", label: "Aliases (CVE, GHSA, …)" },
  { key: "legacy_advisory_ids", label: "Legacy advisory ids" },
  { key: "artifact_names", label: "Packages" },
  { key: "artifact_types", label: "Package types" },
  { key: "artifact_architectures", label: "Architectures" },
  { key: "component_names", label: "Components" },
  { key: "component_types", label: "Component types" },
  { key: "component_locations", label: "Component locations" },
  { key: "event_authors", label: "Event authors" },
  { key: "exclude_event_authors", label: "Events by someone other than" },
  { key: "event_reviewers", label: "Event reviewers" },
] as const;

const kindByCase = new Map(EVENT_KINDS.map((k) => [k.case as string, k.filter]));
const reviewByName = new Map(REVIEW_STATES.map((r) => [r.label.toLowerCase().replace(/ /g, "_"), r.state]));

export function AdvisoriesPage() {
  const [query, setQuery] = useQueryState();
  const filters = {
    query: query.get("q") ?? "",
    group: query.get("group") ?? "",
    origin: query.get("origin") ?? "",
    latest: query.get("latest_event_type") ?? "",
    eventTypes: query.get("event_types") ?? "",
    reviewStates: query.get("event_review_states") ?? "",
    lists: LIST_FILTERS.map((f) => query.get(f.key) ?? ""),
  };
  const list = usePagedList<Advisory>(
    async ({ pageSize, pageToken, skip, orderBy }) => {
      const v = (key: (typeof LIST_FILTERS)[number]["key"]) =>
        splitList(filters.lists[LIST_FILTERS.findIndex((f) => f.key === key)]);
      const latest = kindByCase.get(filters.latest);
      const answer = await client(AdvisoriesService).listAdvisories({
        advisoryIds: v("advisory_ids"),
        aliases: v("aliases"),
        legacyAdvisoryIds: v("legacy_advisory_ids"),
        artifactNames: v("artifact_names"),
        artifactTypes: v("artifact_types"),
        artifactArchitectures: v("artifact_architectures"),
        componentNames: v("component_names"),
        componentTypes: v("component_types"),
        componentLocations: v("component_locations"),
        eventAuthors: v("event_authors"),
        excludeEventAuthors: v("exclude_event_authors"),
        eventReviewers: v("event_reviewers"),
        query: filters.query,
        uidp: filters.group ? { descendantsOf: filters.group } : undefined,
        origin: filters.origin || undefined,
        latestEventType: latest,
        eventTypes: splitList(filters.eventTypes).flatMap((c) => kindByCase.get(c) ?? []),
        eventReviewStates: splitList(filters.reviewStates).flatMap((s) => reviewByName.get(s) ?? []),
        pageSize,
        pageToken,
        skip,
        orderBy,
      });
      return { items: answer.advisories, nextPageToken: answer.nextPageToken, totalCount: answer.totalCount };
    },
    [JSON.stringify(filters)],
  );
  const active = LIST_FILTERS.filter((f) => query.get(f.key)).length + (filters.origin ? 1 : 0);
  // Open at first when a filter in it is set, then as the person leaves it: clearing its last
  // filter must not close it around the field being typed in.
  const [moreOpen, setMoreOpen] = useState(active > 0);
  return (
    <Page title="Advisories">
      <div role="search" className="filters" aria-label="Search advisories">
        <div className="filter-row">
          <QueryText
            name="q"
            type="search"
            label="Search"
            hint="Text in the advisory id, legacy id, aliases, package or component name"
          />
          <GroupSelect
            label="Publisher group"
            value={filters.group}
            allowAll="Every group"
            onValue={(uid) => setQuery({ group: uid, ...resetPosition })}
          />
          <SelectField
            label="Status (newest event)"
            value={filters.latest}
            onValue={(v) => setQuery({ latest_event_type: v, ...resetPosition })}
            options={[{ value: "", label: "Any" }, ...EVENT_KINDS.map((k) => ({ value: k.case, label: k.label }))]}
          />
        </div>
        <details className="more-filters" open={moreOpen} onToggle={(e) => setMoreOpen(e.currentTarget.open)}>
          <summary>More filters{active > 0 ? ` (${active} set)` : ""}</summary>
          <p className="hint">Several values are separated by commas; an advisory matches any of them.</p>
          <div className="filter-grid">
            {LIST_FILTERS.map((f) => (
              <QueryText key={f.key} name={f.key} label={f.label} />
            ))}
            <QueryText name="origin" label="Origin" hint="advisory-yaml, osv, or what the import named" />
          </div>
          <QueryChecks
            name="event_types"
            legend="Has an event of kind"
            options={EVENT_KINDS.map((k) => ({ value: k.case, label: k.label }))}
          />
          <QueryChecks
            name="event_review_states"
            legend="Has an event in review state"
            options={REVIEW_STATES.map((r) => ({ value: r.label.toLowerCase().replace(/ /g, "_"), label: r.label }))}
          />
        </details>
      </div>
      <ListTable
        list={list}
        noun="advisories"
        caption="Advisories"
        rowKey={(a) => a.uid}
        empty="No advisory matches."
        columns={[
          {
            header: "Advisory",
            sort: "advisory_id",
            cell: (a) => <Link to={href("/console/advisory", { id: a.uid })}>{a.advisoryId}</Link>,
          },
          { header: "Package", sort: "artifact_name", cell: (a) => a.artifactName },
          {
            header: "Component",
            sort: "component_name",
            cell: (a) => (a.componentName && a.componentName !== a.artifactName ? a.componentName : "—"),
          },
          { header: "Aliases", cell: (a) => a.aliases.join(", ") || "—" },
          { header: "Status", cell: (a) => status(a) },
          { header: "Severity", cell: (a) => <AdvisorySeverity advisory={a} /> },
          { header: "Updated", sort: "update_time", cell: (a) => <Time value={a.updateTime} /> },
        ]}
      />
    </Page>
  );
}
