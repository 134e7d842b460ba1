// Plain HTTP routes: what a module serves outside the proto services (OIDC discovery, sign-in
// pages, the OCI distribution API and its token endpoint, the advisory feeds). Each route states who may call it; the server's router
// (server/plain-routes.ts) authenticates and authorizes through the same Authorizer as RPCs and
// renders errors with the same mapping, so no handler checks a token by hand.
import type { ConnectError } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest, HTTPMethods } from "fastify";
import type { CallContext, RouteRule } from "../core/service.js";

/**
 * Who may call a route: "public" (no credentials: discovery documents, the sign-in flow, whose
 * own protocol is its authentication), or the rule for this request (it may name the request's
 * resource as the scope).
 */
export type RouteAccess =
  "public" | ((request: FastifyRequest) => RouteRule | "public" | Promise<RouteRule | "public">);

export interface PlainRoute {
  method: HTTPMethods | HTTPMethods[];
  url: string;
  access: RouteAccess;
  /**
   * The route takes credentials of its own protocol or codes a caller could guess (OAuth token
   * and device endpoints): stricter rate limits apply.
   */
  sensitive?: boolean;
  /**
   * The template of what this request reached, when `url` is a wildcard serving several
   * endpoints (`/v2/{name}/manifests/{reference}` under `/v2/*`): logs name it instead of `url`,
   * never the raw path. Undefined when the path named no endpoint.
   */
  templateOf?(request: FastifyRequest): string | undefined;
  /** runs after authorization; `call` carries the caller (principal, access, visibility) */
  handler(request: FastifyRequest, reply: FastifyReply, call: CallContext): unknown;
  /**
   * Renders an error in the route's own protocol (default: AIP-193 google.rpc.Status JSON).
   * `error` is the wire error every protocol answers with; `thrown` what the handler threw;
   * `call` the caller as far as authentication got (the registry records failed pulls).
   */
  renderError?(
    error: ConnectError,
    reply: FastifyReply,
    thrown: unknown,
    request: FastifyRequest,
    call: CallContext,
  ): FastifyReply | Promise<FastifyReply>;
}

export interface PlainRouter {
  route(route: PlainRoute): void;
  /** parse application/x-www-form-urlencoded bodies into objects, for this module's routes only */
  acceptForms(): void;
  /**
   * Hand every request body of this module's routes to the handler unread, as the request's
   * stream (`request.body`), whatever its type or size (blob uploads are streamed, never buffered).
   */
  acceptStreams(): void;
  /**
   * Parse every request body of this module's routes as JSON, whatever its Content-Type
   * (`curl -d` sends application/x-www-form-urlencoded): documented clients of the OSV API do.
   */
  acceptJsonOfAnyType(): void;
}
