// IdentityProvidersService: OIDC identity providers under a group.
//
// - The client secret is write-only: it is stored only encrypted (core/secret-box.ts, keyed per
//   install, bound to the IdP's uid) and no response ever carries it, not even Create's.
// - default_role must name a role visible from the IdP's group (a built-in role, or a custom role
//   of the group or one of its ancestors); the database enforces existence and visibility, and a
//   missing or invisible role is NOT_FOUND "role".
// - correlation_rule is immutable: resending the stored value is fine, changing it is rejected.
// - SCIM (Generate/Regenerate/RevokeScimToken, SetScimEnabled) is not implemented: those RPCs have
//   no handler, so both transports answer UNIMPLEMENTED; `scim` is never set on responses.
import { clone, create, fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  IdentityProviderSchema,
  IdentityProvider_OIDCSchema,
  IdentityProvider_OIDC_CorrelationRule,
  IdentityProvidersService,
  ListIdentityProvidersRequestSchema,
  type IdentityProvider,
  type IdentityProvider_OIDC,
} from "../gen/chainguard/platform/iam/v2beta1/identity_providers_pb.js";
import { invalidArgument, type FieldViolation } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import { NAMED_RESOURCE_LISTING, type ListableResource, type ListEngineDeps } from "../core/list.js";
import { listResponse } from "../platform/list.js";
import type { SecretBox } from "../core/secret-box.js";
import { bindService } from "../core/service.js";
import { newChildUidp } from "../core/uidp.js";
import { deleted, found, written } from "../platform/outcomes.js";
import { descriptionViolations, nameViolations, requireUid, throwIfViolations } from "../core/validate.js";
import type {
  IdentityProviderFields,
  IdentityProviderRow,
  IdentityProvidersRepository,
} from "./storage/identity-providers.js";

export const identityProviderListing: ListableResource = NAMED_RESOURCE_LISTING;

/** The API view of a row: never the client secret, never `scim`. */
export function toIdentityProvider(row: IdentityProviderRow): IdentityProvider {
  return create(IdentityProviderSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    defaultRole: row.default_role_uid,
    configuration:
      row.oidc === null
        ? { case: undefined }
        : {
            case: "oidc",
            value: fromJson(IdentityProvider_OIDCSchema, row.oidc as JsonValue, { ignoreUnknownFields: true }),
          },
    createTime: timestampFromDate(row.create_time),
    updateTime: timestampFromDate(row.update_time),
  });
}

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);
const CONTROL_OR_SPACE = /[\s\u0000-\u001f\u007f]/;
// RFC 6749 §3.3 scope-token: %x21 / %x23-5B / %x5D-7E
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/**
 * The issuer is compared byte for byte with tokens' `iss`, so it is stored as given. OIDC
 * Discovery §3: scheme, host, optional port and path; no query or fragment. https only, except
 * http on a loopback host (local development).
 */
