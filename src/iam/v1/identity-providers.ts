// v1 IdentityProviders onto the v2beta1 IdentityProvidersService. The OIDC and SCIM settings and
// the SCIM RPCs' messages are the same on the wire in both generations (only `_id` reads `_uid`).
import { create } from "@bufbuild/protobuf";
import * as v1 from "../../gen/platform/iam/v1/identity_providers.platform_pb.js";
import * as beta from "../../gen/chainguard/platform/iam/v2beta1/identity_providers_pb.js";
import { bindService, type ServiceBinding } from "../../core/service.js";
import { REPLACE_ALL, delegateTo, listAll, oneOrNone, sameWire } from "../../platform/v1.js";

function toV1(p: beta.IdentityProvider): v1.IdentityProvider {
  return create(v1.IdentityProviderSchema, {
    id: p.uid,
    name: p.name,
    description: p.description,
    defaultRole: p.defaultRole,
    configuration:
      p.configuration.case === "oidc"
        ? {
            case: "oidc",
            value: sameWire(v1.IdentityProvider_OIDCSchema, beta.IdentityProvider_OIDCSchema, p.configuration.value),
          }
        : { case: undefined },
    scim: p.scim && sameWire(v1.IdentityProvider_SCIMSchema, beta.IdentityProvider_SCIMSchema, p.scim),
  });
}

function fromV1(p: v1.IdentityProvider | undefined) {
  const v = p ?? create(v1.IdentityProviderSchema);
  return {
    uid: v.id,
    name: v.name,
    description: v.description,
    defaultRole: v.defaultRole,
    configuration:
      v.configuration.case === "oidc"
        ? {
            case: "oidc" as const,
            value: sameWire(beta.IdentityProvider_OIDCSchema, v1.IdentityProvider_OIDCSchema, v.configuration.value),
          }
        : { case: undefined },
  };
}

export function v1IdentityProvidersService(bindings: readonly ServiceBinding[]): ServiceBinding {
  const idps = delegateTo(beta.IdentityProvidersService, bindings);
  return bindService(v1.IdentityProviders, {
    async create(req, call) {
      const identityProvider = fromV1(req.identityProvider);
      return toV1(await idps("createIdentityProvider", { parent: req.parentId, identityProvider }, call));
    },
    async update(req, call) {
      // A v1 PUT sends the client secret again or clears it, as every other field.
      return toV1(
        await idps("updateIdentityProvider", { identityProvider: fromV1(req), updateMask: REPLACE_ALL }, call),
      );
    },
    async list(req, call) {
      const items = req.id
        ? await oneOrNone(() => idps("getIdentityProvider", { uid: req.id }, call))
        : await listAll(async (pageSize, pageToken) => {
            const page = await idps(
              "listIdentityProviders",
              { uidp: req.uidp, name: req.name, pageSize, pageToken },
              call,
            );
            return { items: page.identityProviders, nextPageToken: page.nextPageToken };
          });
      const named = req.id && req.name ? items.filter((p) => p.name === req.name) : items;
      return create(v1.IdentityProviderListSchema, { items: named.map(toV1) });
    },
    async delete(req, call) {
      return idps("deleteIdentityProvider", { uid: req.id }, call);
    },
    async generateScimToken(req, call) {
      const answer = await idps(
        "generateScimToken",
        sameWire(beta.GenerateScimTokenRequestSchema, v1.GenerateScimTokenRequestSchema, req),
        call,
      );
      return sameWire(v1.GenerateScimTokenResponseSchema, beta.GenerateScimTokenResponseSchema, answer);
    },
    async regenerateScimToken(req, call) {
      const answer = await idps(
        "regenerateScimToken",
        sameWire(beta.RegenerateScimTokenRequestSchema, v1.RegenerateScimTokenRequestSchema, req),
        call,
      );
      return sameWire(v1.RegenerateScimTokenResponseSchema, beta.RegenerateScimTokenResponseSchema, answer);
    },
    async revokeScimToken(req, call) {
      const answer = await idps(
        "revokeScimToken",
        sameWire(beta.RevokeScimTokenRequestSchema, v1.RevokeScimTokenRequestSchema, req),
        call,
      );
      return sameWire(v1.RevokeScimTokenResponseSchema, beta.RevokeScimTokenResponseSchema, answer);
    },
    async setScimEnabled(req, call) {
      const answer = await idps(
        "setScimEnabled",
        sameWire(beta.SetScimEnabledRequestSchema, v1.SetScimEnabledRequestSchema, req),
        call,
      );
      return sameWire(v1.SetScimEnabledResponseSchema, beta.SetScimEnabledResponseSchema, answer);
    },
  });
}
