// Composition root: database, migrations, services, transports, listening socket.
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { pino, type Logger } from "pino";
import { PageTokenCodec, loadSharedSecret } from "../core/page-tokens.js";
import { SecretBox } from "../core/secret-box.js";
import type { ServiceBinding } from "../core/service.js";
import { authService } from "../auth/auth-service.js";
import { TokenAuthorizer } from "../auth/authorizer.js";
import { registerLoginRoutes, type UpstreamProvider } from "../auth/login.js";
import { registerIssuerRoutes } from "../auth/issuer-routes.js";
import { KeyManager, REFRESH_EVERY_MS } from "../auth/keys.js";
import { securityTokenService } from "../auth/sts.js";
import { TokenIssuer, type AuthUrls } from "../auth/tokens.js";
import { UpstreamIssuers, type UpstreamOptions } from "../auth/upstream.js";
import { accountAssociationsService } from "../iam/account-associations.js";
import { BUILTIN_ROLES } from "../iam/builtin-roles.js";
import { groupInvitesService } from "../iam/group-invites.js";
import { groupsService } from "../iam/groups.js";
import { identitiesService } from "../iam/identities.js";
import { identityProvidersService } from "../iam/identity-providers.js";
import { roleBindingsService } from "../iam/role-bindings.js";
import { rolesService } from "../iam/roles.js";
import { AccountAssociationsRepository } from "../store/account-associations.js";
import { migrate, openDatabase, type Db } from "../store/db.js";
import { GroupInvitesRepository } from "../store/group-invites.js";
import { GroupsRepository } from "../store/groups.js";
import { IdentitiesRepository } from "../store/identities.js";
import { LoginSessionsRepository } from "../store/login-sessions.js";
import { IdentityProvidersRepository } from "../store/identity-providers.js";
import { RoleBindingsRepository } from "../store/role-bindings.js";
import { RolesRepository } from "../store/roles.js";
import { createApp } from "./app.js";

export interface ServerConfig {
  port: number;
  host: string;
  /** PGlite data directory (ignored when databaseUrl is set) */
  dataDir: string;
  databaseUrl?: string;
  /** ErrorInfo.domain of every error */
  errorDomain: string;
  logLevel?: string;
  /** {auth_url}: the token issuer's public URL (default: the server's own URL) */
  issuerUrl?: string;
  /** {base_url}: the API's public URL, the audience of API tokens (default: the server's own URL) */
  apiUrl?: string;
  /** {registry_host}: the registry's host, the audience of registry tokens (default: the server's host:port) */
  registryHost?: string;
  /** accept plain-http upstream OIDC issuers on loopback hosts (tests and local use only) */
  allowInsecureIssuers?: boolean;
  /** accept upstream OIDC issuers (and their jwks_uri hosts) on private, loopback, link-local, ... addresses */
  allowPrivateIssuerAddresses?: boolean;
  /** the platform's default upstream OIDC provider for human sign-in (`bulwark auth login`) */
  defaultUpstream?: UpstreamProvider;
  /** tests pass a PGlite cloned from a migrated template */
  pglite?: PGlite;
  logger?: Logger;
}

export const DEFAULT_CONFIG: ServerConfig = {
  port: 8080,
  host: "127.0.0.1",
  dataDir: "./data",
  errorDomain: "bulwark.dev",
};

export interface RunningServer {
  url: string;
  port: number;
  db: Db;
  /** the issuer (tests and the admin command mint tokens with it) */
  tokens: TokenIssuer;
  backend: "pglite" | "postgres";
  close(): Promise<void>;
}

export interface Repositories {
  groups: GroupsRepository;
  roles: RolesRepository;
  identities: IdentitiesRepository;
  roleBindings: RoleBindingsRepository;
  identityProviders: IdentityProvidersRepository;
  accountAssociations: AccountAssociationsRepository;
  groupInvites: GroupInvitesRepository;
  loginSessions: LoginSessionsRepository;
}

export function repositories(db: Db): Repositories {
  return {
    groups: new GroupsRepository(db),
    roles: new RolesRepository(db),
    identities: new IdentitiesRepository(db),
    roleBindings: new RoleBindingsRepository(db),
    identityProviders: new IdentityProvidersRepository(db),
    accountAssociations: new AccountAssociationsRepository(db),
    groupInvites: new GroupInvitesRepository(db),
    loginSessions: new LoginSessionsRepository(db),
  };
}

/** Server keys kept in the database (shared by every replica), loaded once at start. */
export interface ServerKeys {
  /** encrypts IdPs' OIDC client secrets at rest */
  idpClientSecrets: SecretBox;
}

export async function loadServerKeys(db: Db): Promise<ServerKeys> {
  return { idpClientSecrets: new SecretBox(await loadSharedSecret(db, "idp_client_secrets")) };
}

/** The issuer's parts the auth services need. */
export interface AuthDeps {
  issuer: TokenIssuer;
  /** how the token exchange and sign-in reach upstream OIDC issuers (SSRF-guarded) */
  upstream: UpstreamIssuers;
  logger?: Logger;
}

