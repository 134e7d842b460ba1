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
import { outcomeOf } from "./request-log.js";

/** The route label of a request no route matched. */
export const NO_ROUTE = "(no route)";

/** Seconds: from a cached read (~1 ms) to a large blob or a slow database (a minute). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const LABELS = ["protocol", "method", "route", "status", "code"] as const;
const BYTE_LABELS = ["protocol", "method", "route"] as const;

/** Body bytes of one request, counted as they pass (streams have no Content-Length). */
interface Transferred {
  in: number;
  out: number;
}

const transferred = new WeakMap<FastifyRequest, Transferred>();

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

  fastify.addHook("onRequest", (request, reply, done) => {
    transferred.set(request, countBodies(request, reply));
    done();
  });
  fastify.addHook("onResponse", (request, reply, done) => {
    const outcome = outcomeOf(request);
    const protocol = protocolOf(request);
    const route = outcome.route ?? request.routeOptions.url ?? NO_ROUTE;
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
    const bytes = transferred.get(request);
    if (bytes) {
      const byteLabels = { protocol, method: request.method, route };
      bytesIn.inc(byteLabels, bytes.in);
      bytesOut.inc(byteLabels, bytes.out);
    }
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
  const route = request.routeOptions.url;
  return route !== undefined && isRpcPath(route) ? "connect" : "http";
}

/** The RPC's code name for RPC protocols ("OK" for a success); empty for REST and plain routes. */
function codeOf(protocol: string, code: Code | undefined, status: number): string {
  if (code !== undefined) return Code[code] ?? "UNKNOWN";
  if (protocol === "http") return "";
  return status < 400 ? "OK" : "";
}

function byteLength(chunk: unknown, encoding: unknown): number {
  if (typeof chunk === "string")
    return Buffer.byteLength(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
  return chunk instanceof Uint8Array ? chunk.byteLength : 0;
}

/**
 * Counts the body bytes a request receives and its answer sends, on HTTP/1.1 and HTTP/2 alike:
 * Node's parsers hand each received chunk to the request's `push`, and every answer (Fastify's,
 * Connect's, a piped blob) leaves through the response's `write` and `end`.
 */
function countBodies(request: FastifyRequest, reply: FastifyReply): Transferred {
  const counted: Transferred = { in: 0, out: 0 };
  const req = request.raw as unknown as { push(chunk: unknown, encoding?: unknown): boolean };
  const push = req.push;
  req.push = function (chunk, encoding) {
    counted.in += byteLength(chunk, encoding);
    return push.call(this, chunk, encoding);
  };
  const res = reply.raw as unknown as {
    write(chunk: unknown, ...rest: unknown[]): boolean;
    end(chunk?: unknown, ...rest: unknown[]): unknown;
  };
  const write = res.write;
  const end = res.end;
  // HTTP/2's end() writes its chunk through write(): counted once, there.
  let ending = false;
  res.write = function (chunk, ...rest) {
    if (!ending) counted.out += byteLength(chunk, rest[0]);
    return write.call(this, chunk, ...rest);
  };
  res.end = function (chunk, ...rest) {
    if (typeof chunk !== "function") counted.out += byteLength(chunk, rest[0]);
    ending = true;
    try {
      return end.call(this, chunk, ...rest);
    } finally {
      ending = false;
    }
  };
  return counted;
}
