// /console/invites?group=: invitations to join a group with a role. Creating one shows its code
// once, with a copy button: the server keeps only a hash and later reads show just the key id.
import { useState } from "react";
import {
  GroupInvitesService,
  type GroupInvite,
} from "../../../../src/gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { client } from "../../api";
import { useAccess } from "../../access";
import { useAction } from "../../ui/load";
import { ListTable, usePagedList } from "../../ui/list";
import { Button, CheckField, Form, SelectField, TextField } from "../../ui/forms";
import { Done, Empty, ErrorNote } from "../../ui/feedback";
import { ConfirmButton, CopyValue, Page, Section, Time } from "../../ui/misc";
import { GroupFilter } from "./shared";
import { groupOf, under, useGroupParam } from "../../ui/groups";
import { RolePicker } from "./pickers";

const invites = () => client(GroupInvitesService);

const TTLS = [
  { value: "3600", label: "1 hour" },
  { value: "86400", label: "1 day" },
  { value: "604800", label: "7 days" },
  { value: "2592000", label: "30 days" },
];

export function InvitesPage() {
  const { can } = useAccess();
  const [group, setGroup] = useGroupParam();
  const [done, setDone] = useState("");
  const [created, setCreated] = useState<GroupInvite>();
  const list = usePagedList(
    async (p) => {
      const r = await invites().listGroupInvites({ uidp: under(group), ...p });
      return { items: r.groupInvites, nextPageToken: r.nextPageToken, totalCount: r.totalCount };
    },
    [group],
  );
  const remove = useAction((uid: string) => invites().deleteGroupInvite({ uid }));
  return (
    <Page title="Invites">
      <GroupFilter group={group} onGroup={setGroup} />
      {done && <Done>{done}</Done>}
      {created && (
        <Section title="The new invite's code">
          <div className="note note-warn">
            <p>
              Give this code to the person you invite. It is shown <strong>only now</strong>: the server keeps no copy
              it could show again.
            </p>
            <CopyValue value={created.code} label="Invite code" />
            <Button onClick={() => setCreated(undefined)}>I have copied it</Button>
          </div>
        </Section>
      )}
      <ErrorNote error={remove.error} title="Not deleted" />
      <Section title="Invites">
        <ListTable<GroupInvite>
          list={list}
          caption="Invites"
          noun="invites"
          rowKey={(i) => i.uid}
          columns={[
            { header: "Role", cell: (i) => i.role?.name },
            { header: "For", cell: (i) => i.email || <span className="muted">anyone with the code</span> },
            { header: "Single use", cell: (i) => (i.singleUse ? "yes" : "no") },
            { header: "Expires", sort: "expiration_time", cell: (i) => <Time value={i.expirationTime} /> },
            { header: "Created", sort: "create_time", cell: (i) => <Time value={i.createTime} /> },
            { header: "Key id", cell: (i) => <code className="iam-uid">{i.keyId}</code> },
            {
              header: "Actions",
              cell: (i) =>
                can("group_invites.delete", groupOf(i.uid)) ? (
                  <ConfirmButton
                    label={`Delete invite ${i.keyId}`}
                    confirmLabel="Yes, delete"
                    question="Delete this invite? Its code can no longer be redeemed."
                    onConfirm={async () => {
                      if ((await remove.run(i.uid)) !== undefined) {
                        setDone("Deleted the invite.");
                        if (created?.uid === i.uid) setCreated(undefined);
                        list.loaded.reload();
                      }
                    }}
                  />
                ) : null,
            },
          ]}
        />
      </Section>
      <Section title="New invite">
        {!group ? (
          <Empty>Choose a group above to invite someone to it.</Empty>
        ) : !(can("group_invites.create", group) && can("role_bindings.create", group)) ? (
          <Empty>You may not invite to this group.</Empty>
        ) : (
          <NewInviteForm
            group={group}
            onCreated={(i) => {
              setDone("");
              setCreated(i);
              list.loaded.reload();
            }}
          />
        )}
      </Section>
    </Page>
  );
}

function NewInviteForm({ group, onCreated }: { group: string; onCreated: (invite: GroupInvite) => void }) {
  const [roleUid, setRole] = useState("");
  const [ttl, setTtl] = useState("604800");
  const [email, setEmail] = useState("");
  const [singleUse, setSingleUse] = useState(true);
  const createInvite = useAction(() =>
    invites().createGroupInvite({
      parent: group,
      groupInvite: { roleUid, email, singleUse, ttl: { seconds: BigInt(ttl) } },
    }),
  );
  return (
    <Form
      label="New invite"
      onSubmit={async () => {
        const made = await createInvite.run();
        if (made) {
          setEmail("");
          onCreated(made);
        }
      }}
    >
      <RolePicker group={group} value={roleUid} onValue={setRole} label="Role to give" />
      <SelectField label="Valid for" value={ttl} onValue={setTtl} options={TTLS} />
      <TextField
        label="E-mail address"
        type="email"
        value={email}
        onValue={setEmail}
        hint="optional: who the invite is meant for"
      />
      <CheckField label="Single use (used up by its first redemption)" checked={singleUse} onValue={setSingleUse} />
      <ErrorNote error={createInvite.error} title="Not created" />
      <div>
        <Button type="submit" kind="primary" busy={createInvite.busy}>
          Create invite
        </Button>
      </div>
    </Form>
  );
}