function issuerViolations(issuer: string): FieldViolation[] {
  const field = "oidc.issuer";
  if (issuer === "") return [{ field, description: "is required" }];
  if (CONTROL_OR_SPACE.test(issuer)) return [{ field, description: "must not contain spaces or control characters" }];
  let url: URL;
  try {
    if (!/^https?:\/\//i.test(issuer)) throw new Error("not absolute");
    url = new URL(issuer);
  } catch {
    return [{ field, description: "must be an absolute https URL" }];
  }
  const v: FieldViolation[] = [];
  if (url.protocol !== "https:" && !(url.protocol === "http:" && LOOPBACK_HOSTS.has(url.hostname))) {
    v.push({ field, description: "must use https (http is allowed only for 127.0.0.1, localhost and [::1])" });
  }
  if (issuer.includes("#")) v.push({ field, description: "must not have a fragment" });
  if (issuer.includes("?")) v.push({ field, description: "must not have a query" });
  if (url.username !== "" || url.password !== "") v.push({ field, description: "must not contain credentials" });
  return v;
}

function oidcViolations(oidc: IdentityProvider_OIDC | undefined): FieldViolation[] {
  if (!oidc) return [{ field: "oidc", description: "is required (OIDC is the only supported configuration)" }];
  const v = issuerViolations(oidc.issuer);
  if (oidc.clientId.trim() === "") v.push({ field: "oidc.client_id", description: "is required" });
  oidc.additionalScopes.forEach((scope, i) => {
    if (!SCOPE_TOKEN.test(scope)) {
      v.push({ field: `oidc.additional_scopes[${i}]`, description: "must be a non-empty scope token without spaces" });
    }
  });
  if (IdentityProvider_OIDC_CorrelationRule[oidc.correlationRule] === undefined) {
    v.push({ field: "oidc.correlation_rule", description: `unknown CorrelationRule ${oidc.correlationRule}` });
  }
  return v;
}

function oidcOf(idp: IdentityProvider): IdentityProvider_OIDC | undefined {
  return idp.configuration.case === "oidc" ? idp.configuration.value : undefined;
}

/** Validates an IdP as it would be stored; returns its columns except the secret. */
function validated(
  idp: IdentityProvider,
  oidc: IdentityProvider_OIDC | undefined,
): Omit<IdentityProviderFields, "clientSecretEncrypted"> & { oidc: JsonValue } {
  throwIfViolations([...nameViolations(idp.name), ...descriptionViolations(idp.description), ...oidcViolations(oidc)]);
  requireUid("default_role", idp.defaultRole);
  // Stored without the secret: that lives only in client_secret_encrypted.
  const stored = clone(IdentityProvider_OIDCSchema, oidc!);
  stored.clientSecret = "";
  return {
    name: idp.name,
    description: idp.description,
    defaultRoleUid: idp.defaultRole,
    oidc: toJson(IdentityProvider_OIDCSchema, stored),
  };
}

export interface IdentityProvidersDeps {
  identityProviders: IdentityProvidersRepository;
  /** encrypts client secrets at rest */
  secrets: SecretBox;
  lists: ListEngineDeps;
  now: () => Date;
}

export function identityProvidersService({ identityProviders, secrets, lists, now }: IdentityProvidersDeps) {
  return bindService(IdentityProvidersService, {
    async createIdentityProvider(req) {
      requireUid("parent", req.parent);
      const idp = req.identityProvider ?? create(IdentityProviderSchema);
      const oidc = oidcOf(idp);
      const fields = validated(idp, oidc);
      const uid = newChildUidp(req.parent);
      const secret = oidc!.clientSecret === "" ? null : await secrets.encrypt(oidc!.clientSecret, uid);
      const result = await identityProviders.insert(
        uid,
        req.parent,
        { ...fields, clientSecretEncrypted: secret },
        now(),
      );
      return toIdentityProvider(written(result));
    },

    async getIdentityProvider(req, call) {
      requireUid("uid", req.uid);
      return toIdentityProvider(
        found(await identityProviders.get(req.uid, call.freshness), "identity provider", req.uid),
      );
    },

    async listIdentityProviders(req, call) {
      const { items, ...page } = await listResponse({
        lists,
        resource: identityProviderListing,
        schema: ListIdentityProvidersRequestSchema,
        request: req,
        query: identityProviders.listQuery({ uidp: req.uidp, name: req.name }),
        toItems: (rows: IdentityProviderRow[]) => rows.map(toIdentityProvider),
        call,
      });
      return { identityProviders: items, ...page };
    },

    async updateIdentityProvider(req) {
      const patch = req.identityProvider;
      if (!patch) throw invalidArgument({ field: "identity_provider", description: "is required" });
      requireUid("identity_provider.uid", patch.uid);
      const result = await identityProviders.update(
        patch.uid,
        async (current) => {
          // applyFieldMask also refuses a change of oidc.correlation_rule (IMMUTABLE).
          const { updated } = applyFieldMask(
            IdentityProviderSchema,
            toIdentityProvider(current),
            patch,
            req.updateMask,
          );
          const oidc = oidcOf(updated);
          const fields = validated(updated, oidc);
          // The secret is write-only, so a client that read the IdP and sends its oidc block back
          // sends an empty client_secret: empty keeps the stored secret, non-empty replaces it.
          // (It cannot be cleared through this API; delete and re-create the IdP for that.)
          const secret =
            oidc!.clientSecret === ""
              ? current.client_secret_encrypted
              : await secrets.encrypt(oidc!.clientSecret, current.uid);
          return { ...fields, clientSecretEncrypted: secret };
        },
        now(),
      );
      return toIdentityProvider(written(result));
    },

    async deleteIdentityProvider(req) {
      requireUid("uid", req.uid);
      return deleted(await identityProviders.delete(req.uid), "identity provider", req.uid);
    },
  });
}
