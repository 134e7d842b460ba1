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
import { failedPrecondition, invalidArgument, notFound, type FieldViolation } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import { filterFingerprint, listPage, type ListableResource, type ListEngineDeps } from "../core/list.js";
import { bindService } from "../core/service.js";
import { isValidUidp, newChildUidp, newRootUidp } from "../core/uidp.js";
import type { GroupRow, GroupsRepository } from "../store/groups.js";

export const GROUP_NAME_PATTERN = /^[a-z0-9 ._-]{1,}$/;
const MAX_NAME_LENGTH = 256;
const MAX_DESCRIPTION_LENGTH = 4096;

export const groupListing: ListableResource = {
  sortable: {
    name: { column: "name", kind: "text" },
    create_time: { column: "create_time", kind: "timestamp" },
    update_time: { column: "update_time", kind: "timestamp" },
  },
  aliases: { created_at: "create_time", updated_at: "update_time" },
  defaultOrder: "uid",
};

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
  const v: FieldViolation[] = [];
  if (!GROUP_NAME_PATTERN.test(g.name)) v.push({ field: "name", description: `name must match ${GROUP_NAME_PATTERN.source}` });
  else if (g.name.length > MAX_NAME_LENGTH) v.push({ field: "name", description: `name must be at most ${MAX_NAME_LENGTH} characters` });
  if (g.description.length > MAX_DESCRIPTION_LENGTH) {
    v.push({ field: "description", description: `description must be at most ${MAX_DESCRIPTION_LENGTH} characters` });
  }
  if (OrgKind[g.kind] === undefined) v.push({ field: "kind", description: `unknown OrgKind ${g.kind}` });
  return v;
}

function requireUid(field: string, uid: string): void {
  if (uid === "") throw invalidArgument({ field, description: "is required" });
  if (!isValidUidp(uid)) throw invalidArgument({ field, description: `"${uid}" is not a valid UIDP` });
}

export interface GroupsDeps {
  groups: GroupsRepository;
  lists: ListEngineDeps;
  now: () => Date;
}

export function groupsService({ groups, lists, now }: GroupsDeps) {
  return bindService(GroupsService, {
    async createGroup(req) {
      if (req.parent !== "") requireUid("parent", req.parent);
      const g = req.group ?? create(GroupSchema);
      const violations = validateFields(g);
      if (violations.length) throw invalidArgument(violations);
      const uid = req.parent === "" ? newRootUidp() : newChildUidp(req.parent);
      const row = await groups.insert({
        uid,
        parentUid: req.parent === "" ? null : req.parent,
        name: g.name,
        description: g.description,
        kind: g.kind,
        now: now(),
      });
      if (!row) throw notFound("group", req.parent);
      return toGroup(row);
    },

    async getGroup(req) {
      requireUid("uid", req.uid);
      const row = await groups.get(req.uid);
      if (!row) throw notFound("group", req.uid);
      return toGroup(row);
    },

    async listGroups(req) {
      const page = await listPage<GroupRow>(
        lists,
        groupListing,
        req,
        filterFingerprint(ListGroupsRequestSchema, req),
        groups.listQuery({ uidp: req.uidp, name: req.name }),
      );
      return {
        groups: page.rows.map(toGroup),
        nextPageToken: page.nextPageToken,
        totalCount: page.totalCount,
        skipped: page.skipped,
      };
    },

    async updateGroup(req) {
      const patch = req.group;
      if (!patch) throw invalidArgument({ field: "group", description: "is required" });
      requireUid("group.uid", patch.uid);
      const row = await groups.update(
        patch.uid,
        (current) => {
          const { updated } = applyFieldMask(GroupSchema, toGroup(current), patch, req.updateMask);
          const violations = validateFields(updated);
          if (violations.length) throw invalidArgument(violations);
          return { name: updated.name, description: updated.description, verified: updated.verified, kind: updated.kind };
        },
        now(),
      );
      if (!row) throw notFound("group", patch.uid);
      return toGroup(row);
    },

    async deleteGroup(req) {
      requireUid("uid", req.uid);
      const result = await groups.delete(req.uid);
      if (result.kind === "not_found") throw notFound("group", req.uid);
      if (result.kind === "not_empty") {
        throw failedPrecondition({
          type: "RESOURCE_NOT_EMPTY",
          description: `cannot delete group with ${result.blockedBy.join(", ")}`,
        });
      }
      return {};
    },
  });
}
