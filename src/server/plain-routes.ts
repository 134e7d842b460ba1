// The router modules register their plain HTTP routes with (platform/routes.ts). Each route is
// authorized before its handler runs — public ones explicitly so — through the same Authorizer as
// RPCs, and its errors take the same mapping to google.rpc.Status (or the route's own renderer).
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ConnectError } from "@connectrpc/connect";
import type { Authorizer, CallContext } from "../core/service.js";
import { checkParameterStrings, strictUtf8 } from "../core/strings.js";
import type { PlainRoute, PlainRouter } from "../platform/routes.js";
import type { CallKind, RequestLimits } from "./limits.js";
import { outcomeOf } from "./request-log.js";
import { clientAddressOf } from "./client-address.js";

/** Request headers as a Headers object (what services see of HTTP and gRPC metadata alike). */
export function headersOf(raw: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    // http2 compat requests carry pseudo-headers (":path") that Headers rejects.
    if (name.startsWith(":") || value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return headers;
}

export interface PlainRouterDeps {
  authorizer: Authorizer;
  /** maps what a request's handler threw to the wire error every protocol answers with (and notes it for the log) */
  wireError(request: FastifyRequest, err: unknown): ConnectError;
  /** sends a wire error as google.rpc.Status JSON */
  sendError(reply: FastifyReply, err: ConnectError): FastifyReply;
  /** rate limits (absent: none) */
  limits?: RequestLimits;
  /** ties a route's call to its request (the log names the caller the authorizer admits) */
  noteCall?(request: FastifyRequest, call: CallContext): void;
}

/** A router over one Fastify scope (one per module, so a module's body parsers stay its own). */
export function plainRouter(scope: FastifyInstance, deps: PlainRouterDeps): PlainRouter {
  return {
    route(route: PlainRoute) {
      scope.route({
        method: route.method,
        url: route.url,
        handler: async (request: FastifyRequest, reply: FastifyReply) => {
          const call: CallContext = { headers: headersOf(request.headers), clientAddress: clientAddressOf(request) };
          deps.noteCall?.(request, call);
          const kind: CallKind = { sensitive: route.sensitive === true };
          // Noted before the handler runs too: a streamed answer may be logged before it returns.
          const noteTemplate = () => {
            const template = route.templateOf?.(request);
            if (template) outcomeOf(request).route = template;
          };
          try {
            deps.limits?.admit(call, kind);
            // The same rule for text as RPC fields: no NUL, valid Unicode, bounded length.
            checkParameterStrings("query", request.query);
            checkParameterStrings("form", request.body);
            const rule = route.access === "public" ? "public" : await route.access(request);
            if (rule !== "public") await deps.authorizer.authorizeRoute(rule, call);
            else deps.limits?.afterAuthorization(call);
            noteTemplate();
            return await route.handler(request, reply, call);
          } catch (thrown) {
            // Answered already (a request body that stopped arriving is answered by the idle limit).
            if (reply.sent) return reply;
            const err = deps.limits ? deps.limits.afterFailure(thrown, call) : thrown;
            const wire = deps.wireError(request, err);
            return route.renderError
              ? await route.renderError(wire, reply, err, request, call)
              : deps.sendError(reply, wire);
          } finally {
            noteTemplate();
          }
        },
      });
    },
    acceptForms() {
      // OAuth endpoints take forms (RFC 6749 §4.1.3).
      scope.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_req, body, done) =>
        done(null, Object.fromEntries(new URLSearchParams(body as string))),
      );
    },
    acceptJsonOfAnyType() {
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => {
        const text = strictUtf8(body as Buffer);
        if (text === undefined)
          return done(Object.assign(new Error("the body is not valid UTF-8"), { statusCode: 400 }), undefined);
        try {
          done(null, text === "" ? undefined : JSON.parse(text));
        } catch {
          done(Object.assign(new Error("the body is not JSON"), { statusCode: 400 }), undefined);
        }
      });
    },
    acceptStreams() {
      scope.removeAllContentTypeParsers();
      // The payload itself becomes request.body; nothing is read (and no body limit applies).
      scope.addContentTypeParser("*", (_req, payload, done) => done(null, payload));
    },
  };
}
