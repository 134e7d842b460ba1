// The IAM module: groups, identities, roles, role bindings, identity providers, account
// associations and group invites (chainguard.platform.iam.v2beta1).
import {
  AccountAssociationSchema,
  AccountAssociationsService,
} from "../gen/chainguard/platform/iam/v2beta1/account_associations_pb.js";
import { GroupInviteSchema, GroupInvitesService } from "../gen/chainguard/platform/iam/v2beta1/group_invites_pb.js";
import { GroupSchema, GroupsService } from "../gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { IdentitySchema, IdentitiesService } from "../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import {
  IdentityProviderSchema,
  IdentityProvidersService,
} from "../gen/chainguard/platform/iam/v2beta1/identity_providers_pb.js";
import { RoleBindingSchema, RoleBindingsService } from "../gen/chainguard/platform/iam/v2beta1/role_bindings_pb.js";
import { RoleSchema, RolesService } from "../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { file_chainguard_platform_iam_v2_account_associations } from "../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import { file_chainguard_platform_iam_v2_group_invites } from "../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { file_chainguard_platform_iam_v2_groups } from "../gen/chainguard/platform/iam/v2/groups_pb.js";
import { file_chainguard_platform_iam_v2_identities } from "../gen/chainguard/platform/iam/v2/identities_pb.js";
import { file_chainguard_platform_iam_v2_identity_providers } from "../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { file_chainguard_platform_iam_v2_role_bindings } from "../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { file_chainguard_platform_iam_v2_roles } from "../gen/chainguard/platform/iam/v2/roles_pb.js";
import { SecretBox } from "../core/secret-box.js";
import type { ServiceBinding } from "../core/service.js";
import { GaTwins } from "../platform/ga-twins.js";
import { IAM_V1_SERVICES, iamV1Bindings } from "./v1/index.js";
import type { FeatureModule } from "../platform/module.js";
import type { Db } from "../storage/db.js";
import { accountAssociationListing, accountAssociationsService } from "./account-associations.js";
import { BUILTIN_ROLES } from "./builtin-roles.js";
import {
  groupDirectory,
  identityDirectory,
  inviteRedemption,
  roleBindingDirectory,
  signInIdentityProviders,
  type IamExports,
} from "./exports.js";
import { groupInviteListing, groupInvitesService } from "./group-invites.js";
import { groupListing, groupsService } from "./groups.js";
import { identitiesService, identityListing } from "./identities.js";
import { identityProviderListing, identityProvidersService } from "./identity-providers.js";
import * as m001 from "./migrations/001_groups.js";
import * as m002 from "./migrations/002_iam.js";
import * as m009 from "./migrations/009_authz_epoch.js";
import * as m010 from "./migrations/010_group_counts.js";
import * as m012 from "./migrations/012_sealed_server_secrets.js";
import { roleBindingListing, roleBindingsService } from "./role-bindings.js";
import { roleListing, rolesService } from "./roles.js";
import { AccountAssociationsRepository } from "./storage/account-associations.js";
import { GroupInvitesRepository } from "./storage/group-invites.js";
import { GroupsRepository } from "./storage/groups.js";
import { IdentitiesRepository } from "./storage/identities.js";
import { IdentityProvidersRepository } from "./storage/identity-providers.js";
import { RoleBindingsRepository } from "./storage/role-bindings.js";
import { RolesRepository } from "./storage/roles.js";

/** The name of the shared secret that encrypts IdPs' OIDC client secrets at rest. */
const IDP_CLIENT_SECRETS = "idp_client_secrets";

export function iamRepositories(db: Db) {
  return {
    groups: new GroupsRepository(db),
    roles: new RolesRepository(db),
    identities: new IdentitiesRepository(db),
    roleBindings: new RoleBindingsRepository(db),
    identityProviders: new IdentityProvidersRepository(db),
    accountAssociations: new AccountAssociationsRepository(db),
    groupInvites: new GroupInvitesRepository(db),
  };
}

export type IamRepositories = ReturnType<typeof iamRepositories>;

/** chainguard.platform.iam.v2beta1 */
const IAM_SERVICES = [
  GroupsService,
  RolesService,
  IdentitiesService,
  RoleBindingsService,
  IdentityProvidersService,
  AccountAssociationsService,
  GroupInvitesService,
];

/** chainguard.platform.iam.v2: the same services under the GA name, from the same handlers */
const GA = new GaTwins(IAM_SERVICES, [
  file_chainguard_platform_iam_v2_groups,
  file_chainguard_platform_iam_v2_roles,
  file_chainguard_platform_iam_v2_identities,
  file_chainguard_platform_iam_v2_role_bindings,
  file_chainguard_platform_iam_v2_identity_providers,
  file_chainguard_platform_iam_v2_account_associations,
  file_chainguard_platform_iam_v2_group_invites,
]);

/** the v2beta1 bindings, their GA twins and the v1 adapters onto them */
function v2AndV1(beta: ServiceBinding[]): ServiceBinding[] {
  return [...GA.bind(beta), ...iamV1Bindings(beta)];
}

export const iamModule: FeatureModule<IamRepositories, IamExports> = {
  name: "iam",
  // 001 also made the platform's server_secrets table, before modules existed (012 seals its rows).
  migrations: {
    "001_groups": m001,
    "002_iam": m002,
    "009_authz_epoch": m009,
    "010_group_counts": m010,
    "012_sealed_server_secrets": m012,
  },
  services: [...IAM_SERVICES, ...GA.services, ...IAM_V1_SERVICES],
  listings: GA.listings({
    [GroupSchema.typeName]: groupListing,
    [RoleSchema.typeName]: roleListing,
    [IdentitySchema.typeName]: identityListing,
    [RoleBindingSchema.typeName]: roleBindingListing,
    [IdentityProviderSchema.typeName]: identityProviderListing,
    [AccountAssociationSchema.typeName]: accountAssociationListing,
    [GroupInviteSchema.typeName]: groupInviteListing,
  }),
  repositories: iamRepositories,

  async start(ctx) {
    const repos = ctx.repositoriesOf(iamModule);
    await repos.roles.ensureBuiltins(BUILTIN_ROLES, ctx.now());
    const secrets = new SecretBox(await ctx.sharedSecret(IDP_CLIENT_SECRETS));
    const common = { lists: ctx.lists, now: () => ctx.now() };
    return {
      bindings: v2AndV1([
        groupsService({ groups: repos.groups, ...common }),
        rolesService({ roles: repos.roles, ...common }),
        identitiesService({ identities: repos.identities, ...common }),
        roleBindingsService({ roleBindings: repos.roleBindings, ...common }),
        identityProvidersService({ identityProviders: repos.identityProviders, secrets, ...common }),
        accountAssociationsService({ accountAssociations: repos.accountAssociations, ...common }),
        groupInvitesService({ invites: repos.groupInvites, ...common }),
      ]),
      // One field per line: what other features use of IAM (exports.ts).
      exports: {
        identities: identityDirectory(repos.identities),
        roleBindings: roleBindingDirectory(repos.roleBindings),
        identityProviders: signInIdentityProviders(repos.identityProviders, secrets),
        invites: inviteRedemption(repos.groupInvites, repos.roleBindings),
        groups: groupDirectory(repos.groups),
      },
    };
  },
};
