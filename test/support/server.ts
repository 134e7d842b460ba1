// Starts the real server on an ephemeral port over a fresh database of the given backend; and what
// suites use with it: the operator's gRPC client, a counter of its database queries.
import { pino, type Logger } from "pino";
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import type { KyselyPlugin } from "kysely";
import { authModule } from "../../src/auth/module.js";
import { OPERATOR_SUBJECT, type MintRequest, type TokenIssuer } from "../../src/auth/tokens.js";
import pg from "pg";
import type { UpstreamProvider } from "../../src/platform/config.js";
import type { RegistrySettings } from "../../src/registry/api.js";
import type { AdvisorySettings } from "../../src/vulnerabilities/api.js";
import type { EventsSettings } from "../../src/events/api.js";
import type { ImagesSettings } from "../../src/images/api.js";
import type { FeatureModule } from "../../src/platform/module.js";
import type { RateLimitSettings } from "../../src/server/limits.js";
import type { MetricsSettings } from "../../src/server/metrics.js";
import { startServer, type RunningServer } from "../../src/server/start.js";
import type { TracingSettings } from "../../src/server/tracing.js";
import { clonePglite, clonePostgres, type Backend } from "./db-templates.js";

export const ERROR_DOMAIN = "test.bulwark.dev";

export interface TestServer extends RunningServer {
  backend: Backend;
  /** the server's token issuer (the auth module's) */
  tokens: TokenIssuer;
  /** a token of the platform operator, who may do everything */
  operatorToken: string;
  /** an API token for an identity (or any subject), minted by the server's own issuer */
  tokenFor(subject: string, options?: Partial<MintRequest>): Promise<string>;
  /** the PostgreSQL database the server runs on (postgres backend) */
  databaseUrl?: string;
}

/** The standard claims of an API token for `subject` on this server, valid now for an hour (plus `extra`). */
export function claimsFor(server: TestServer, subject: string, extra: Record<string, unknown> = {}) {
  const now = Math.floor(Date.now() / 1000);
  return {
    iss: server.tokens.urls.issuer,
    aud: [server.tokens.urls.apiAudience],
    sub: subject,
    iat: now,
    nbf: now,
    exp: now + 3600,
    jti: `t-${now}-${Math.random()}`,
    ...extra,
  };
}

/** A Connect interceptor that sends `Authorization: Bearer <token>`. */
export function bearer(token: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

/**
 * A Connect gRPC client of `service` calling as the platform operator, on its own HTTP/2 session;
 * `close()` ends the session.
 */
export function operatorGrpc<S extends DescService>(
  server: TestServer,
  service: S,
): { client: Client<S>; close(): void } {
  const sessionManager = new Http2SessionManager(server.url);
  const client = createClient(
    service,
    createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(server.operatorToken)], sessionManager }),
  );
  return { client, close: () => sessionManager.abort() };
}

/** A Kysely plugin that counts the queries run through it (`db.withPlugin(counter.plugin)`). */
export function queryCounter(): { plugin: KyselyPlugin; count(): number } {
  let queries = 0;
  return {
    plugin: {
      transformQuery: (args) => {
        queries++;
        return args.node;
      },
      transformResult: async (args) => args.result,
    },
    count: () => queries,
  };
}

/** The running server's token issuer. */
export function issuerOf(server: RunningServer): TokenIssuer {
  return server.exportsOf(authModule).issuer;
}

async function withTokens(server: RunningServer, backend: Backend, close = server.close): Promise<TestServer> {
  const tokens = issuerOf(server);
  const tokenFor = async (subject: string, options: Partial<MintRequest> = {}) =>
    (await tokens.mint({ subject, audience: [tokens.urls.apiAudience], ...options })).token;
  return { ...server, backend, close, tokens, tokenFor, operatorToken: await tokenFor(OPERATOR_SUBJECT) };
}

