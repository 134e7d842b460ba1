// The server side of `bulwark`: `serve`, and the operator's tools that open the database
// themselves (`admin token`, `registry gc`). The server's modules are imported only when one of
// these runs, so client commands start quickly. `serve` owns its process: it handles SIGTERM and
// SIGINT and exits once closed. Options with an environment variable read it from the process
// (commander's .env()); what these commands read themselves comes from their io (io.ts).
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { Command, InvalidArgumentError, Option } from "commander";
import type { RateLimit } from "../../core/rate-limit.js";
import type { RateLimitSettings } from "../../server/limits.js";
import { DEFAULT_CONFIG } from "../../server/defaults.js";
import type { RegistrySettings } from "../../registry/api.js";
import { isValidUidp } from "../../core/uidp.js";
import { CliError } from "../errors.js";
import { ioOf } from "../io.js";
import { commaList, examples, parseCount } from "../command.js";
import { durationMillis } from "../durations.js";
import { LISTENING_V8_FLAGS, SERVE_V8_FLAGS } from "../serve-flags.js";
import { launchedCodeCache } from "../code-cache.js";

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError(`invalid port: ${value}`);
  return n;
}

/**
 * A switch that also reads an environment variable: commander would take any defined value
 * (even "false") as on, so the value is parsed; the bare flag means true.
 */
function parseSwitch(value: string): boolean {
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off|)$/i.test(value)) return false;
  throw new InvalidArgumentError(`invalid boolean: ${value}`);
}

/** "<per second>[:<burst>]" (burst defaults to twice the rate), or "off". */
function parseRateLimit(value: string): RateLimit | null {
  if (/^(off|none|0)$/i.test(value)) return null;
  const m = /^(\d+(?:\.\d+)?)(?::(\d+))?$/.exec(value);
  if (!m || Number(m[1]) <= 0)
    throw new InvalidArgumentError(`invalid rate limit "${value}": use <per second>[:<burst>] or off`);
  const perSecond = Number(m[1]);
  return { perSecond, burst: m[2] ? Math.max(1, Number(m[2])) : Math.max(1, Math.ceil(perSecond * 2)) };
}

/** "90s", "15m", "1h30m", "7d" (or plain milliseconds) → milliseconds. */
export function parseDuration(value: string): number {
  const millis = /^\d+$/.test(value.trim()) ? Number(value.trim()) : durationMillis(value);
  if (millis === undefined) throw new InvalidArgumentError(`invalid duration "${value}": use e.g. 90s, 15m, 1h30m, 7d`);
  return millis;
}

function parsePositiveDuration(value: string): number {
  const millis = parseDuration(value);
  if (millis <= 0) throw new InvalidArgumentError(`invalid duration "${value}": must be more than 0`);
  return millis;
}

/** After the shutdown timeout cut what was open: how long closing the modules and the database may still take. */
const CLOSE_AFTER_BOUND_MS = 5_000;

/** Where the registry keeps blobs: a directory, or an S3-compatible bucket. */
function blobOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--blob-dir <dir>", "registry blobs in this directory (default: <data dir>/registry)").env(
        "BULWARK_BLOB_DIR",
      ),
    )
    .addOption(
      new Option(
        "--s3-bucket <bucket>",
        "registry blobs in this S3-compatible bucket (credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the SDK's chain)",
      ).env("BULWARK_S3_BUCKET"),
    )
    .addOption(
      new Option("--s3-endpoint <url>", "the S3-compatible endpoint (default: AWS)").env("BULWARK_S3_ENDPOINT"),
    )
    .addOption(new Option("--s3-region <region>", "the bucket's region").env("BULWARK_S3_REGION").default("us-east-1"))
    .addOption(new Option("--s3-prefix <prefix>", "a key prefix inside the bucket").env("BULWARK_S3_PREFIX"))
    .addOption(
      new Option("--s3-path-style [bool]", "path-style bucket URLs (most S3-compatible servers)")
        .env("BULWARK_S3_PATH_STYLE")
        .argParser(parseSwitch),
    );
}

interface BlobOpts {
  blobDir?: string;
  s3Bucket?: string;
  s3Endpoint?: string;
  s3Region: string;
  s3Prefix?: string;
  s3PathStyle?: boolean;
}

