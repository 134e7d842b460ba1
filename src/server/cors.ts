// CORS for browser apps and gRPC-Web clients on other origins: off unless origins are listed
// (`--cors-origin`, repeatable). Bearer tokens, not cookies, authenticate API calls, so
// credentials are never allowed cross-origin.
import type { FastifyReply, FastifyRequest } from "fastify";

export interface CorsSettings {
  /** exact origins ("https://app.example.com"), or "*" for any */
  origins: readonly string[];
}

const ALLOWED_METHODS = "GET, POST, PUT, PATCH, DELETE";
/** What Connect, gRPC-Web and REST clients send. */
const ALLOWED_HEADERS = [
  "authorization",
  "content-type",
  "accept",
  "connect-protocol-version",
  "connect-timeout-ms",
  "connect-accept-encoding",
  "connect-content-encoding",
  "grpc-timeout",
  "grpc-accept-encoding",
  "x-grpc-web",
  "x-user-agent",
].join(", ");
/** What scripts may read of a response: the gRPC status (gRPC-Web puts it in headers) and retry hints. */
const EXPOSED_HEADERS = [
  "grpc-status",
  "grpc-message",
  "grpc-status-details-bin",
  "retry-after",
  "www-authenticate",
].join(", ");
const PREFLIGHT_MAX_AGE_SECONDS = "7200";

/**
 * Adds the CORS headers a request's origin may have; answers a preflight itself (returns true:
 * the request is done).
 */
export function applyCors(settings: CorsSettings, request: FastifyRequest, reply: FastifyReply): boolean {
  const origin = request.headers.origin;
  const res = reply.raw;
  res.setHeader("vary", "Origin");
  if (!origin || !(settings.origins.includes("*") || settings.origins.includes(origin))) return false;
  res.setHeader("access-control-allow-origin", origin);
  const isPreflight = request.method === "OPTIONS" && request.headers["access-control-request-method"] !== undefined;
  if (!isPreflight) {
    res.setHeader("access-control-expose-headers", EXPOSED_HEADERS);
    return false;
  }
  res.setHeader("access-control-allow-methods", ALLOWED_METHODS);
  res.setHeader("access-control-allow-headers", ALLOWED_HEADERS);
  res.setHeader("access-control-max-age", PREFLIGHT_MAX_AGE_SECONDS);
  reply.hijack();
  res.writeHead(204);
  res.end();
  return true;
}