/** Test servers reach the test OIDC issuers on 127.0.0.1 over http, so both default to on. */
export interface TestServerOptions {
  allowInsecureIssuers?: boolean;
  allowPrivateIssuerAddresses?: boolean;
  /** event subscriptions may have http sinks and sinks on loopback or private addresses (default: off, as served) */
  allowInsecureSinks?: boolean;
  /** the platform's default upstream OIDC provider for human sign-in */
  defaultUpstream?: UpstreamProvider;
  /** the feature modules to run (default: all) */
  modules?: readonly FeatureModule<any, any>[];
  /** rate limits (default: off, since suites send many bad tokens on purpose) */
  rateLimits?: RateLimitSettings | false;
  /** CORS origins (default: none) */
  corsOrigins?: string[];
  /** take client addresses from X-Forwarded-For */
  trustProxy?: boolean;
  /** how long a request body may send nothing (default: the server's) */
  bodyTimeoutMs?: number;
  /** registry blob storage and garbage collection (default: a temporary directory per server) */
  registry?: RegistrySettings;
  /** also serve the registry on this port (0: any free one) */
  registryPort?: number;
  /** the events module's settings: retention and its pruning, the audit log, deliveries' retries, leases and polling, insecure sinks */
  events?: EventsSettings;
  /** the images module's settings (inventory concurrency and polling, SBOM attachment) */
  images?: ImagesSettings;
  /** public advisory groups (create them with `rootGroups`: the setting is read at start) */
  advisories?: AdvisorySettings;
  /** organizations written into the database before the server starts, with uids of the test's choosing */
  rootGroups?: { uid: string; name: string }[];
  /** PostgreSQL: named prepared statements (default on; off as `--no-prepared-statements`) */
  preparedStatements?: boolean;
  /** PostgreSQL: pipeline mode (default on; off as `--no-pipelining`) */
  pipelining?: boolean;
  /** {auth_url} and {base_url} (default: the server's own URL); replicas of one platform share them */
  publicUrls?: { issuerUrl: string; apiUrl: string };
  /** run as another replica on this server's database (postgres only; closing it leaves the database) */
  replicaOf?: TestServer;
  /** the server's logger (default: silent, or BULWARK_TEST_LOG's level); see test/support/logs.ts */
  logger?: Logger;
  /** export traces (the provider is the process's: one traced server at a time) */
  tracing?: TracingSettings;
  /** where /metrics is served (default: nowhere; the registry still counts, as `server.metrics`) */
  metrics?: MetricsSettings;
  /** one log line per request (default on, as served; `--no-access-log`) */
  accessLog?: boolean;
}

const INSERT_ROOT_GROUP =
  "insert into groups (uid, name, create_time, update_time) values ($1, $2, date_trunc('milliseconds', now()), date_trunc('milliseconds', now()))";

export async function startTestServer(backend: Backend, options: TestServerOptions = {}): Promise<TestServer> {
  const common = {
    port: 0,
    host: "127.0.0.1",
    dataDir: "",
    errorDomain: ERROR_DOMAIN,
    logger: options.logger ?? pino({ level: process.env.BULWARK_TEST_LOG ?? "silent" }),
    allowInsecureIssuers: options.allowInsecureIssuers ?? true,
    allowPrivateIssuerAddresses: options.allowPrivateIssuerAddresses ?? true,
    defaultUpstream: options.defaultUpstream,
    modules: options.modules,
    rateLimits: options.rateLimits ?? false,
    corsOrigins: options.corsOrigins,
    trustProxy: options.trustProxy,
    bodyTimeoutMs: options.bodyTimeoutMs,
    accessLog: options.accessLog,
    moduleSettings: {
      events:
        options.allowInsecureSinks === undefined
          ? options.events
          : { ...options.events, allowInsecureSinks: options.allowInsecureSinks },
      registry: options.registry,
      vulnerabilities: options.advisories,
      images: options.images,
    },
    registryPort: options.registryPort,
    metrics: options.metrics,
    preparedStatements: options.preparedStatements,
    pipelining: options.pipelining,
    tracing: options.tracing,
    ...options.publicUrls,
  };
  if (backend === "pglite") {
    const pglite = await clonePglite();
    for (const g of options.rootGroups ?? []) await pglite.query(INSERT_ROOT_GROUP, [g.uid, g.name]);
    const server = await startServer({ ...common, pglite });
    return withTokens(server, backend);
  }
  if (options.replicaOf) {
    const url = options.replicaOf.databaseUrl;
    if (!url) throw new Error("replicaOf needs a server on PostgreSQL");
    return { ...(await withTokens(await startServer({ ...common, databaseUrl: url }), backend)), databaseUrl: url };
  }
  const { url, drop } = await clonePostgres();
  if (options.rootGroups?.length) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      for (const g of options.rootGroups) await client.query(INSERT_ROOT_GROUP, [g.uid, g.name]);
    } finally {
      await client.end();
    }
  }
  const server = await startServer({ ...common, databaseUrl: url });
  const running = await withTokens(server, backend, async () => {
    await server.close();
    await drop();
  });
  return { ...running, databaseUrl: url };
}
