// What each area of the console (pages/<area>/index.tsx) contributes: its pages and its entries
// in the navigation. routes.tsx joins the areas; no area imports another's pages.
import type { ReactNode } from "react";

export interface RouteDef {
  /** the exact path, e.g. "/console/groups" (state is in the query, never in the path) */
  path: string;
  render(): ReactNode;
}

export interface NavItem {
  /** the navigation's heading it sits under */
  section: "Organization" | "Registry" | "Security" | "Events";
  label: string;
  to: string;
  /** the page is scoped by `?group=`: moving between such pages keeps the group chosen */
  keepsGroup?: boolean;
}

export interface Area {
  routes: RouteDef[];
  nav: NavItem[];
}
