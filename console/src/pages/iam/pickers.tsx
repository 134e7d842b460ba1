// Pickers for the IAM forms: the roles and identities usable at a group. A role or identity is
// usable from its own group and everything beneath it; built-in roles and root-level identities
// from anywhere (the server answers NOT_FOUND for anything else).
import { RolesService } from "../../../../src/gen/chainguard/platform/iam/v2/roles_pb.js";
import { IdentitiesService } from "../../../../src/gen/chainguard/platform/iam/v2/identities_pb.js";
import { client } from "../../api";
import { useLoad } from "../../ui/load";
import { SelectField } from "../../ui/forms";
import { isBuiltInRole, listAll } from "./shared";
import { groupOf } from "../../ui/groups";

/** true when something living in `home` ("" for the root) is usable at `group`. */
const usableAt = (home: string, group: string) => home === "" || group === home || group.startsWith(`${home}/`);

export function RolePicker({
  group,
  value,
  onValue,
  label = "Role",
}: {
  group: string;
  value: string;
  onValue: (uid: string) => void;
  label?: string;
}) {
  const roles = useLoad(
    () =>
      listAll(async (pageToken) => {
        const r = await client(RolesService).listRoles({ pageSize: 200, pageToken, orderBy: "name" });
        return { items: r.roles, nextPageToken: r.nextPageToken };
      }),
    [],
  );
  const usable = (roles.data ?? []).filter((r) => usableAt(isBuiltInRole(r.uid) ? "" : groupOf(r.uid), group));
  return (
    <SelectField
      label={label}
      value={value}
      onValue={onValue}
      required
      options={[
        { value: "", label: roles.data ? "Choose a role…" : "Loading roles…" },
        ...usable.map((r) => ({ value: r.uid, label: isBuiltInRole(r.uid) ? r.name : `${r.name} (custom)` })),
      ]}
      hint={roles.error ? "The roles could not be listed." : undefined}
    />
  );
}

export function IdentityPicker({
  group,
  value,
  onValue,
}: {
  group: string;
  value: string;
  onValue: (uid: string) => void;
}) {
  const identities = useLoad(
    () =>
      listAll(async (pageToken) => {
        const r = await client(IdentitiesService).listIdentities({ pageSize: 200, pageToken, orderBy: "name" });
        return { items: r.identities, nextPageToken: r.nextPageToken };
      }),
    [],
  );
  const usable = (identities.data ?? []).filter((i) => usableAt(groupOf(i.uid), group));
  return (
    <SelectField
      label="Identity"
      value={value}
      onValue={onValue}
      required
      options={[
        { value: "", label: identities.data ? "Choose an identity…" : "Loading identities…" },
        ...usable.map((i) => ({ value: i.uid, label: i.email ? `${i.name} (${i.email})` : i.name })),
      ]}
      hint={identities.error ? "The identities could not be listed." : undefined}
    />
  );
}
