// The upstream OIDC providers people sign in with: the platform's default one (operator
// configuration) or an organization's IdentityProvider, and openid-client's view of each, whose
// every request goes through the SSRF-guarded fetch.
import * as oidc from "openid-client";
import type { SignInIdentityProviders } from "../../iam/api.js";
import type { UpstreamProvider } from "../../platform/config.js";
import type { UpstreamIssuers, UpstreamOptions } from "../upstream.js";
import { LoginError } from "./errors.js";

/** How long a discovered provider configuration is reused. */
const CONFIG_TTL_MS = 10 * 60 * 1000;

export interface SignInProvidersDeps {
  upstream: UpstreamIssuers;
  upstreamOptions: UpstreamOptions;
  /** the platform's default upstream (operator configuration) */
  defaultUpstream?: UpstreamProvider;
  identityProviders: SignInIdentityProviders;
}

/** An organization IdP's OIDC settings, as IdentityProvidersService stores them. */
interface IdpOidcSettings {
  issuer?: string;
  clientId?: string;
  additionalScopes?: string[];
}

export class SignInProviders {
  private readonly configs = new Map<string, { at: number; config: Promise<oidc.Configuration> }>();

  constructor(private readonly deps: SignInProvidersDeps) {}

  /** The provider a session signs in with: an organization's IdP, or the platform's default. */
  async providerOf(identityProviderUid: string | null): Promise<UpstreamProvider> {
    if (!identityProviderUid) {
      if (!this.deps.defaultUpstream) {
        throw new LoginError("server_error", "no sign-in provider is configured on this server");
      }
      return this.deps.defaultUpstream;
    }
    const idp = await this.deps.identityProviders.get(identityProviderUid);
    const settings = idp?.oidc as IdpOidcSettings | null | undefined;
    if (!idp || !settings?.issuer || !settings.clientId) {
      throw new LoginError("invalid_request", "unknown identity provider");
    }
    const secret = await this.deps.identityProviders.clientSecretOf(idp);
    return {
      issuer: settings.issuer,
      clientId: settings.clientId,
      clientSecret: secret,
      scopes: settings.additionalScopes,
    };
  }

  /** openid-client's view of an upstream, discovered through the guarded fetch and cached. */
  configOf(p: UpstreamProvider): Promise<oidc.Configuration> {
    const key = `${p.issuer}\0${p.clientId}\0${p.clientSecret ?? ""}`;
    const hit = this.configs.get(key);
    if (hit && Date.now() - hit.at < CONFIG_TTL_MS) return hit.config;
    const insecure = this.deps.upstreamOptions.allowInsecureIssuers && new URL(p.issuer).protocol === "http:";
    const config = oidc.discovery(
      new URL(p.issuer),
      p.clientId,
      p.clientSecret ? { client_secret: p.clientSecret } : undefined,
      p.clientSecret ? oidc.ClientSecretPost(p.clientSecret) : oidc.None(),
      {
        [oidc.customFetch]: this.deps.upstream.clientFetch as never,
        execute: insecure ? [oidc.allowInsecureRequests] : [],
      },
    );
    // A failed discovery is not cached: the next sign-in tries again.
    config.catch(() => this.configs.delete(key));
    this.configs.set(key, { at: Date.now(), config });
    return config;
  }
}
