// GroupsService: organizations and their group trees.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  GroupSchema,
  GroupsService,
  ListGroupsRequestSchema,
  OrgKind,
  type Group,
} from "../gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { invalidArgument, permissionDenied, type FieldViolation } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import { NAMED_RESOURCE_LISTING, type ListableResource, type ListEngineDeps } from "../core/list.js";
import { listResponse } from "../platform/list.js";
import { accessOf, bindService } from "../core/service.js";
import { builtinRoleUid } from "./builtin-roles.js";
import { newChildUidp, newRootUidp } from "../core/uidp.js";
import { descriptionViolations, nameViolations, requireUid } from "../core/validate.js";
import { deleted, found, written } from "../platform/outcomes.js";
import type { GroupRow, GroupsRepository } from "./storage/groups.js";

export const groupListing: ListableResource = NAMED_RESOURCE_LISTING;

function toGroup(row: GroupRow): Group {
  return create(GroupSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    resourceLimits: row.resource_limits,
    verified: row.verified,
    kind: row.kind,
    status: row.status,
    createTime: timestampFromDate(row.create_time),
    updateTime: timestampFromDate(row.update_time),
  });
}

function validateFields(g: { name: string; description: string; kind: number }): FieldViolation[] {
  const v: FieldViolation[] = [...nameViolations(g.name), ...descriptionViolations(g.description)];
  if (OrgKind[g.kind] === undefined) v.push({ field: "kind", description: `unknown OrgKind ${g.kind}` });
  return v;
}

export interface GroupsDeps {
  groups: GroupsRepository;
  lists: ListEngineDeps;
  now: () => Date;
}

export function groupsService({ groups, lists, now }: GroupsDeps) {
  return bindService(GroupsService, {
    async createGroup(req, call) {
      // CreateGroup is unscoped: the parent decides. A root organization may be created by the
      // operator, or by a human, who becomes its owner in the same transaction; workloads cannot.
      const access = accessOf(call);
      if (req.parent !== "") {
        requireUid("parent", req.parent);
        access.require([Capability.CAP_IAM_GROUPS_CREATE], req.parent, "group");
      } else if (access.principal.kind === "workload") {
        throw permissionDenied("workload identities cannot create organizations");
      } else if (!access.unnarrowedFor([Capability.CAP_IAM_GROUPS_CREATE])) {
        throw permissionDenied("this token is narrowed and cannot create organizations");
      }
      const g = req.group ?? create(GroupSchema);
      const violations = validateFields(g);
      if (violations.length) throw invalidArgument(violations);
      const uid = req.parent === "" ? newRootUidp() : newChildUidp(req.parent);
      const owner = req.parent === "" && access.principal.kind === "human" ? access.principal.uid : undefined;
      const row = written(
        await groups.insert({
          uid,
          parentUid: req.parent === "" ? null : req.parent,
          name: g.name,
          description: g.description,
          kind: g.kind,
          now: now(),
          owner: owner
            ? { bindingUid: newChildUidp(uid), identityUid: owner, roleUid: builtinRoleUid("owner") }
            : undefined,
        }),
      );
      return toGroup(row);
    },

    async getGroup(req, call) {
      requireUid("uid", req.uid);
      return toGroup(found(await groups.get(req.uid, call.freshness), "group", req.uid));
    },

    async listGroups(req, call) {
      const { items, ...page } = await listResponse({
        lists,
        resource: groupListing,
        schema: ListGroupsRequestSchema,
        request: req,
        query: groups.listQuery({ uidp: req.uidp, name: req.name }),
        maintainedCount: groups.maintainedCount({ uidp: req.uidp, name: req.name }),
        toItems: (rows: GroupRow[]) => rows.map(toGroup),
        call,
      });
      return { groups: items, ...page };
    },

    async updateGroup(req, call) {
      const patch = req.group;
      if (!patch) throw invalidArgument({ field: "group", description: "is required" });
      requireUid("group.uid", patch.uid);
      const result = await groups.update(
        patch.uid,
        (current) => {
          const { updated } = applyFieldMask(GroupSchema, toGroup(current), patch, req.updateMask);
          const violations = validateFields(updated);
          if (violations.length) throw invalidArgument(violations);
          // `verified` is the platform's statement about an organization, not the owner's.
          if (updated.verified !== current.verified && !accessOf(call).isOperator) {
            throw permissionDenied("verified is set by the platform operator");
          }
          return {
            name: updated.name,
            description: updated.description,
            verified: updated.verified,
            kind: updated.kind,
          };
        },
        now(),
      );
      return toGroup(written(result));
    },

    async deleteGroup(req) {
      requireUid("uid", req.uid);
      return deleted(await groups.delete(req.uid), "group", req.uid);
    },
  });
}
