// The groups the caller can see, for pickers and breadcrumbs: every group the API lists for them
// (the list engine's pages, followed to the end, up to a bound), each with its path of names.
import { GroupsService, type Group } from "../../../src/gen/chainguard/platform/iam/v2/groups_pb.js";
import { client } from "../api";
import { useQueryState } from "../router";
import { session } from "../session";
import { useLoad } from "./load";
import { SelectField } from "./forms";
import { resetPosition } from "./list";

/** The group a resource sits in (a uid without its last segment; "" at the root). */
export const groupOf = (uid: string): string => uid.slice(0, Math.max(0, uid.lastIndexOf("/")));

/** A list's filter for a group: the group and everything beneath it (every group when none). */
export function under(group: string): { descendantsOf: string } | undefined {
  return group ? { descendantsOf: group } : undefined;
}

/**
 * The group a group-scoped page is scoped to (`?group=`, which the navigation carries between such
 * pages) and a setter that restarts the page's list at its first page.
 */
export function useGroupParam(): [string, (uid: string) => void] {
  const [query, setQuery] = useQueryState();
  return [query.get("group") ?? "", (uid) => setQuery({ group: uid, ...resetPosition })];
}

export interface VisibleGroup {
  uid: string;
  name: string;
  /** names from the organization down, "acme / team / ci" */
  path: string;
  group: Group;
}

/** Enough for any picker; a tree larger than this is browsed on the groups page. */
const MAX_GROUPS = 2000;

export async function listVisibleGroups(): Promise<VisibleGroup[]> {
  const groups: Group[] = [];
  let pageToken = "";
  do {
    const page = await client(GroupsService).listGroups({ pageSize: 500, pageToken, orderBy: "name" });
    groups.push(...page.groups);
    pageToken = page.nextPageToken;
  } while (pageToken && groups.length < MAX_GROUPS);
  const byUid = new Map(groups.map((g) => [g.uid, g]));
  const pathOf = (uid: string): string => {
    const parts = uid.split("/");
    const names: string[] = [];
    for (let i = 1; i <= parts.length; i++) {
      const ancestor = byUid.get(parts.slice(0, i).join("/"));
      if (ancestor) names.push(ancestor.name);
    }
    return names.join(" / ");
  };
  return groups
    .map((group) => ({ uid: group.uid, name: group.name, path: pathOf(group.uid), group }))
    .sort((a, b) => a.path.localeCompare(b.path));
}

/**
 * One listing shared by every picker and table of a page view (a page with a group filter and a
 * group column lists the tree once, not per component). Kept briefly, per token; a change to the
 * tree (the groups page) forgets it.
 */
const SHARED_FOR_MS = 30_000;
let shared: { token?: string; until: number; groups: Promise<VisibleGroup[]> } | undefined;

function visibleGroups(): Promise<VisibleGroup[]> {
  const token = session.token();
  if (!shared || shared.token !== token || shared.until < Date.now()) {
    const groups = listVisibleGroups();
    const entry = { token, until: Date.now() + SHARED_FOR_MS, groups };
    shared = entry;
    groups.catch(() => {
      if (shared === entry) shared = undefined;
    });
  }
  return shared.groups;
}

/** After a group is created, renamed or deleted: the next listing asks the server. */
export function forgetVisibleGroups(): void {
  shared = undefined;
}

export function useVisibleGroups() {
  return useLoad(visibleGroups, []);
}

/** A group's path of names ("acme / team"), its uid while the groups load or when it is not visible. */
export function pathOf(groups: readonly VisibleGroup[] | undefined, uid: string): string {
  return groups?.find((g) => g.uid === uid)?.path ?? uid;
}

/**
 * Picks a group the caller can see. `allowAll` adds a first option "" (every group) for filters.
 * `only` narrows the choices (e.g. to where the caller may create).
 */
export function GroupSelect({
  label,
  value,
  onValue,
  allowAll,
  only,
  required,
}: {
  label: string;
  value: string;
  onValue: (uid: string) => void;
  allowAll?: string;
  only?: (group: VisibleGroup) => boolean;
  required?: boolean;
}) {
  const groups = useVisibleGroups();
  const choices = (groups.data ?? []).filter((g) => !only || only(g));
  const options = [
    ...(allowAll !== undefined ? [{ value: "", label: allowAll }] : []),
    ...(allowAll === undefined && !value ? [{ value: "", label: "Choose…" }] : []),
    ...choices.map((g) => ({ value: g.uid, label: g.path })),
  ];
  return (
    <SelectField
      label={label}
      value={value}
      required={required}
      onValue={onValue}
      options={options}
      hint={groups.error ? "The groups could not be listed." : undefined}
    />
  );
}
