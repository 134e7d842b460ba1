// GroupInvitesService: invitations to join a group with a role. The code is returned once, by
// Create; afterwards only its public key id is shown.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate, type Duration } from "@bufbuild/protobuf/wkt";
import {
  GroupInviteRoleSchema,
  GroupInviteSchema,
  GroupInvitesService,
  ListGroupInvitesRequestSchema,
  type GroupInvite,
} from "../gen/chainguard/platform/iam/v2beta1/group_invites_pb.js";
import { notFound, type FieldViolation } from "../core/errors.js";
import type { ListableResource, ListEngineDeps } from "../core/list.js";
import { listResponse } from "../platform/list.js";
import { deleted, found, written } from "../platform/outcomes.js";
import { bindService } from "../core/service.js";
import { isUsableFrom, newChildUidp } from "../core/uidp.js";
import { requireUid, throwIfViolations } from "../core/validate.js";
import { mintInviteCode } from "./invites.js";
import type { GroupInviteRow, GroupInvitesRepository, InviteRole } from "./storage/group-invites.js";
import { quote } from "../core/strings.js";

export const groupInviteListing: ListableResource = {
  sortable: {
    create_time: { column: "create_time", kind: "timestamp" },
    expiration_time: { column: "expiration_time", kind: "timestamp" },
  },
  aliases: { created_at: "create_time", expires_at: "expiration_time" },
  defaultOrder: "create_time desc",
};

/**
 * The longest ttl an invite may have: 30 days. An invite code is a bearer credential for joining
 * a group, so it must not live indefinitely; a month covers any reasonable onboarding.
 */
export const MAX_INVITE_TTL_SECONDS = 30 * 24 * 60 * 60;

const NANOS_PER_SECOND = 1_000_000_000n;
const NANOS_PER_MILLI = 1_000_000n;

/** Violations of the ttl rule: required, a valid Duration, > 0 and at most MAX_INVITE_TTL_SECONDS. */
function ttlViolations(ttl: Duration | undefined): FieldViolation[] {
  const field = "ttl";
  if (!ttl) return [{ field, description: "is required" }];
  const { seconds, nanos } = ttl;
  // A Duration's nanos are within ±999,999,999 and carry the sign of its seconds.
  if (Math.abs(nanos) > 999_999_999 || (seconds > 0n && nanos < 0) || (seconds < 0n && nanos > 0)) {
    return [{ field, description: "is not a valid Duration" }];
  }
  const total = seconds * NANOS_PER_SECOND + BigInt(nanos);
  if (total <= 0n) return [{ field, description: "must be positive" }];
  if (total > BigInt(MAX_INVITE_TTL_SECONDS) * NANOS_PER_SECOND) {
    return [{ field, description: `must be at most ${MAX_INVITE_TTL_SECONDS}s (30 days)` }];
  }
  return [];
}

/** A valid ttl in whole milliseconds (timestamps are stored to the millisecond), rounded up so it stays > 0. */
function ttlMillis(ttl: Duration): number {
  const total = ttl.seconds * NANOS_PER_SECOND + BigInt(ttl.nanos);
  return Number((total + NANOS_PER_MILLI - 1n) / NANOS_PER_MILLI);
}

// The WHATWG "valid e-mail address" (what <input type=email> accepts), plus RFC 5321's limits:
// 64 octets for the local part, 254 for the whole address.
const EMAIL_PATTERN =
  /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;

function emailViolations(email: string): FieldViolation[] {
  if (email === "") return [];
  const at = email.lastIndexOf("@");
  if (!EMAIL_PATTERN.test(email) || email.length > 254 || at > 64) {
    return [{ field: "email", description: `${quote(email)} is not a valid email address` }];
  }
  return [];
}

function toGroupInvite(row: GroupInviteRow, role: InviteRole | undefined, code = ""): GroupInvite {
  return create(GroupInviteSchema, {
    uid: row.uid,
    roleUid: row.role_uid,
    role:
      role &&
      create(GroupInviteRoleSchema, {
        uid: role.uid,
        name: role.name,
        description: role.description,
        capabilities: role.capabilities,
      }),
    email: row.email,
    expirationTime: timestampFromDate(row.expiration_time),
    singleUse: row.single_use,
    code,
    keyId: row.key_id,
    createTime: timestampFromDate(row.create_time),
  });
}

export interface GroupInvitesDeps {
  invites: GroupInvitesRepository;
  lists: ListEngineDeps;
  now: () => Date;
}

export function groupInvitesService({ invites, lists, now }: GroupInvitesDeps) {
  return bindService(GroupInvitesService, {
    async createGroupInvite(req) {
      requireUid("parent", req.parent);
      const invite = req.groupInvite ?? create(GroupInviteSchema);
      requireUid("role_uid", invite.roleUid);
      throwIfViolations([...ttlViolations(invite.ttl), ...emailViolations(invite.email)]);
      // An invisible role is answered like a missing one; the database checks the same rule.
      if (!isUsableFrom(invite.roleUid, req.parent)) throw notFound("role", invite.roleUid);

      const createTime = now();
      const expirationTime = new Date(createTime.getTime() + ttlMillis(invite.ttl!));
      const uid = newChildUidp(req.parent);
      // A key id is 64 random bits; a collision is all but impossible, but costs only a retry.
      for (let attempt = 0; ; attempt++) {
        const code = mintInviteCode();
        const result = await invites.insert({
          uid,
          parentUid: req.parent,
          roleUid: invite.roleUid,
          email: invite.email,
          singleUse: invite.singleUse,
          keyId: code.keyId,
          codeHash: code.hash,
          expirationTime,
          now: createTime,
        });
        if (result.kind !== "key_id_taken") {
          const created = written(result);
          return toGroupInvite(created.row, created.role, code.code);
        }
        if (attempt >= 2) throw new Error("could not allocate a unique invite key id");
      }
    },

    async getGroupInvite(req, call) {
      requireUid("uid", req.uid);
      const row = found(await invites.get(req.uid, call.freshness), "group invite", req.uid);
      const roles = await invites.rolesOf([row]);
      return toGroupInvite(row, roles.get(row.role_uid));
    },

    async listGroupInvites(req, call) {
      const { items, ...page } = await listResponse({
        lists,
        resource: groupInviteListing,
        schema: ListGroupInvitesRequestSchema,
        request: req,
        query: invites.listQuery({ uidp: req.uidp, keyId: req.keyId }),
        toItems: async (rows: GroupInviteRow[]) => {
          const roles = await invites.rolesOf(rows); // one query per page
          return rows.map((row) => toGroupInvite(row, roles.get(row.role_uid)));
        },
        call,
      });
      return { groupInvites: items, ...page };
    },

    async deleteGroupInvite(req) {
      requireUid("uid", req.uid);
      return deleted(await invites.delete(req.uid), "group invite", req.uid);
    },
  });
}