/** Every served service; one line each. */
export function buildServices(repos: Repositories, tokens: PageTokenCodec, keys: ServerKeys, auth: AuthDeps): ServiceBinding[] {
  const now = () => new Date();
  const lists = { tokens };
  return [
    groupsService({ groups: repos.groups, lists, now }),
    rolesService({ roles: repos.roles, lists, now }),
    identitiesService({ identities: repos.identities, lists, now }),
    roleBindingsService({ roleBindings: repos.roleBindings, lists, now }),
    identityProvidersService({ identityProviders: repos.identityProviders, secrets: keys.idpClientSecrets, lists, now }),
    accountAssociationsService({ accountAssociations: repos.accountAssociations, lists, now }),
    groupInvitesService({ invites: repos.groupInvites, lists, now }),
    authService({ tokens: auth.issuer, identities: repos.identities, roleBindings: repos.roleBindings }),
    securityTokenService({ tokens: auth.issuer, identities: repos.identities, upstream: auth.upstream, logger: auth.logger, now }),
  ];
}

export function issuerKeyFile(dataDir: string): string {
  return join(dataDir, "issuer-signing-key.json");
}

/** The issuer's URLs from configuration; blanks are filled from the server's URL once it listens. */
export function authUrls(config: Pick<ServerConfig, "issuerUrl" | "apiUrl" | "registryHost">): AuthUrls {
  return { issuer: config.issuerUrl ?? "", apiAudience: config.apiUrl ?? "", registryAudience: config.registryHost ?? "" };
}

export function fillAuthUrls(urls: AuthUrls, serverUrl: string): void {
  if (!urls.issuer) urls.issuer = serverUrl;
  if (!urls.apiAudience) urls.apiAudience = serverUrl;
  if (!urls.registryAudience) urls.registryAudience = new URL(serverUrl).host;
}

export async function startServer(config: ServerConfig): Promise<RunningServer> {
  const logger = config.logger ?? pino({ level: config.logLevel ?? "info", redact: ["req.headers.authorization"] });
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, pglite: config.pglite });
  try {
    await migrate(database.db);
    const repos = repositories(database.db);
    await repos.roles.ensureBuiltins(BUILTIN_ROLES, new Date());
    const secret = process.env.BULWARK_PAGE_TOKEN_SECRET
      ? new TextEncoder().encode(process.env.BULWARK_PAGE_TOKEN_SECRET)
      : await loadSharedSecret(database.db, "page_tokens");
    const tokens = PageTokenCodec.fromSecret(secret);
    // Embedded mode keeps the current signing key beside the data for `bulwark admin token`.
    const keyFile = database.backend === "pglite" && !config.pglite && !config.dataDir.startsWith("memory://") ? issuerKeyFile(config.dataDir) : undefined;
    const keys = new KeyManager(database.db, undefined, keyFile);
    await keys.signingKey();
    const refresh = setInterval(
      () =>
        void keys
          .signingKey()
          .then(() => Promise.all([keys.prune(), repos.loginSessions.prune(new Date())]))
          .catch((err) => logger.error({ err }, "periodic key refresh failed")),
      REFRESH_EVERY_MS,
    );
    refresh.unref();
    const urls = authUrls(config);
    const issuer = new TokenIssuer(keys, urls);
    const upstreamOptions: UpstreamOptions = { allowInsecureIssuers: config.allowInsecureIssuers, allowPrivateIssuerAddresses: config.allowPrivateIssuerAddresses };
    const upstream = new UpstreamIssuers(upstreamOptions);
    const serverKeys = await loadServerKeys(database.db);
    const { fastify, dual } = await createApp({
      bindings: buildServices(repos, tokens, serverKeys, { issuer, upstream, logger }),
      authorizer: new TokenAuthorizer(issuer, repos.identities, repos.roleBindings),
      routes: (app) => {
        registerIssuerRoutes(app, urls, keys);
        registerLoginRoutes(app, {
          issuer,
          upstream,
          upstreamOptions,
          defaultUpstream: config.defaultUpstream,
          sessions: repos.loginSessions,
          identities: repos.identities,
          roleBindings: repos.roleBindings,
          identityProviders: repos.identityProviders,
          idpSecrets: serverKeys.idpClientSecrets,
          invites: repos.groupInvites,
          logger,
        });
      },
      pathPrefixes: [config.issuerUrl, config.apiUrl].flatMap((u) => {
        const path = u ? new URL(u).pathname.replace(/\/+$/, "") : "";
        return path ? [path] : [];
      }),
      errorDomain: config.errorDomain,
      logger,
    });
    await fastify.listen({ port: config.port, host: config.host });
    const port = (dual.front.address() as AddressInfo).port;
    const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
    fillAuthUrls(urls, url);
    let closing: Promise<void> | undefined;
    return {
      url,
      port,
      db: database.db,
      tokens: issuer,
      backend: database.backend,
      close: () =>
        (closing ??= (async () => {
          clearInterval(refresh);
          dual.closeConnections();
          // In-flight requests get a grace period; then whatever is still open is cut.
          const force = setTimeout(() => dual.destroyConnections(), 5_000);
          try {
            await fastify.close();
          } finally {
            clearTimeout(force);
          }
          await database.close();
        })()),
    };
  } catch (err) {
    await database.close();
    throw err;
  }
}
