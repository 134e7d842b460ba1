// The token issuer's public face: OIDC discovery and the JWKS, so any OIDC library (jose's
// createRemoteJWKSet, openid-client's discovery) can verify our tokens. Unauthenticated by design.
import type { FastifyInstance } from "fastify";
import type { KeyManager } from "./keys.js";
import { ALGORITHM } from "./keys.js";
import type { AuthUrls } from "./tokens.js";

/** Paths below the issuer URL (which may itself have a path). */
function issuerPath(issuer: string, suffix: string): string {
  const base = new URL(issuer).pathname.replace(/\/$/, "");
  return `${base}${suffix}`;
}

export function registerIssuerRoutes(app: FastifyInstance, urls: AuthUrls, keys: KeyManager): void {
  // Routes are resolved per request because the issuer URL may only be known after listen.
  app.get("/.well-known/openid-configuration", async (request, reply) => {
    if (issuerPath(urls.issuer, "/.well-known/openid-configuration") !== request.url.split("?")[0]) return reply.callNotFound();
    const issuer = urls.issuer.replace(/\/$/, "");
    return reply.header("cache-control", "public, max-age=300").send({
      issuer: urls.issuer,
      jwks_uri: `${issuer}/.well-known/jwks.json`,
      token_endpoint: `${issuer}/sts/exchange`,
      response_types_supported: ["id_token"],
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: [ALGORITHM],
      token_endpoint_auth_methods_supported: ["none"],
      claims_supported: ["iss", "sub", "aud", "exp", "iat", "nbf", "jti"],
    });
  });
  app.get("/.well-known/jwks.json", async (_request, reply) => {
    const published = await keys.publishedKeys();
    return reply.header("cache-control", "public, max-age=60").send({ keys: published.map((k) => k.jwk) });
  });
}
