// The first page after sign-in: who the console is signed in as, until when, and what the token
// may do (the same rows as `bulwark auth token capabilities`).
import { useAccess } from "../access";
import { DataTable } from "../ui/list";
import { Page, Section, Time } from "../ui/misc";
import { Empty } from "../ui/feedback";
import type { WhoAmI_Capability } from "../../../src/gen/platform/auth/v1/auth.platform_pb.js";

export function HomePage() {
  const { whoAmI, operator } = useAccess();
  return (
    <Page title="Overview">
      <dl className="facts">
        <dt>Signed in as</dt>
        <dd>
          {operator ? "the platform operator" : whoAmI.email || whoAmI.subject}
          {!operator && whoAmI.email && <span className="muted"> ({whoAmI.subject})</span>}
        </dd>
        <dt>Token expires</dt>
        <dd>
          <Time value={whoAmI.expiry} />
        </dd>
      </dl>
      <Section title="What you may do">
        {operator ? (
          <p>The operator may do everything, in every organization.</p>
        ) : whoAmI.capabilities.length === 0 ? (
          <Empty>
            No role is bound to you yet. Ask an owner of an organization for one, or create an organization.
          </Empty>
        ) : (
          <div className="table-scroll">
            <DataTable<WhoAmI_Capability>
              caption="Your role bindings"
              rows={whoAmI.capabilities}
              rowKey={(c) => `${c.group?.id}:${c.role?.id}`}
              columns={[
                { header: "Group", cell: (c) => c.group?.name ?? "" },
                { header: "Role", cell: (c) => c.role?.name ?? "" },
                { header: "Capabilities", cell: (c) => c.capabilities.join(", ") },
              ]}
            />
          </div>
        )}
      </Section>
    </Page>
  );
}
