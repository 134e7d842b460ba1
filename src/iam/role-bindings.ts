// RoleBindingsService: grants of a role to an identity at a group (and everything beneath it).
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ListRoleBindingsRequestSchema,
  RoleBindingSchema,
  RoleBindingsService,
  type CreateRoleBindingRequest,
  type RoleBinding,
} from "../gen/chainguard/platform/iam/v2beta1/role_bindings_pb.js";
import { invalidArgument, type FieldViolation } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import { type ListableResource, type ListEngineDeps } from "../core/list.js";
import { listResponse } from "../platform/list.js";
import { bindService } from "../core/service.js";
import { isValidUidp, newChildUidp } from "../core/uidp.js";
import { deleted, found, written } from "../platform/outcomes.js";
import { optionalUid, requireUid, throwIfViolations } from "../core/validate.js";
import type { HydratedBinding, NewBinding, RoleBindingRow, RoleBindingsRepository } from "./storage/role-bindings.js";
import { displayIssuerSubject } from "./identity-relationships.js";
import { quote } from "../core/strings.js";

const MAX_BATCH = 100;

export const roleBindingListing: ListableResource = {
  sortable: { create_time: { column: "create_time", kind: "timestamp" } },
  aliases: { created_at: "create_time" },
  defaultOrder: "uid",
};

export function toRoleBinding(b: HydratedBinding): RoleBinding {
  const { issuer, subject } = displayIssuerSubject(b.relationship_type, b.relationship);
  return create(RoleBindingSchema, {
    uid: b.uid,
    identity: {
      uid: b.identity_uid,
      name: b.identity_name,
      description: b.identity_description,
      subject,
      issuer,
      email: b.identity_email,
    },
    group: { uid: b.parent_uid, name: b.group_name, description: b.group_description },
    role: { uid: b.role_uid, name: b.role_name, description: b.role_description },
    createTime: timestampFromDate(b.create_time),
    identityUid: b.identity_uid,
    roleUid: b.role_uid,
  });
}

function referenceViolations(identityUid: string, roleUid: string, prefix = ""): FieldViolation[] {
  const v: FieldViolation[] = [];
  for (const [field, uid] of [
    ["identity_uid", identityUid],
    ["role_uid", roleUid],
  ] as const) {
    if (uid === "") v.push({ field: prefix + field, description: "is required" });
    else if (!isValidUidp(uid)) v.push({ field: prefix + field, description: `${quote(uid)} is not a valid UIDP` });
  }
  return v;
}

function newBinding(
  parent: string,
  request: CreateRoleBindingRequest,
  defaultRoleUid: string,
  prefix: string,
): NewBinding {
  const rb = request.roleBinding ?? create(RoleBindingSchema);
  const roleUid = rb.roleUid || defaultRoleUid;
  throwIfViolations(referenceViolations(rb.identityUid, roleUid, prefix));
  return { uid: newChildUidp(parent), parentUid: parent, identityUid: rb.identityUid, roleUid };
}

export interface RoleBindingsDeps {
  roleBindings: RoleBindingsRepository;
  lists: ListEngineDeps;
  now: () => Date;
}

export function roleBindingsService({ roleBindings, lists, now }: RoleBindingsDeps) {
  return bindService(RoleBindingsService, {
    async createRoleBinding(req) {
      requireUid("parent", req.parent);
      const [created] = written(await roleBindings.insertAll([newBinding(req.parent, req, "", "")], now()));
      return toRoleBinding(created!);
    },

    async batchCreateRoleBindings(req) {
      requireUid("parent", req.parent);
      optionalUid("role_uid", req.roleUid);
      if (req.requests.length === 0)
        throw invalidArgument({ field: "requests", description: "at least one request is required" });
      if (req.requests.length > MAX_BATCH)
        throw invalidArgument({ field: "requests", description: `at most ${MAX_BATCH} bindings per batch` });
      const bindings = req.requests.map((r, i) => {
        if (r.parent !== "" && r.parent !== req.parent) {
          throw invalidArgument({
            field: `requests[${i}].parent`,
            description: "must be empty or equal to the batch's parent",
          });
        }
        return newBinding(req.parent, r, req.roleUid, `requests[${i}].role_binding.`);
      });
      return { roleBindings: written(await roleBindings.insertAll(bindings, now())).map(toRoleBinding) };
    },

    async getRoleBinding(req, call) {
      requireUid("uid", req.uid);
      return toRoleBinding(found(await roleBindings.get(req.uid, call.freshness), "role binding", req.uid));
    },

    async listRoleBindings(req, call) {
      optionalUid("identity", req.identity);
      optionalUid("group", req.group);
      optionalUid("role", req.role);
      const { items, ...page } = await listResponse({
        lists,
        resource: roleBindingListing,
        schema: ListRoleBindingsRequestSchema,
        request: req,
        query: roleBindings.listQuery(req),
        // one hydration query per page
        toItems: async (rows: RoleBindingRow[]) =>
          (await roleBindings.hydrate(rows.map((r) => r.uid))).map(toRoleBinding),
        call,
      });
      return { roleBindings: items, ...page };
    },

    async updateRoleBinding(req) {
      const patch = req.roleBinding;
      if (!patch) throw invalidArgument({ field: "role_binding", description: "is required" });
      requireUid("role_binding.uid", patch.uid);
      const result = await roleBindings.update(
        patch.uid,
        (current) => {
          const existing = create(RoleBindingSchema, {
            uid: current.uid,
            identityUid: current.identity_uid,
            roleUid: current.role_uid,
          });
          const { updated } = applyFieldMask(RoleBindingSchema, existing, patch, req.updateMask);
          throwIfViolations(referenceViolations(updated.identityUid, updated.roleUid));
          return { identityUid: updated.identityUid, roleUid: updated.roleUid };
        },
        now(),
      );
      return toRoleBinding(written(result));
    },

    async deleteRoleBinding(req) {
      requireUid("uid", req.uid);
      return deleted(await roleBindings.delete(req.uid), "role binding", req.uid);
    },
  });
}
