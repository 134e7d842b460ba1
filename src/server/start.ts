// Composition root: database, migrations, feature modules, transports, listening socket. It loops
// over the modules (server/modules.ts) and names no feature.
import type { AddressInfo } from "node:net";
import type { PGlite } from "@electric-sql/pglite";
import type { Kysely } from "kysely";
import { pino, type Logger } from "pino";
import { PageTokenCodec } from "../core/page-tokens.js";
import type { Authorizer, CallRecorder, ServiceBinding } from "../core/service.js";
import { NO_EVENTS, type EventJournal } from "../platform/events.js";
import {
  fillPublicUrls,
  publicUrls,
  type PlatformSettings,
  type PublicUrls,
  type SharedGrant,
} from "../platform/config.js";
import type { FeatureModule, ModuleContext, ModuleRuntime } from "../platform/module.js";
import { newMetricsRegistry, type MetricsRegistry } from "../platform/telemetry.js";
import { setTimeout as sleep } from "node:timers/promises";
import { NotReady } from "../platform/health.js";
import type { ReadinessCheck } from "../platform/module.js";
import {
  KEY_ENCRYPTION_KEY_ENV,
  keyEncryptionKeyFromEnv,
  migrate,
  openDatabase,
  pendingMigrations,
} from "../storage/db.js";
import { loadSharedSecret } from "../storage/server-secrets.js";
import { createApp } from "./app.js";
import { Readiness } from "./health.js";
import { DEFAULT_RATE_LIMITS, RequestLimits, type RateLimitSettings } from "./limits.js";
import {
  listenForMetrics,
  metricsRoute,
  registerBuildInfo,
  registerDatabaseMetrics,
  type MetricsSettings,
} from "./metrics.js";
import { MODULES, type ModuleSettings } from "./modules.js";
import { PeriodicTasks } from "./tasks.js";
import { startTracing, type TracingSettings } from "./tracing.js";
import { traceQueries } from "../platform/tracing.js";

export interface ServerConfig extends PlatformSettings {
  port: number;
  host: string;
  /** PGlite data directory (ignored when databaseUrl is set); locked while the server runs */
  dataDir: string;
  databaseUrl?: string;
  /** an on-disk embedded database without fsync: survives a process kill, not a power loss (see DatabaseOptions) */
  unsafeNoFsync?: boolean;
  /** PostgreSQL: named, server-side prepared statements (default true; see DatabaseOptions) */
  preparedStatements?: boolean;
  /** PostgreSQL: pipeline mode (default true; see DatabaseOptions) */
  pipelining?: boolean;
  /**
   * The 32-byte key that seals the issuer's private keys in PostgreSQL (default: BULWARK_KEY_ENCRYPTION_KEY,
   * required there). An embedded data directory keeps its own; a given `pglite` gets a random one.
   */
  keyEncryptionKey?: Uint8Array;
  logLevel?: string;
  /** {auth_url}: the token issuer's public URL (default: the server's own URL) */
  issuerUrl?: string;
  /** {base_url}: the API's public URL, the audience of API tokens (default: the server's own URL) */
  apiUrl?: string;
  /** {registry_host}: the registry's host, the audience of registry tokens (default: the server's host:port) */
  registryHost?: string;
  /** a second port serving only the registry (/v2/ and its token endpoint); default: the main port only */
  registryPort?: number;
  /** tests pass a PGlite cloned from a migrated template */
  pglite?: PGlite;
  logger?: Logger;
  /** rate limits (default: DEFAULT_RATE_LIMITS); false: none */
  rateLimits?: RateLimitSettings | false;
  /** browser origins allowed to call the API ("*": any); empty: CORS off */
  corsOrigins?: string[];
  /** behind a reverse proxy: take the client's address from X-Forwarded-For */
  trustProxy?: boolean;
  /** how long a request body may send nothing before it is answered 400 (default 30 s) */
  bodyTimeoutMs?: number;
  /** one info line per request, successes too (default on); off: only requests that went wrong */
  accessLog?: boolean;
  /** the features to run (default: all of them) */
  modules?: readonly FeatureModule<any, any>[];
  /** where /metrics is served: a port of its own, and/or the main port to the operator (default: nowhere) */
  metrics?: MetricsSettings;
  /** the server's metrics registry (default: a new one) */
  metricsRegistry?: MetricsRegistry;
  /** each feature's own settings, by module name (a module reads its own as `ctx.moduleSettings`) */
  moduleSettings?: ModuleSettings;
  /**
   * Export OpenTelemetry traces over OTLP/HTTP (`bulwark serve`: when OTEL_EXPORTER_OTLP_ENDPOINT is
   * set). The provider is the process's: one server per process may trace. Absent: no tracing.
   */
  tracing?: TracingSettings;
  /**
   * on close: how long /readyz answers 503 while everything is still served, before the listener
   * closes, so that load balancers stop sending first (default 0)
   */
  drainDelayMs?: number;
  /** on close: the bound of the whole shutdown, drain delay included; then what is still open is cut (default 30 s) */
  shutdownTimeoutMs?: number;
}

