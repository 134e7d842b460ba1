// /console/roles?group=: the built-in roles and the custom roles of a group (and beneath it), each
// with its capabilities by name (`groups.list`); create a custom role from a checklist of the
// grantable capabilities, edit a custom role's description and capabilities (`?edit=` holds the
// role being edited; built-in roles are never offered), and delete one (the server refuses while
// something still uses it).
import { useState } from "react";
import { RolesService, type Role } from "../../../../src/gen/chainguard/platform/iam/v2/roles_pb.js";
import type { Capability } from "../../../../src/gen/capabilities/capabilities_pb.js";
import { client } from "../../api";
import { useAccess } from "../../access";
import { useQueryState } from "../../router";
import { useAction, useLoad } from "../../ui/load";
import { DataTable, ListTable, usePagedList, type Column } from "../../ui/list";
import { Button, Form, TextField } from "../../ui/forms";
import { Done, Empty, ErrorNote, Loading } from "../../ui/feedback";
import { ConfirmButton, Page, Section } from "../../ui/misc";
import { GRANTABLE, GroupFilter, capabilityName, isBuiltInRole } from "./shared";
import { groupOf, useGroupParam } from "../../ui/groups";

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
  const [query, setQuery] = useQueryState();
  const edit = query.get("edit") ?? "";
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
                cell: (r) => (
                  <div className="row-actions">
                    {can("roles.update", groupOf(r.uid)) && (
                      <Button onClick={() => setQuery({ edit: r.uid }, { push: true })}>Edit {r.name}</Button>
                    )}
                    {can("roles.delete", groupOf(r.uid)) && (
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
                            if (edit === r.uid) setQuery({ edit: undefined });
                            custom.loaded.reload();
                          }
                        }}
                      />
                    )}
                  </div>
                ),
              },
            ]}
          />
        )}
      </Section>
      {edit && !isBuiltInRole(edit) && can("roles.update", groupOf(edit)) ? (
        <EditRole
          key={edit}
          uid={edit}
          onSaved={(r) => {
            setDone(`Saved ${r.name}.`);
            setQuery({ edit: undefined });
            custom.loaded.reload();
          }}
          onCancel={() => setQuery({ edit: undefined })}
        />
      ) : (
        group &&
        can("roles.create", group) && (
          <Section title="New custom role">
            <NewRoleForm
              group={group}
              onCreated={(r) => {
                setDone(`Created ${r.name}.`);
                custom.loaded.reload();
              }}
            />
          </Section>
        )
      )}
    </Page>
  );
}

/** The capabilities a custom role may hold, as a checklist; `chosen` is what is ticked. */
function CapabilityChecklist({
  chosen,
  onChosen,
}: {
  chosen: Set<Capability>;
  onChosen: (next: Set<Capability>) => void;
}) {
  const toggle = (c: Capability, on: boolean) => {
    const next = new Set(chosen);
    if (on) next.add(c);
    else next.delete(c);
    onChosen(next);
  };
  return (
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
  );
}

function NewRoleForm({ group, onCreated }: { group: string; onCreated: (role: Role) => void }) {
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [chosen, setChosen] = useState<Set<Capability>>(new Set());
  const createRole = useAction(() =>
    roles().createRole({ parent: group, role: { name, description, capabilities: [...chosen] } }),
  );
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
      <CapabilityChecklist chosen={chosen} onChosen={setChosen} />
      <ErrorNote error={createRole.error} title="Not created" />
      <div>
        <Button type="submit" kind="primary" busy={createRole.busy}>
          Create role
        </Button>
      </div>
    </Form>
  );
}

/** Loads the custom role `uid` (it may be on another page of the list) and edits it. */
function EditRole({ uid, onSaved, onCancel }: { uid: string; onSaved: (role: Role) => void; onCancel: () => void }) {
  const loaded = useLoad(() => roles().getRole({ uid }), [uid]);
  return (
    <Section title={loaded.data ? `Edit ${loaded.data.name}` : "Edit role"}>
      {loaded.error ? (
        <ErrorNote error={loaded.error} />
      ) : !loaded.data ? (
        <Loading what="the role" />
      ) : (
        <EditRoleForm role={loaded.data} onSaved={onSaved} onCancel={onCancel} />
      )}
    </Section>
  );
}

function EditRoleForm({
  role,
  onSaved,
  onCancel,
}: {
  role: Role;
  onSaved: (role: Role) => void;
  onCancel: () => void;
}) {
  const [description, setDescription] = useState(role.description);
  const [chosen, setChosen] = useState<Set<Capability>>(new Set(role.capabilities));
  const save = useAction(() =>
    roles().updateRole({
      role: { uid: role.uid, description, capabilities: [...chosen] },
      // Named, so that an emptied description or checklist is cleared too.
      updateMask: { paths: ["description", "capabilities"] },
    }),
  );
  return (
    <Form
      label={`Edit ${role.name}`}
      onSubmit={async () => {
        const saved = await save.run();
        if (saved) onSaved(saved);
      }}
    >
      <TextField label="Role description" value={description} onValue={setDescription} autoFocus />
      <CapabilityChecklist chosen={chosen} onChosen={setChosen} />
      <ErrorNote error={save.error} title="Not saved" />
      <div className="row-actions">
        <Button type="submit" kind="primary" busy={save.busy}>
          Save {role.name}
        </Button>
        <Button onClick={onCancel}>Cancel</Button>
      </div>
    </Form>
  );
}
