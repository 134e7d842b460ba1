// The groups the caller can see, for pickers and breadcrumbs: every group the API lists for them
// (the list engine's pages, followed to the end, up to a bound), each with its path of names.
import { GroupsService, type Group } from "../../../src/gen/chainguard/platform/iam/v2/groups_pb.js";
import { client } from "../api";
import { useLoad } from "./load";
import { SelectField } from "./forms";

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

export function useVisibleGroups() {
  return useLoad(listVisibleGroups, []);
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
