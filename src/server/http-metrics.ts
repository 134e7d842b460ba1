// Every answered request, counted and timed: by protocol, method, route template (the transcoder's
// rule, a plain route's template, an RPC's full path; never the raw path, which holds uids), HTTP
// status and, for RPC protocols, the RPC code; its body bytes in and out; and which rate limit
// refused it. Fastify's onResponse runs once the answer is out for every request, hijacked ones
// (Connect, gRPC) included; the transports note what the status alone does not say on the
// request's Outcome (request-log.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Code } from "@connectrpc/connect";
import { Counter, Histogram } from "prom-client";
import type { MetricsRegistry } from "../platform/telemetry.js";
import { limitOf } from "./limits.js";
import { isRpcPath } from "./protocol-errors.js";
import { outcomeOf, routeOf, routeTemplateOf, trafficOf } from "./request-log.js";

/** Seconds: from a cached read (~1 ms) to a large blob or a slow database (a minute). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const LABELS = ["protocol", "method", "route", "status", "code"] as const;
const BYTE_LABELS = ["protocol", "method", "route"] as const;

export function registerHttpMetrics(fastify: FastifyInstance, registry: MetricsRegistry): void {
  const requests = new Counter({
    name: "bulwark_http_requests_total",
    help: "Answered requests, by protocol, method, route template, HTTP status and RPC code",
    labelNames: LABELS,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "bulwark_http_request_duration_seconds",
    help: "Time from a request's arrival until its answer was out, by the same labels as bulwark_http_requests_total",
    labelNames: LABELS,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const bytesIn = new Counter({
    name: "bulwark_http_request_bytes_total",
    help: "Request body bytes received, by protocol, method and route template",
    labelNames: BYTE_LABELS,
    registers: [registry],
  });
  const bytesOut = new Counter({
    name: "bulwark_http_response_bytes_total",
    help: "Response body bytes sent, by protocol, method and route template",
    labelNames: BYTE_LABELS,
    registers: [registry],
  });
  const refusals = new Counter({
    name: "bulwark_rate_limit_refusals_total",
    help: "Requests answered RESOURCE_EXHAUSTED (429) by a rate limit, by which limit",
    labelNames: ["limit"],
    registers: [registry],
  });

  // Body bytes are the access log's counts (request-log.ts countTraffic, which app.ts starts on every request).
  fastify.addHook("onResponse", (request, reply, done) => {
    const outcome = outcomeOf(request);
    const protocol = protocolOf(request);
    const route = routeOf(request);
    const status = outcome.status ?? reply.statusCode;
    const labels = {
      protocol,
      method: request.method,
      route,
      status: String(status),
      code: codeOf(protocol, outcome.code, status),
    };
    requests.inc(labels);
    duration.observe(labels, reply.elapsedTime / 1000);
    const bytes = trafficOf(request, reply);
    const byteLabels = { protocol, method: request.method, route };
    bytesIn.inc(byteLabels, bytes.in ?? 0);
    bytesOut.inc(byteLabels, bytes.out ?? 0);
    const limit = limitOf(outcome.thrown);
    if (limit) refusals.inc({ limit });
    done();
  });
}

/** grpc, grpc-web, connect (an RPC path not in a gRPC content type) or http (REST, plain routes). */
function protocolOf(request: FastifyRequest): string {
  const type = request.headers["content-type"];
  if (typeof type === "string" && type.startsWith("application/grpc"))
    return type.startsWith("application/grpc-web") ? "grpc-web" : "grpc";
  const route = routeTemplateOf(request);
  return route !== undefined && isRpcPath(route) ? "connect" : "http";
}

/** The RPC's code name for RPC protocols ("OK" for a success); empty for REST and plain routes. */
function codeOf(protocol: string, code: Code | undefined, status: number): string {
  if (code !== undefined) return Code[code] ?? "UNKNOWN";
  if (protocol === "http") return "";
  return status < 400 ? "OK" : "";
}
