// The v1 IAM interface (package chainguard.platform.iam): adapters onto the v2beta1 services.
import { GroupAccountAssociations } from "../../gen/platform/iam/v1/account_associations.platform_pb.js";
import { Groups } from "../../gen/platform/iam/v1/group.platform_pb.js";
import { GroupInvites } from "../../gen/platform/iam/v1/group_invites.platform_pb.js";
import { Identities } from "../../gen/platform/iam/v1/identity.platform_pb.js";
import { IdentityProviders } from "../../gen/platform/iam/v1/identity_providers.platform_pb.js";
import { RoleBindings } from "../../gen/platform/iam/v1/role_binding.platform_pb.js";
import { Roles } from "../../gen/platform/iam/v1/role.platform_pb.js";
import type { ServiceBinding } from "../../core/service.js";
import { v1AccountAssociationsService } from "./account-associations.js";
import { v1GroupInvitesService } from "./group-invites.js";
import { v1GroupsService } from "./groups.js";
import { v1IdentitiesService } from "./identities.js";
import { v1IdentityProvidersService } from "./identity-providers.js";
import { v1RoleBindingsService } from "./role-bindings.js";
import { v1RolesService } from "./roles.js";

export const IAM_V1_SERVICES = [
  Groups,
  Identities,
  Roles,
  RoleBindings,
  IdentityProviders,
  GroupAccountAssociations,
  GroupInvites,
];

/** the v1 bindings over the module's v2beta1 bindings */
export function iamV1Bindings(beta: readonly ServiceBinding[]): ServiceBinding[] {
  return [
    v1GroupsService(beta),
    v1IdentitiesService(beta),
    v1RolesService(beta),
    v1RoleBindingsService(beta),
    v1IdentityProvidersService(beta),
    v1AccountAssociationsService(beta),
    v1GroupInvitesService(beta),
  ];
}
