// /console/advisory?id=: one advisory — its events in time order, aliases, affected packages and
// severity. `id` is an advisory's uid, its advisory id (CGA-…), a legacy id, or an alias (CVE-…,
// GHSA-…): other pages link here with the vulnerability id they have. An id that several
// advisories share (one per package) lists them all as the affected packages; `uid` picks the one
// shown.
import {
  AdvisoriesService,
  type Advisory,
} from "../../../../src/gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { useState } from "react";
import { client } from "../../api";
import { href, Link, navigate, useQueryState } from "../../router";
import { useLoad } from "../../ui/load";
import { DataTable } from "../../ui/list";
import { Button, Form, TextField } from "../../ui/forms";
import { groupOf } from "../../ui/groups";
import { Empty, ErrorNote, Loading } from "../../ui/feedback";
import { Page, Section, SeverityBadge, Time } from "../../ui/misc";
import {
  cvss3BaseScore,
  eventDetails,
  eventLabel,
  levelOf,
  reviewLabel,
  severityTypeLabel,
  status,
  timeline,
} from "./advisory-words";

interface Found {
  /** every advisory the id names */
  matches: Advisory[];
  /** how the id matched */
  by: "uid" | "advisory id" | "alias" | "legacy id" | "search";
}

const MAX = 200;

async function findAdvisories(id: string): Promise<Found> {
  const advisories = client(AdvisoriesService);
  if (id.includes("/")) {
    const advisory = await advisories.getAdvisory({ uid: id });
    const same = await advisories.listAdvisories({ advisoryIds: [advisory.advisoryId], pageSize: MAX });
    const others = same.advisories.filter((a) => a.uid !== advisory.uid);
    return { matches: [advisory, ...others], by: "uid" };
  }
  const attempts: [Found["by"], () => Promise<Advisory[]>][] = [
    ["advisory id", async () => (await advisories.listAdvisories({ advisoryIds: [id], pageSize: MAX })).advisories],
    ["alias", async () => (await advisories.listAdvisories({ aliases: [id], pageSize: MAX })).advisories],
    ["legacy id", async () => (await advisories.listAdvisories({ legacyAdvisoryIds: [id], pageSize: MAX })).advisories],
    [
      // Ids are compared exactly above; a different letter case still finds its advisory here.
      "search",
      async () => {
        const wanted = id.toLowerCase();
        const found = await advisories.listAdvisories({ query: id, pageSize: MAX });
        return found.advisories.filter((a) =>
          [a.advisoryId, a.legacyAdvisoryId ?? "", ...a.aliases].some((x) => x.toLowerCase() === wanted),
        );
      },
    ],
  ];
  for (const [by, attempt] of attempts) {
    const matches = await attempt();
    if (matches.length > 0) return { matches, by };
  }
  return { matches: [], by: "search" };
}

export function AdvisoryPage() {
  const [query] = useQueryState();
  const id = (query.get("id") ?? "").trim();
  if (!id) return <LookUp />;
  return <AdvisoryOf id={id} selected={query.get("uid") ?? ""} />;
}

function LookUp() {
  const [id, setId] = useState("");
  return (
    <Page title="Advisory">
      <Form label="Find an advisory" onSubmit={() => navigate(href("/console/advisory", { id: id.trim() }))}>
        <TextField label="Advisory id or alias" hint="CGA-…, CVE-…, GHSA-…" value={id} onValue={setId} required />
        <Button type="submit" kind="primary">
          Find
        </Button>
      </Form>
    </Page>
  );
}

