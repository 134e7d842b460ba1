// /console/groups: the organization and folder tree. Organizations (or, for a caller bound lower
// down, the groups it is bound at) are the roots; a node expands to its direct children
// (ListGroups children_of), a page at a time: "Show more" appends the next page (page_token), for
// a node's folders and for the organizations alike. The selection (`?group=`) and the expanded
// nodes (`?open=`) are in the URL. The selected group's details, and what the caller may do with
// it: rename, add a folder, delete (the server's refusal, e.g. a group that still holds folders,
// shown in its words).
import { useEffect, useRef, useState } from "react";
import {
  GroupsService,
  type Group,
  type ListGroupsResponse,
} from "../../../../src/gen/chainguard/platform/iam/v2/groups_pb.js";
import { client } from "../../api";
import { useAccess } from "../../access";
import { Link, href, useQueryState } from "../../router";
import { useAction, useLoad } from "../../ui/load";
import { Button, Form, TextArea, TextField } from "../../ui/forms";
import { Done, Empty, ErrorNote, Loading } from "../../ui/feedback";
import { ConfirmButton, CopyValue, Page, Section, Time } from "../../ui/misc";
import { GroupLinks } from "./shared";
import { forgetVisibleGroups, groupOf } from "../../ui/groups";

const groups = () => client(GroupsService);

/** Groups per page of the tree: each node (and the roots) shows this many, then "Show more". */
const TREE_PAGE_SIZE = 200;

/**
 * A ListGroups listing read a page at a time: the first page now, the next ones appended when
 * `more()` is called (with the previous page's `next_page_token`). `firstNew` is the index of the
 * first group the last `more()` added, so focus can move to it.
 */
function useGroupPages(list: (pageToken: string) => Promise<ListGroupsResponse>, deps: readonly unknown[]) {
  const first = useLoad(() => list(""), deps);
  const [extra, setExtra] = useState<{ groups: Group[]; next: string; firstNew: number }>();
  useEffect(() => setExtra(undefined), [first.data]);
  const next = extra ? extra.next : (first.data?.nextPageToken ?? "");
  const loadMore = useAction(async () => {
    const page = await list(next);
    setExtra((old) => ({
      groups: [...(old?.groups ?? []), ...page.groups],
      next: page.nextPageToken,
      firstNew: (first.data?.groups.length ?? 0) + (old?.groups.length ?? 0),
    }));
  });
  const shown = first.data ? [...first.data.groups, ...(extra?.groups ?? [])] : undefined;
  const total = Number(first.data?.totalCount ?? 0);
  return {
    error: first.error,
    groups: shown,
    /** How many are not shown yet (0 on the last page). */
    rest: next && shown ? Math.max(total - shown.length, 1) : 0,
    firstNew: extra?.firstNew ?? -1,
    more: loadMore,
    reload: first.reload,
  };
}

/** The groups the caller is bound at (all of them: a caller holds few bindings). */
async function loadBound(bound: string[]): Promise<Group[]> {
  const ids = [...new Set(bound)];
  const found: Group[] = [];
  if (ids.length === 0) return found;
  let pageToken = "";
  do {
    const page = await groups().listGroups({ uidp: { ids }, orderBy: "name", pageSize: TREE_PAGE_SIZE, pageToken });
    found.push(...page.groups);
    pageToken = page.nextPageToken;
  } while (pageToken);
  return found;
}

/**
 * The tree's roots: the organizations the caller can list (a page at a time), then the groups it
 * is bound at that no listed organization (nor another such group) holds.
 */
function rootsOf(orgs: Group[], bound: Group[]): Group[] {
  const under = (uid: string, list: Group[]) => list.some((g) => uid === g.uid || uid.startsWith(`${g.uid}/`));
  const below = bound.filter((g) => !under(g.uid, orgs));
  return [...orgs, ...below.filter((g) => !below.some((h) => g.uid.startsWith(`${h.uid}/`)))];
}

/** "Show more ..." with how many are not shown yet; a real button, focus then moves to the first new one. */
function ShowMore({
  label,
  rest,
  more,
}: {
  label: string;
  rest: number;
  more: ReturnType<typeof useAction<[], void>>;
}) {
  return (
    <li>
      <Button busy={more.busy} onClick={() => void more.run()}>
        {label}
      </Button>{" "}
      <span className="muted">({rest} not shown yet)</span>
      <ErrorNote error={more.error} title="Not loaded" />
    </li>
  );
}

