// What the signed-in caller may do, from the server's own answer (Auth.Validate, the call behind
// `bulwark auth token capabilities`): each role binding's group and capabilities. A binding at a
// group holds in every group below it. Pages hide actions the caller may not take with `can`;
// the server still decides, and its refusal is shown in its words if the two ever disagree.
import { createContext, useContext, type ReactNode } from "react";
import { Auth, type WhoAmI } from "../../src/gen/platform/auth/v1/auth.platform_pb.js";
import { client } from "./api";

/** The operator's subject (tokens from `bulwark admin token`): every capability everywhere. */
const OPERATOR_SUBJECT = "bulwark:operator";

export interface Access {
  whoAmI: WhoAmI;
  operator: boolean;
  /** true when the caller holds `capability` (e.g. "groups.create") at `groupUid` (or above it) */
  can(capability: string, groupUid: string): boolean;
  /** true when the caller holds `capability` at any group */
  canSomewhere(capability: string): boolean;
  /** the groups (uid, name) where the caller holds `capability` directly through a binding */
  bindingGroups(capability: string): { uid: string; name: string }[];
  /**
   * Asks the server again: after a change of the caller's own bindings (founding an organization
   * makes its founder the owner; a grant or a revoke). Bindings are read live, not from the token.
   */
  refresh(): void;
}

export function accessOf(whoAmI: WhoAmI): Omit<Access, "refresh"> {
  const operator = whoAmI.subject === OPERATOR_SUBJECT;
  const bindings = whoAmI.capabilities.map((c) => ({
    uid: c.group?.id ?? "",
    name: c.group?.name ?? "",
    capabilities: new Set(c.capabilities),
  }));
  const covers = (bindingUid: string, uid: string) => uid === bindingUid || uid.startsWith(`${bindingUid}/`);
  return {
    whoAmI,
    operator,
    can: (capability, groupUid) =>
      operator || bindings.some((b) => b.capabilities.has(capability) && covers(b.uid, groupUid)),
    canSomewhere: (capability) => operator || bindings.some((b) => b.capabilities.has(capability)),
    bindingGroups: (capability) =>
      bindings.filter((b) => b.capabilities.has(capability)).map(({ uid, name }) => ({ uid, name })),
  };
}

export async function loadAccess(): Promise<Omit<Access, "refresh">> {
  return accessOf(await client(Auth).validate({}));
}

const AccessContext = createContext<Access | undefined>(undefined);

export function AccessProvider({
  access,
  refresh,
  children,
}: {
  access: Omit<Access, "refresh">;
  refresh: () => void;
  children: ReactNode;
}) {
  return <AccessContext.Provider value={{ ...access, refresh }}>{children}</AccessContext.Provider>;
}

/** The caller's access (inside the signed-in shell). */
export function useAccess(): Access {
  const access = useContext(AccessContext);
  if (!access) throw new Error("useAccess outside the signed-in shell");
  return access;
}
