// /console/identities?group=: the identities in a group (and beneath it), each with what tokens
// it matches in words; create one (a GitHub Actions or GitLab CI workload, any OIDC issuer's
// claims, or static keys for an issuer the server cannot reach) and delete one.
import { useState } from "react";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  IdentitiesService,
  ServicePrincipal,
  type Identity,
} from "../../../../src/gen/chainguard/platform/iam/v2/identities_pb.js";
import { client } from "../../api";
import { useAccess } from "../../access";
import { useAction } from "../../ui/load";
import { ListTable, usePagedList } from "../../ui/list";
import { Button, CheckField, Form, SelectField, TextArea, TextField } from "../../ui/forms";
import { Done, Empty, ErrorNote } from "../../ui/feedback";
import { ConfirmButton, Page, Section, Time } from "../../ui/misc";
import { GroupFilter } from "./shared";
import { groupOf, under, useGroupParam } from "../../ui/groups";

const identities = () => client(IdentitiesService);

const GITHUB_ISSUER = "https://token.actions.githubusercontent.com";
const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

/** What tokens an identity matches, in words. */
export function matchesInWords(identity: Identity): string {
  const r = identity.relationship;
  switch (r.case) {
    case "claimMatch": {
      const m = r.value;
      const parts = [
        m.iss.case === "issuer"
          ? `issuer is ${m.iss.value}`
          : m.iss.case === "issuerPattern"
            ? `issuer matches /${m.iss.value}/`
            : "",
        m.sub.case === "subject"
          ? `subject is ${m.sub.value}`
          : m.sub.case === "subjectPattern"
            ? `subject matches /${m.sub.value}/`
            : "",
        m.aud.case === "audience"
          ? `audience is ${m.aud.value}`
          : m.aud.case === "audiencePattern"
            ? `an audience matches /${m.aud.value}/`
            : "",
        ...Object.entries(m.claims).map(([k, v]) => `claim ${k} is ${v}`),
        ...Object.entries(m.claimPatterns).map(([k, v]) => `claim ${k} matches /${v}/`),
      ].filter(Boolean);
      return `OIDC tokens whose ${parts.join(", and ")}`;
    }
    case "staticKeys": {
      const s = r.value;
      return [
        `Tokens signed by the given keys whose issuer is ${s.issuer} and subject is ${s.subject}`,
        s.audiences.length ? `for audience ${s.audiences.join(" or ")}` : "",
        s.expirationTime
          ? `until ${new Date(Number(s.expirationTime.seconds) * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC`
          : "",
      ]
        .filter(Boolean)
        .join(", ");
    }
    case "awsIdentity": {
      const a = r.value;
      const arn =
        a.awsArn.case === "arn"
          ? `ARN ${a.awsArn.value}`
          : a.awsArn.case === "arnPattern"
            ? `ARN matching /${a.awsArn.value}/`
            : "";
      return `AWS credentials of account ${a.awsAccount}${arn ? `, ${arn}` : ""}`;
    }
    case "servicePrincipal":
      return `The platform's service ${ServicePrincipal[r.value] ?? r.value}`;
    default:
      return "Nothing (no way to assume it)";
  }
}

