// Settings of the whole server that modules read: error domain, public URLs, upstream OIDC rules,
// the operator's shared grants. A feature's own settings live in the feature (its `moduleSettings`,
// platform/module.ts).

/** {auth_url}, {base_url} and {registry_host}: whom tokens come from and whom they are for. */
export interface PublicUrls {
  /** {auth_url}: iss of every token, and the OIDC discovery base */
  issuer: string;
  /** {base_url}: the API audience */
  apiAudience: string;
  /** {registry_host}: the registry audience */
  registryAudience: string;
}

/** An upstream OIDC provider people sign in with. */
export interface UpstreamProvider {
  issuer: string;
  clientId: string;
  /** absent: a public client using PKCE only */
  clientSecret?: string;
  scopes?: string[];
}

export interface PlatformSettings {
  /** ErrorInfo.domain of every error */
  errorDomain: string;
  /** accept plain-http upstream OIDC issuers on loopback hosts (tests and local use only) */
  allowInsecureIssuers?: boolean;
  /** accept upstream OIDC issuers (and their jwks_uri hosts) on private, loopback, link-local, ... addresses */
  allowPrivateIssuerAddresses?: boolean;
  /** the platform's default upstream OIDC provider for human sign-in (`bulwark auth login`) */
  defaultUpstream?: UpstreamProvider;
  /**
   * Grants every authenticated caller holds beside its own bindings (the operator's choice):
   * e.g. CAP_ADVISORIES_LIST on a group of public advisories. Modules add the ones their settings
   * make (FeatureModule.sharedGrants).
   */
  sharedGrants?: readonly SharedGrant[];
}

/** Capabilities on a group (and beneath it) that every authenticated caller holds. */
export interface SharedGrant {
  group: string;
  capabilities: readonly number[];
}

/** The configured URLs; blanks are filled once the server knows its own URL (fillPublicUrls). */
export function publicUrls(config: { issuerUrl?: string; apiUrl?: string; registryHost?: string }): PublicUrls {
  return {
    issuer: config.issuerUrl ?? "",
    apiAudience: config.apiUrl ?? "",
    registryAudience: config.registryHost ?? "",
  };
}

export function fillPublicUrls(urls: PublicUrls, serverUrl: string): void {
  if (!urls.issuer) urls.issuer = serverUrl;
  if (!urls.apiAudience) urls.apiAudience = serverUrl;
  if (!urls.registryAudience) urls.registryAudience = new URL(serverUrl).host;
}