export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000;

/** How a close went. */
export interface ShutdownReport {
  /** connections still open at the shutdown's bound, cut (0: every request accepted was answered) */
  cutConnections: number;
}

export interface RunningServer {
  url: string;
  port: number;
  /** the registry's own port, when one was asked for */
  registryPort?: number;
  /** the metrics' own port, when one was asked for */
  metricsPort?: number;
  /** the database, untyped here: each module types its own tables */
  db: Kysely<any>;
  backend: "pglite" | "postgres";
  urls: PublicUrls;
  /** every metric the server and its modules keep */
  metrics: MetricsRegistry;
  /** every served service with its handlers (a method without one answers UNIMPLEMENTED) */
  bindings: readonly ServiceBinding[];
  /** what a running module exports (e.g. the auth module's token issuer) */
  exportsOf<E>(module: FeatureModule<unknown, E>): E;
  /**
   * Shuts down: /readyz answers 503 at once; after the drain delay the listeners close, requests
   * in progress finish (HTTP/1.1 connections close once answered, HTTP/2 sessions get GOAWAY),
   * background tasks stop, modules and the database close. At the shutdown timeout whatever
   * connection is still open is cut. Once begun, every call answers the same shutdown.
   */
  shutdown(): Promise<ShutdownReport>;
  /** `shutdown`, for callers that need not know whether connections were cut */
  close(): Promise<void>;
}

/** Every module's migrations, for the server and for tools that open the database themselves. */
export function migrateAll(db: Kysely<any>, modules: readonly FeatureModule<any, any>[] = MODULES): Promise<void> {
  return migrate(db, modules);
}

/** The one Authorizer the modules provide. */
function authorizerOf(runtimes: ModuleRuntime[], modules: readonly FeatureModule<any, any>[]): Authorizer {
  const providers = runtimes.flatMap((r, i) =>
    r.authorizer ? [{ authorizer: r.authorizer, name: modules[i]!.name }] : [],
  );
  if (providers.length !== 1) {
    throw new Error(
      `exactly one module must provide the authorizer; found ${providers.map((p) => p.name).join(", ") || "none"}`,
    );
  }
  return providers[0]!.authorizer;
}

/** What at most one module provides (the events outbox and journal). */
function atMostOne<T>(
  what: string,
  runtimes: ModuleRuntime[],
  modules: readonly FeatureModule<any, any>[],
  pick: (r: ModuleRuntime) => T | undefined,
): T | undefined {
  const providers = runtimes.flatMap((r, i) => {
    const value = pick(r);
    return value ? [{ value, name: modules[i]!.name }] : [];
  });
  if (providers.length > 1)
    throw new Error(`at most one module may provide the ${what}; found ${providers.map((p) => p.name).join(", ")}`);
  return providers[0]?.value;
}

