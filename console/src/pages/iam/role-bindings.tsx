// /console/role-bindings?group=: who holds which role where — the bindings at a group and beneath
// it, with identity, role and group filled in by the server; grant a role to an identity at the
// group, revoke a binding.
import { useState } from "react";
import {
  RoleBindingsService,
  type RoleBinding,
} from "../../../../src/gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { client } from "../../api";
import { useAccess } from "../../access";
import { useAction } from "../../ui/load";
import { ListTable, usePagedList } from "../../ui/list";
import { Button, Form } from "../../ui/forms";
import { Done, Empty, ErrorNote } from "../../ui/feedback";
import { ConfirmButton, Page, Section, Time } from "../../ui/misc";
import { Link, href } from "../../router";
import { GroupFilter } from "./shared";
import { groupOf, under, useGroupParam } from "../../ui/groups";
import { IdentityPicker, RolePicker } from "./pickers";

const bindings = () => client(RoleBindingsService);

export function RoleBindingsPage() {
  const { can, refresh, whoAmI } = useAccess();
  const [group, setGroup] = useGroupParam();
  const [done, setDone] = useState("");
  const list = usePagedList(
    async (p) => {
      const r = await bindings().listRoleBindings({ uidp: under(group), ...p });
      return { items: r.roleBindings, nextPageToken: r.nextPageToken, totalCount: r.totalCount };
    },
    [group],
  );
  const revoke = useAction((uid: string) => bindings().deleteRoleBinding({ uid }));
  return (
    <Page title="Role bindings">
      <GroupFilter group={group} onGroup={setGroup} />
      {done && <Done>{done}</Done>}
      <ErrorNote error={revoke.error} title="Not revoked" />
      <Section title="Bindings">
        <ListTable<RoleBinding>
          list={list}
          caption="Role bindings"
          noun="bindings"
          rowKey={(b) => b.uid}
          columns={[
            {
              header: "Identity",
              cell: (b) => (
                <>
                  <strong>{b.identity?.name}</strong>
                  {(b.identity?.email || b.identity?.subject) && (
                    <div className="muted">{b.identity?.email || b.identity?.subject}</div>
                  )}
                </>
              ),
            },
            { header: "Role", cell: (b) => b.role?.name },
            {
              header: "Group",
              cell: (b) => <Link to={href("/console/groups", { group: b.group?.uid })}>{b.group?.name}</Link>,
            },
            { header: "Granted", sort: "create_time", cell: (b) => <Time value={b.createTime} /> },
            {
              header: "Actions",
              cell: (b) =>
                can("role_bindings.delete", groupOf(b.uid)) ? (
                  <ConfirmButton
                    label={`Revoke ${b.role?.name} from ${b.identity?.name}`}
                    confirmLabel="Yes, revoke"
                    question={
                      <>
                        Revoke the role <strong>{b.role?.name}</strong> from <strong>{b.identity?.name}</strong> at{" "}
                        <strong>{b.group?.name}</strong>?
                      </>
                    }
                    onConfirm={async () => {
                      if ((await revoke.run(b.uid)) !== undefined) {
                        setDone(`Revoked ${b.role?.name} from ${b.identity?.name}.`);
                        list.loaded.reload();
                        // The caller's own binding: what they may do changed.
                        if (b.identity?.uid === whoAmI.subject) refresh();
                      }
                    }}
                  />
                ) : null,
            },
          ]}
        />
      </Section>
      <Section title="Grant a role">
        {!group ? (
          <Empty>Choose a group above to grant a role at it.</Empty>
        ) : !can("role_bindings.create", group) ? (
          <Empty>You may not grant roles at this group.</Empty>
        ) : (
          <GrantForm
            group={group}
            onGranted={(b) => {
              setDone(`Granted ${b.role?.name} to ${b.identity?.name} at ${b.group?.name}.`);
              list.loaded.reload();
              if (b.identity?.uid === whoAmI.subject) refresh();
            }}
          />
        )}
      </Section>
    </Page>
  );
}

function GrantForm({ group, onGranted }: { group: string; onGranted: (binding: RoleBinding) => void }) {
  const [identityUid, setIdentity] = useState("");
  const [roleUid, setRole] = useState("");
  const grant = useAction(() => bindings().createRoleBinding({ parent: group, roleBinding: { identityUid, roleUid } }));
  return (
    <Form
      label="Grant a role"
      onSubmit={async () => {
        const made = await grant.run();
        if (made) onGranted(made);
      }}
    >
      <IdentityPicker group={group} value={identityUid} onValue={setIdentity} />
      <RolePicker group={group} value={roleUid} onValue={setRole} />
      <ErrorNote error={grant.error} title="Not granted" />
      <div>
        <Button type="submit" kind="primary" busy={grant.busy}>
          Grant
        </Button>
      </div>
    </Form>
  );
}
