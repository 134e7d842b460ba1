// The token issuer's public face: OIDC discovery and the JWKS, so any OIDC library (jose's
// createRemoteJWKSet, openid-client's discovery) can verify our tokens. Unauthenticated by design.
import type { PlainRouter } from "../platform/routes.js";
import type { KeyManager } from "./keys.js";
import { ALGORITHM } from "./keys.js";
import type { AuthUrls } from "./tokens.js";

export function registerIssuerRoutes(router: PlainRouter, urls: AuthUrls, keys: KeyManager): void {
  // Served at the root; an issuer URL with a path is served under it too (app.ts pathPrefixes).
  // The document is built per request because the issuer URL may only be known after listen.
  router.route({
    method: "GET",
    url: "/.well-known/openid-configuration",
    access: "public",
    handler: async (_request, reply) => {
      const issuer = urls.issuer.replace(/\/$/, "");
      return reply.header("cache-control", "public, max-age=300").send({
        issuer: urls.issuer,
        jwks_uri: `${issuer}/.well-known/jwks.json`,
        // Human sign-in for the CLI (auth/sign-in/): authorization code + PKCE, and the device flow.
        authorization_endpoint: `${issuer}/oauth/authorize`,
        token_endpoint: `${issuer}/oauth/token`,
        device_authorization_endpoint: `${issuer}/oauth/device_authorization`,
        grant_types_supported: ["authorization_code", "urn:ietf:params:oauth:grant-type:device_code"],
        response_types_supported: ["code"],
        code_challenge_methods_supported: ["S256"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: [ALGORITHM],
        token_endpoint_auth_methods_supported: ["none"],
        claims_supported: ["iss", "sub", "aud", "exp", "iat", "nbf", "jti"],
      });
    },
  });
  router.route({
    method: "GET",
    url: "/.well-known/jwks.json",
    access: "public",
    handler: async (_request, reply) => {
      const published = await keys.publishedKeys();
      return reply.header("cache-control", "public, max-age=60").send({ keys: published.map((k) => k.jwk) });
    },
  });
}
