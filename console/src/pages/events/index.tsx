// The events area of the console: its pages and navigation entries.
import type { Area } from "../types";
import { AuditPage } from "./audit";
import { DeliveriesPage } from "./deliveries";
import { SubscriptionsPage } from "./subscriptions";

export const eventsArea: Area = {
  routes: [
    { path: "/console/subscriptions", render: () => <SubscriptionsPage /> },
    { path: "/console/deliveries", render: () => <DeliveriesPage /> },
    { path: "/console/audit", render: () => <AuditPage /> },
  ],
  nav: [
    { section: "Events", label: "Subscriptions", to: "/console/subscriptions", keepsGroup: true },
    { section: "Events", label: "Audit trail", to: "/console/audit", keepsGroup: true },
  ],
};