/** Each running module's own settings; settings for a module that is not running are refused. */
function settingsByModule(config: ServerConfig, modules: readonly FeatureModule<any, any>[]) {
  const given: Readonly<Record<string, unknown>> = { ...config.moduleSettings };
  for (const [name, value] of Object.entries(given))
    if (value !== undefined && !modules.some((m) => m.name === name))
      throw new Error(`settings are given for module ${name}, which does not run`);
  return (module: FeatureModule<any, any>): unknown => given[module.name];
}

/** The operator's shared grants, then those the modules' settings make (asked before any module starts). */
function sharedGrantsOf(
  config: ServerConfig,
  modules: readonly FeatureModule<any, any>[],
  settingsOf: (module: FeatureModule<any, any>) => unknown,
): SharedGrant[] {
  return [...(config.sharedGrants ?? []), ...modules.flatMap((m) => m.sharedGrants?.(settingsOf(m)) ?? [])];
}

/** A module's bindings must be exactly the services it declares (tests, reflection and the OpenAPI document read the list). */
function checkBindings(module: FeatureModule<any, any>, bindings: ServiceBinding[]): void {
  const declared = module.services.map((s) => s.typeName).sort();
  const bound = bindings.map((b) => b.service.typeName).sort();
  if (declared.join() !== bound.join()) {
    throw new Error(`module ${module.name} declares [${declared.join(", ")}] but binds [${bound.join(", ")}]`);
  }
}

