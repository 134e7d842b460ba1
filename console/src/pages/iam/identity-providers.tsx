// /console/identity-providers?group=: the OIDC providers people of a group sign in through; create
// one (the client secret is write-only: a password field, never shown back, as the API never
// returns it) and delete one.
import { useState } from "react";
import {
  IdentityProvidersService,
  type IdentityProvider,
} from "../../../../src/gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { client } from "../../api";
import { useAccess } from "../../access";
import { useAction } from "../../ui/load";
import { ListTable, usePagedList } from "../../ui/list";
import { Button, CheckField, Form, TextField } from "../../ui/forms";
import { Done, Empty, ErrorNote } from "../../ui/feedback";
import { ConfirmButton, Page, Section } from "../../ui/misc";
import { GroupFilter } from "./shared";
import { groupOf, under, useGroupParam } from "../../ui/groups";
import { RolePicker } from "./pickers";

const providers = () => client(IdentityProvidersService);

const oidcOf = (p: IdentityProvider) => (p.configuration.case === "oidc" ? p.configuration.value : undefined);

export function IdentityProvidersPage() {
  const { can } = useAccess();
  const [group, setGroup] = useGroupParam();
  const [done, setDone] = useState("");
  const list = usePagedList(
    async (p) => {
      const r = await providers().listIdentityProviders({ uidp: under(group), ...p });
      return { items: r.identityProviders, nextPageToken: r.nextPageToken, totalCount: r.totalCount };
    },
    [group],
    { defaultOrder: "name" },
  );
  const remove = useAction((uid: string) => providers().deleteIdentityProvider({ uid }));
  return (
    <Page title="Identity providers">
      <GroupFilter group={group} onGroup={setGroup} />
      {done && <Done>{done}</Done>}
      <ErrorNote error={remove.error} title="Not deleted" />
      <Section title="Identity providers">
        <ListTable<IdentityProvider>
          list={list}
          caption="Identity providers"
          noun="identity providers"
          rowKey={(p) => p.uid}
          columns={[
            { header: "Name", sort: "name", cell: (p) => <strong>{p.name}</strong> },
            { header: "Issuer", cell: (p) => oidcOf(p)?.issuer },
            { header: "Client ID", cell: (p) => <code>{oidcOf(p)?.clientId}</code> },
            {
              header: "Extra scopes",
              cell: (p) => oidcOf(p)?.additionalScopes.join(" ") || <span className="muted">none</span>,
            },
            { header: "PKCE", cell: (p) => (oidcOf(p)?.pkceEnabled ? "yes" : "no") },
            {
              header: "Actions",
              cell: (p) =>
                can("identity_providers.delete", groupOf(p.uid)) ? (
                  <ConfirmButton
                    label={`Delete ${p.name}`}
                    confirmLabel="Yes, delete"
                    question={
                      <>
                        Delete the identity provider <strong>{p.name}</strong>? Sign-ins in progress through it are
                        abandoned.
                      </>
                    }
                    onConfirm={async () => {
                      if ((await remove.run(p.uid)) !== undefined) {
                        setDone(`Deleted ${p.name}.`);
                        list.loaded.reload();
                      }
                    }}
                  />
                ) : null,
            },
          ]}
        />
      </Section>
      <Section title="New identity provider">
        {!group ? (
          <Empty>Choose a group above to add an identity provider to it.</Empty>
        ) : !(can("identity_providers.create", group) && can("role_bindings.create", group)) ? (
          <Empty>You may not add identity providers to this group.</Empty>
        ) : (
          <NewProviderForm
            group={group}
            onCreated={(p) => {
              setDone(`Created ${p.name}.`);
              list.loaded.reload();
            }}
          />
        )}
      </Section>
    </Page>
  );
}

function NewProviderForm({ group, onCreated }: { group: string; onCreated: (provider: IdentityProvider) => void }) {
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [issuer, setIssuer] = useState("");
  const [clientId, setClientId] = useState("");
  const [clientSecret, setClientSecret] = useState("");
  const [scopes, setScopes] = useState("");
  const [pkce, setPkce] = useState(true);
  const [defaultRole, setDefaultRole] = useState("");
  const createProvider = useAction(() =>
    providers().createIdentityProvider({
      parent: group,
      identityProvider: {
        name,
        description,
        defaultRole,
        configuration: {
          case: "oidc",
          value: {
            issuer,
            clientId,
            clientSecret,
            additionalScopes: scopes.split(/[\s,]+/).filter(Boolean),
            pkceEnabled: pkce,
          },
        },
      },
    }),
  );
  return (
    <Form
      label="New identity provider"
      onSubmit={async () => {
        const made = await createProvider.run();
        // The secret leaves the page with the request: the field is emptied either way once created.
        if (made) {
          setName("");
          setDescription("");
          setClientSecret("");
          onCreated(made);
        }
      }}
    >
      <TextField label="Provider name" value={name} onValue={setName} required />
      <TextField label="Provider description" value={description} onValue={setDescription} />
      <TextField
        label="OIDC issuer"
        type="url"
        value={issuer}
        onValue={setIssuer}
        required
        placeholder="https://login.example.com"
      />
      <TextField label="Client ID" value={clientId} onValue={setClientId} required />
      <TextField
        label="Client secret"
        type="password"
        autoComplete="new-password"
        value={clientSecret}
        onValue={setClientSecret}
        hint="stored encrypted and never shown again"
      />
      <TextField label="Extra scopes" value={scopes} onValue={setScopes} hint="besides openid, separated by spaces" />
      <CheckField label="Use PKCE" checked={pkce} onValue={setPkce} />
      <RolePicker group={group} value={defaultRole} onValue={setDefaultRole} label="Default role" />
      <ErrorNote error={createProvider.error} title="Not created" />
      <div>
        <Button type="submit" kind="primary" busy={createProvider.busy}>
          Create identity provider
        </Button>
      </div>
    </Form>
  );
}
