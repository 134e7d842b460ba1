// Principals for the authentication and authorization suites: tokens that must be refused
// (expired, not yet valid, wrong issuer or audience), workload identities with role bindings,
// an independent model of what a set of bindings grants (from the reference's built-in
// capability sets, not from src/). The AIP-193 error assertions are in assertions.ts.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { KeyManager } from "../../src/auth/keys.js";
import { TokenIssuer, type AuthUrls, type MintRequest } from "../../src/auth/tokens.js";
import { createIdentity, createRoleBinding, type Api, type Json } from "./fixtures.js";
import type { TestServer } from "./server.js";
import { REPO_ROOT } from "./paths.js";

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;

const ROOT = REPO_ROOT;
const REFERENCE = JSON.parse(readFileSync(join(ROOT, "reference", "api-surface.json"), "utf8")) as {
  builtinRoles: Record<string, { expanded: string[] }>;
};

/** The built-in roles by name, with the reference's capability-set name each one is. */
export const BUILTIN_SETS: Record<string, string> = {
  viewer: "ViewerCaps",
  editor: "EditorCaps",
  owner: "OwnerCaps",
  "registry.pull": "RegistryPullCaps",
  "registry.push": "RegistryPushCaps",
  "registry.pull_token_creator": "RegistryPullTokenCreatorCaps",
};

/** A built-in role's capabilities (names), as the reference defines them. */
export function builtinCaps(role: string): ReadonlySet<string> {
  const set = BUILTIN_SETS[role];
  assert.ok(set, `no built-in role ${role}`);
  const expanded = REFERENCE.builtinRoles[set]?.expanded;
  assert.ok(expanded, `reference has no capability set ${set}`);
  return new Set(expanded);
}

// ---------------------------------------------------------------------------------------------
// What bindings grant: a binding at G grants its role's capabilities on G and everything beneath.

export interface ModelBinding {
  /** the group the binding is at */
  at: string;
  /** capability names of its role */
  caps: ReadonlySet<string>;
}

export function isAncestorOrSelf(ancestor: string, uid: string): boolean {
  return uid === ancestor || uid.startsWith(`${ancestor}/`);
}

/** Every capability the bindings grant on `uid`. */
export function capsAt(bindings: readonly ModelBinding[], uid: string): Set<string> {
  const out = new Set<string>();
  for (const b of bindings) if (isAncestorOrSelf(b.at, uid)) for (const c of b.caps) out.add(c);
  return out;
}

/** Whether any of the bindings is at `uid` or above it. */
export function covers(bindings: readonly ModelBinding[], uid: string): boolean {
  return bindings.some((b) => isAncestorOrSelf(b.at, uid));
}

export function holdsAll(bindings: readonly ModelBinding[], uid: string, caps: readonly string[]): boolean {
  const held = capsAt(bindings, uid);
  return caps.every((c) => held.has(c));
}

/** Whether the bindings grant all of `caps` anywhere (what built-in roles' visibility needs). */
export function holdsAnywhere(bindings: readonly ModelBinding[], caps: readonly string[]): boolean {
  return bindings.some((b) => holdsAll(bindings, b.at, caps));
}

// ---------------------------------------------------------------------------------------------
// Tokens.

/** An issuer on the server's database and URLs whose clock reads `now()`. */
export function issuerAt(server: TestServer, now: () => Date, urls: Partial<AuthUrls> = {}): TokenIssuer {
  return new TokenIssuer(new KeyManager(server.db), { ...server.tokens.urls, ...urls }, now);
}

function apiToken(
  issuer: TokenIssuer,
  server: TestServer,
  subject: string,
  options: Partial<MintRequest> = {},
): Promise<string> {
  return issuer.mint({ subject, audience: [server.tokens.urls.apiAudience], ...options }).then((t) => t.token);
}

/** Minted two hours ago: expired an hour ago. */
export function expiredToken(server: TestServer, subject: string): Promise<string> {
  return apiToken(
    issuerAt(server, () => new Date(Date.now() - 2 * HOUR)),
    server,
    subject,
  );
}

/** Minted by a clock ten minutes ahead: nbf (and iat) in the future. */
export function notYetValidToken(server: TestServer, subject: string): Promise<string> {
  return apiToken(
    issuerAt(server, () => new Date(Date.now() + 10 * MINUTE)),
    server,
    subject,
  );
}

/** Signed with the server's key, but naming another issuer. */
export function wrongIssuerToken(server: TestServer, subject: string): Promise<string> {
  return apiToken(
    issuerAt(server, () => new Date(), { issuer: "https://issuer.other.example" }),
    server,
    subject,
  );
}

export function wrongAudienceToken(server: TestServer, subject: string): Promise<string> {
  return server.tokenFor(subject, { audience: ["https://other.example"] });
}

// ---------------------------------------------------------------------------------------------
// Workload identities.

let serial = 0;

export interface Workload {
  uid: string;
  token: string;
  /** what its bindings grant, for the model */
  bindings: ModelBinding[];
}

/**
 * A claim-match identity created at `parent` (by the operator's `api`), bound to each role at
 * its group, with an API token.
 */
export async function workload(
  server: TestServer,
  api: Api,
  parent: string,
  name: string,
  grants: { at: string; role: Json }[] = [],
): Promise<Workload> {
  const identity = await createIdentity(api, parent, name, `workload-${++serial}-${Date.now()}`);
  const bindings: ModelBinding[] = [];
  for (const g of grants) {
    await createRoleBinding(api, g.at, identity.uid, g.role.uid);
    bindings.push({ at: g.at, caps: new Set(g.role.capabilities as string[]) });
  }
  return { uid: identity.uid, token: await server.tokenFor(identity.uid), bindings };
}

/** An identity with static keys, as `auth pull-token create` makes one, and its key to sign pull tokens with. */
export interface PullTokenIdentity {
  uid: string;
  /** a pull token: a JWT signed by the identity's key, for the registry (valid an hour) */
  pullToken(): Promise<string>;
}

/** A static-keys identity at `parent` whose tokens are for `audience` (the registry host). */
export async function pullTokenIdentity(
  api: Api,
  parent: string,
  name: string,
  audience: string,
): Promise<PullTokenIdentity> {
  const { publicKey, privateKey } = await generateKeyPair("RS256");
  const kid = `${name}-key`;
  const issuer = `https://pull-tokens.example/${name}`;
  const subject = `pull-token-${name}`;
  const created = await api.post(`/iam/v2beta1/identities/${parent}`, {
    name,
    staticKeys: {
      issuer,
      subject,
      issuerKeys: JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" }] }),
      audiences: [audience],
      expirationTime: new Date(Date.now() + 30 * 24 * HOUR).toISOString(),
    },
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  return {
    uid: created.body.uid as string,
    pullToken: () => {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({})
        .setProtectedHeader({ alg: "RS256", kid })
        .setIssuer(issuer)
        .setSubject(subject)
        .setAudience(audience)
        .setIssuedAt(now)
        .setExpirationTime(now + 3600)
        .sign(privateKey);
    },
  };
}
