// The security area of the console: its pages and navigation entries.
import type { Area } from "../types";
import { AdvisoriesPage } from "./advisories";
import { AdvisoryPage } from "./advisory";

export const securityArea: Area = {
  routes: [
    { path: "/console/advisories", render: () => <AdvisoriesPage /> },
    { path: "/console/advisory", render: () => <AdvisoryPage /> },
  ],
  nav: [{ section: "Security", label: "Advisories", to: "/console/advisories" }],
};
