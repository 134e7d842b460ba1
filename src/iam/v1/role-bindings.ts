// v1 RoleBindings onto the v2beta1 RoleBindingsService. A binding's group is its parent (its uid
// is the group's plus a suffix), so v1's deprecated `group` field is answered, never read.
import { create } from "@bufbuild/protobuf";
import {
  RoleBindingBatchSchema,
  RoleBindingListSchema,
  RoleBindingSchema,
  RoleBindings,
  type RoleBinding,
} from "../../gen/platform/iam/v1/role_binding.platform_pb.js";
import {
  RoleBindingsService,
  type RoleBinding as BetaRoleBinding,
} from "../../gen/chainguard/platform/iam/v2beta1/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { bindService, type CallContext, type ServiceBinding } from "../../core/service.js";
import { parentOf } from "../../core/uidp.js";
import { REPLACE_ALL, delegateTo, listAll, oneOrNone } from "../../platform/v1.js";
import { toV1Role } from "./roles.js";

function toV1RoleBinding(b: BetaRoleBinding): RoleBinding {
  return create(RoleBindingSchema, {
    id: b.uid,
    identity: b.identityUid || b.identity?.uid || "",
    group: b.group?.uid || parentOf(b.uid) || "",
    role: b.roleUid || b.role?.uid || "",
  });
}

function fromV1RoleBinding(b: RoleBinding | undefined) {
  const v = b ?? create(RoleBindingSchema);
  return { uid: v.id, identityUid: v.identity, roleUid: v.role };
}

export function v1RoleBindingsService(beta: readonly ServiceBinding[]): ServiceBinding {
  const bindings = delegateTo(RoleBindingsService, beta);
  const roles = delegateTo(RolesService, beta);

  /** v1 list items carry the whole role (capabilities too): each distinct role read once */
  async function rolesOf(items: BetaRoleBinding[], call: CallContext) {
    const uids = [...new Set(items.map((b) => b.roleUid || b.role?.uid || "").filter(Boolean))];
    const found = await Promise.all(uids.map((uid) => oneOrNone(() => roles("getRole", { uid }, call))));
    return new Map(found.flat().map((r) => [r.uid, toV1Role(r)]));
  }

  return bindService(RoleBindings, {
    async create(req, call) {
      const roleBinding = fromV1RoleBinding(req.roleBinding);
      return toV1RoleBinding(await bindings("createRoleBinding", { parent: req.parent, roleBinding }, call));
    },
    async createBatch(req, call) {
      const answer = await bindings(
        "batchCreateRoleBindings",
        { parent: req.parent, requests: req.roleBindings.map((b) => ({ roleBinding: fromV1RoleBinding(b) })) },
        call,
      );
      return create(RoleBindingBatchSchema, { roleBindings: answer.roleBindings.map(toV1RoleBinding) });
    },
    async update(req, call) {
      const roleBinding = fromV1RoleBinding(req);
      return toV1RoleBinding(await bindings("updateRoleBinding", { roleBinding, updateMask: REPLACE_ALL }, call));
    },
    async list(req, call) {
      const items = req.id
        ? await oneOrNone(() => bindings("getRoleBinding", { uid: req.id }, call))
        : await listAll(async (pageSize, pageToken) => {
            const page = await bindings("listRoleBindings", { uidp: req.uidp, pageSize, pageToken }, call);
            return { items: page.roleBindings, nextPageToken: page.nextPageToken };
          });
      const roleByUid = await rolesOf(items, call);
      return create(RoleBindingListSchema, {
        items: items.map((b) => {
          const roleUid = b.roleUid || b.role?.uid || "";
          return {
            id: b.uid,
            group: b.group ? { id: b.group.uid, name: b.group.name, description: b.group.description } : undefined,
            identity: b.identityUid || b.identity?.uid || "",
            role:
              roleByUid.get(roleUid) ??
              (b.role ? { id: b.role.uid, name: b.role.name, description: b.role.description } : undefined),
            email: b.identity?.email ?? "",
            claimMatchIssuer: b.identity?.issuer ?? "",
            claimMatchSubject: b.identity?.subject ?? "",
            createdAt: b.createTime,
          };
        }),
      });
    },
    async delete(req, call) {
      return bindings("deleteRoleBinding", { uid: req.id }, call);
    },
  });
}
