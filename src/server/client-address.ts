// The client's address, the key of every per-address limit. Behind --trust-proxy it comes from
// X-Forwarded-For, which a client may fill with anything: a value that is not an IP address is
// not taken (each distinct string would be a budget of its own, and a key held in memory); the
// connection's own address stands in.
import { isIP } from "node:net";
import type { FastifyRequest } from "fastify";

export function clientAddressOf(request: FastifyRequest): string {
  return isIP(request.ip) ? request.ip : (request.socket.remoteAddress ?? "unknown");
}
