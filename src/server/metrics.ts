// The server's Prometheus exposition: what the server itself measures (build info, the database's
// statements and pool), the process's own metrics, and where /metrics is served. Off by default.
// - A separate port (`--metrics-port`, bound to `--metrics-host`): GET /metrics and nothing else,
//   without credentials, as Harbor and zot serve theirs: the port is the operator's to keep private.
// - The main port (`--metrics`): GET /metrics answers only the platform operator's token; the
//   counts of every tenant's traffic are nobody else's business.
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { Code, ConnectError } from "@connectrpc/connect";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Logger } from "pino";
import { httpStatusFor, permissionDenied } from "../core/errors.js";
import { VERSION } from "../core/version.js";
import type { PlainRouter } from "../platform/routes.js";
import type { MetricsRegistry } from "../platform/telemetry.js";
import type { Db, PoolStats } from "../storage/db.js";
import { observeQueries } from "../storage/observed.js";
import { statusJson } from "./protocol-errors.js";

/** Where /metrics is served (absent or empty: nowhere; the registry still counts). */
export interface MetricsSettings {
  /** serve GET /metrics, without credentials, on a listener of its own on this port (0: any free one) */
  port?: number;
  /** the address that listener binds (default: the server's host) */
  host?: string;
  /** serve GET /metrics on the main port, to the platform operator's token only */
  onMainPort?: boolean;
}

/** The path the exposition is served at. */
export const METRICS_PATH = "/metrics";

let processRegistry: Registry | undefined;

/**
 * The process's own metrics (CPU, memory, heap, event-loop lag, GC, file descriptors), prefixed
 * `bulwark_`. Made once per process, not per server: prom-client's collectors install process-wide
 * monitors (an event-loop delay histogram, a GC observer) that cannot be removed, and what they
 * measure is the process's, whichever server of it is scraped.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry, prefix: "bulwark_" });
  }
  return processRegistry;
}

/** The exposition a scrape gets: the server's metrics, then the process's. */
export async function exposition(registry: MetricsRegistry): Promise<string> {
  const [own, process] = await Promise.all([registry.metrics(), processMetrics().metrics()]);
  return own.endsWith("\n") || own === "" ? own + process : `${own}\n${process}`;
}

/** The exposition's content type (Prometheus text format 0.0.4). */
export function expositionType(registry: MetricsRegistry): string {
  return registry.contentType;
}

/** `bulwark_build_info{version}` = 1: which build answers (join it onto other series by instance). */
export function registerBuildInfo(registry: MetricsRegistry): void {
  new Gauge({
    name: "bulwark_build_info",
    help: "The running build: always 1, with its version as a label",
    labelNames: ["version"],
    registers: [registry],
  }).set({ version: VERSION }, 1);
}

/** The kinds of statement timed apart; anything else is "other". The SQL text itself is never a label. */
const STATEMENT_KINDS = new Set(["select", "insert", "update", "delete", "begin", "commit", "rollback", "savepoint"]);

/** A statement's kind by its first word (`start transaction` is a begin, `release savepoint` a savepoint). */
export function statementKind(sql: string): string {
  const word = /^\s*([A-Za-z]+)/.exec(sql)?.[1]?.toLowerCase() ?? "";
  if (word === "start") return "begin";
  if (word === "release") return "savepoint";
  return STATEMENT_KINDS.has(word) ? word : "other";
}

/** Seconds: from a cached lookup (~0.1 ms) to a long migration or a lock wait. */
const QUERY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

/**
 * Times every statement the database sends (by kind, never its text or parameters) and, on
 * PostgreSQL, reports the pool's occupancy at scrape. Returns the removal of the statement observer.
 */
export function registerDatabaseMetrics(registry: MetricsRegistry, db: Db, poolStats?: () => PoolStats): () => void {
  const registers = [registry];
  const duration = new Histogram({
    name: "bulwark_db_query_duration_seconds",
    help: "Time from sending a statement to its answer, by statement kind (select, insert, update, delete, begin, commit, rollback, savepoint, other)",
    labelNames: ["statement"],
    buckets: QUERY_BUCKETS,
    registers,
  });
  const errors = new Counter({
    name: "bulwark_db_query_errors_total",
    help: "Statements that failed (constraint violations, serialization failures, lost connections), by statement kind",
    labelNames: ["statement"],
    registers,
  });
  if (poolStats) {
    const gauge = (name: string, help: string, read: (stats: PoolStats) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read(poolStats()));
        },
      });
    gauge("bulwark_db_pool_connections", "PostgreSQL connections the pool holds open (busy or idle)", (s) => s.total);
    gauge("bulwark_db_pool_idle_connections", "PostgreSQL connections open and idle in the pool", (s) => s.idle);
    gauge(
      "bulwark_db_pool_waiting_queries",
      "Queries waiting for a PostgreSQL connection from the pool",
      (s) => s.waiting,
    );
    gauge("bulwark_db_pool_max_connections", "The most PostgreSQL connections the pool opens", (s) => s.max);
  }
  return observeQueries(db, (sql) => {
    const started = performance.now();
    return (error) => {
      const statement = statementKind(sql);
      duration.observe({ statement }, (performance.now() - started) / 1000);
      if (error !== undefined) errors.inc({ statement });
    };
  });
}

/** GET /metrics on the main port: the platform operator's token only (any other caller is refused). */
export function metricsRoute(registry: MetricsRegistry): (router: PlainRouter) => void {
  return (router) =>
    router.route({
      method: "GET",
      url: METRICS_PATH,
      // Any valid API token gets past authentication; the handler then wants the operator's.
      access: () => ({ audience: "api", capabilities: [] }),
      handler: async (_request, reply, call) => {
        if (!call.access?.isOperator) throw permissionDenied("the metrics are for the platform operator");
        return reply
          .header("content-type", expositionType(registry))
          .header("cache-control", "no-store")
          .send(await exposition(registry));
      },
    });
}

/** A listener of its own serving GET /metrics (and HEAD) without credentials; anything else is refused. */
export async function listenForMetrics(
  registry: MetricsRegistry,
  port: number,
  host: string,
  logger: Logger,
): Promise<{ port: number; close(): Promise<void> }> {
  const refuse = (res: ServerResponse, err: ConnectError, status = httpStatusFor(err.code), headers = {}) => {
    res.writeHead(status, {
      "content-type": "application/json",
      "x-content-type-options": "nosniff",
      ...headers,
    });
    res.end(JSON.stringify(statusJson(err)));
  };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== METRICS_PATH)
      return refuse(res, new ConnectError(`Not found: this port serves only ${METRICS_PATH}`, Code.NotFound));
    if (req.method !== "GET" && req.method !== "HEAD")
      return refuse(res, new ConnectError(`${METRICS_PATH} answers GET only`, Code.Unimplemented), 405, {
        allow: "GET, HEAD",
      });
    exposition(registry).then(
      (text) => {
        res.writeHead(200, {
          "content-type": expositionType(registry),
          "cache-control": "no-store",
          "x-content-type-options": "nosniff",
        });
        res.end(req.method === "HEAD" ? undefined : text);
      },
      (err: unknown) => {
        logger.error({ err }, "metrics: the exposition could not be made");
        refuse(res, new ConnectError("the metrics could not be collected", Code.Internal));
      },
    );
  });
  // A scrape is one short request: idle keep-alive connections do not hold the close up.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
