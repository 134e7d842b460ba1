// chainguard.platform.oidc.SecurityTokenService: the token exchange (token-exchange.ts) as an RPC.
//
// The method has no iam option, so the authorizer lets every call through: the exchange itself
// is the authentication, of the bearer token this binding takes from the call.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { SecurityTokenService } from "../gen/platform/oidc/v1/oidc.platform_pb.js";
import { unauthenticated, unimplemented } from "../core/errors.js";
import { bindService } from "../core/service.js";
import { TokenExchange, type TokenExchangeDeps } from "./token-exchange.js";
import { bearerToken, principalKey, unverifiedClaims } from "./tokens.js";
import { isRefusal, type AuthEvents } from "./events.js";

export function securityTokenService(deps: TokenExchangeDeps, events?: AuthEvents) {
  const exchange = new TokenExchange(deps);
  return bindService(SecurityTokenService, {
    async exchange(req, call) {
      const token = bearerToken(call.headers);
      if (!token) {
        throw unauthenticated("a bearer token is required: the workload's OIDC token (Authorization: Bearer <token>)");
      }
      // For the failed-authentication limit: the identity asked for, else the token's own subject.
      call.claimedPrincipal = principalKey(req.identity || unverifiedClaims(token)?.sub);
      if (req.identityProvider !== "") {
        throw unimplemented(
          "exchanging a token through an identity provider is not supported by this server: " +
            "people sign in with `bulwark auth login` (the OAuth endpoints)",
        );
      }
      let issued;
      try {
        issued = await exchange.exchange(req, token);
      } catch (err) {
        throw events && isRefusal(err) ? await events.credentialsRefused(call, req.aud.join(" "), err) : err;
      }
      await events?.tokenExchanged(call, {
        identity: issued.subject,
        audience: issued.audience,
        act: issued.act,
        group: issued.group,
      });
      return { token: issued.token, expiry: timestampFromDate(issued.expiry) };
    },

    async exchangeRefreshToken() {
      throw unimplemented(
        "this server issues no refresh tokens: " +
          "exchange the workload's OIDC token (or an API token) again with Exchange",
      );
    },
  });
}