function registrySettings(
  env: NodeJS.ProcessEnv,
  o: BlobOpts,
  gc: { gcIntervalMs?: number; gcGraceMs?: number } = {},
): RegistrySettings {
  return {
    blobDirectory: o.blobDir,
    objectStorage: o.s3Bucket
      ? {
          bucket: o.s3Bucket,
          endpoint: o.s3Endpoint,
          region: o.s3Region,
          prefix: o.s3Prefix,
          forcePathStyle: o.s3PathStyle,
          accessKeyId: env.AWS_ACCESS_KEY_ID,
          secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
        }
      : undefined,
    ...gc,
  };
}

/** Options shared by every command that opens the database. */
function databaseOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--data-dir <dir>", "embedded PGlite data directory")
        .env("BULWARK_DATA_DIR")
        .default(DEFAULT_CONFIG.dataDir),
    )
    .addOption(
      new Option("--database-url <url>", "PostgreSQL connection string; when set, PGlite is not used").env(
        "DATABASE_URL",
      ),
    );
}

/** The public URLs of the issuer, the API and the registry; by default the server's own. */
function urlOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--port <port>", "port to listen on (0: any free port)")
        .env("BULWARK_PORT")
        .default(DEFAULT_CONFIG.port)
        .argParser(parsePort),
    )
    .addOption(new Option("--host <host>", "address to bind").env("BULWARK_HOST").default(DEFAULT_CONFIG.host))
    .addOption(
      new Option(
        "--issuer-url <url>",
        "{auth_url}: public URL of the token issuer (default: http://<host>:<port>)",
      ).env("BULWARK_ISSUER_URL"),
    )
    .addOption(
      new Option(
        "--api-url <url>",
        "{base_url}: public URL of the API, the audience of API tokens (default: http://<host>:<port>)",
      ).env("BULWARK_API_URL"),
    )
    .addOption(
      new Option(
        "--registry-host <host>",
        "{registry_host}: the registry's host, the audience of registry tokens (default: <host>:<port>)",
      ).env("BULWARK_REGISTRY_HOST"),
    );
}

interface UrlOpts {
  port: number;
  host: string;
  issuerUrl?: string;
  apiUrl?: string;
  registryHost?: string;
}

function ownUrl(o: { host: string; port: number }): string {
  return `http://${o.host.includes(":") ? `[${o.host}]` : o.host}:${o.port}`;
}

