// IdentitiesService: assumable identities, matched by OIDC token claims (claim_match), a static
// JWKS (static_keys), an AWS principal, or a platform service principal.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  IdentitiesService,
  IdentitySchema,
  ListIdentitiesRequestSchema,
  RelationshipType,
  type Identity,
} from "../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import { invalidArgument, notFound, unimplemented } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import { NAMED_RESOURCE_LISTING, type ListableResource, type ListEngineDeps } from "../core/list.js";
import { listResponse } from "../platform/list.js";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { accessOf, bindService } from "../core/service.js";
import { newChildUidp, newRootUidp } from "../core/uidp.js";
import { deleted, found, written } from "../platform/outcomes.js";
import { descriptionViolations, nameViolations, requireUid, throwIfViolations } from "../core/validate.js";
import type { IdentitiesRepository, IdentityFields, IdentityRow } from "./storage/identities.js";
import { loadRelationship, relationshipViolations, storeRelationship } from "./identity-relationships.js";

const MAX_COMPANY_LENGTH = 256;

export const identityListing: ListableResource = {
  ...NAMED_RESOURCE_LISTING,
  sortable: { ...NAMED_RESOURCE_LISTING.sortable, last_seen_time: { column: "last_seen_time", kind: "timestamp" } },
  aliases: { ...NAMED_RESOURCE_LISTING.aliases, last_seen_at: "last_seen_time" },
};

export function toIdentity(row: IdentityRow): Identity {
  return create(IdentitySchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    email: row.email,
    emailUnverified: row.email_unverified,
    company: row.company,
    lastSeenTime: timestampFromDate(row.last_seen_time),
    createTime: timestampFromDate(row.create_time),
    updateTime: timestampFromDate(row.update_time),
    relationship: loadRelationship(row.relationship_type, row.relationship),
  });
}

/**
 * Validates an identity's writable fields and turns them into columns. The identity's own fields
 * are checked first and reported alone, so `{}` is answered exactly like a nameless group.
 */
async function validated(identity: Identity, now: Date): Promise<IdentityFields> {
  const own = [...nameViolations(identity.name), ...descriptionViolations(identity.description)];
  if (identity.company.length > MAX_COMPANY_LENGTH)
    own.push({ field: "company", description: `company must be at most ${MAX_COMPANY_LENGTH} characters` });
  throwIfViolations(own);
  throwIfViolations(await relationshipViolations(identity.relationship, now));
  const stored = storeRelationship(identity.relationship);
  return {
    name: identity.name,
    description: identity.description,
    company: identity.company,
    relationship_type: stored.type,
    relationship: stored.json,
    issuer: stored.issuer,
    subject: stored.subject,
  };
}

export interface IdentitiesDeps {
  identities: IdentitiesRepository;
  lists: ListEngineDeps;
  now: () => Date;
}

export function identitiesService({ identities, lists, now }: IdentitiesDeps) {
  return bindService(IdentitiesService, {
    async createIdentity(req) {
      // An empty parent makes a root-level identity (a human's); the authorizer lets only the
      // platform operator act outside a group.
      if (req.parent !== "") requireUid("parent", req.parent);
      const at = now();
      const fields = await validated(req.identity ?? create(IdentitySchema), at);
      const uid = req.parent === "" ? newRootUidp() : newChildUidp(req.parent);
      return toIdentity(written(await identities.insert(uid, req.parent === "" ? null : req.parent, fields, at)));
    },

    async getIdentity(req, call) {
      requireUid("uid", req.uid);
      return toIdentity(found(await identities.get(req.uid, call.freshness), "identity", req.uid));
    },

    async listIdentities(req, call) {
      if (RelationshipType[req.relationshipType] === undefined) {
        throw invalidArgument({
          field: "relationship_type",
          description: `unknown relationship type ${req.relationshipType}`,
        });
      }
      const { items, ...page } = await listResponse({
        lists,
        resource: identityListing,
        schema: ListIdentitiesRequestSchema,
        request: req,
        query: identities.listQuery({ uidp: req.uidp, name: req.name, relationshipType: req.relationshipType }),
        toItems: (rows: IdentityRow[]) => rows.map(toIdentity),
        call,
      });
      return { identities: items, ...page };
    },

    async updateIdentity(req) {
      const patch = req.identity;
      if (!patch) throw invalidArgument({ field: "identity", description: "is required" });
      requireUid("identity.uid", patch.uid);
      const at = now();
      const result = await identities.update(
        patch.uid,
        async (current) =>
          validated(applyFieldMask(IdentitySchema, toIdentity(current), patch, req.updateMask).updated, at),
        at,
      );
      return toIdentity(written(result));
    },

    async deleteIdentity(req) {
      requireUid("uid", req.uid);
      return deleted(await identities.delete(req.uid), "identity", req.uid);
    },

    async updateIdentityMetadata() {
      // It edits the calling identity's own metadata (IdentityMetadata), which this server does not store.
      throw unimplemented("UpdateIdentityMetadata is not implemented by this server: it keeps no identity metadata");
    },

    async lookupIdentity(req, call) {
      const missing = [
        ...(req.issuer === "" ? [{ field: "issuer", description: "is required" }] : []),
        ...(req.subject === "" ? [{ field: "subject", description: "is required" }] : []),
      ];
      throwIfViolations(missing);
      // Unscoped: answer only about identities the caller may list (or itself).
      const access = accessOf(call);
      const row = await identities.lookup(req.issuer, req.subject);
      const visible =
        row && (row.uid === access.principal.uid || access.can([Capability.CAP_IAM_IDENTITY_LIST], row.uid));
      if (!row || !visible) throw notFound("identity", `${req.issuer} ${req.subject}`);
      return { uid: row.uid };
    },
  });
}