export async function startServer(config: ServerConfig): Promise<RunningServer> {
  const logger = config.logger ?? pino({ level: config.logLevel ?? "info", redact: ["req.headers.authorization"] });
  const modules = config.modules ?? MODULES;
  const settingsOf = settingsByModule(config, modules);
  const sharedGrants = sharedGrantsOf(config, modules, settingsOf);
  const keyEncryptionKey = config.keyEncryptionKey ?? keyEncryptionKeyFromEnv();
  if (config.databaseUrl && !keyEncryptionKey)
    throw new Error(
      `${KEY_ENCRYPTION_KEY_ENV} is not set: on PostgreSQL the server needs a key-encryption key for the issuer's ` +
        `private keys (32 random bytes as 64 hex digits or 43 base64url characters, e.g. \`openssl rand -hex 32\`; ` +
        `the same on every replica)`,
    );
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    preparedStatements: config.preparedStatements,
    pipelining: config.pipelining,
    dataDir: config.dataDir,
    pglite: config.pglite,
    keyEncryptionKey,
    unsafeNoFsync: config.unsafeNoFsync,
    notice: (message, details) => logger.warn(details, message),
  });
  if (config.unsafeNoFsync && database.dataDir)
    logger.warn(
      { dataDir: database.dataDir },
      "fsync is off (--unsafe-no-fsync): a power loss or kernel crash can lose committed data and corrupt the database",
    );
  const metrics = config.metricsRegistry ?? newMetricsRegistry();
  const tasks = new PeriodicTasks(logger);
  const runtimes: ModuleRuntime[] = [];
  let stopTracing: (() => Promise<void>) | undefined;
  let metricsListener: Awaited<ReturnType<typeof listenForMetrics>> | undefined;
  // Once made, a failed start closes it too: nothing may keep answering over a closed database.
  let app: Awaited<ReturnType<typeof createApp>> | undefined;
  try {
    registerBuildInfo(metrics);
    registerDatabaseMetrics(metrics, database.db, database.poolStats);
    // Before the modules start: they decide then whether to trace (the registry's blob store).
    if (config.tracing) {
      stopTracing = await startTracing(config.tracing, logger);
      traceQueries(database.db);
    }
    await migrate(database.db, modules);
    // Each shared secret is read once per server, however many modules ask for it.
    const secrets = new Map<string, Promise<Uint8Array>>();
    const sharedSecret = (name: string) => {
      let secret = secrets.get(name);
      if (!secret) secrets.set(name, (secret = loadSharedSecret(database.db, name)));
      return secret;
    };
    const secret = process.env.BULWARK_PAGE_TOKEN_SECRET
      ? new TextEncoder().encode(process.env.BULWARK_PAGE_TOKEN_SECRET)
      : await sharedSecret("page_tokens");
    const urls = publicUrls(config);
    const repositories = new Map<FeatureModule<any, any>, unknown>();
    const exports = new Map<FeatureModule<any, any>, unknown>();
    const exportsOf = <E>(module: FeatureModule<unknown, E>): E => {
      if (!exports.has(module))
        throw new Error(`module ${module.name} is not running (or starts after the module asking)`);
      return exports.get(module) as E;
    };
    // Modules starting before the journal's provider get this forwarder: it records once that one started.
    let journal: EventJournal = NO_EVENTS;
    const events: EventJournal = {
      record: (event) => journal.record(event),
      recordSoon: (event) => journal.recordSoon(event),
      insertWithin: (event, condition) => journal.insertWithin(event, condition),
    };
    const ctx: Omit<ModuleContext, "moduleSettings"> = {
      db: database.db,
      database: { backend: database.backend, snapshot: database.snapshot },
      settings: config,
      sharedGrants,
      urls,
      dataDir: database.dataDir,
      logger,
      metrics,
      lists: { tokens: PageTokenCodec.fromSecret(secret) },
      now: () => new Date(),
      repositoriesOf: <R>(module: FeatureModule<R, unknown>): R => {
        if (!repositories.has(module)) repositories.set(module, module.repositories(database.db));
        return repositories.get(module) as R;
      },
      exportsOf,
      events,
      sharedSecret,
    };
    for (const module of modules) {
      const runtime = await module.start({ ...ctx, moduleSettings: settingsOf(module) });
      checkBindings(module, runtime.bindings);
      exports.set(module, runtime.exports);
      runtimes.push(runtime);
      journal = atMostOne("event journal", runtimes, modules, (r) => r.journal) ?? NO_EVENTS;
    }
    const recorder: CallRecorder | undefined = atMostOne("events outbox", runtimes, modules, (r) => r.recorder);
    for (const [i, runtime] of runtimes.entries())
      for (const task of runtime.tasks ?? []) tasks.schedule(modules[i]!.name, task);
    const bindings = runtimes.flatMap((r) => r.bindings);
    const databaseReady: ReadinessCheck = {
      name: "database",
      run: async () => {
        let pending: string[];
        try {
          pending = await pendingMigrations(database.db, modules);
        } catch (err) {
          throw new NotReady("unreachable", err);
        }
        if (pending.length > 0)
          throw new NotReady("not migrated", new Error(`migrations not applied: ${pending.join(", ")}`));
      },
    };
    const readiness = new Readiness([databaseReady, ...runtimes.flatMap((r) => r.readiness ?? [])], logger);
    app = await createApp({
      readiness,
      bindings,
      authorizer: authorizerOf(runtimes, modules),
      recorder,
      routes: [
        ...runtimes.flatMap((r) => (r.routes ? [r.routes.bind(r)] : [])),
        ...(config.metrics?.onMainPort ? [metricsRoute(metrics)] : []),
      ],
      pathPrefixes: [config.issuerUrl, config.apiUrl].flatMap((u) => {
        const path = u ? new URL(u).pathname.replace(/\/+$/, "") : "";
        return path ? [path] : [];
      }),
      errorDomain: config.errorDomain,
      logger,
      limits: config.rateLimits === false ? undefined : new RequestLimits(config.rateLimits ?? DEFAULT_RATE_LIMITS),
      cors: config.corsOrigins?.length ? { origins: config.corsOrigins } : undefined,
      trustProxy: config.trustProxy,
      bodyTimeoutMs: config.bodyTimeoutMs,
      tracing: config.tracing !== undefined,
      metrics,
      accessLog: config.accessLog,
      // Read per page: the URLs are final only once the server listens.
      consoleConnectOrigins: () => (URL.canParse(urls.issuer) ? [new URL(urls.issuer).origin] : []),
    });
    const { fastify, dual, extraListener } = app;
    // Before the main port, so a metrics port that cannot be had stops the start with nothing served.
    if (config.metrics?.port !== undefined)
      metricsListener = await listenForMetrics(
        metrics,
        config.metrics.port,
        // Loopback unless asked: the port answers without credentials.
        config.metrics.host ?? "127.0.0.1",
        logger,
      );
    await fastify.listen({ port: config.port, host: config.host });
    const port = (dual.front.address() as AddressInfo).port;
    const hostPart = config.host.includes(":") ? `[${config.host}]` : config.host;
    const url = `http://${hostPart}:${port}`;
    let registryListener: ReturnType<typeof extraListener> | undefined;
    if (config.registryPort !== undefined) {
      const prefixes = runtimes.flatMap((r) => r.registryPaths ?? []);
      registryListener = extraListener((path) =>
        prefixes.some((p) => path === p || path.startsWith(p + "/") || path.startsWith(p + "?")),
      );
      const front = registryListener.front;
      await new Promise<void>((resolve, reject) => {
        front.once("error", reject);
        front.listen(config.registryPort, config.host, () => resolve());
      });
      if (!urls.registryAudience) urls.registryAudience = `${hostPart}:${(front.address() as AddressInfo).port}`;
    }
    fillPublicUrls(urls, url);
    for (const runtime of runtimes) await runtime.listening?.(urls, url);
    let closing: Promise<ShutdownReport> | undefined;
    const shutdown = () =>
      (closing ??= (async (): Promise<ShutdownReport> => {
        const listeners = [dual, ...(registryListener ? [registryListener] : [])];
        // The bound of the whole shutdown, from its first moment.
        let boundTimer: NodeJS.Timeout | undefined;
        const bound = new Promise<"bound">((resolve) => {
          boundTimer = setTimeout(() => resolve("bound"), config.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS);
        });
        // Load balancers see /readyz fail while everything is still served, and stop sending.
        readiness.shutDown();
        for (const listener of listeners) listener.drain();
        const drainDelayMs = config.drainDelayMs ?? 0;
        logger.info({ drainDelayMs }, "shutting down: /readyz answers 503");
        if (drainDelayMs > 0) await Promise.race([sleep(drainDelayMs), bound]);
        const tasksStopped = tasks.stop();
        // No new connections; each open one ends once it has answered what it was sent.
        const closed = Promise.all([
          fastify.close(),
          ...(registryListener ? [new Promise((resolve) => registryListener.front.close(resolve))] : []),
        ]);
        for (const listener of listeners) listener.closeConnections();
        let cutConnections = 0;
        if ((await Promise.race([closed, bound])) === "bound") {
          cutConnections = listeners.reduce((n, listener) => n + listener.destroyConnections(), 0);
          logger.warn({ cutConnections }, "shutdown timeout: connections still open are cut");
          await closed;
        }
        // Scraped while the main port drains; closed once it has.
        await metricsListener?.close();
        // A task run past the bound is not waited for (its database closes under it).
        await Promise.race([tasksStopped, bound]);
        clearTimeout(boundTimer);
        // Last started, first closed: a module may be using an earlier one's exports (the
        // images module's background reads, the registry's blob store) until it closes.
        for (const runtime of [...runtimes].reverse()) await runtime.close?.();
        await database.close();
        await stopTracing?.(); // last: the spans of everything above are flushed
        return { cutConnections };
      })());
    return {
      url,
      port,
      registryPort: registryListener && (registryListener.front.address() as AddressInfo).port,
      metricsPort: metricsListener?.port,
      db: database.db,
      backend: database.backend,
      urls,
      bindings,
      metrics,
      exportsOf,
      close: async () => void (await shutdown()),
      shutdown,
    };
  } catch (err) {
    await app?.fastify.close().catch(() => undefined);
    await metricsListener?.close();
    await tasks.stop();
    for (const runtime of [...runtimes].reverse()) await runtime.close?.().catch(() => undefined);
    await database.close();
    await stopTracing?.().catch(() => undefined);
    throw err;
  }
}
