// v1 Roles onto the v2beta1 RolesService; v1 names capabilities by their strings ("groups.list").
import { create } from "@bufbuild/protobuf";
import { RoleListSchema, RoleSchema, Roles, type Role } from "../../gen/platform/iam/v1/role.platform_pb.js";
import { RolesService, type Role as BetaRole } from "../../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { bindService, type ServiceBinding } from "../../core/service.js";
import { REPLACE_ALL, delegateTo, listAll, oneOrNone } from "../../platform/v1.js";
import { capabilityStrings, capabilityValues } from "./capabilities.js";

export function toV1Role(r: BetaRole): Role {
  return create(RoleSchema, {
    id: r.uid,
    name: r.name,
    description: r.description,
    capabilities: capabilityStrings(r.capabilities),
  });
}

function fromV1Role(r: Role | undefined, field: string) {
  const v = r ?? create(RoleSchema);
  return {
    uid: v.id,
    name: v.name,
    description: v.description,
    capabilities: capabilityValues(v.capabilities, field),
  };
}

export function v1RolesService(beta: readonly ServiceBinding[]): ServiceBinding {
  const roles = delegateTo(RolesService, beta);
  return bindService(Roles, {
    async create(req, call) {
      const role = fromV1Role(req.role, "role.capabilities");
      return toV1Role(await roles("createRole", { parent: req.parentId, role }, call));
    },
    async update(req, call) {
      const role = fromV1Role(req, "capabilities");
      return toV1Role(await roles("updateRole", { role, updateMask: REPLACE_ALL }, call));
    },
    async list(req, call) {
      // `parent`: the roles defined at that group (its children), as v1's filter meant.
      const uidp = req.uidp ?? (req.parent ? { childrenOf: req.parent } : undefined);
      const items = req.id
        ? await oneOrNone(() => roles("getRole", { uid: req.id }, call))
        : await listAll(async (pageSize, pageToken) => {
            const page = await roles("listRoles", { uidp, name: req.name, pageSize, pageToken }, call);
            return { items: page.roles, nextPageToken: page.nextPageToken };
          });
      const named = req.id && req.name ? items.filter((r) => r.name === req.name) : items;
      return create(RoleListSchema, { items: named.map(toV1Role) });
    },
    async delete(req, call) {
      return roles("deleteRole", { uid: req.id }, call);
    },
  });
}
