// chainguard.platform.auth.Auth: "who am I" for a token (Validate). Register, Delete and
// GetHeadlessSession have no handler and answer UNIMPLEMENTED: people sign in through the OAuth
// endpoints instead (auth/sign-in/).
import { create, getOption } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  Auth,
  WhoAmISchema,
  WhoAmI_CapabilitySchema,
  type WhoAmI_Capability,
} from "../gen/platform/auth/v1/auth.platform_pb.js";
import { Capability, CapabilitySchema, name as capabilityName } from "../gen/capabilities/capabilities_pb.js";
import { accessOf, bindService } from "../core/service.js";
import { unauthenticated } from "../core/errors.js";
import type { IdentityDirectory, RoleBindingDirectory } from "../iam/api.js";
import type { TokenIssuer } from "./tokens.js";

/** "groups.list" for CAP_IAM_GROUPS_LIST: the capability's string name in v1 APIs. */
export function capabilityString(cap: number): string {
  const value = CapabilitySchema.values.find((v) => v.number === cap);
  return (value && getOption(value, capabilityName)) || Capability[cap] || String(cap);
}

export interface AuthServiceDeps {
  tokens: TokenIssuer;
  identities: IdentityDirectory;
  roleBindings: RoleBindingDirectory;
}

export function authService({ tokens, identities, roleBindings }: AuthServiceDeps) {
  return bindService(Auth, {
    async validate(_req, call) {
      const access = accessOf(call);
      const token = call.token;
      if (!token) throw unauthenticated("a bearer token is required");
      const identity = access.principal.kind === "operator" ? undefined : await identities.get(access.principal.uid);
      const bindings = identity ? await roleBindings.bindingsOf(identity.uid) : [];
      const capabilities: WhoAmI_Capability[] = bindings.map((b) => {
        const caps = b.capabilities.map(capabilityString);
        return create(WhoAmI_CapabilitySchema, {
          group: { id: b.group_uid, name: b.group_name, description: b.group_description },
          role: { id: b.role_uid, name: b.role_name, description: b.role_description, capabilities: caps },
          capabilities: caps,
        });
      });
      return create(WhoAmISchema, {
        issuer: tokens.urls.issuer,
        subject: token.subject,
        audience: token.audience,
        expiry: timestampFromDate(token.expiry),
        issuedAt: timestampFromDate(token.issuedAt),
        capabilities,
        email: identity?.email ?? "",
      });
    },
  });
}
