// /console/roles?group=: the built-in roles and the custom roles of a group (and beneath it), each
// with its capabilities by name (`groups.list`); create a custom role from a checklist of the
// grantable capabilities, and delete one (the server refuses while something still uses it).
import { useState } from "react";
import { RolesService, type Role } from "../../../../src/gen/chainguard/platform/iam/v2/roles_pb.js";
import type { Capability } from "../../../../src/gen/capabilities/capabilities_pb.js";
import { client } from "../../api";
import { useAccess } from "../../access";
import { useAction, useLoad } from "../../ui/load";
import { DataTable, ListTable, usePagedList, type Column } from "../../ui/list";
import { Button, Form, TextField } from "../../ui/forms";
import { Done, Empty, ErrorNote, Loading } from "../../ui/feedback";
import { ConfirmButton, Page, Section } from "../../ui/misc";
import { GRANTABLE, GroupFilter, capabilityName, groupOf, useGroupParam } from "./shared";

const roles = () => client(RolesService);

function Capabilities({ role }: { role: Role }) {
  const names = role.capabilities.map(capabilityName).sort();
  return names.length === 0 ? (
    <span className="muted">none</span>
  ) : (
    <span className="iam-caps">{names.join(", ")}</span>
  );
}

export function RolesPage() {
  const { can } = useAccess();
  const [group, setGroup] = useGroupParam();
  const [done, setDone] = useState("");
  const builtIn = useLoad(() => roles().listRoles({ uidp: { inRoot: true }, orderBy: "name", pageSize: 200 }), []);
  const custom = usePagedList(
    async (p) => {
      if (!group) return { items: [], nextPageToken: "", totalCount: 0 };
      const r = await roles().listRoles({ uidp: { descendantsOf: group }, ...p });
      return { items: r.roles, nextPageToken: r.nextPageToken, totalCount: r.totalCount };
    },
    [group],
    { defaultOrder: "name" },
  );
  const remove = useAction((uid: string) => roles().deleteRole({ uid }));
  const columns: Column<Role>[] = [
    { header: "Name", sort: "name", cell: (r) => <strong>{r.name}</strong> },
    { header: "Description", cell: (r) => r.description },
    { header: "Capabilities", cell: (r) => <Capabilities role={r} /> },
  ];
  return (
    <Page title="Roles">
      <GroupFilter group={group} onGroup={setGroup} />
      {done && <Done>{done}</Done>}
      <Section title="Built-in roles">
        {builtIn.error ? (
          <ErrorNote error={builtIn.error} />
        ) : !builtIn.data ? (
          <Loading what="roles" />
        ) : (
          <div className="table-scroll">
            <DataTable<Role>
              caption="Built-in roles"
              rows={builtIn.data.roles}
              rowKey={(r) => r.uid}
              columns={columns.map((c) => ({ ...c, sort: undefined }))}
            />
          </div>
        )}
      </Section>
      <Section title="Custom roles">
        <ErrorNote error={remove.error} title="Not deleted" />
        {!group ? (
          <Empty>Choose a group above to see its custom roles.</Empty>
        ) : (
          <ListTable<Role>
            list={custom}
            caption="Custom roles"
            noun="custom roles"
            rowKey={(r) => r.uid}
            columns={[
              ...columns,
              {
                header: "Actions",
                cell: (r) =>
                  can("roles.delete", groupOf(r.uid)) ? (
                    <ConfirmButton
                      label={`Delete ${r.name}`}
                      confirmLabel="Yes, delete"
                      question={
                        <>
                          Delete the role <strong>{r.name}</strong>?
                        </>
                      }
                      onConfirm={async () => {
                        if ((await remove.run(r.uid)) !== undefined) {
                          setDone(`Deleted ${r.name}.`);
                          custom.loaded.reload();
                        }
                      }}
                    />
                  ) : null,
              },
            ]}
          />
        )}
      </Section>
      {group && can("roles.create", group) && (
        <Section title="New custom role">
          <NewRoleForm
            group={group}
            onCreated={(r) => {
              setDone(`Created ${r.name}.`);
              custom.loaded.reload();
            }}
          />
        </Section>
      )}
    </Page>
  );
}

function NewRoleForm({ group, onCreated }: { group: string; onCreated: (role: Role) => void }) {
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [chosen, setChosen] = useState<Set<Capability>>(new Set());
  const createRole = useAction(() =>
    roles().createRole({ parent: group, role: { name, description, capabilities: [...chosen] } }),
  );
  const toggle = (c: Capability, on: boolean) =>
    setChosen((old) => {
      const next = new Set(old);
      if (on) next.add(c);
      else next.delete(c);
      return next;
    });
  return (
    <Form
      label="New custom role"
      onSubmit={async () => {
        const made = await createRole.run();
        if (made) {
          setName("");
          setDescription("");
          setChosen(new Set());
          onCreated(made);
        }
      }}
    >
      <TextField label="Role name" value={name} onValue={setName} required />
      <TextField label="Role description" value={description} onValue={setDescription} />
      <fieldset className="iam-checklist">
        <legend>Capabilities ({chosen.size} chosen)</legend>
        {GRANTABLE.map(({ capability, name: capName }) => (
          <label key={capability}>
            <input
              type="checkbox"
              checked={chosen.has(capability)}
              onChange={(e) => toggle(capability, e.target.checked)}
            />{" "}
            {capName}
          </label>
        ))}
      </fieldset>
      <ErrorNote error={createRole.error} title="Not created" />
      <div>
        <Button type="submit" kind="primary" busy={createRole.busy}>
          Create role
        </Button>
      </div>
    </Form>
  );
}
