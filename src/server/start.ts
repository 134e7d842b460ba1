// Composition root: database, migrations, services, transports, listening socket.
import type { AddressInfo } from "node:net";
import type { PGlite } from "@electric-sql/pglite";
import { pino, type Logger } from "pino";
import { PageTokenCodec, loadSharedSecret } from "../core/page-tokens.js";
import { SecretBox } from "../core/secret-box.js";
import { allowAll, type Authorizer, type ServiceBinding } from "../core/service.js";
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

/** Every served service; one line each. */
export function buildServices(repos: Repositories, tokens: PageTokenCodec, keys: ServerKeys): ServiceBinding[] {
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
  ];
}

export async function startServer(config: ServerConfig, authorizer: Authorizer = allowAll): Promise<RunningServer> {
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
    const { fastify, dual } = await createApp({
      bindings: buildServices(repos, tokens, await loadServerKeys(database.db)),
      authorizer,
      errorDomain: config.errorDomain,
      logger,
    });
    await fastify.listen({ port: config.port, host: config.host });
    const port = (dual.front.address() as AddressInfo).port;
    const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
    let closing: Promise<void> | undefined;
    return {
      url,
      port,
      db: database.db,
      backend: database.backend,
      close: () =>
        (closing ??= (async () => {
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