function AdvisoryOf({ id, selected }: { id: string; selected: string }) {
  const found = useLoad(() => findAdvisories(id), [id]);
  if (found.error)
    return (
      <Page title="Advisory">
        <ErrorNote error={found.error} title={`The advisory ${id} could not be read`} />
      </Page>
    );
  if (!found.data) {
    return (
      <Page title="Advisory">
        <Loading what={`advisory ${id}`} />
      </Page>
    );
  }
  const { matches, by } = found.data;
  if (matches.length === 0) {
    return (
      <Page title="Advisory">
        <div className="note note-warn" role="status">
          No advisory has the id <strong>{id}</strong> (as an advisory id, legacy id or alias) among those you may read.
        </div>
        <p>
          <Link to={href("/console/advisories", { q: id })}>Search the advisories for “{id}”</Link>
        </p>
      </Page>
    );
  }
  const advisory = matches.find((a) => a.uid === selected) ?? matches[0]!;
  return (
    <Page title={advisory.advisoryId}>
      {by !== "uid" && by !== "advisory id" && (
        <p className="muted">
          Found by its {by === "search" ? "id" : by} <strong>{id}</strong>.
        </p>
      )}
      <dl className="facts">
        <dt>Status</dt>
        <dd>{status(advisory)}</dd>
        <dt>Aliases</dt>
        <dd>{advisory.aliases.length ? advisory.aliases.join(", ") : "—"}</dd>
        {advisory.legacyAdvisoryId && (
          <>
            <dt>Legacy id</dt>
            <dd>{advisory.legacyAdvisoryId}</dd>
          </>
        )}
        <dt>Package</dt>
        <dd>
          {advisory.artifactName} <span className="muted">({advisory.artifactType || "any type"}</span>
          <span className="muted">
            {advisory.artifactArchitecture ? `, ${advisory.artifactArchitecture})` : ", every architecture)"}
          </span>
        </dd>
        <dt>Component</dt>
        <dd>
          {advisory.componentName || "—"}
          {advisory.componentType && <span className="muted"> ({advisory.componentType})</span>}
          {advisory.componentLocation && <span className="muted"> at {advisory.componentLocation}</span>}
        </dd>
        <dt>Publisher group</dt>
        <dd>
          <code>{groupOf(advisory.uid)}</code>
        </dd>
        <dt>Imported by</dt>
        <dd>{advisory.author || "—"}</dd>
        <dt>Created</dt>
        <dd>
          <Time value={advisory.createTime} />
        </dd>
        <dt>Updated</dt>
        <dd>
          <Time value={advisory.updateTime} />
        </dd>
        {advisory.deleteTime && (
          <>
            <dt>Withdrawn</dt>
            <dd>
              <Time value={advisory.deleteTime} />
            </dd>
          </>
        )}
      </dl>
      <Section title="Severity">
        {advisory.severities.length === 0 ? (
          <Empty>No severity score was published.</Empty>
        ) : (
          <div className="table-scroll">
            <DataTable
              caption="Severity scores"
              rows={advisory.severities}
              rowKey={(s) => `${s.type}:${s.score}`}
              columns={[
                { header: "System", cell: (s) => severityTypeLabel(s) },
                { header: "Vector", cell: (s) => <code>{s.score}</code> },
                {
                  header: "Base score",
                  cell: (s) => {
                    const score = cvss3BaseScore(s.score);
                    return score === undefined ? (
                      "—"
                    ) : (
                      <>
                        <SeverityBadge severity={levelOf(score)} /> {score.toFixed(1)}
                      </>
                    );
                  },
                },
              ]}
            />
          </div>
        )}
      </Section>
      <Section title="Timeline">
        {advisory.events.length === 0 ? (
          <Empty>No event yet.</Empty>
        ) : (
          <ol className="timeline">
            {timeline(advisory).map((e) => (
              <li key={e.uid}>
                <Time value={e.createTime} /> <strong>{eventLabel(e)}</strong>
                {eventDetails(e).map((line) => (
                  <div key={line}>{line}</div>
                ))}
                <div className="muted">
                  by {e.author || "—"}
                  {e.reviewer && `, reviewed by ${e.reviewer}`} · {reviewLabel(e.reviewState)}
                  {e.issue && (
                    <>
                      {" · "}
                      {/^https?:\/\//.test(e.issue) ? (
                        <a href={e.issue} rel="noreferrer noopener" target="_blank">
                          issue
                        </a>
                      ) : (
                        `issue ${e.issue}`
                      )}
                    </>
                  )}
                </div>
              </li>
            ))}
          </ol>
        )}
      </Section>
      <Section title="Affected packages">
        <div className="table-scroll">
          <DataTable
            caption={`Advisories with the id ${id}`}
            rows={matches}
            rowKey={(a) => a.uid}
            columns={[
              {
                header: "Package",
                cell: (a) =>
                  a.uid === advisory.uid ? (
                    <span aria-current="true">{a.artifactName} (shown)</span>
                  ) : (
                    <Link to={href("/console/advisory", { id, uid: a.uid })}>{a.artifactName}</Link>
                  ),
              },
              { header: "Advisory", cell: (a) => a.advisoryId },
              { header: "Architecture", cell: (a) => a.artifactArchitecture || "all" },
              { header: "Component", cell: (a) => a.componentName || "—" },
              { header: "Status", cell: (a) => status(a) },
            ]}
          />
        </div>
      </Section>
    </Page>
  );
}