export function GroupsPage() {
  const access = useAccess();
  const [query, setQuery] = useQueryState();
  const selected = query.get("group") ?? "";
  const open = new Set((query.get("open") ?? "").split(",").filter(Boolean));
  const bound = access.bindingGroups("groups.list").map((g) => g.uid);
  const orgs = useGroupPages(
    (pageToken) =>
      groups().listGroups({ uidp: { inRoot: true }, orderBy: "name", pageSize: TREE_PAGE_SIZE, pageToken }),
    [],
  );
  const boundGroups = useLoad(() => loadBound(bound), [bound.join(",")]);
  const rootsError = orgs.error ?? boundGroups.error;
  const roots = orgs.groups && boundGroups.data ? rootsOf(orgs.groups, boundGroups.data) : undefined;
  // What just happened, shown while the group it happened at stays selected.
  const [done, setDone] = useState({ text: "", at: "" });
  // Anyone but a workload (an identity inside a group) may found an organization.
  const mayFoundOrg = access.operator || !access.whoAmI.subject.includes("/");

  const toggle = (uid: string) => {
    const next = new Set(open);
    if (next.has(uid)) next.delete(uid);
    else next.add(uid);
    setQuery({ open: [...next].join(",") });
  };
  /** After a create or delete: reload the tree (remounting each node's children). */
  const [round, setRound] = useState(0);
  const refresh = (message: string, changes: Record<string, string | undefined> = {}) => {
    setDone({ text: message, at: "group" in changes ? (changes.group ?? "") : selected });
    setRound((r) => r + 1);
    orgs.reload();
    boundGroups.reload();
    if (Object.keys(changes).length) setQuery(changes, { push: true });
  };

  return (
    <Page title="Groups">
      {done.text && done.at === selected && <Done>{done.text}</Done>}
      <div className="iam-split">
        <Section title="Organizations and folders">
          {rootsError ? (
            <ErrorNote error={rootsError} />
          ) : !roots ? (
            <Loading what="groups" />
          ) : roots.length === 0 ? (
            <Empty>No organization yet.</Empty>
          ) : (
            <nav className="tree" aria-label="Group tree" key={round}>
              <ul>
                {roots.map((g) => (
                  <TreeNode
                    key={g.uid}
                    group={g}
                    open={open}
                    selected={selected}
                    onToggle={toggle}
                    focus={orgs.groups?.[orgs.firstNew] === g}
                  />
                ))}
                {orgs.rest > 0 && <ShowMore label="Show more organizations" rest={orgs.rest} more={orgs.more} />}
              </ul>
            </nav>
          )}
          {mayFoundOrg && <NewGroupForm parent="" onCreated={(g) => refresh(`Created ${g.name}.`, { group: g.uid })} />}
        </Section>
        {selected ? (
          <GroupDetails
            key={`${selected}:${round}`}
            uid={selected}
            onChanged={(message) => refresh(message)}
            onCreated={(g) =>
              refresh(`Created ${g.name}.`, { group: g.uid, open: [...new Set([...open, selected])].join(",") })
            }
            onDeleted={(name) => {
              const rest = [...open].filter((u) => u !== selected && !u.startsWith(`${selected}/`));
              refresh(`Deleted ${name}.`, { group: groupOf(selected) || undefined, open: rest.join(",") || undefined });
            }}
          />
        ) : (
          <Section title="Details">
            <Empty>Choose a group in the tree to see its details.</Empty>
          </Section>
        )}
      </div>
    </Page>
  );
}

function TreeNode({
  group,
  open,
  selected,
  onToggle,
  focus = false,
}: {
  group: Group;
  open: Set<string>;
  selected: string;
  onToggle: (uid: string) => void;
  /** Take the focus (the first of a page just shown with "Show more"). */
  focus?: boolean;
}) {
  const expanded = open.has(group.uid);
  const isRoot = !group.uid.includes("/");
  const toggleButton = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (focus) toggleButton.current?.focus();
  }, [focus]);
  return (
    <li>
      <button
        ref={toggleButton}
        type="button"
        className="tree-toggle"
        aria-expanded={expanded}
        aria-label={`${expanded ? "Collapse" : "Expand"} ${group.name}`}
        onClick={() => onToggle(group.uid)}
      >
        <span aria-hidden="true">{expanded ? "▾" : "▸"}</span>
      </button>{" "}
      <Link
        to={href("/console/groups", { group: group.uid, open: [...open].join(",") })}
        aria-current={group.uid === selected ? "true" : undefined}
        className={group.uid === selected ? "tree-selected" : undefined}
      >
        {group.name}
      </Link>{" "}
      <span className="muted">{isRoot ? "organization" : "folder"}</span>
      {expanded && <Children parent={group} open={open} selected={selected} onToggle={onToggle} />}
    </li>
  );
}

function Children({
  parent,
  open,
  selected,
  onToggle,
}: {
  parent: Group;
  open: Set<string>;
  selected: string;
  onToggle: (uid: string) => void;
}) {
  const children = useGroupPages(
    (pageToken) =>
      groups().listGroups({ uidp: { childrenOf: parent.uid }, orderBy: "name", pageSize: TREE_PAGE_SIZE, pageToken }),
    [parent.uid],
  );
  if (children.error) return <ErrorNote error={children.error} />;
  if (!children.groups) return <Loading what="folders" />;
  if (children.groups.length === 0) return <p className="muted tree-empty">No folders.</p>;
  return (
    <ul>
      {children.groups.map((g, i) => (
        <TreeNode
          key={g.uid}
          group={g}
          open={open}
          selected={selected}
          onToggle={onToggle}
          focus={i === children.firstNew}
        />
      ))}
      {children.rest > 0 && (
        <ShowMore label={`Show more folders of ${parent.name}`} rest={children.rest} more={children.more} />
      )}
    </ul>
  );
}

