// v1 Groups onto the v2beta1 GroupsService.
import { create } from "@bufbuild/protobuf";
import { GroupListSchema, GroupSchema, Groups, type Group } from "../../gen/platform/iam/v1/group.platform_pb.js";
import { GroupsService, type Group as BetaGroup } from "../../gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { bindService, type ServiceBinding } from "../../core/service.js";
import { REPLACE_ALL, delegateTo, listAll, oneOrNone } from "../../platform/v1.js";

export function toV1Group(g: BetaGroup): Group {
  return create(GroupSchema, {
    id: g.uid,
    name: g.name,
    description: g.description,
    resourceLimits: g.resourceLimits,
    verified: g.verified,
    kind: g.kind,
    status: g.status,
  });
}

function fromV1Group(g: Group | undefined) {
  const v = g ?? create(GroupSchema);
  return {
    uid: v.id,
    name: v.name,
    description: v.description,
    resourceLimits: v.resourceLimits,
    verified: v.verified,
    kind: v.kind,
    status: v.status,
  };
}

export function v1GroupsService(beta: readonly ServiceBinding[]): ServiceBinding {
  const groups = delegateTo(GroupsService, beta);
  return bindService(Groups, {
    async create(req, call) {
      return toV1Group(await groups("createGroup", { parent: req.parent, group: fromV1Group(req.group) }, call));
    },
    async update(req, call) {
      return toV1Group(await groups("updateGroup", { group: fromV1Group(req), updateMask: REPLACE_ALL }, call));
    },
    async list(req, call) {
      const items = req.id
        ? await oneOrNone(() => groups("getGroup", { uid: req.id }, call))
        : await listAll(async (pageSize, pageToken) => {
            const page = await groups("listGroups", { uidp: req.uidp, name: req.name, pageSize, pageToken }, call);
            return { items: page.groups, nextPageToken: page.nextPageToken };
          });
      const named = req.id && req.name ? items.filter((g) => g.name === req.name) : items;
      return create(GroupListSchema, { items: named.map(toV1Group) });
    },
    async delete(req, call) {
      return groups("deleteGroup", { uid: req.id }, call);
    },
    async lookupGroup(_req, call) {
      const found = await groups("lookupGroup", {}, call);
      return { group: found.group ? toV1Group(found.group) : undefined };
    },
    async requestGroupAccess(req, call) {
      await groups("requestGroupAccess", { groupUid: req.groupId }, call);
      return {};
    },
    async checkEligibility(_req, call) {
      const answer = await groups("checkEligibility", {}, call);
      return { eligible: answer.eligible };
    },
  });
}
