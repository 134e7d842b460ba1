// /console/deliveries?subscription=: a subscription's deliveries (DeliveriesService.ListDeliveries),
// newest event first, filtered by state and paged by cursor; each one, or every event of a time
// range, can be sent again (RedeliverEvents) where the caller may update the subscription.
import { useState } from "react";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  DeliveriesService,
  Delivery_State,
  SubscriptionFiltersService,
  type Delivery,
} from "../../../../src/gen/bulwark/events/v1/events_pb.js";
import { useAccess } from "../../access";
import { client } from "../../api";
import { href, Link, useQueryState } from "../../router";
import { useAction, useLoad } from "../../ui/load";
import { DataTable, usePagedList, type PagedList } from "../../ui/list";
import { Button, Form, TextField } from "../../ui/forms";
import { Done, Empty, ErrorNote, Loading } from "../../ui/feedback";
import { groupOf, pathOf, useVisibleGroups } from "../../ui/groups";
import { Page, Section, Time } from "../../ui/misc";
import { QueryChecks, splitList, utcDate } from "../../ui/filters";

const STATES: { value: string; label: string; state: Delivery_State }[] = [
  { value: "pending", label: "Pending", state: Delivery_State.PENDING },
  { value: "delivered", label: "Delivered", state: Delivery_State.DELIVERED },
  { value: "failed", label: "Failed", state: Delivery_State.FAILED },
];
const stateLabel = (s: Delivery_State) => STATES.find((x) => x.state === s)?.label ?? "—";

export function DeliveriesPage() {
  const [query] = useQueryState();
  const uid = query.get("subscription") ?? "";
  if (!uid) {
    return (
      <Page title="Deliveries">
        <Empty>
          Choose a subscription on the <Link to="/console/subscriptions">subscriptions page</Link> to see its
          deliveries.
        </Empty>
      </Page>
    );
  }
  return <DeliveriesOf uid={uid} />;
}

function DeliveriesOf({ uid }: { uid: string }) {
  const access = useAccess();
  const [query] = useQueryState();
  const states = query.get("states") ?? "";
  const groups = useVisibleGroups();
  const subscription = useLoad(() => client(SubscriptionFiltersService).getFilteredSubscription({ uid }), [uid]);
  const list = usePagedList<Delivery>(
    async ({ pageSize, pageToken }) => {
      const answer = await client(DeliveriesService).listDeliveries({
        subscriptionUid: uid,
        states: splitList(states).flatMap((v) => STATES.find((s) => s.value === v)?.state ?? []),
        pageSize,
        pageToken,
      });
      return { items: answer.deliveries, nextPageToken: answer.nextPageToken, totalCount: answer.totalCount };
    },
    [uid, states],
  );
  const canRedeliver = access.can("subscriptions.update", groupOf(uid));
  const [outcome, setOutcome] = useState("");
  const redeliver = useAction(async (request: { eventId?: string; start?: Date; end?: Date }) => {
    const answer = await client(DeliveriesService).redeliverEvents({
      subscriptionUid: uid,
      eventId: request.eventId ?? "",
      startTime: request.start && timestampFromDate(request.start),
      endTime: request.end && timestampFromDate(request.end),
    });
    return Number(answer.count);
  });
  const run = async (request: { eventId?: string; start?: Date; end?: Date }) => {
    setOutcome("");
    const count = await redeliver.run(request);
    if (count !== undefined) {
      setOutcome(
        count === 0
          ? "No delivery matched: nothing was queued."
          : `${count} ${count === 1 ? "delivery" : "deliveries"} queued again.`,
      );
      list.loaded.reload();
    }
  };
  return (
    <Page title="Deliveries" actions={<Button onClick={list.loaded.reload}>Refresh</Button>}>
      {subscription.error ? (
        <ErrorNote error={subscription.error} title="The subscription could not be read" />
      ) : subscription.data ? (
        <dl className="facts">
          <dt>Subscription</dt>
          <dd>
            <code>{subscription.data.sink}</code>
          </dd>
          <dt>Event types</dt>
          <dd>{subscription.data.types.length ? subscription.data.types.join(", ") : "every type"}</dd>
          <dt>Group</dt>
          <dd>
            <Link to={href("/console/subscriptions", { group: groupOf(uid) })}>
              {pathOf(groups.data, groupOf(uid))}
            </Link>
          </dd>
        </dl>
      ) : (
        <Loading what="the subscription" />
      )}
      <div role="search" className="filters" aria-label="Filter deliveries">
        <QueryChecks name="states" legend="State" options={STATES} />
      </div>
      {outcome && <Done>{outcome}</Done>}
      <ErrorNote error={redeliver.error} title="The events could not be sent again" />
      <DeliveriesTable
        list={list}
        canRedeliver={canRedeliver}
        busy={redeliver.busy}
        onRedeliver={(eventId) => run({ eventId })}
      />
      {canRedeliver && <RedeliverRange busy={redeliver.busy} onRedeliver={(start, end) => run({ start, end })} />}
    </Page>
  );
}