export function IdentitiesPage() {
  const { can } = useAccess();
  const [group, setGroup] = useGroupParam();
  const [done, setDone] = useState("");
  const list = usePagedList(
    async (p) => {
      const r = await identities().listIdentities({ uidp: under(group), ...p });
      return { items: r.identities, nextPageToken: r.nextPageToken, totalCount: r.totalCount };
    },
    [group],
    { defaultOrder: "name" },
  );
  const remove = useAction((uid: string) => identities().deleteIdentity({ uid }));
  return (
    <Page title="Identities">
      <GroupFilter group={group} onGroup={setGroup} />
      {done && <Done>{done}</Done>}
      <ErrorNote error={remove.error} title="Not deleted" />
      <Section title="Identities">
        <ListTable<Identity>
          list={list}
          caption="Identities"
          noun="identities"
          rowKey={(i) => i.uid}
          columns={[
            { header: "Name", sort: "name", cell: (i) => <strong>{i.name}</strong> },
            { header: "What matches it", cell: (i) => matchesInWords(i) },
            { header: "UID", cell: (i) => <code className="iam-uid">{i.uid}</code> },
            { header: "Last seen", sort: "last_seen_time", cell: (i) => <Time value={i.lastSeenTime} /> },
            {
              header: "Actions",
              cell: (i) =>
                can("identity.delete", groupOf(i.uid)) ? (
                  <ConfirmButton
                    label={`Delete ${i.name}`}
                    confirmLabel="Yes, delete"
                    question={
                      <>
                        Delete the identity <strong>{i.name}</strong>? Tokens matching it can no longer be exchanged.
                      </>
                    }
                    onConfirm={async () => {
                      if ((await remove.run(i.uid)) !== undefined) {
                        setDone(`Deleted ${i.name}.`);
                        list.loaded.reload();
                      }
                    }}
                  />
                ) : null,
            },
          ]}
        />
      </Section>
      <Section title="New identity">
        {!group ? (
          <Empty>Choose a group above to create an identity in it.</Empty>
        ) : !can("identity.create", group) ? (
          <Empty>You may not create identities in this group.</Empty>
        ) : (
          <NewIdentityForm
            group={group}
            onCreated={(i) => {
              setDone(`Created ${i.name}: ${matchesInWords(i)}.`);
              list.loaded.reload();
            }}
          />
        )}
      </Section>
    </Page>
  );
}

type Kind = "github" | "gitlab" | "claims" | "static";

/** "name=value" lines as a map. */
function pairs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

