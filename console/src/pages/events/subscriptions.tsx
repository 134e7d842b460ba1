// /console/subscriptions?group=: the event subscriptions (webhooks) of a group's subtree, or of
// every group the caller may see; each with its type filter (SubscriptionFiltersService) and a link
// to its deliveries. Create one (every event, or only the types named) and delete one, where the
// caller may.
import { useState } from "react";
import { SubscriptionsService } from "../../../../src/gen/chainguard/platform/events/v2/subscriptions_pb.js";
import {
  SubscriptionFiltersService,
  type FilteredSubscription,
} from "../../../../src/gen/bulwark/events/v1/events_pb.js";
import { useAccess } from "../../access";
import { client } from "../../api";
import { href, Link } from "../../router";
import { useAction } from "../../ui/load";
import { ListTable, usePagedList } from "../../ui/list";
import { Button, Form, TextField } from "../../ui/forms";
import { Done, ErrorNote } from "../../ui/feedback";
import { GroupSelect, groupOf, pathOf, under, useGroupParam, useVisibleGroups } from "../../ui/groups";
import { ConfirmButton, Page, Section } from "../../ui/misc";
import { splitList } from "../../ui/filters";

export function SubscriptionsPage() {
  const access = useAccess();
  const [group, setGroup] = useGroupParam();
  const groups = useVisibleGroups();
  const [deleted, setDeleted] = useState("");
  const remove = useAction(async (uid: string) => {
    await client(SubscriptionsService).deleteSubscription({ uid });
    return uid;
  });
  const list = usePagedList<FilteredSubscription>(
    async ({ pageSize, pageToken, skip, orderBy }) => {
      const answer = await client(SubscriptionsService).listSubscriptions({
        uidp: under(group),
        pageSize,
        pageToken,
        skip,
        orderBy,
      });
      // Each one's type filter (the extension's Get); the published List does not carry it.
      const items = await Promise.all(
        answer.subscriptions.map((s) => client(SubscriptionFiltersService).getFilteredSubscription({ uid: s.uid })),
      );
      return { items, nextPageToken: answer.nextPageToken, totalCount: answer.totalCount };
    },
    [group],
  );
  const canCreate = access.canSomewhere("subscriptions.create");
  return (
    <Page title="Event subscriptions">
      <div role="search" className="filters" aria-label="Filter subscriptions">
        <GroupSelect label="Subscriptions of" value={group} allowAll="Every group" onValue={setGroup} />
      </div>
      {deleted && <Done>Subscription {deleted} deleted.</Done>}
      <ErrorNote error={remove.error} title="The subscription could not be deleted" />
      <ListTable
        list={list}
        noun="subscriptions"
        caption="Event subscriptions"
        rowKey={(s) => s.uid}
        empty="No subscription here."
        columns={[
          { header: "Sink", cell: (s) => <code className="wrap">{s.sink}</code> },
          { header: "Group", cell: (s) => pathOf(groups.data, groupOf(s.uid)) },
          { header: "Event types", cell: (s) => (s.types.length ? s.types.join(", ") : "every type") },
          {
            header: "Actions",
            cell: (s) => (
              <div className="row-actions">
                <Link to={href("/console/deliveries", { subscription: s.uid })}>Deliveries</Link>
                {access.can("subscriptions.delete", groupOf(s.uid)) && (
                  <ConfirmButton
                    label="Delete"
                    question={
                      <>
                        Delete the subscription to <code>{s.sink}</code>? Its receiver gets no more events.
                      </>
                    }
                    confirmLabel="Delete subscription"
                    busy={remove.busy}
                    onConfirm={async () => {
                      setDeleted("");
                      const uid = await remove.run(s.uid);
                      if (uid) {
                        setDeleted(s.sink);
                        list.loaded.reload();
                      }
                    }}
                  />
                )}
              </div>
            ),
          },
        ]}
      />
      {canCreate && (
        <CreateSubscription
          initialGroup={access.can("subscriptions.create", group) ? group : ""}
          onCreated={list.loaded.reload}
        />
      )}
    </Page>
  );
}

function CreateSubscription({ initialGroup, onCreated }: { initialGroup: string; onCreated: () => void }) {
  const access = useAccess();
  const [parent, setParent] = useState(initialGroup);
  const [sink, setSink] = useState("");
  const [types, setTypes] = useState("");
  const [created, setCreated] = useState<FilteredSubscription | undefined>();
  const create = useAction(async () => {
    const wanted = splitList(types);
    // Without types, the published service (every event); with them, the filters extension.
    if (wanted.length === 0) {
      const s = await client(SubscriptionsService).createSubscription({ parent, subscription: { sink } });
      return { uid: s.uid, sink: s.sink, types: [] as string[] };
    }
    const s = await client(SubscriptionFiltersService).createFilteredSubscription({
      parent,
      subscription: { sink, types: wanted },
    });
    return { uid: s.uid, sink: s.sink, types: s.types };
  });
  return (
    <Section title="New subscription">
      <Form
        label="New subscription"
        onSubmit={async () => {
          setCreated(undefined);
          const made = await create.run();
          if (made) {
            setCreated(made as FilteredSubscription);
            setSink("");
            setTypes("");
            onCreated();
          }
        }}
      >
        <GroupSelect
          label="Group"
          value={parent}
          onValue={setParent}
          required
          only={(g) => access.can("subscriptions.create", g.uid)}
        />
        <TextField
          label="Sink URL"
          type="url"
          required
          value={sink}
          onValue={setSink}
          hint="The HTTPS URL events are POSTed to. It is not a secret: do not put one in it."
        />
        <TextField
          label="Event types"
          value={types}
          onValue={setTypes}
          hint='Optional, comma-separated: exact types, or prefixes ending in "." (e.g. dev.chainguard.registry.). Empty: every type.'
        />
        <Button type="submit" kind="primary" busy={create.busy}>
          Create subscription
        </Button>
      </Form>
      <ErrorNote error={create.error} title="The subscription could not be created" />
      {created && (
        <Done>
          Subscription created for <code>{created.sink}</code>.{" "}
          <Link to={href("/console/deliveries", { subscription: created.uid })}>See its deliveries</Link>
        </Done>
      )}
    </Section>
  );
}