export function registerServerCommands(program: Command): void {
  examples(blobOptions(urlOptions(databaseOptions(program.command("serve")))), [
    "bulwark serve                                   # embedded database in ./data, http://127.0.0.1:8080",
    "bulwark serve --port 9090 --data-dir /var/lib/bulwark",
    "DATABASE_URL=postgres://... BULWARK_KEY_ENCRYPTION_KEY=$(openssl rand -hex 32) bulwark serve --host 0.0.0.0",
  ])
    .description("start the API server (REST/JSON, gRPC, gRPC-Web and Connect on one port)")
    .addOption(
      new Option("--registry-port <port>", "also serve the registry (/v2/, /token) on this port")
        .env("BULWARK_REGISTRY_PORT")
        .argParser(parsePort),
    )
    .addOption(
      new Option("--registry-gc-every <duration>", "collect registry garbage this often (e.g. 6h); default: never")
        .env("BULWARK_REGISTRY_GC_EVERY")
        .argParser(parseDuration),
    )
    .addOption(
      new Option("--registry-gc-grace <duration>", "keep unreferenced registry content this long (default 1h)")
        .env("BULWARK_REGISTRY_GC_GRACE")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--delivery-retry-for <duration>",
        "retry an event's delivery this long after the event before marking it failed (default 24h)",
      )
        .env("BULWARK_DELIVERY_RETRY_FOR")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--delivery-backoff-min <duration>",
        "first delay before retrying a delivery; doubled per attempt, with jitter (default 1s)",
      )
        .env("BULWARK_DELIVERY_BACKOFF_MIN")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--delivery-backoff-max <duration>",
        "longest delay between two attempts of a delivery, a receiver's Retry-After included (default 10m)",
      )
        .env("BULWARK_DELIVERY_BACKOFF_MAX")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--delivery-lease <duration>",
        "how long a replica holds a subscription it delivers to without renewing; a crashed replica's subscriptions move on after this (default 30s)",
      )
        .env("BULWARK_DELIVERY_LEASE")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--delivery-poll <duration>",
        "how often a replica looks for due deliveries besides its own new events (default 1s)",
      )
        .env("BULWARK_DELIVERY_POLL")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--delivery-timeout <duration>",
        "deadline of one delivery request (default 10s; less than half of --delivery-lease)",
      )
        .env("BULWARK_DELIVERY_TIMEOUT")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--delivery-concurrency <n>",
        "subscriptions one replica delivers to at once (default 16; 0: this replica delivers nothing, others do)",
      )
        .env("BULWARK_DELIVERY_CONCURRENCY")
        .argParser(parseCount),
    )
    .addOption(
      new Option(
        "--inventory-concurrency <n>",
        "pushed images one replica reads (packages, config) at once, in the background (default 1; 0: this replica reads none, others do)",
      )
        .env("BULWARK_INVENTORY_CONCURRENCY")
        .argParser(parseCount),
    )
    .addOption(
      new Option(
        "--inventory-lease <duration>",
        "how long a replica holds an image it reads without renewing; a crashed replica's reads move on after this (default 30s)",
      )
        .env("BULWARK_INVENTORY_LEASE")
        .argParser(parsePositiveDuration),
    )
    .addOption(
      new Option(
        "--attach-sboms [bool]",
        "also push each image's generated SPDX SBOM to its repo as an OCI referrer of the image (found by referrer-aware tools)",
      )
        .env("BULWARK_ATTACH_SBOMS")
        .argParser(parseSwitch),
    )
    .addOption(
      new Option(
        "--public-advisories <group>",
        "advisories in this group (uid) are readable by every authenticated caller; the first is where `advisories import` puts documents by default (repeatable)",
      )
        .env("BULWARK_PUBLIC_ADVISORIES")
        .argParser(commaList),
    )
    .addOption(
      new Option("--event-retention <duration>", "keep recorded events (the audit trail) this long (default 90d)")
        .env("BULWARK_EVENT_RETENTION")
        .argParser(parsePositiveDuration),
    )
    .addOption(
      new Option(
        "--audit-log <file>",
        "also write every event this replica records as one JSON line to this file (appended; -: standard output)",
      ).env("BULWARK_AUDIT_LOG"),
    )
    .addOption(
      new Option("--error-domain <domain>", "ErrorInfo.domain reported in errors")
        .env("BULWARK_ERROR_DOMAIN")
        .default(DEFAULT_CONFIG.errorDomain),
    )
    .addOption(new Option("--log-level <level>", "log level").env("BULWARK_LOG_LEVEL").default("info"))
    .addOption(
      new Option("--log-format <format>", "log lines as JSON, or pretty for a person at a terminal")
        .env("BULWARK_LOG_FORMAT")
        .choices(["json", "pretty"])
        .default("json"),
    )
    .addOption(
      new Option("--no-access-log", "log only requests that went wrong, not one line per request").env(
        "BULWARK_NO_ACCESS_LOG",
      ),
    )
    .addOption(
      new Option(
        "--allow-insecure-issuers [bool]",
        "token exchange: accept plain-http OIDC issuers on loopback hosts (tests and local use only)",
      )
        .env("BULWARK_ALLOW_INSECURE_ISSUERS")
        .argParser(parseSwitch),
    )
    .addOption(
      new Option(
        "--allow-private-issuer-addresses [bool]",
        "token exchange: accept OIDC issuers on private, loopback, link-local, CGNAT, ... addresses",
      )
        .env("BULWARK_ALLOW_PRIVATE_ISSUER_ADDRESSES")
        .argParser(parseSwitch),
    )
    .addOption(
      new Option(
        "--allow-insecure-sinks [bool]",
        "event subscriptions: accept http sinks and sinks on loopback, private, link-local, ... addresses (development and tests only)",
      )
        .env("BULWARK_ALLOW_INSECURE_SINKS")
        .argParser(parseSwitch),
    )
    .addOption(
      new Option("--upstream-issuer <url>", "sign-in: the platform's default upstream OIDC provider for people").env(
        "BULWARK_UPSTREAM_ISSUER",
      ),
    )
    .addOption(
      new Option("--upstream-client-id <id>", "sign-in: this server's client id at the upstream provider").env(
        "BULWARK_UPSTREAM_CLIENT_ID",
      ),
    )
    .addOption(
      new Option(
        "--upstream-client-secret <secret>",
        "sign-in: its client secret (prefer the env variable; omit for a public client with PKCE)",
      ).env("BULWARK_UPSTREAM_CLIENT_SECRET"),
    )
    .addOption(
      new Option(
        "--cors-origin <origin>",
        'allow browser apps on this origin (repeatable; "*": any); default: CORS off',
      )
        .env("BULWARK_CORS_ORIGINS")
        .argParser(commaList),
    )
    .addOption(
      new Option("--trust-proxy [bool]", "behind a reverse proxy: the client's address is in X-Forwarded-For")
        .env("BULWARK_TRUST_PROXY")
        .argParser(parseSwitch),
    )
    .addOption(
      new Option("--body-timeout <duration>", "answer 400 to a request body that sends nothing this long (default 30s)")
        .env("BULWARK_BODY_TIMEOUT")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--drain-delay <duration>",
        "on SIGTERM/SIGINT: answer /readyz 503 this long, still serving, before the listener closes (load balancers stop sending first; default 0s)",
      )
        .env("BULWARK_DRAIN_DELAY")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--shutdown-timeout <duration>",
        "on SIGTERM/SIGINT: the bound of the whole shutdown, drain delay included; connections still open then are cut and the exit status is 1 (default 30s)",
      )
        .env("BULWARK_SHUTDOWN_TIMEOUT")
        .argParser(parsePositiveDuration),
    )
    .addOption(new Option("--no-rate-limit", "turn every rate limit off").env("BULWARK_NO_RATE_LIMIT"))
    .addOption(
      new Option(
        "--unsafe-no-fsync [bool]",
        "embedded database: never wait for the disk (survives a process kill, not a power loss, which can corrupt it); tests and scratch data only",
      )
        .env("BULWARK_UNSAFE_NO_FSYNC")
        .argParser(parseSwitch),
    )
    .addOption(
      new Option(
        "--no-prepared-statements",
        "PostgreSQL: send every statement unprepared (for a pooler that cannot keep prepared statements)",
      ).env("BULWARK_NO_PREPARED_STATEMENTS"),
    )
    .addOption(
      new Option(
        "--no-pipelining",
        "PostgreSQL: wait for each statement's answer before sending the next (for a proxy that cannot take pipelined statements or delays small packets)",
      ).env("BULWARK_NO_PIPELINING"),
    )
    .addOption(
      new Option("--rate-limit-address <rate>", "requests per client address: <per second>[:<burst>] or off")
        .env("BULWARK_RATE_LIMIT_ADDRESS")
        .argParser(parseRateLimit),
    )
    .addOption(
      new Option("--rate-limit-identity <rate>", "requests per identity: <per second>[:<burst>] or off")
        .env("BULWARK_RATE_LIMIT_IDENTITY")
        .argParser(parseRateLimit),
    )
    .addOption(
      new Option(
        "--rate-limit-sensitive <rate>",
        "token exchange, OAuth token and device endpoints, per address: <per second>[:<burst>] or off",
      )
        .env("BULWARK_RATE_LIMIT_SENSITIVE")
        .argParser(parseRateLimit),
    )
    .addOption(
      new Option(
        "--rate-limit-failed-auth <rate>",
        "refused credentials per address and per principal named, before more are answered 429: <per second>[:<burst>] or off",
      )
        .env("BULWARK_RATE_LIMIT_FAILED_AUTH")
        .argParser(parseRateLimit),
    )
    .addOption(
      new Option(
        "--metrics-port <port>",
        "serve Prometheus metrics at /metrics on this port, without credentials (keep it private); default: off",
      )
        .env("BULWARK_METRICS_PORT")
        .argParser(parsePort),
    )
    .addOption(
      new Option(
        "--metrics-host <host>",
        "the address the metrics port binds (default: 127.0.0.1, whatever --host is: it answers without credentials)",
      ).env("BULWARK_METRICS_HOST"),
    )
    .addOption(
      new Option("--metrics [bool]", "also serve /metrics on the main port, to the operator's token only")
        .env("BULWARK_METRICS")
        .argParser(parseSwitch),
    )
    .action(
      async (
        opts: UrlOpts &
          BlobOpts & {
            metricsPort?: number;
            metricsHost?: string;
            metrics?: boolean;
            registryPort?: number;
            registryGcEvery?: number;
            registryGcGrace?: number;
            eventRetention?: number;
            auditLog?: string;
            deliveryRetryFor?: number;
            deliveryBackoffMin?: number;
            deliveryBackoffMax?: number;
            deliveryLease?: number;
            deliveryPoll?: number;
            deliveryTimeout?: number;
            deliveryConcurrency?: number;
            inventoryConcurrency?: number;
            inventoryLease?: number;
            attachSboms?: boolean;
            publicAdvisories?: string[];
            corsOrigin?: string[];
            trustProxy?: boolean;
            bodyTimeout?: number;
            drainDelay?: number;
            shutdownTimeout?: number;
            rateLimit: boolean;
            unsafeNoFsync?: boolean;
            preparedStatements: boolean;
            pipelining: boolean;
            rateLimitAddress?: RateLimit | null;
            rateLimitIdentity?: RateLimit | null;
            rateLimitSensitive?: RateLimit | null;
            rateLimitFailedAuth?: RateLimit | null;
            dataDir: string;
            databaseUrl?: string;
            errorDomain: string;
            logLevel: string;
            logFormat: "json" | "pretty";
            accessLog: boolean;
            allowInsecureIssuers?: boolean;
            allowPrivateIssuerAddresses?: boolean;
            allowInsecureSinks?: boolean;
            upstreamIssuer?: string;
            upstreamClientId?: string;
            upstreamClientSecret?: string;
          },
        command: Command,
      ) => {
        const io = ioOf(command);
        if (!opts.databaseUrl) {
          setFlagsFromString(SERVE_V8_FLAGS);
          // PGlite's WebAssembly compiles on V8's background threads while this thread loads the
          // server's modules (~60 ms of a start spent waiting for it otherwise); openDatabase takes it.
          void import("../../storage/pglite-wasm.js").then(({ pgliteWasmModule }) => pgliteWasmModule());
        }
        const [
          { pino },
          { startServer, DEFAULT_SHUTDOWN_TIMEOUT_MS },
          { keyEncryptionKeyFromEnv },
          { DEFAULT_RATE_LIMITS },
          { tracingFromEnv },
          pretty,
        ] = await Promise.all([
          import("pino"),
          import("../../server/start.js"),
          import("../../storage/db.js"),
          import("../../server/limits.js"),
          import("../../server/tracing.js"),
          opts.logFormat === "pretty" ? import("pino-pretty") : undefined,
        ]);
        // Pretty lines are formatted in this thread, synchronously: pino.transport's worker thread
        // resolves modules by name, which the bundled binary cannot.
        const logger = pretty
          ? pino(
              { level: opts.logLevel },
              pretty.default({ sync: true, singleLine: true, translateTime: "SYS:standard" }),
            )
          : pino({ level: opts.logLevel });
        for (const group of opts.publicAdvisories ?? [])
          if (!isValidUidp(group))
            throw new CliError(`--public-advisories: ${JSON.stringify(group)} is not a group uid`);
        if (Boolean(opts.upstreamIssuer) !== Boolean(opts.upstreamClientId))
          throw new CliError("--upstream-issuer and --upstream-client-id go together");
        const defaultUpstream =
          opts.upstreamIssuer && opts.upstreamClientId
            ? {
                issuer: opts.upstreamIssuer,
                clientId: opts.upstreamClientId,
                clientSecret: opts.upstreamClientSecret || undefined,
              }
            : undefined;
        // BULWARK_KEY_ENCRYPTION_KEY: PostgreSQL's key-encryption key (an embedded data directory keeps its own)
        const keyEncryptionKey = opts.databaseUrl ? keyEncryptionKeyFromEnv(io.env) : undefined;
        const chosen = (flag: RateLimit | null | undefined, fallback: RateLimit) =>
          flag === null ? undefined : (flag ?? fallback);
        const rateLimits: RateLimitSettings | false = opts.rateLimit && {
          address: chosen(opts.rateLimitAddress, DEFAULT_RATE_LIMITS.address),
          identity: chosen(opts.rateLimitIdentity, DEFAULT_RATE_LIMITS.identity),
          sensitive: chosen(opts.rateLimitSensitive, DEFAULT_RATE_LIMITS.sensitive),
          failedAuthentication: chosen(opts.rateLimitFailedAuth, DEFAULT_RATE_LIMITS.failedAuthentication),
        };
        // Signals are handled from here on: a stop asked for while the server starts (it may be
        // opening the database, or recording its URLs after it began answering) waits for that to
        // end, then closes as usual, so the database shuts down cleanly and its lock is released.
        // Repeats are ignored: Ctrl-C under `npm start` delivers SIGINT twice (the terminal's, and
        // npm's forwarded one).
        // The exit status says whether the stop was clean: 0 once every request accepted was
        // answered and the database closed; 1 when the shutdown timeout cut connections (or the
        // close failed), so a supervisor records that requests were lost. Data is safe either way:
        // transactions are atomic and an upload cut mid-chunk resumes from its last whole one.
        let server: Awaited<ReturnType<typeof startServer>> | undefined;
        let stopping = false;
        const shutdownTimeoutMs = opts.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
        const closeAndExit = async (running: NonNullable<typeof server>) => {
          // The close cuts connections at the bound; this ends the process should closing the
          // modules or the database after that hang. Armed here, not at the signal: a stop asked
          // for during a long start (migrations) waits for the start to end.
          setTimeout(() => {
            logger.error({ shutdownTimeoutMs }, "shutdown did not finish: exiting");
            process.exit(1);
          }, shutdownTimeoutMs + CLOSE_AFTER_BOUND_MS).unref();
          try {
            const { cutConnections } = await running.shutdown();
            logger.info({ cutConnections }, cutConnections ? "stopped, connections cut" : "stopped");
            process.exit(cutConnections ? 1 : 0);
          } catch (err) {
            logger.error({ err }, "error during shutdown");
            process.exit(1);
          }
        };
        const stop = (signal: string) => {
          if (stopping) return;
          stopping = true;
          logger.info({ signal }, "shutting down");
          if (server) void closeAndExit(server); // else once startServer is done, below
        };
        process.on("SIGTERM", () => stop("SIGTERM"));
        process.on("SIGINT", () => stop("SIGINT"));
        server = await startServer({
          ...opts,
          defaultUpstream,
          keyEncryptionKey,
          logger,
          rateLimits,
          corsOrigins: opts.corsOrigin,
          bodyTimeoutMs: opts.bodyTimeout,
          drainDelayMs: opts.drainDelay,
          shutdownTimeoutMs,
          // OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT): traces exported over OTLP/HTTP
          tracing: tracingFromEnv(io.env),
          metrics: { port: opts.metricsPort, host: opts.metricsHost, onMainPort: opts.metrics === true },
          moduleSettings: {
            events: {
              allowInsecureSinks: opts.allowInsecureSinks,
              deliveryRetryForMs: opts.deliveryRetryFor,
              deliveryBackoffMinMs: opts.deliveryBackoffMin,
              deliveryBackoffMaxMs: opts.deliveryBackoffMax,
              deliveryLeaseMs: opts.deliveryLease,
              deliveryPollMs: opts.deliveryPoll,
              deliveryTimeoutMs: opts.deliveryTimeout,
              deliveryConcurrency: opts.deliveryConcurrency,
              retentionMs: opts.eventRetention,
              auditLog: opts.auditLog || undefined,
            },
            vulnerabilities: { publicGroups: opts.publicAdvisories ?? [] },
            images: {
              inventoryConcurrency: opts.inventoryConcurrency,
              inventoryLeaseMs: opts.inventoryLease,
              attachSboms: opts.attachSboms,
            },
            registry: registrySettings(
              io.env,
              { ...opts, blobDir: opts.blobDir ?? (opts.s3Bucket ? undefined : join(opts.dataDir, "registry")) },
              { gcIntervalMs: opts.registryGcEvery, gcGraceMs: opts.registryGcGrace },
            ),
          },
        });
        const codeCache = launchedCodeCache();
        logger.info(
          {
            url: server.url,
            issuer: server.urls.issuer,
            database: server.backend === "postgres" ? "postgres" : `pglite:${opts.dataDir}`,
            registryHost: server.urls.registryAudience,
            ...(codeCache ? { codeCache: codeCache.state } : {}),
          },
          `bulwark listening on ${server.url}` +
            (server.registryPort === undefined ? "" : ` (registry also on port ${server.registryPort})`) +
            (server.metricsPort === undefined ? "" : ` (metrics on port ${server.metricsPort})`),
        );
        // The build's making start writes the cache now: it holds what the start compiled (under the
        // start's flags, which V8 checks a cache against: so before they are turned back).
        codeCache?.started();
        for (const flag of LISTENING_V8_FLAGS) setFlagsFromString(flag);
        if (stopping) await closeAndExit(server);
      },
    );

  const admin = program
    .command("admin")
    .description("operator commands (need access to the database, not the network)");
  examples(databaseOptions(admin.command("token")), [
    "BULWARK_TOKEN=$(bulwark admin token) bulwark iam organizations list",
    "bulwark admin token --data-dir /var/lib/bulwark",
    "DATABASE_URL=postgres://... BULWARK_KEY_ENCRYPTION_KEY=... bulwark admin token",
  ])
    .description(
      "print a one-hour API token for the platform operator, who may do everything; its issuer and audience " +
        "are the ones the server last started with (recorded in the database), unless given here",
    )
    .addOption(new Option("--audience <aud>", "token audience (default: the API URL)"))
    .addOption(
      new Option("--port <port>", "the server's port, when it runs with URLs other than it recorded").argParser(
        parsePort,
      ),
    )
    .addOption(new Option("--host <host>", "the server's host, with --port (default 127.0.0.1)"))
    .addOption(new Option("--issuer-url <url>", "{auth_url}: the token's issuer (default: what the server recorded)"))
    .addOption(new Option("--api-url <url>", "{base_url}: the API audience (default: what the server recorded)"))
    .addOption(
      new Option(
        "--registry-host <host>",
        "{registry_host}: the registry audience (default: what the server recorded)",
      ),
    )
    .addOption(
      new Option("--wait <duration>", "how long to wait for a starting server to publish its signing key")
        .default(30_000, "30s")
        .argParser(parseDuration),
    )
    .action(
      async (
        opts: {
          dataDir: string;
          databaseUrl?: string;
          audience?: string;
          wait: number;
          port?: number;
          host?: string;
          issuerUrl?: string;
          apiUrl?: string;
          registryHost?: string;
        },
        command: Command,
      ) => {
        const io = ioOf(command);
        const [{ adminToken }, { keyEncryptionKeyFromEnv }] = await Promise.all([
          import("../admin.js"),
          import("../../storage/db.js"),
        ]);
        const own = ownUrl({ host: opts.host ?? DEFAULT_CONFIG.host, port: opts.port ?? DEFAULT_CONFIG.port });
        const given = opts.port !== undefined || opts.host !== undefined ? own : undefined;
        const { token } = await adminToken({
          dataDir: opts.dataDir,
          databaseUrl: opts.databaseUrl,
          keyEncryptionKey: opts.databaseUrl ? keyEncryptionKeyFromEnv(io.env) : undefined,
          say: (line) => void io.stderr.write(`bulwark: ${line}\n`),
          urls: {
            issuer: opts.issuerUrl ?? given,
            apiAudience: opts.apiUrl ?? given,
            registryAudience: opts.registryHost ?? (given && new URL(given).host),
          },
          fallbackUrls: { issuer: own, apiAudience: own, registryAudience: new URL(own).host },
          audience: opts.audience,
          waitMs: opts.wait,
        });
        io.stdout.write(token + "\n");
      },
    );
  const registry = program
    .command("registry")
    .description("registry maintenance (on the database, or through the server that holds it)");
  examples(blobOptions(databaseOptions(registry.command("gc"))), [
    "bulwark registry gc --dry-run",
    "bulwark registry gc --grace 24h --data-dir /var/lib/bulwark",
    "BULWARK_TOKEN=$(bulwark admin token) bulwark registry gc --server https://bulwark.example.com",
  ])
    .description(
      "remove untagged manifests and unreferenced blobs older than the grace window: through the server when one " +
        "holds the embedded data directory (with an operator token minted from it) or with --server (the CLI's " +
        "token, the operator's); otherwise on the database directly (PostgreSQL: safe while replicas serve)",
    )
    .option("--dry-run", "only report what would be removed")
    .addOption(
      new Option(
        "--grace <duration>",
        "keep what changed within this window (default 1h; through a server: its --registry-gc-grace)",
      ).argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--server <url>",
        "ask this running server to collect (its API URL; token: BULWARK_TOKEN, BULWARK_TOKEN_FILE or `bulwark auth login`)",
      ),
    )
    .option("--insecure", "allow --server to be plain http to another host (the token crosses the network unencrypted)")
    .action(
      async (
        opts: BlobOpts & {
          dataDir: string;
          databaseUrl?: string;
          dryRun?: boolean;
          grace?: number;
          server?: string;
          insecure?: boolean;
        },
        command: Command,
      ) => {
        const io = ioOf(command);
        const [{ registryGc }, { keyEncryptionKeyFromEnv }, { CollectionRunningError }] = await Promise.all([
          import("../registry.js"),
          import("../../storage/db.js"),
          import("../../registry/api.js"),
        ]);
        const report = await registryGc({
          dataDir: opts.dataDir,
          databaseUrl: opts.databaseUrl,
          keyEncryptionKey: opts.databaseUrl ? keyEncryptionKeyFromEnv(io.env) : undefined,
          registry: registrySettings(io.env, opts),
          graceMs: opts.grace,
          dryRun: opts.dryRun === true,
          server: opts.server,
          insecure: opts.insecure,
          fallbackUrl: ownUrl({ host: DEFAULT_CONFIG.host, port: DEFAULT_CONFIG.port }),
          env: io.env,
          say: (line) => void io.stderr.write(`bulwark: ${line}\n`),
        }).catch((err: unknown) => {
          if (err instanceof CollectionRunningError)
            throw new CliError(`${err.message}: try again once it has finished`);
          throw err;
        });
        const verb = opts.dryRun ? "would remove" : "removed";
        io.stdout.write(
          `${verb}: ${report.manifests} manifests, ${report.blobLinks} blob links, ${report.blobs} blobs ` +
            `(${report.bytes} bytes), ${report.uploads} abandoned uploads\n`,
        );
      },
    );

  examples(blobOptions(program.command("backup")), [
    "bulwark backup bulwark-$(date +%F).tar.gz --data-dir /var/lib/bulwark   # the server keeps serving",
    "BULWARK_TOKEN=$(bulwark admin token) bulwark backup b.tar.gz --server https://bulwark.example.com",
  ])
    .description(
      "write a consistent backup of an embedded server (database, key-encryption key, blobs) to <file>, " +
        "through the server when one runs on the data directory, else by opening it; the file is secret (0600)",
    )
    .argument("<file>", "the archive to write (a gzipped tar)")
    .addOption(
      new Option("--data-dir <dir>", "embedded PGlite data directory")
        .env("BULWARK_DATA_DIR")
        .default(DEFAULT_CONFIG.dataDir),
    )
    .addOption(
      new Option("--server <url>", "back up this server over the network (the operator's token in BULWARK_TOKEN)"),
    )
    .option("--insecure", "allow --server to be plain http to another host (the token crosses the network unencrypted)")
    .action(
      async (
        file: string,
        opts: BlobOpts & { dataDir: string; server?: string; insecure?: boolean },
        command: Command,
      ) => {
        const io = ioOf(command);
        const { backup } = await import("../backup.js");
        const own = ownUrl({ host: DEFAULT_CONFIG.host, port: DEFAULT_CONFIG.port });
        const report = await backup({
          file,
          dataDir: opts.dataDir,
          server: opts.server,
          insecure: opts.insecure,
          token: io.env.BULWARK_TOKEN,
          registry: registrySettings(io.env, opts),
          fallbackUrls: { issuer: own, apiAudience: own, registryAudience: new URL(own).host },
          say: (line) => void io.stderr.write(`bulwark: ${line}\n`),
        });
        io.stderr.write(
          `bulwark: wrote ${report.file} (${report.bytes} bytes, ${report.how === "server" ? "from the running server" : "offline"}); ` +
            "it holds the data directory's key-encryption key: keep it as secret as the data directory\n",
        );
      },
    );

  examples(program.command("restore"), [
    "bulwark restore bulwark-2026-01-31.tar.gz --data-dir /var/lib/bulwark-restored",
  ])
    .description(
      "restore a backup into a new or empty data directory, verifying the database snapshot and every blob; " +
        "a damaged archive changes nothing",
    )
    .argument("<file>", "the archive `bulwark backup` wrote")
    .addOption(
      new Option("--data-dir <dir>", "the new data directory (absent or empty)")
        .env("BULWARK_DATA_DIR")
        .makeOptionMandatory(),
    )
    .addOption(
      new Option("--blob-dir <dir>", "where the blobs go (default: <data dir>/registry, where serve looks)").env(
        "BULWARK_BLOB_DIR",
      ),
    )
    .action(async (file: string, opts: { dataDir: string; blobDir?: string }, command: Command) => {
      const io = ioOf(command);
      const { restoreArchive } = await import("../../operations/api.js");
      const report = await restoreArchive({ file, dataDir: opts.dataDir, blobDir: opts.blobDir }).catch(
        (err: Error) => {
          throw new CliError(err.message);
        },
      );
      io.stdout.write(
        `restored ${opts.dataDir}: the database as of ${report.manifest.created} ` +
          `(Bulwark ${report.manifest.bulwarkVersion}; ${report.databaseBytes} bytes), ${report.blobs} blobs ` +
          `(${report.bytes} bytes), all verified\n`,
      );
    });
}
