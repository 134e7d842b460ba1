// Resource factories over REST, for suites that need groups, roles, identities, bindings, IdPs,
// account associations or invites to exist. Each asserts a 200 and returns the server's JSON.
import { ok } from "./assertions.js";
import type { restClient } from "./http.js";

export type Api = ReturnType<typeof restClient>;
// REST JSON as the server returned it.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = Record<string, any>;

/** The hosted API's well-known uid of the built-in viewer role. */
export const VIEWER_ROLE_UID = "63921b2c44617e3f2603851537be0123af4a57d7";

/** An organization (parent undefined) or a group under `parent`. */
export async function createGroup(api: Api, parent: string | undefined, name: string, description = ""): Promise<Json> {
  return ok(
    await api.post(parent ? `/iam/v2beta1/groups/${parent}` : "/iam/v2beta1/groups", { name, description }),
    `create group ${name}`,
  );
}

export async function createRole(
  api: Api,
  parent: string,
  name: string,
  capabilities: (string | number)[] = ["CAP_IAM_GROUPS_LIST"],
  description = "",
): Promise<Json> {
  return ok(await api.post(`/iam/v2beta1/roles/${parent}`, { name, description, capabilities }), `create role ${name}`);
}

/** An identity assumable by an OIDC token with exactly this issuer and subject. */
export async function createIdentity(
  api: Api,
  parent: string,
  name: string,
  subject: string,
  issuer = "https://issuer.example",
): Promise<Json> {
  return ok(
    await api.post(`/iam/v2beta1/identities/${parent}`, { name, claimMatch: { issuer, subject } }),
    `create identity ${name}`,
  );
}

export async function createRoleBinding(
  api: Api,
  parent: string,
  identityUid: string,
  roleUid: string = VIEWER_ROLE_UID,
): Promise<Json> {
  return ok(
    await api.post(`/iam/v2beta1/roleBindings/${parent}`, { identityUid, roleUid }),
    `bind ${identityUid} to ${roleUid}`,
  );
}

export async function createIdentityProvider(
  api: Api,
  parent: string,
  name: string,
  defaultRole: string = VIEWER_ROLE_UID,
): Promise<Json> {
  const body = { name, defaultRole, oidc: { issuer: "https://idp.example", clientId: "x", clientSecret: "y" } };
  return ok(await api.post(`/iam/v2beta1/identityProviders/${parent}`, body), `create identity provider ${name}`);
}

/** A group's (only) account association; its uid is the group's. */
export async function createAccountAssociation(
  api: Api,
  group: string,
  name: string,
  account = "123456789012",
): Promise<Json> {
  return ok(
    await api.post(`/iam/v2beta1/accountAssociations/${group}`, { name, amazon: { account } }),
    `create account association ${name}`,
  );
}

export async function createGroupInvite(
  api: Api,
  parent: string,
  ttlSeconds = 3600,
  roleUid: string = VIEWER_ROLE_UID,
): Promise<Json> {
  return ok(
    await api.post(`/iam/v2beta1/groupInvites/${parent}`, { roleUid, ttl: `${ttlSeconds}s` }),
    "create group invite",
  );
}

/** An event subscription under `parent` (published API: every event type). */
export async function createSubscription(api: Api, parent: string, sink: string): Promise<Json> {
  return ok(await api.post(`/events/v2beta1/subscriptions/${parent}`, { sink }), `create subscription ${sink}`);
}

/** An event subscription under `parent` that receives only `types` (the filters extension). */
export async function createFilteredSubscription(
  api: Api,
  parent: string,
  sink: string,
  types: string[],
): Promise<Json> {
  return ok(
    await api.post(`/bulwark/events/v1/subscriptions/${parent}`, { sink, types }),
    `create filtered subscription ${sink}`,
  );
}
