// The HTTP application: Connect (gRPC, gRPC-Web, Connect) and transcoded REST for the same
// service handlers, plus /healthz, all on one Fastify instance behind the one-port dual server.
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { create, createRegistry, toJson, type DescMethodUnary } from "@bufbuild/protobuf";
import { AnySchema, anyPack } from "@bufbuild/protobuf/wkt";
import type { Logger } from "pino";
import { StatusSchema } from "../gen/google/rpc/status_pb.js";
import {
  BadRequestSchema,
  DebugInfoSchema,
  ErrorInfoSchema,
  HelpSchema,
  LocalizedMessageSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
  RequestInfoSchema,
  ResourceInfoSchema,
  RetryInfoSchema,
} from "../gen/google/rpc/error_details_pb.js";
import { Code, ConnectError, httpStatusFor, invalidArgument, isOutgoingDetail, toWireError } from "../core/errors.js";
import { invoke, type Authorizer, type CallContext, type ServiceBinding } from "../core/service.js";
import type { PlainRouter } from "../platform/routes.js";
import { createDualServer, type DualServer } from "./dual-server.js";
import { headersOf, plainRouter } from "./plain-routes.js";
import { registerTranscoder } from "./transcoder.js";

const errorDetailRegistry = createRegistry(
  ErrorInfoSchema,
  BadRequestSchema,
  PreconditionFailureSchema,
  ResourceInfoSchema,
  RetryInfoSchema,
  DebugInfoSchema,
  QuotaFailureSchema,
  RequestInfoSchema,
  HelpSchema,
  LocalizedMessageSchema,
);

/** google.rpc.Status as canonical JSON: {code, message, details: [{"@type": ...}]}. */
export function statusJson(err: ConnectError) {
  const details = err.details.map((d) =>
    isOutgoingDetail(d)
      ? anyPack(d.desc, create(d.desc, d.value))
      : create(AnySchema, { typeUrl: `type.googleapis.com/${d.type}`, value: d.value }),
  );
  const json = toJson(StatusSchema, create(StatusSchema, { code: err.code, message: err.rawMessage, details }), {
    registry: errorDetailRegistry,
  }) as { details?: Record<string, unknown>[] };
  // "@type" first, as grpc-gateway and the AIP-193 examples print it.
  json.details = json.details?.map(({ "@type": type, ...rest }) => ({ "@type": type, ...rest }));
  return json;
}

export interface AppOptions {
  bindings: ServiceBinding[];
  authorizer: Authorizer;
  errorDomain: string;
  logger: Logger;
  /** max request body in bytes */
  bodyLimit?: number;
  /** each module's plain routes outside the RPC surface (OIDC discovery, sign-in, ...), one scope each */
  routes?: ((router: PlainRouter) => void)[];
  /**
   * Path prefixes of the public URLs (an issuer or API published at https://host/prefix): a
   * request under one is served as if the prefix were absent, as behind a path-routing proxy.
   */
  pathPrefixes?: string[];
}

export interface App {
  fastify: FastifyInstance;
  dual: DualServer;
}

export async function createApp(opts: AppOptions): Promise<App> {
  const { logger, errorDomain, authorizer } = opts;
  let dual!: DualServer;
  const fastify = Fastify({
    loggerInstance: logger,
    // Per-request logs would be noise at this rate; errors are logged where they are handled.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    rewriteUrl: (req) => {
      const url = req.url ?? "/";
      for (const prefix of opts.pathPrefixes ?? []) {
        if (url === prefix || url.startsWith(prefix + "/") || url.startsWith(prefix + "?"))
          return url.slice(prefix.length) || "/";
      }
      return url;
    },
    // Requests Fastify rejects before routing (e.g. a malformed percent-encoding in the URL).
    frameworkErrors: (err, _request, reply) =>
      sendError(reply as unknown as FastifyReply, invalidArgument({ field: "request", description: err.message })),
    serverFactory: (handler) => {
      dual = createDualServer(handler);
      return dual.front as unknown as ReturnType<typeof import("node:http").createServer>;
    },
  }) as unknown as FastifyInstance;

  const logUnexpected = (err: unknown) => logger.error({ err }, "unexpected error while handling a request");
  const wireError = (err: unknown) => toWireError(err, errorDomain, logUnexpected);
  const sendError = (reply: FastifyReply, err: unknown): FastifyReply => {
    const ce = wireError(err);
    if (ce.code === Code.Unauthenticated) reply.header("www-authenticate", 'Bearer realm="bulwark"');
    return reply
      .code(httpStatusFor(ce.code))
      .header("content-type", "application/json")
      .send(JSON.stringify(statusJson(ce)));
  };

  fastify.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _request, reply) => {
    // Errors Fastify raises before a handler runs (body too large, bad content length, ...).
    if (err instanceof ConnectError) return sendError(reply, err);
    if (err.statusCode === 413)
      return sendError(
        reply,
        invalidArgument({ field: "body", description: `exceeds ${opts.bodyLimit ?? 1048576} bytes` }),
      );
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return sendError(reply, invalidArgument({ field: "request", description: err.message }));
    }
    return sendError(reply, err);
  });
  fastify.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      new ConnectError(`Not found: no route for ${request.method} ${request.url.split("?")[0]}`, Code.NotFound),
    ),
  );

  fastify.get("/healthz", async () => ({ status: "SERVING" }));
  for (const register of opts.routes ?? []) {
    await fastify.register(async (scope) => register(plainRouter(scope, { authorizer, wireError, sendError })));
  }

  const callFromHttp = (request: FastifyRequest): CallContext => ({ headers: headersOf(request.headers) });
  const callFromConnect = (ctx: HandlerContext): CallContext => ({ headers: ctx.requestHeader, signal: ctx.signal });

  await fastify.register(fastifyConnectPlugin, {
    readMaxBytes: opts.bodyLimit ?? 1024 * 1024,
    routes: (router: ConnectRouter) => {
      for (const binding of opts.bindings) {
        const impl: Record<string, (req: unknown, ctx: HandlerContext) => Promise<unknown>> = {};
        for (const method of binding.service.methods) {
          if (method.methodKind !== "unary") continue;
          impl[method.localName] = async (req, ctx) => {
            try {
              return await invoke(binding, method as DescMethodUnary, req as never, callFromConnect(ctx), authorizer);
            } catch (err) {
              throw wireError(err);
            }
          };
        }
        router.service(binding.service, impl as never);
      }
    },
  });

  await registerTranscoder(fastify, { bindings: opts.bindings, authorizer, sendError, callContext: callFromHttp });
  return { fastify, dual };
}
