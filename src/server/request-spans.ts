// One SERVER span per request, when tracing is on (installed only then: `createApp`). The
// incoming W3C `traceparent`/`tracestate` is its parent; the span is the active context for
// everything the request does (hooks, body, authorization, handler, database statements), through
// AsyncLocalStorage and the request's and reply's event emitters bound to it. It ends when the
// response closes, named and labelled from the route's template and the RPC, never the raw path
// (uids) or the query (tokens).
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Code } from "@connectrpc/connect";
import { context, propagation, trace, ROOT_CONTEXT, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { Authorizer } from "../core/service.js";
import { inSpan, tracer, type Span } from "../platform/tracing.js";
import { outcomeOf, routeTemplateOf } from "./request-log.js";

/** Opens a request's span as it arrives; `rpcPaths` are the gRPC/Connect methods served (`/pkg.Service/Method`). */
export function traceRequests(fastify: FastifyInstance, rpcPaths: ReadonlySet<string>): void {
  fastify.addHook("onRequest", (request, reply, done) => {
    const parent = propagation.extract(ROOT_CONTEXT, request.headers);
    const span = tracer().startSpan(
      request.method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          "http.request.method": request.method,
          "url.scheme": "http",
          "network.protocol.version": request.raw.httpVersion,
        },
      },
      parent,
    );
    const active = trace.setSpan(parent, span);
    // Listeners added from here on (the body's data and end, the response's finish) run in the span.
    context.bind(active, request.raw);
    context.bind(active, reply.raw);
    reply.raw.once("close", () => endRequestSpan(span, request, reply, rpcPaths));
    context.with(active, done);
  });
}

/** gRPC codes that are the server's fault (the others are the caller's). */
const SERVER_FAULTS = new Set([
  Code.Unknown,
  Code.DeadlineExceeded,
  Code.Unimplemented,
  Code.Internal,
  Code.Unavailable,
  Code.DataLoss,
]);

function endRequestSpan(span: Span, request: FastifyRequest, reply: FastifyReply, rpcPaths: ReadonlySet<string>): void {
  const outcome = outcomeOf(request);
  const route = routeTemplateOf(request);
  const status = reply.raw.statusCode;
  span.setAttribute("http.response.status_code", status);
  if (route !== undefined && rpcPaths.has(route)) {
    // `/pkg.Service/Method`: named as the RPC (the semantic conventions' `pkg.Service/Method`).
    const [service, method] = route.slice(1).split("/") as [string, string];
    const type = String(request.headers["content-type"] ?? "").toLowerCase();
    const grpc = type.startsWith("application/grpc");
    const code = outcome.code; // undefined: OK
    span.updateName(`${service}/${method}`);
    span.setAttributes({
      "rpc.system": grpc ? "grpc" : "connect_rpc",
      "rpc.service": service,
      "rpc.method": method,
      ...(grpc
        ? { "rpc.grpc.status_code": code ?? 0 }
        : code !== undefined
          ? { "rpc.connect_rpc.error_code": codeName(code) }
          : {}),
    });
    if (code !== undefined && SERVER_FAULTS.has(code)) fail(span, codeName(code));
  } else {
    if (route !== undefined) {
      span.updateName(`${request.method} ${route}`);
      span.setAttribute("http.route", route);
    }
    const meant = outcome.status ?? status;
    if (meant >= 500) fail(span, String(meant));
  }
  if (!reply.raw.writableEnded) fail(span, "aborted");
  span.end();
}

function codeName(code: Code): string {
  // Connect's names: `not_found`, `permission_denied`, …
  return Code[code]!.replace(/[A-Z]/g, (c, i: number) => (i ? "_" : "") + c.toLowerCase());
}

function fail(span: Span, type: string): void {
  span.setAttribute("error.type", type);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/** The authorizer with an `authorize` span around each authorization (an RPC's or a plain route's). */
export function tracedAuthorizer(inner: Authorizer): Authorizer {
  return {
    authorize: (method, request, call) =>
      inSpan("authorize", { attributes: { "rpc.method": method.name, "rpc.service": method.parent.typeName } }, () =>
        inner.authorize(method, request, call),
      ),
    authorizeRoute: (rule, call) => inSpan("authorize", {}, () => inner.authorizeRoute(rule, call)),
    confirm: (call) => inner.confirm(call),
  };
}
