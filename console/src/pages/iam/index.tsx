// The iam area of the console: its pages and navigation entries.
import type { ReactNode } from "react";
import type { Area } from "../types";
import { GroupsPage } from "./groups";
import { IdentitiesPage } from "./identities";
import { RolesPage } from "./roles";
import { RoleBindingsPage } from "./role-bindings";
import { InvitesPage } from "./invites";
import { IdentityProvidersPage } from "./identity-providers";
import { IAM_PAGES } from "./shared";

const pages: Record<(typeof IAM_PAGES)[number]["to"], () => ReactNode> = {
  "/console/groups": () => <GroupsPage />,
  "/console/identities": () => <IdentitiesPage />,
  "/console/roles": () => <RolesPage />,
  "/console/role-bindings": () => <RoleBindingsPage />,
  "/console/invites": () => <InvitesPage />,
  "/console/identity-providers": () => <IdentityProvidersPage />,
};

export const iamArea: Area = {
  routes: IAM_PAGES.map((p) => ({ path: p.to, render: pages[p.to] })),
  nav: IAM_PAGES.map((p) => ({ section: "Organization" as const, label: p.label, to: p.to, keepsGroup: true })),
};
