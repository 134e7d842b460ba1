// RolesService: built-in roles (read-only) and custom roles under a group.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ListRolesRequestSchema,
  RoleSchema,
  RolesService,
  type Role,
} from "../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { failedPrecondition, invalidArgument, notFound } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import { NAMED_RESOURCE_LISTING, type ListableResource, type ListEngineDeps } from "../core/list.js";
import { listResponse } from "../platform/list.js";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { accessOf, bindService } from "../core/service.js";
import { newChildUidp, parentOf } from "../core/uidp.js";
import { deleted, found, written } from "../platform/outcomes.js";
import { descriptionViolations, nameViolations, requireUid, throwIfViolations } from "../core/validate.js";
import type { RoleFields, RoleRow, RolesRepository } from "./storage/roles.js";
import { capabilityViolations, normalizeCapabilities } from "./capabilities.js";

// Built-in roles belong to no group: anyone who may list roles somewhere sees them.
export const roleListing: ListableResource = { ...NAMED_RESOURCE_LISTING, sharedRoots: true };

export function toRole(row: RoleRow): Role {
  return create(RoleSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    capabilities: row.capabilities,
    createTime: timestampFromDate(row.create_time),
    updateTime: timestampFromDate(row.update_time),
  });
}

function validated(role: { name: string; description: string; capabilities: number[] }): RoleFields {
  throwIfViolations([
    ...nameViolations(role.name),
    ...descriptionViolations(role.description),
    ...capabilityViolations(role.capabilities),
  ]);
  return { name: role.name, description: role.description, capabilities: normalizeCapabilities(role.capabilities) };
}

function refuseBuiltin(row: RoleRow, action: string): void {
  if (row.parent_uid === null) {
    throw failedPrecondition({ type: "BUILT_IN_ROLE", description: `built-in role "${row.name}" cannot be ${action}` });
  }
}

export interface RolesDeps {
  roles: RolesRepository;
  lists: ListEngineDeps;
  now: () => Date;
}

export function rolesService({ roles, lists, now }: RolesDeps) {
  return bindService(RolesService, {
    async createRole(req) {
      requireUid("parent", req.parent);
      const fields = validated(req.role ?? create(RoleSchema));
      return toRole(written(await roles.insert(newChildUidp(req.parent), req.parent, fields, now())));
    },

    async getRole(req, call) {
      requireUid("uid", req.uid);
      // GetRole is unscoped: built-in roles are readable by anyone who may list roles somewhere,
      // custom roles by those who may list roles where the role lives.
      const access = accessOf(call);
      const needed = [Capability.CAP_IAM_ROLES_LIST];
      if (parentOf(req.uid) !== undefined) access.require(needed, req.uid, "role");
      else if (!access.holdsAnywhere(needed)) throw notFound("role", req.uid);
      return toRole(found(await roles.get(req.uid, call.freshness), "role", req.uid));
    },

    async listRoles(req, call) {
      const { items, ...page } = await listResponse({
        lists,
        resource: roleListing,
        schema: ListRolesRequestSchema,
        request: req,
        query: roles.listQuery(req),
        toItems: (rows: RoleRow[]) => rows.map(toRole),
        call,
      });
      return { roles: items, ...page };
    },

    async updateRole(req) {
      const patch = req.role;
      if (!patch) throw invalidArgument({ field: "role", description: "is required" });
      requireUid("role.uid", patch.uid);
      const result = await roles.update(
        patch.uid,
        (current) => {
          refuseBuiltin(current, "changed");
          return validated(applyFieldMask(RoleSchema, toRole(current), patch, req.updateMask).updated);
        },
        now(),
      );
      return toRole(written(result));
    },

    async deleteRole(req) {
      requireUid("uid", req.uid);
      const existing = await roles.get(req.uid);
      if (existing) refuseBuiltin(existing, "deleted");
      return deleted(await roles.delete(req.uid), "role", req.uid);
    },
  });
}
