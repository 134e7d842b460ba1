// v1 GroupInvites onto the v2beta1 GroupInvitesService. v1 names the group `group`, the role by
// its uid in `role`, and answers the role whole (capabilities as names).
import { create } from "@bufbuild/protobuf";
import * as v1 from "../../gen/platform/iam/v1/group_invites.platform_pb.js";
import * as beta from "../../gen/chainguard/platform/iam/v2beta1/group_invites_pb.js";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { invalidArgument } from "../../core/errors.js";
import { accessOf, bindService, type CallContext, type ServiceBinding } from "../../core/service.js";
import { delegateTo, listAll, oneOrNone } from "../../platform/v1.js";
import { capabilityStrings } from "./capabilities.js";

function roleOf(i: beta.GroupInvite) {
  const r = i.role;
  return r
    ? { id: r.uid, name: r.name, description: r.description, capabilities: capabilityStrings(r.capabilities) }
    : { id: i.roleUid };
}

function toStored(i: beta.GroupInvite): v1.StoredGroupInvite {
  return create(v1.StoredGroupInviteSchema, {
    id: i.uid,
    expiration: i.expirationTime,
    keyId: i.keyId,
    role: roleOf(i),
    email: i.email,
    createdAt: i.createTime,
    singleUse: i.singleUse,
  });
}

export function v1GroupInvitesService(bindings: readonly ServiceBinding[]): ServiceBinding {
  const invites = delegateTo(beta.GroupInvitesService, bindings);

  async function createInvite(req: v1.GroupInviteRequest, call: CallContext): Promise<v1.GroupInvite> {
    const invite = await invites(
      "createGroupInvite",
      {
        parent: req.group,
        groupInvite: { roleUid: req.role, ttl: req.ttl, email: req.email, singleUse: req.singleUse },
      },
      call,
    );
    return create(v1.GroupInviteSchema, {
      id: invite.uid,
      expiration: invite.expirationTime,
      keyId: invite.keyId,
      role: roleOf(invite),
      code: invite.code,
    });
  }

  return bindService(v1.GroupInvites, {
    async create(req, call) {
      return createInvite(req, call);
    },
    // gRPC only (no HTTP rule) and unscoped in v1: the group must be named, and the caller must
    // hold there what Create asks.
    async createWithGroup(req, call) {
      if (req.group === "") throw invalidArgument({ field: "group", description: "is required" });
      accessOf(call).require(
        [Capability.CAP_IAM_GROUP_INVITES_CREATE, Capability.CAP_IAM_ROLE_BINDINGS_CREATE],
        req.group,
        "group",
      );
      return createInvite(req, call);
    },
    async list(req, call) {
      const items = req.id
        ? await oneOrNone(() => invites("getGroupInvite", { uid: req.id }, call))
        : await listAll(async (pageSize, pageToken) => {
            const uidp = req.group ? { childrenOf: req.group } : undefined;
            const page = await invites("listGroupInvites", { uidp, keyId: req.keyId, pageSize, pageToken }, call);
            return { items: page.groupInvites, nextPageToken: page.nextPageToken };
          });
      const kept = items.filter((i) => !req.id || !req.keyId || i.keyId === req.keyId);
      return create(v1.GroupInviteListSchema, { items: kept.map(toStored) });
    },
    async delete(req, call) {
      return invites("deleteGroupInvite", { uid: req.id }, call);
    },
  });
}
