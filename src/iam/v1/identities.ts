// v1 Identities onto the v2beta1 IdentitiesService. v1 spells the static-keys relationship
// `static` (with `expiration`) and the timestamps `createdAt`/`updatedAt`/`lastSeen`.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  IdentityListSchema,
  IdentitySchema,
  Identities,
  type Identity,
  type Identity_ClaimMatch,
} from "../../gen/platform/iam/v1/identity.platform_pb.js";
import {
  IdentitiesService,
  type Identity as BetaIdentity,
} from "../../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import { bindService, type ServiceBinding } from "../../core/service.js";
import { REPLACE_ALL, delegateTo, listAll, oneOrNone } from "../../platform/v1.js";

export function toV1Identity(i: BetaIdentity): Identity {
  const r = i.relationship;
  return create(IdentitySchema, {
    id: i.uid,
    name: i.name,
    description: i.description,
    createdAt: i.createTime,
    updatedAt: i.updateTime,
    lastSeen: i.lastSeenTime,
    relationship:
      r.case === "claimMatch"
        ? { case: "claimMatch", value: claimMatchOf(r.value) }
        : r.case === "staticKeys"
          ? {
              case: "static",
              value: {
                issuer: r.value.issuer,
                subject: r.value.subject,
                issuerKeys: r.value.issuerKeys,
                expiration: r.value.expirationTime,
                audiences: r.value.audiences,
              },
            }
          : r.case === "awsIdentity"
            ? {
                case: "awsIdentity",
                value: { awsAccount: r.value.awsAccount, awsArn: r.value.awsArn, awsUserId: r.value.awsUserId },
              }
            : r.case === "servicePrincipal"
              ? { case: "servicePrincipal", value: r.value as number }
              : { case: undefined },
  });
}

/** v1 and v2beta1 spell a claim match alike (the same fields and numbers): copied field by field. */
function claimMatchOf(m: {
  iss: Identity_ClaimMatch["iss"];
  sub: Identity_ClaimMatch["sub"];
  aud: Identity_ClaimMatch["aud"];
  claims: Record<string, string>;
  claimPatterns: Record<string, string>;
}) {
  return { iss: m.iss, sub: m.sub, aud: m.aud, claims: { ...m.claims }, claimPatterns: { ...m.claimPatterns } };
}

function fromV1Identity(i: Identity | undefined) {
  const v = i ?? create(IdentitySchema);
  const r = v.relationship;
  return {
    uid: v.id,
    name: v.name,
    description: v.description,
    relationship:
      r.case === "claimMatch"
        ? { case: "claimMatch" as const, value: claimMatchOf(r.value) }
        : r.case === "static"
          ? {
              case: "staticKeys" as const,
              value: {
                issuer: r.value.issuer,
                subject: r.value.subject,
                issuerKeys: r.value.issuerKeys,
                expirationTime: r.value.expiration,
                audiences: r.value.audiences,
              },
            }
          : r.case === "awsIdentity"
            ? {
                case: "awsIdentity" as const,
                value: { awsAccount: r.value.awsAccount, awsArn: r.value.awsArn, awsUserId: r.value.awsUserId },
              }
            : r.case === "servicePrincipal"
              ? { case: "servicePrincipal" as const, value: r.value as number }
              : { case: undefined },
  };
}

export function v1IdentitiesService(beta: readonly ServiceBinding[]): ServiceBinding {
  const identities = delegateTo(IdentitiesService, beta);
  return bindService(Identities, {
    async create(req, call) {
      const identity = fromV1Identity(req.identity);
      return toV1Identity(await identities("createIdentity", { parent: req.parentId, identity }, call));
    },
    async update(req, call) {
      const identity = fromV1Identity(req);
      return toV1Identity(await identities("updateIdentity", { identity, updateMask: REPLACE_ALL }, call));
    },
    async list(req, call) {
      const items = req.id
        ? await oneOrNone(() => identities("getIdentity", { uid: req.id }, call))
        : await listAll(async (pageSize, pageToken) => {
            const page = await identities("listIdentities", { uidp: req.uidp, pageSize, pageToken }, call);
            return { items: page.identities, nextPageToken: page.nextPageToken };
          });
      return create(IdentityListSchema, { items: items.map(toV1Identity) });
    },
    async lookup(req, call) {
      const { uid } = await identities("lookupIdentity", { issuer: req.issuer, subject: req.subject }, call);
      try {
        return toV1Identity(await identities("getIdentity", { uid }, call));
      } catch (err) {
        // Looking oneself up needs no list capability; the uid is all v2 answers then too.
        const code = ConnectError.from(err).code;
        if (code === Code.PermissionDenied || code === Code.NotFound) return create(IdentitySchema, { id: uid });
        throw err;
      }
    },
    async delete(req, call) {
      return identities("deleteIdentity", { uid: req.id }, call);
    },
  });
}
