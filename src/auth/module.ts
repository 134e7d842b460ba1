// The auth module: the token issuer (ES256 keys, discovery, JWKS), the authorizer every request
// passes through, the token exchange (SecurityTokenService), "who am I" (Auth.Validate) and human
// sign-in through the browser or the device flow.
import { join } from "node:path";
import { Auth } from "../gen/platform/auth/v1/auth.platform_pb.js";
import { SecurityTokenService } from "../gen/platform/oidc/v1/oidc.platform_pb.js";
import { iamModule } from "../iam/api.js";
import type { FeatureModule } from "../platform/module.js";
import type { Db } from "../storage/db.js";
import { authService } from "./auth-service.js";
import { AuthEvents } from "./events.js";
import { TokenAuthorizer } from "./authorizer.js";
import { registerIssuerRoutes } from "./issuer-routes.js";
import { KeyManager, REFRESH_EVERY_MS } from "./keys.js";
import { registerLoginRoutes } from "./sign-in/routes.js";
import * as m003 from "./migrations/003_signing_keys.js";
import * as m004 from "./migrations/004_login_sessions.js";
import * as m005 from "./migrations/005_encrypted_signing_keys.js";
import * as m008 from "./migrations/008_issuer_urls.js";
import { recordPublicUrls } from "./recorded-urls.js";
import { LoginSessionsRepository } from "./storage/login-sessions.js";
import { securityTokenService } from "./sts.js";
import { TokenExchange } from "./token-exchange.js";
import { TokenIssuer } from "./tokens.js";
import { UpstreamIssuers } from "./upstream.js";

/** Where an embedded server keeps its current signing key for `bulwark admin token`. */
export function issuerKeyFile(dataDir: string): string {
  return join(dataDir, "issuer-signing-key.json");
}

export function authRepositories(db: Db) {
  return { loginSessions: new LoginSessionsRepository(db) };
}

export interface AuthExports {
  /** mints and verifies the server's tokens */
  issuer: TokenIssuer;
  /** every capability an identity (or the operator) holds on `uid` now; none once it no longer exists */
  capabilitiesOf(identityUid: string, uid: string): Promise<Set<number>>;
}

export const authModule: FeatureModule<ReturnType<typeof authRepositories>, AuthExports> = {
  name: "auth",
  migrations: {
    "003_signing_keys": m003,
    "004_login_sessions": m004,
    "005_encrypted_signing_keys": m005,
    "008_issuer_urls": m008,
  },
  services: [Auth, SecurityTokenService],
  listings: {},
  repositories: authRepositories,

  async start(ctx) {
    const iam = ctx.exportsOf(iamModule);
    const { loginSessions } = ctx.repositoriesOf(authModule);
    const keys = new KeyManager(ctx.db, undefined, ctx.dataDir && issuerKeyFile(ctx.dataDir));
    const sealed = await keys.sealPlaintextKeys();
    if (sealed) ctx.logger.info({ keys: sealed }, "sealed the signing keys an earlier version stored in plaintext");
    await keys.signingKey();
    const issuer = new TokenIssuer(keys, ctx.urls);
    const { allowInsecureIssuers, allowPrivateIssuerAddresses, defaultUpstream } = ctx.settings;
    const upstreamOptions = { allowInsecureIssuers, allowPrivateIssuerAddresses };
    const upstream = new UpstreamIssuers(upstreamOptions);
    const now = () => ctx.now();
    const exchangeDeps = { tokens: issuer, identities: iam.identities, upstream, logger: ctx.logger, now };
    const events = new AuthEvents(ctx.events);
    const authorizer = new TokenAuthorizer(
      issuer,
      iam.roleBindings,
      new TokenExchange(exchangeDeps),
      ctx.sharedGrants.map((g) => ({ at: g.group, capabilities: new Set(g.capabilities) })),
      events,
    );
    return {
      bindings: [
        authService({ tokens: issuer, identities: iam.identities, roleBindings: iam.roleBindings }),
        securityTokenService(exchangeDeps, events),
      ],
      routes(router) {
        registerIssuerRoutes(router, ctx.urls, keys);
        registerLoginRoutes(router, {
          issuer,
          upstream,
          upstreamOptions,
          defaultUpstream,
          sessions: loginSessions,
          identities: iam.identities,
          roleBindings: iam.roleBindings,
          identityProviders: iam.identityProviders,
          invites: iam.invites,
          logger: ctx.logger,
          events,
        });
      },
      authorizer,
      tasks: [
        {
          name: "signing key rotation and sign-in session pruning",
          everyMs: REFRESH_EVERY_MS,
          run: async () => {
            await keys.signingKey();
            await Promise.all([keys.prune(), loginSessions.prune(ctx.now())]);
          },
        },
      ],
      // `bulwark admin token` reads these to mint tokens this server accepts (and where to call it).
      listening: (urls, listenUrl) => recordPublicUrls(ctx.db, urls, ctx.dataDir, listenUrl),
      exports: { issuer, capabilitiesOf: (identityUid, uid) => authorizer.capabilitiesOf(identityUid, uid) },
    };
  },
};