function NewIdentityForm({ group, onCreated }: { group: string; onCreated: (identity: Identity) => void }) {
  const [kind, setKind] = useState<Kind>("github");
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [f, setF] = useState({
    repo: "",
    ref: "",
    workflow: "",
    project: "",
    gitlabIssuer: "https://gitlab.com",
    issuer: "",
    issuerIsPattern: false,
    subject: "",
    subjectIsPattern: false,
    audience: "",
    claims: "",
    claimPatterns: "",
    keys: "",
    expiry: "",
    audiences: "",
  });
  const set = (key: keyof typeof f) => (value: string | boolean) => setF((old) => ({ ...old, [key]: value }));

  const relationship = (): Identity["relationship"] | undefined => {
    const aud = f.audience ? { case: "audience" as const, value: f.audience } : { case: undefined };
    switch (kind) {
      case "github": {
        const claimPatterns: Record<string, string> = {};
        if (f.workflow)
          claimPatterns.workflow_ref = `${escapeRegExp(f.repo)}/\\.github/workflows/${escapeRegExp(f.workflow)}@.*`;
        return {
          case: "claimMatch",
          value: {
            iss: { case: "issuer", value: GITHUB_ISSUER },
            sub: f.ref
              ? { case: "subject", value: `repo:${f.repo}:ref:${f.ref}` }
              : { case: "subjectPattern", value: `repo:${escapeRegExp(f.repo)}:.*` },
            aud,
            claimPatterns,
          },
        } as Identity["relationship"];
      }
      case "gitlab":
        return {
          case: "claimMatch",
          value: {
            iss: { case: "issuer", value: f.gitlabIssuer },
            sub: f.ref
              ? { case: "subject", value: `project_path:${f.project}:ref_type:branch:ref:${f.ref}` }
              : { case: "subjectPattern", value: `project_path:${escapeRegExp(f.project)}:.*` },
            aud,
          },
        } as Identity["relationship"];
      case "claims":
        return {
          case: "claimMatch",
          value: {
            iss: { case: f.issuerIsPattern ? "issuerPattern" : "issuer", value: f.issuer },
            sub: { case: f.subjectIsPattern ? "subjectPattern" : "subject", value: f.subject },
            aud,
            claims: pairs(f.claims),
            claimPatterns: pairs(f.claimPatterns),
          },
        } as Identity["relationship"];
      case "static":
        return {
          case: "staticKeys",
          value: {
            issuer: f.issuer,
            subject: f.subject,
            issuerKeys: f.keys,
            expirationTime: f.expiry ? timestampFromDate(new Date(`${f.expiry}Z`)) : undefined,
            audiences: f.audiences
              .split(",")
              .map((a) => a.trim())
              .filter(Boolean),
          },
        } as Identity["relationship"];
    }
  };

  const createIdentity = useAction(() =>
    identities().createIdentity({ parent: group, identity: { name, description, relationship: relationship() } }),
  );

  return (
    <Form
      label="New identity"
      onSubmit={async () => {
        const made = await createIdentity.run();
        if (made) {
          setName("");
          setDescription("");
          onCreated(made);
        }
      }}
    >
      <SelectField
        label="Assumed by"
        value={kind}
        onValue={(v) => setKind(v as Kind)}
        options={[
          { value: "github", label: "GitHub Actions workflow" },
          { value: "gitlab", label: "GitLab CI pipeline" },
          { value: "claims", label: "OIDC tokens with matching claims" },
          { value: "static", label: "Tokens signed by static keys" },
        ]}
      />
      <TextField label="Identity name" value={name} onValue={setName} required />
      <TextField label="Identity description" value={description} onValue={setDescription} />
      {kind === "github" && (
        <>
          <TextField label="Repository" value={f.repo} onValue={set("repo")} required placeholder="owner/repo" />
          <TextField
            label="Git ref"
            value={f.ref}
            onValue={set("ref")}
            hint="e.g. refs/heads/main; empty for any ref"
          />
          <TextField
            label="Workflow file"
            value={f.workflow}
            onValue={set("workflow")}
            hint="e.g. release.yaml; empty for any workflow"
          />
        </>
      )}
      {kind === "gitlab" && (
        <>
          <TextField label="GitLab issuer" value={f.gitlabIssuer} onValue={set("gitlabIssuer")} required type="url" />
          <TextField
            label="Project path"
            value={f.project}
            onValue={set("project")}
            required
            placeholder="group/project"
          />
          <TextField label="Branch" value={f.ref} onValue={set("ref")} hint="empty for any branch or tag" />
        </>
      )}
      {(kind === "claims" || kind === "static") && (
        <>
          <TextField label="Issuer" value={f.issuer} onValue={set("issuer")} required />
          {kind === "claims" && (
            <CheckField
              label="The issuer is a regular expression"
              checked={f.issuerIsPattern}
              onValue={set("issuerIsPattern")}
            />
          )}
          <TextField label="Subject" value={f.subject} onValue={set("subject")} required />
          {kind === "claims" && (
            <CheckField
              label="The subject is a regular expression"
              checked={f.subjectIsPattern}
              onValue={set("subjectIsPattern")}
            />
          )}
        </>
      )}
      {kind !== "static" && (
        <TextField
          label="Audience"
          value={f.audience}
          onValue={set("audience")}
          hint="optional: the audience the token must carry"
        />
      )}
      {kind === "claims" && (
        <>
          <TextArea
            label="Claims"
            value={f.claims}
            onValue={set("claims")}
            rows={2}
            hint="one name=value a line: the claim must have exactly this value"
          />
          <TextArea
            label="Claim patterns"
            value={f.claimPatterns}
            onValue={set("claimPatterns")}
            rows={2}
            hint="one name=regular expression a line"
          />
        </>
      )}
      {kind === "static" && (
        <>
          <TextArea
            label="Issuer keys (JWKS)"
            value={f.keys}
            onValue={set("keys")}
            rows={5}
            required
            hint="the issuer's public keys as a JSON Web Key Set"
          />
          <TextField label="Keys expire (UTC)" type="datetime-local" value={f.expiry} onValue={set("expiry")} />
          <TextField
            label="Audiences"
            value={f.audiences}
            onValue={set("audiences")}
            hint="optional, comma-separated"
          />
        </>
      )}
      <ErrorNote error={createIdentity.error} title="Not created" />
      <div>
        <Button type="submit" kind="primary" busy={createIdentity.busy}>
          Create identity
        </Button>
      </div>
    </Form>
  );
}
