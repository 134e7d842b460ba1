// The HTTP application: Connect (gRPC, gRPC-Web, Connect) and transcoded REST for the same
// service handlers, plus /healthz, /livez and /readyz, all on one Fastify instance behind the one-port dual server.
import { randomUUID } from "node:crypto";
import type { ServerHttp2Stream } from "node:http2";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { createContextKey, createContextValues, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { errorToJsonBytes as connectErrorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { hasOption, type DescMethod, type DescMethodUnary } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { iam } from "../gen/annotations/auth_pb.js";
import { Code, ConnectError, clip, httpStatusFor, invalidArgument, toWireError } from "../core/errors.js";
import { MAX_ECHO_LENGTH } from "../core/strings.js";
import {
  invoke,
  type Authorizer,
  type CallContext,
  type CallRecorder,
  type Dispatch,
  type ServiceBinding,
} from "../core/service.js";
import type { PlainRouter } from "../platform/routes.js";
import type { MetricsRegistry } from "../platform/telemetry.js";
import { DEFAULT_BODY_TIMEOUT_MS, limitBodyIdle } from "./body-timeout.js";
import { clientAddressOf } from "./client-address.js";
import { registerConnectRoutes } from "./connect-routes.js";
import { registerConsoleRoutes } from "./console-routes.js";
import { registerDocsRoutes } from "./docs-routes.js";
import { REFLECTION_SERVICES, registerReflection } from "./reflection.js";
import { applyCors, type CorsSettings } from "./cors.js";
import { createDualServer, type ClientProblem, type DualServer } from "./dual-server.js";
import type { CallKind, RequestLimits } from "./limits.js";
import { registerHttpMetrics } from "./http-metrics.js";
import { headersOf, plainRouter } from "./plain-routes.js";
import {
  MAX_HEADER_BYTES,
  clientError,
  clientErrorAnswer,
  headerListSize,
  isRpcPath,
  normalizeProtocolError,
  shapeOfReceived,
  shapeOfRequest,
  statusJson,
} from "./protocol-errors.js";
import { VERSION } from "../core/version.js";
import { registerTranscoder } from "./transcoder.js";
import { registerHealthRoutes, type Readiness } from "./health.js";
import {
  REQUEST_ID_HEADER,
  REQUEST_ID_LABEL,
  NO_ROUTE,
  RequestLog,
  countTraffic,
  outcomeOf,
  requestIdOf,
  type Outcome,
} from "./request-log.js";
import { traceRequests, tracedAuthorizer } from "./request-spans.js";

export { statusJson };

export interface AppOptions {
  bindings: ServiceBinding[];
  authorizer: Authorizer;
  /** the events outbox every RPC passes through, when a module provides one */
  recorder?: CallRecorder;
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
  /** rate limits (absent: none) */
  limits?: RequestLimits;
  /** browser origins allowed to call the API (absent or empty: CORS off) */
  cors?: CorsSettings;
  /** take the client's address from X-Forwarded-For (behind a reverse proxy) */
  trustProxy?: boolean;
  /** how long a request body may send nothing before it is answered 400 (default 30 s) */
  bodyTimeoutMs?: number;
  /** what /readyz answers */
  readiness: Readiness;
  /** a span per request and per authorization (the tracing provider is registered: server/tracing.ts) */
  tracing?: boolean;
  /** counts and times every request here (absent: nothing is counted) */
  metrics?: MetricsRegistry;
  /** one info line per request, successes too (default on); off: failures only (successes at debug) */
  accessLog?: boolean;
  /** origins besides its own the web console calls (the issuer's, when published elsewhere) */
  consoleConnectOrigins?: () => string[];
}

/** The client's address, for handlers that only see a Connect HandlerContext. */
const CLIENT_ADDRESS = createContextKey<string | undefined>(undefined, { description: "client address" });
/** The request's outcome record (request-log.ts), for what a Connect handler throws. */
const OUTCOME = createContextKey<Outcome>({}, { description: "request outcome" });

/** Methods without an iam rule take other credentials (the token exchange): stricter limits. */
const sensitiveMethods = new WeakMap<DescMethod, boolean>();
function kindOf(method: DescMethod): CallKind {
  let sensitive = sensitiveMethods.get(method);
  if (sensitive === undefined) sensitiveMethods.set(method, (sensitive = !hasOption(method, iam)));
  return { sensitive };
}

export interface App {
  fastify: FastifyInstance;
  dual: DualServer;
  /**
   * A second one-port listener (HTTP/1.1 and h2c) on the same application that serves only the
   * paths `serves` accepts (the registry's own port); everything else is answered 404.
   */
  extraListener(serves: (path: string) => boolean): DualServer;
}

export async function createApp(opts: AppOptions): Promise<App> {
  const { logger, errorDomain, limits } = opts;
  const traced = opts.tracing ? tracedAuthorizer(opts.authorizer) : opts.authorizer;
  // Each call's request outcome, for the caller's identity once the authorizer admits it.
  const outcomeOfCall = new WeakMap<CallContext, Outcome>();
  const admitted = (call: CallContext) => {
    if (call.principal) {
      const outcome = outcomeOfCall.get(call);
      if (outcome) outcome.identity = call.principal.uid;
    }
    // Once the caller is known, its identity's limit applies (a call that stayed anonymous meets
    // the address limit admit let it past to have its credentials checked).
    limits?.afterAuthorization(call);
  };
  const authorizer: Authorizer = {
    async authorize(method, request, call) {
      await traced.authorize(method, request, call);
      admitted(call);
    },
    async authorizeRoute(rule, call) {
      await traced.authorizeRoute(rule, call);
      admitted(call);
    },
    confirm: (call) => traced.confirm(call),
  };
  const accessLog = opts.accessLog ?? true;
  let dual!: DualServer;
  let appHandler!: import("node:http").RequestListener;
  const dualOptions = {
    // Requests Node rejects before Fastify sees them (headers or URL over 16 KiB, bad framing).
    clientError: (problem: ClientProblem, received: Buffer | undefined) => {
      const answer = clientErrorAnswer(wireError(clientError(problem)), shapeOfReceived(received));
      // No request reached the application, yet the answer carries an id as every other does.
      const id = randomUUID();
      logger.info(
        { [REQUEST_ID_LABEL]: id, route: "(no route)", status: answer.status, reason: problem },
        "request refused: client error",
      );
      return { ...answer, headers: { ...answer.headers, [REQUEST_ID_HEADER]: id } };
    },
  };
  const fastify = Fastify({
    loggerInstance: logger,
    // One line per request that went wrong, at its cause's level (request-log.ts).
    logController: new RequestLog({ accessLog }),
    genReqId: requestIdOf,
    // A request that arrives on an open connection while the server closes is served (with
    // `Connection: close`, dual-server.ts), not refused: the shutdown lets connections finish.
    return503OnClosing: false,
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    trustProxy: opts.trustProxy ?? false,
    // No route has a JSON schema (requests are decoded against the protos), so Fastify's schema
    // compilers (ajv, fast-json-stringify: ~40 ms of every start) are never loaded.
    schemaController: {
      compilersFactory: {
        buildValidator: () => () => {
          throw new Error("route schemas are not used: requests are decoded against the protos");
        },
        buildSerializer: () => () => {
          throw new Error("route schemas are not used: answers are rendered from the protos");
        },
      },
    },
    rewriteUrl: (req) => {
      const url = req.url ?? "/";
      for (const prefix of opts.pathPrefixes ?? []) {
        if (url === prefix || url.startsWith(prefix + "/") || url.startsWith(prefix + "?"))
          return url.slice(prefix.length) || "/";
      }
      return url;
    },
    // Requests Fastify rejects before routing (e.g. a malformed percent-encoding in the URL). Its
    // messages repeat the URL, so they are not passed on.
    frameworkErrors: (err, _request, reply) =>
      sendError(
        reply as unknown as FastifyReply,
        invalidArgument({
          field: "request",
          description: err.code === "FST_ERR_BAD_URL" ? "the URL is malformed" : "the request is malformed",
        }),
      ),
    serverFactory: (handler) => {
      appHandler = handler;
      dual = createDualServer(handler, dualOptions);
      return dual.front as unknown as ReturnType<typeof import("node:http").createServer>;
    },
  }) as unknown as FastifyInstance;

  const extraListener = (serves: (path: string) => boolean): DualServer =>
    createDualServer((req, res) => {
      if (serves(req.url ?? "/")) return appHandler(req, res);
      res.writeHead(404, {
        "content-type": "application/json",
        "x-content-type-options": "nosniff",
        [REQUEST_ID_HEADER]: requestIdOf(req),
      });
      res.end(JSON.stringify(statusJson(wireError(new ConnectError("no route on this port", Code.NotFound)))));
    }, dualOptions);

  // Outside any request (a refusal before routing): nothing unexpected reaches it, but if it did
  // it would be logged.
  const logUnexpected = (err: unknown) => logger.error({ err }, "unexpected error outside a request");
  const wireError = (err: unknown) => toWireError(err, errorDomain, logUnexpected);
  /** The wire error for what a request's handler threw, noted for the request's log line. */
  const wireErrorOf = (outcome: Outcome, err: unknown) => {
    outcome.thrown ??= err;
    return toWireError(err, errorDomain, () => {});
  };
  const sendError = (reply: FastifyReply, err: unknown): FastifyReply => {
    const ce = wireErrorOf(outcomeOf(reply.request), err);
    // Errors Fastify answers before the onRequest hook (a malformed URL) carry the id too.
    if (!reply.raw.headersSent && !reply.raw.hasHeader(REQUEST_ID_HEADER))
      reply.raw.setHeader(REQUEST_ID_HEADER, reply.request.id);
    if (ce.code === Code.Unauthenticated) reply.header("www-authenticate", 'Bearer realm="bulwark"');
    const retryAfter = ce.metadata.get("retry-after");
    if (retryAfter) reply.header("retry-after", retryAfter);
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
  fastify.setNotFoundHandler((request, reply) => {
    outcomeOf(request).route = NO_ROUTE;
    return sendError(
      reply,
      new ConnectError(
        `Not found: no route for ${request.method} ${clip(request.url.split("?")[0]!, MAX_ECHO_LENGTH)}`,
        Code.NotFound,
      ),
    );
  });

  const grpcPaths = new Set(
    [...opts.bindings.map((b) => b.service), ...REFLECTION_SERVICES].flatMap((service) =>
      service.methods.map((m) => `/${service.typeName}/${m.name}`),
    ),
  );
  // First, so that every answer (CORS preflights, unserved methods) has its span.
  if (opts.tracing) traceRequests(fastify, grpcPaths);
  // First: requests the next hook answers itself (CORS preflights, unserved RPCs) are counted too.
  if (opts.metrics) registerHttpMetrics(fastify, opts.metrics);
  fastify.addHook("onRequest", (request, reply, done) => {
    // Set on the raw response, so replies written past Fastify (Connect, gRPC) carry them too.
    reply.raw.setHeader("x-content-type-options", "nosniff");
    reply.raw.setHeader(REQUEST_ID_HEADER, request.id);
    countTraffic(request, reply);
    if (opts.cors && applyCors(opts.cors, request, reply)) return;
    if (answerUnservedGrpc(request, reply, grpcPaths)) return;
    if (answerUnservedConnect(request, reply, grpcPaths, wireError)) return;
    // HTTP/1.1 refuses heads over 16 KiB in Node's parser (see dual-server.ts); HTTP/2 lets up
    // to 256 KiB through so that the same limit is answered here, in the request's protocol.
    if (request.raw.httpVersionMajor === 2 && headerListSize(request.raw.rawHeaders) > MAX_HEADER_BYTES) {
      const answer = clientErrorAnswer(wireError(clientError("headers too large")), shapeOfRequest(request));
      reply.hijack();
      reply.raw.writeHead(answer.status, answer.headers);
      reply.raw.end(answer.body);
      return;
    }
    limitBodyIdle(request, reply, opts.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS, wireError);
    done();
  });

  fastify.get("/healthz", async () => ({ status: "SERVING", version: VERSION }));
  registerHealthRoutes(fastify, opts.readiness);
  registerDocsRoutes(fastify);
  registerConsoleRoutes(fastify, { connectOrigins: opts.consoleConnectOrigins ?? (() => []) });
  for (const register of opts.routes ?? []) {
    await fastify.register(async (scope) =>
      register(
        plainRouter(scope, {
          authorizer,
          limits,
          noteCall: (request, call) => outcomeOfCall.set(call, outcomeOf(request)),
          wireError: (request, err) => wireErrorOf(outcomeOf(request), err),
          sendError,
        }),
      ),
    );
  }

  const callFromHttp = (request: FastifyRequest): CallContext => {
    const call: CallContext = { headers: headersOf(request.headers), clientAddress: clientAddressOf(request) };
    outcomeOfCall.set(call, outcomeOf(request));
    return call;
  };
  const callFromConnect = (ctx: HandlerContext): CallContext => {
    const call: CallContext = {
      headers: ctx.requestHeader,
      signal: ctx.signal,
      clientAddress: ctx.values.get(CLIENT_ADDRESS),
    };
    outcomeOfCall.set(call, ctx.values.get(OUTCOME));
    return call;
  };

  // Every RPC on every protocol: limits, then string checks, authorization and the handler.
  const dispatch: Dispatch = async (binding, method, request, call) => {
    if (!limits) return invoke(binding, method, request, call, authorizer, opts.recorder);
    const kind = kindOf(method);
    limits.admit(call, kind);
    try {
      return await invoke(binding, method, request, call, authorizer, opts.recorder);
    } catch (err) {
      throw limits.afterFailure(err, call);
    }
  };

  await registerConnectRoutes(fastify, {
    readMaxBytes: opts.bodyLimit ?? 1024 * 1024,
    contextValues: (request) =>
      createContextValues().set(CLIENT_ADDRESS, clientAddressOf(request)).set(OUTCOME, outcomeOf(request)),
    normalize: (error) => normalizeProtocolError(error, wireError),
    answered: (request, error, status) => {
      const outcome = outcomeOf(request);
      outcome.code = error?.code;
      outcome.status = status;
      if (error) outcome.thrown ??= error;
    },
    routes: (router: ConnectRouter) => {
      for (const binding of opts.bindings) {
        const impl: Record<string, (req: unknown, ctx: HandlerContext) => Promise<unknown>> = {};
        for (const method of binding.service.methods) {
          if (method.methodKind !== "unary") continue;
          impl[method.localName] = async (req, ctx) => {
            try {
              return await dispatch(binding, method as DescMethodUnary, req as never, callFromConnect(ctx));
            } catch (err) {
              throw wireErrorOf(ctx.values.get(OUTCOME), err);
            }
          };
        }
        router.service(binding.service, impl as never);
      }
      registerReflection(
        router,
        opts.bindings.map((b) => b.service),
      );
    },
  });

  await registerTranscoder(fastify, { bindings: opts.bindings, dispatch, sendError, callContext: callFromHttp });
  return { fastify, dual, extraListener };
}

/**
 * A Connect call (an RPC-shaped path, `/package.Service/Method`, that no gRPC content type
 * claimed) to a method this server does not serve: Connect's error shape, with the 404 a Connect
 * server answers for a route it does not have (clients read it as `unimplemented`), rather than
 * the REST error a transcoded path gets.
 */
function answerUnservedConnect(
  request: FastifyRequest,
  reply: FastifyReply,
  served: ReadonlySet<string>,
  wireError: (err: unknown) => ConnectError,
): boolean {
  const path = request.url.split("?")[0]!;
  if (!isRpcPath(path) || served.has(path) || !isConnectCall(request)) return false;
  outcomeOf(request).code = Code.Unimplemented;
  const error = wireError(
    new ConnectError(
      `unknown method ${clip(path, MAX_ECHO_LENGTH)}: this server does not serve it`,
      Code.Unimplemented,
    ),
  );
  // The body is never read: on HTTP/1.1 it must not be taken for the next request.
  if (request.raw.httpVersionMajor === 1 && !request.raw.complete) reply.header("connection", "close");
  void reply
    .code(404)
    .header("content-type", "application/json")
    .send(Buffer.from(connectErrorToJsonBytes(error, {})));
  return true;
}

/**
 * Whether a request is a Connect call by its protocol: a POST of a Connect codec (unary
 * `application/json` or `application/proto`, streaming `application/connect+…`), or a GET with
 * `connect=v1` (Connect's GET for side-effect-free methods). Anything else on an RPC-shaped path
 * (`/jwks.json/x`) is an ordinary request for a route that does not exist.
 */
function isConnectCall(request: FastifyRequest): boolean {
  if (request.method === "GET") return /[?&]connect=v1(&|$)/.test(request.url);
  const type = String(request.headers["content-type"] ?? "").toLowerCase();
  return request.method === "POST" && /^application\/(json|proto|connect\+(json|proto))\s*(;|$)/.test(type);
}

/**
 * A gRPC or gRPC-Web call to a method this server does not serve is answered at once, before its
 * request stream is read: a trailers-only UNIMPLEMENTED, so a client that keeps its stream open
 * (a reflection client probing, a bidi call) learns it now rather than at its deadline.
 */
function answerUnservedGrpc(request: FastifyRequest, reply: FastifyReply, served: ReadonlySet<string>): boolean {
  const type = String(request.headers["content-type"] ?? "").toLowerCase();
  if (!type.startsWith("application/grpc") || request.method !== "POST") return false;
  const path = request.url.split("?")[0]!;
  if (served.has(path)) return false;
  const message = `unknown method ${clip(path, MAX_ECHO_LENGTH)}: this server does not serve it`;
  Object.assign(outcomeOf(request), { code: Code.Unimplemented, status: httpStatusFor(Code.Unimplemented) });
  const headers = {
    // CORS and nosniff, set on the reply by now
    ...(reply.getHeaders() as Record<string, string>),
    "x-content-type-options": "nosniff",
    [REQUEST_ID_HEADER]: request.id,
    "content-type": type.startsWith("application/grpc-web") ? "application/grpc-web+proto" : "application/grpc",
    "grpc-status": String(Code.Unimplemented),
    "grpc-message": encodeURIComponent(message),
  };
  reply.hijack();
  const stream = (request.raw as unknown as { stream?: ServerHttp2Stream }).stream;
  if (stream) {
    // Trailers-only: the status in the one HEADERS frame, which ends our half of the stream (a
    // separate empty DATA frame would make gRPC clients wait for trailers). The client, told the
    // status, closes its half.
    stream.respond({ ":status": 200, ...headers }, { endStream: true });
  } else {
    // HTTP/1.1 (gRPC-Web): the unread body must not be read as the next request.
    reply.raw.writeHead(200, { ...headers, connection: "close" });
    reply.raw.end();
  }
  return true;
}
