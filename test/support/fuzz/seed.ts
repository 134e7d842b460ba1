// A little real data for the fuzzer to hit: an organization with a team, a custom role, an
// identity bound to the viewer role, an identity provider, an account association and an invite,
// plus page tokens from real List calls. Everything that names an issuer names a loopback URL, so
// nothing the fuzzer then does can make the server fetch from outside the machine.
import type { Api, Json } from "../fixtures.js";
import {
  createAccountAssociation,
  createGroup,
  createGroupInvite,
  createIdentity,
  createRole,
  createRoleBinding,
} from "../fixtures.js";
import type { TestServer } from "../server.js";
import type { Plausible } from "./arbitraries.js";

/** An issuer nobody listens on (connection refused at once), on loopback. */
export const DEAD_ISSUER = "http://127.0.0.1:9/fuzz-issuer";

export interface Seeded {
  org: Json;
  team: Json;
  identity: Json;
  /** an API token of the seeded identity (viewer on the org) */
  identityToken: string;
  plausible: Plausible;
}

let serial = 0;

export async function seed(server: TestServer, op: Api): Promise<Seeded> {
  const n = ++serial;
  const org = await createGroup(op, undefined, `fuzz org ${n}`, "seeded for the fuzz suite");
  const team = await createGroup(op, org.uid, `fuzz team ${n}`);
  const role = await createRole(op, org.uid, `fuzz-role-${n}`, ["CAP_IAM_GROUPS_LIST"]);
  const identity = await createIdentity(op, org.uid, `fuzz robot ${n}`, `fuzz-subject-${n}`, server.url);
  const binding = await createRoleBinding(op, org.uid, identity.uid);
  const idp = await op.post(`/iam/v2beta1/identityProviders/${org.uid}`, {
    name: `fuzz idp ${n}`,
    defaultRole: role.uid,
    oidc: { issuer: DEAD_ISSUER, clientId: "x", clientSecret: "y" },
  });
  const aa = await createAccountAssociation(op, team.uid, `fuzz aa ${n}`);
  const invite = await createGroupInvite(op, org.uid);
  const pageTokens: string[] = [];
  for (const list of ["groups", "roles", "identities", "roleBindings"]) {
    const res = await op.get(`/iam/v2beta1/${list}?page_size=1`);
    if (typeof res.body?.nextPageToken === "string" && res.body.nextPageToken) pageTokens.push(res.body.nextPageToken);
  }
  const uids = [org.uid, team.uid, role.uid, identity.uid, binding.uid, aa.uid, invite.uid, idp.body?.uid].filter(
    (u): u is string => typeof u === "string" && u !== "",
  );
  return {
    org,
    team,
    identity,
    identityToken: await server.tokenFor(identity.uid),
    plausible: {
      uids,
      names: [org.name, team.name, role.name, identity.name, "viewer", "owner", "editor"],
      pageTokens,
      issuers: [server.url, `${server.url}/`, DEAD_ISSUER, server.tokens.urls.apiAudience],
      baseline: { group: org.uid, identity: identity.uid, role: role.uid, issuer: server.url },
      capabilities: ["CAP_IAM_GROUPS_LIST", "CAP_IAM_GROUPS_CREATE", "CAP_UNKNOWN", "iam.groups.list", "*"],
      extra: [
        JSON.stringify({ keys: [] }),
        "63921b2c44617e3f2603851537be0123af4a57d7",
        `${org.uid}/${team.uid.split("/").pop()}`,
        "true",
        "1",
        "0",
        "-1",
      ],
    },
  };
}