function DeliveriesTable({
  list,
  canRedeliver,
  busy,
  onRedeliver,
}: {
  list: PagedList<Delivery>;
  canRedeliver: boolean;
  busy: boolean;
  onRedeliver: (eventId: string) => void;
}) {
  const { loaded } = list;
  if (loaded.error) return <ErrorNote error={loaded.error} />;
  if (loaded.loading && !loaded.data) return <Loading what="deliveries" />;
  return (
    <div className="list">
      {list.items.length === 0 ? (
        <Empty>No delivery yet.</Empty>
      ) : (
        // Focusable, so a keyboard can scroll it when no control inside takes focus (a viewer's).
        <div className="table-scroll" tabIndex={0} role="region" aria-label="Deliveries">
          <DataTable<Delivery>
            caption="Deliveries, newest event first"
            rows={list.items}
            rowKey={(d) => d.eventId}
            columns={[
              {
                header: "Event",
                cell: (d) => (
                  <>
                    {d.eventType}
                    <div className="muted">
                      <Time value={d.eventTime} />
                    </div>
                    <code className="wrap">{d.eventSubject}</code>
                  </>
                ),
              },
              {
                header: "State",
                cell: (d) => (
                  <>
                    {stateLabel(d.state)}
                    <div className="muted">
                      {d.state === Delivery_State.DELIVERED ? (
                        <Time value={d.deliveredTime} />
                      ) : d.state === Delivery_State.PENDING ? (
                        <>
                          next <Time value={d.nextAttemptTime} />
                        </>
                      ) : (
                        "given up"
                      )}
                    </div>
                  </>
                ),
              },
              { header: "Attempts", className: "num", cell: (d) => d.attempts },
              {
                header: "Last answer",
                cell: (d) =>
                  d.attempts === 0 ? (
                    "—"
                  ) : (
                    <>
                      {d.lastStatusCode ? `HTTP ${d.lastStatusCode}` : "no answer"}
                      {d.lastError && <div className="muted">{d.lastError}</div>}
                    </>
                  ),
              },
              ...(canRedeliver
                ? [
                    {
                      header: "Actions",
                      cell: (d: Delivery) => (
                        <Button busy={busy} onClick={() => onRedeliver(d.eventId)}>
                          Redeliver
                        </Button>
                      ),
                    },
                  ]
                : []),
            ]}
          />
        </div>
      )}
      <CursorPager list={list} />
    </div>
  );
}

/** ListDeliveries pages by cursor only (no offset): back to the newest, or on to the next page. */
function CursorPager({ list }: { list: PagedList<Delivery> }) {
  const { page, pageSize, total, items, loaded } = list;
  const first = (page - 1) * pageSize + 1;
  return (
    <nav className="pager" aria-label="Pages of deliveries">
      <span role="status">
        {items.length === 0
          ? "No deliveries"
          : `${first}–${first + items.length - 1}${total === undefined ? "" : ` of ${total}`} deliveries`}
      </span>
      <Button onClick={() => list.goTo(1)} disabled={page <= 1 || loaded.loading}>
        Newest
      </Button>
      <span>Page {page}</span>
      <Button onClick={list.next} disabled={!loaded.data?.nextPageToken || loaded.loading}>
        Next
      </Button>
    </nav>
  );
}

function RedeliverRange({ busy, onRedeliver }: { busy: boolean; onRedeliver: (start: Date, end?: Date) => void }) {
  const [start, setStart] = useState("");
  const [end, setEnd] = useState("");
  return (
    <Section title="Redeliver a time range">
      <Form
        label="Redeliver a time range"
        onSubmit={() => {
          const from = utcDate(start);
          if (from) onRedeliver(from, utcDate(end));
        }}
      >
        <TextField label="Events from (UTC)" type="datetime-local" step={1} required value={start} onValue={setStart} />
        <TextField
          label="Until (UTC)"
          type="datetime-local"
          step={1}
          value={end}
          onValue={setEnd}
          hint="Optional: events recorded before this time."
        />
        <Button type="submit" busy={busy}>
          Redeliver events
        </Button>
      </Form>
    </Section>
  );
}