function GroupDetails({
  uid,
  onChanged,
  onCreated,
  onDeleted,
}: {
  uid: string;
  onChanged: (message: string) => void;
  onCreated: (group: Group) => void;
  onDeleted: (name: string) => void;
}) {
  const { can } = useAccess();
  const loaded = useLoad(async () => {
    const [group, children] = await Promise.all([
      groups().getGroup({ uid }),
      groups().listGroups({ uidp: { childrenOf: uid }, pageSize: 1 }),
    ]);
    return { group, folders: Number(children.totalCount ?? children.groups.length) };
  }, [uid]);
  const remove = useAction(() => groups().deleteGroup({ uid }).finally(forgetVisibleGroups));
  if (loaded.error) {
    return (
      <Section title="Details">
        <ErrorNote error={loaded.error} />
      </Section>
    );
  }
  if (!loaded.data) return <Loading what="the group" />;
  const { group, folders } = loaded.data;
  const kind = uid.includes("/") ? "folder" : "organization";
  return (
    <div>
      <Section
        title={`${group.name} (${kind})`}
        actions={
          can("groups.delete", uid) && (
            <ConfirmButton
              label={`Delete ${kind}`}
              confirmLabel="Yes, delete"
              question={
                <>
                  Delete the {kind} <strong>{group.name}</strong>? This cannot be undone.
                </>
              }
              busy={remove.busy}
              onConfirm={async () => {
                const ok = await remove.run();
                if (ok !== undefined) onDeleted(group.name);
              }}
            />
          )
        }
      >
        <ErrorNote error={remove.error} title="Not deleted" />
        <dl className="facts">
          <dt>UID</dt>
          <dd>
            <CopyValue value={group.uid} label="UID" />
          </dd>
          <dt>Description</dt>
          <dd>{group.description || <span className="muted">none</span>}</dd>
          <dt>Folders directly inside</dt>
          <dd>{folders}</dd>
          <dt>Created</dt>
          <dd>
            <Time value={group.createTime} />
          </dd>
          <dt>Updated</dt>
          <dd>
            <Time value={group.updateTime} />
          </dd>
          {kind === "organization" && (
            <>
              <dt>Verified</dt>
              <dd>{group.verified ? "yes" : "no"}</dd>
            </>
          )}
        </dl>
        <GroupLinks group={uid} />
      </Section>
      {can("groups.update", uid) && <RenameForm group={group} onRenamed={(g) => onChanged(`Saved ${g.name}.`)} />}
      {can("groups.create", uid) && (
        <Section title="New folder">
          <NewGroupForm parent={uid} onCreated={onCreated} />
        </Section>
      )}
    </div>
  );
}

function RenameForm({ group, onRenamed }: { group: Group; onRenamed: (group: Group) => void }) {
  const [name, setName] = useState(group.name);
  const [description, setDescription] = useState(group.description);
  useEffect(() => {
    setName(group.name);
    setDescription(group.description);
  }, [group]);
  const save = useAction(() =>
    groups()
      .updateGroup({
        group: { uid: group.uid, name, description },
        updateMask: { paths: ["name", "description"] },
      })
      .finally(forgetVisibleGroups),
  );
  return (
    <Section title="Rename">
      <Form
        label={`Rename ${group.name}`}
        onSubmit={async () => {
          const saved = await save.run();
          if (saved) onRenamed(saved);
        }}
      >
        <TextField
          label="Name"
          value={name}
          onValue={setName}
          required
          hint="Lower case letters, digits, space, . _ -"
        />
        <TextArea label="Description" value={description} onValue={setDescription} rows={2} />
        <ErrorNote error={save.error} title="Not saved" />
        <div>
          <Button type="submit" kind="primary" busy={save.busy}>
            Save
          </Button>
        </div>
      </Form>
    </Section>
  );
}

function NewGroupForm({ parent, onCreated }: { parent: string; onCreated: (group: Group) => void }) {
  const access = useAccess();
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const what = parent ? "folder" : "organization";
  const createGroup = useAction(() =>
    groups().createGroup({ parent, group: { name, description } }).finally(forgetVisibleGroups),
  );
  return (
    <Form
      label={`New ${what}`}
      onSubmit={async () => {
        const made = await createGroup.run();
        if (made) {
          setName("");
          setDescription("");
          // Its founder now owns a new organization: what they may do changed.
          if (!parent) access.refresh();
          onCreated(made);
        }
      }}
    >
      {!parent && <h3 className="iam-form-title">New organization</h3>}
      <TextField label={`${parent ? "Folder" : "Organization"} name`} value={name} onValue={setName} required />
      <TextField
        label={`${parent ? "Folder" : "Organization"} description`}
        value={description}
        onValue={setDescription}
      />
      <ErrorNote error={createGroup.error} title="Not created" />
      <div>
        <Button type="submit" kind="primary" busy={createGroup.busy}>
          Create {what}
        </Button>
      </div>
    </Form>
  );
}
