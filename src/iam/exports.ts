// What the IAM module offers the features built on it (auth: the token exchange, the authorizer,
// "who am I" and sign-in), as its module's `exports` (`ctx.exportsOf(iamModule)`): narrow views
// over IAM's repositories and rules. Another feature reaches IAM's data only through these and the
// types iam/api.ts exports, never through iam's storage/ or its tables.
import type { RawBuilder } from "kysely";
import type { Identity } from "../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import type { SecretBox } from "../core/secret-box.js";
import { loadRelationship } from "./identity-relationships.js";
import { acceptInvite, findUsableInvite, parseInviteCode, type VouchedEmails } from "./invites.js";
import type { GroupInviteRow, GroupInvitesRepository } from "./storage/group-invites.js";
import type { GroupRef, GroupsRepository } from "./storage/groups.js";
import type { IdentitiesRepository, IdentityRow } from "./storage/identities.js";
import type { IdentityProviderRow, IdentityProvidersRepository } from "./storage/identity-providers.js";
import {
  AUTHZ_EPOCH,
  type GrantsSnapshot,
  type NewBinding,
  type RoleBindingsRepository,
} from "./storage/role-bindings.js";

/** The IAM module's exports. */
export interface IamExports {
  /** whom a token names, whom a person signs in as */
  identities: IdentityDirectory;
  /** each identity's bindings and grants, and the authorization change counter */
  roleBindings: RoleBindingDirectory;
  /** organizations' identity providers, as people sign in through them */
  identityProviders: SignInIdentityProviders;
  /** group invites, as sign-in redeems them */
  invites: InviteRedemption;
  /** groups found by name or uid (the registry's repository names address groups so) */
  groups: GroupDirectory;
}

/** Identities, as tokens and sign-in use them. */
export interface IdentityDirectory {
  get(uid: string): Promise<IdentityRow | undefined>;
  /** records a successful token exchange */
  touch(uid: string, now: Date): Promise<void>;
  /** a person's root-level identity, made at the first sign-in and updated at the next ones */
  upsertHuman: IdentitiesRepository["upsertHuman"];
  /** how the identity may be assumed (its Identity.relationship, from the stored row) */
  relationshipOf(identity: Pick<IdentityRow, "relationship_type" | "relationship">): Identity["relationship"];
}

/** Role bindings, as the authorizer, "who am I" and sign-in use them. */
export interface RoleBindingDirectory {
  /** an identity's bindings with their group and role */
  bindingsOf: RoleBindingsRepository["bindingsOf"];
  /** the identity, its grants and the change counter, read in one statement (one snapshot) */
  grantsSnapshot(identityUid: string): Promise<GrantsSnapshot>;
  /** the authorization change counter now */
  authzEpoch(): Promise<string>;
  /**
   * The change counter as an expression a read selects beside its data (a Freshness probe,
   * core/service.ts): one statement tells whether grants cached at some value are still current.
   */
  readonly authzEpochProbe: RawBuilder<string>;
  /** binds unless the same binding exists already (an IdP's default role at sign-in) */
  ensure(binding: NewBinding, now: Date): Promise<void>;
}

/** Organizations' identity providers, as sign-in uses them. */
export interface SignInIdentityProviders {
  get(uid: string): Promise<IdentityProviderRow | undefined>;
  /** the IdP's OIDC client secret, opened; undefined for a public client */
  clientSecretOf(idp: IdentityProviderRow): Promise<string | undefined>;
}

/** Group invites, as sign-in redeems them (the rules: iam/invites.ts). */
export interface InviteRedemption {
  /** the invite a code names if it may be used at `now`; undefined for a malformed, wrong or spent code */
  findUsable(code: string, now: Date): Promise<GroupInviteRow | undefined>;
  /** accepts an invite for an identity, binding its role at its group; throws InviteRefused */
  accept(inviteUid: string, identityUid: string, vouched: VouchedEmails, at: Date): Promise<void>;
}

export type { GroupRef };

/** The group tree, as the registry's repository names address it. */
export interface GroupDirectory {
  /** Root groups whose uid or name is `segment`, by uid, at most two (a name may be shared: the caller decides). */
  rootsByUidOrName(segment: string): Promise<GroupRef[]>;
  /** The one child group of `parent` whose name or last uid segment is `segment`; undefined when none or several. */
  childByNameOrSegment(parent: string, segment: string): Promise<GroupRef | undefined>;
  /** The groups with these uids (any missing are left out). */
  byUids(uids: readonly string[]): Promise<GroupRef[]>;
  /** How many root groups carry each of `names` (names no root carries are absent). */
  rootNameCounts(names: readonly string[]): Promise<Map<string, number>>;
}

export function identityDirectory(identities: IdentitiesRepository): IdentityDirectory {
  return {
    get: (uid) => identities.get(uid),
    touch: (uid, now) => identities.touch(uid, now),
    upsertHuman: (human) => identities.upsertHuman(human),
    relationshipOf: (identity) => loadRelationship(identity.relationship_type, identity.relationship),
  };
}

export function roleBindingDirectory(roleBindings: RoleBindingsRepository): RoleBindingDirectory {
  return {
    bindingsOf: (identityUid) => roleBindings.bindingsOf(identityUid),
    grantsSnapshot: (identityUid) => roleBindings.grantsSnapshot(identityUid),
    authzEpoch: () => roleBindings.authzEpoch(),
    authzEpochProbe: AUTHZ_EPOCH,
    ensure: (binding, now) => roleBindings.ensure(binding, now),
  };
}

export function signInIdentityProviders(
  identityProviders: IdentityProvidersRepository,
  secrets: SecretBox,
): SignInIdentityProviders {
  return {
    get: (uid) => identityProviders.get(uid),
    clientSecretOf: async (idp) =>
      idp.client_secret_encrypted ? await secrets.decrypt(idp.client_secret_encrypted, idp.uid) : undefined,
  };
}

export function inviteRedemption(
  invites: GroupInvitesRepository,
  roleBindings: RoleBindingsRepository,
): InviteRedemption {
  return {
    async findUsable(code, now) {
      const parsed = parseInviteCode(code);
      return parsed && (await findUsableInvite(invites, parsed.keyId, parsed.secret, now));
    },
    accept: (inviteUid, identityUid, vouched, at) =>
      acceptInvite({ invites, roleBindings }, inviteUid, identityUid, vouched, at),
  };
}

export function groupDirectory(groups: GroupsRepository): GroupDirectory {
  return {
    rootsByUidOrName: (segment) => groups.rootsByUidOrName(segment),
    childByNameOrSegment: (parent, segment) => groups.childByNameOrSegment(parent, segment),
    byUids: (uids) => groups.byUids(uids),
    rootNameCounts: (names) => groups.rootNameCounts(names),
  };
}
