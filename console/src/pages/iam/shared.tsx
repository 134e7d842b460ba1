// Pieces the IAM pages share: the filter that picks the group they are scoped to (ui/groups.tsx's
// useGroupParam), capability names (the `name` option of each Capability value, as
// `bulwark auth token capabilities` prints them) and small fetch helpers for pickers.
import { getOption } from "@bufbuild/protobuf";
import {
  Capability,
  CapabilitySchema,
  internal_only,
  name as capabilityNameOption,
} from "../../../../src/gen/capabilities/capabilities_pb.js";
import { Link, href } from "../../router";
import { GroupSelect } from "../../ui/groups";

export function GroupFilter({ group, onGroup }: { group: string; onGroup: (uid: string) => void }) {
  return (
    <div className="form inline">
      <GroupSelect label="Group" value={group} onValue={onGroup} allowAll="Every group you can see" />
    </div>
  );
}

/** The IAM pages, each keeping the selected group. */
export const IAM_PAGES = [
  { label: "Groups", to: "/console/groups" },
  { label: "Identities", to: "/console/identities" },
  { label: "Roles", to: "/console/roles" },
  { label: "Role bindings", to: "/console/role-bindings" },
  { label: "Invites", to: "/console/invites" },
  { label: "Identity providers", to: "/console/identity-providers" },
] as const;

export function GroupLinks({ group }: { group: string }) {
  return (
    <ul className="iam-links">
      {IAM_PAGES.filter((p) => p.to !== "/console/groups").map((p) => (
        <li key={p.to}>
          <Link to={href(p.to, { group })}>{p.label}</Link>
        </li>
      ))}
    </ul>
  );
}

const byNumber = new Map(CapabilitySchema.values.map((v) => [v.number, v]));

/** "groups.list" for CAP_IAM_GROUPS_LIST. */
export function capabilityName(capability: Capability): string {
  const value = byNumber.get(capability);
  return (value && getOption(value, capabilityNameOption)) || value?.name || String(capability);
}

/** The capabilities a custom role may hold (not UNKNOWN, not internal), by name. */
export const GRANTABLE = CapabilitySchema.values
  .filter(
    (v) => v.number !== Capability.UNKNOWN && v.number !== Capability.CAP_INTERNAL && !getOption(v, internal_only),
  )
  .map((v) => ({ capability: v.number as Capability, name: getOption(v, capabilityNameOption) || v.name }))
  .sort((a, b) => a.name.localeCompare(b.name));

/** Follows a list's pages to the end (up to `max` items), for pickers. */
export async function listAll<T>(
  page: (pageToken: string) => Promise<{ items: T[]; nextPageToken: string }>,
  max = 1000,
): Promise<T[]> {
  const items: T[] = [];
  let token = "";
  do {
    const answer = await page(token);
    items.push(...answer.items);
    token = answer.nextPageToken;
  } while (token && items.length < max);
  return items;
}

/** A built-in role's uid is 40 hex characters (no group); a custom role's has its group's uid before it. */
export const isBuiltInRole = (uid: string) => !uid.includes("/");
