// The console's pages: the shell's own and each area's (pages/<area>/index.tsx).
import type { Area, NavItem, RouteDef } from "./pages/types";
import { HomePage } from "./pages/home";
import { iamArea } from "./pages/iam/index";
import { registryArea } from "./pages/registry/index";
import { securityArea } from "./pages/security/index";
import { eventsArea } from "./pages/events/index";

const areas: Area[] = [iamArea, registryArea, securityArea, eventsArea];

export const routes: RouteDef[] = [{ path: "/console", render: () => <HomePage /> }, ...areas.flatMap((a) => a.routes)];

export const navigation: NavItem[] = areas.flatMap((a) => a.nav);

/** The page at `path` ("/" is the overview). */
export function routeOf(path: string): RouteDef | undefined {
  const normalized = path === "/" ? "/console" : path.replace(/\/+$/, "");
  return routes.find((r) => r.path === normalized);
}
