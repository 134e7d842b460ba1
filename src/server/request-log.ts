// One line per answered request (the access log): method, the route's template (never the raw
// path, which holds uids), status, duration, bytes in and out, request id, client address, the
// identity when the call authenticated, and the user agent. A request that went wrong is logged at
// the level its cause deserves, on the same one line: a client's mistake at info, a refused
// credential or permission at warn, a server fault at error with the fault's one stack. Fastify
// calls `requestCompleted` once the answer is out on every route, hijacked ones (Connect, gRPC)
// included; what the transports learnt on the way (the RPC code, what was thrown, a finer route
// template, the caller) is noted on the request's `Outcome`. With the access log off, successes
// are logged at debug only.
import { randomUUID } from "node:crypto";
import { ServerResponse, type IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import { LogController, type FastifyReply, type FastifyRequest } from "fastify";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import { clip } from "../core/errors.js";
import { clientAddressOf } from "./client-address.js";

/** What the transports note about a request's answer, beyond what the reply itself says. */
export interface Outcome {
  /** the route's template when Fastify's is coarser (the transcoder's rule, e.g. `/iam/v2beta1/groups/{uid=**}`) */
  route?: string;
  /** the RPC's code, for answers whose HTTP status does not tell it (gRPC, gRPC-Web: always 200) */
  code?: Code;
  /** the HTTP status the code stands for, when the status sent is not it */
  status?: number;
  /** what the handler threw, if anything */
  thrown?: unknown;
  /** the line's level when the status alone would misjudge it (a /readyz 503 is an answer, not a fault) */
  level?: "info" | "warn";
  /** the caller's identity uid, once the authorizer admitted the call */
  identity?: string;
}

const outcomes = new WeakMap<FastifyRequest, Outcome>();

/** The request's outcome record, made on first use. */
export function outcomeOf(request: FastifyRequest): Outcome {
  let outcome = outcomes.get(request);
  if (!outcome) outcomes.set(request, (outcome = {}));
  return outcome;
}

/** The header a request id arrives and leaves in. */
export const REQUEST_ID_HEADER = "x-request-id";

/** Ids a client or proxy may choose: short, printable, nothing a log reader could mistake. */
const VALID_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:+=/-]{0,127}$/;

/** The incoming `X-Request-Id` when it is a valid one, else a new UUID. */
export function requestIdOf(raw: IncomingMessage): string {
  const given = raw.headers[REQUEST_ID_HEADER];
  return typeof given === "string" && VALID_REQUEST_ID.test(given) ? given : randomUUID();
}

/** The label the request id carries in every line of a request's logger. */
export const REQUEST_ID_LABEL = "requestId";

/** The route of a request no route matched (the raw path is never logged). */
export const NO_ROUTE = "(no route)";

/**
 * The route config of one route serving a whole service's RPCs (`/pkg.Service/:method`, see
 * connect-routes.ts): the template a request reached is its method's own, `/pkg.Service/Method`.
 */
export interface RpcServiceRouteConfig {
  rpcService: string;
  /** the methods the service has, by name */
  rpcMethods: { has(method: string): boolean };
}

/**
 * The template a request reached (the transports' finer one first; an RPC's own path), or
 * undefined if no route matched: never the raw path.
 */
export function routeTemplateOf(request: FastifyRequest): string | undefined {
  const noted = outcomes.get(request)?.route;
  if (noted !== undefined) return noted;
  const config = request.routeOptions.config as Partial<RpcServiceRouteConfig> | undefined;
  if (config?.rpcMethods) {
    // A method the service does not have matched no route before there was one route per service.
    const method = (request.params as { method?: string }).method ?? "";
    return config.rpcMethods.has(method) ? `/${config.rpcService}/${method}` : undefined;
  }
  return request.routeOptions.url;
}

/** The template a request reached, for logs and metrics (NO_ROUTE if none): never the raw path. */
export function routeOf(request: FastifyRequest): string {
  return routeTemplateOf(request) ?? NO_ROUTE;
}

/** The longest user agent a line repeats (a client chooses it). */
const MAX_USER_AGENT_LENGTH = 200;

/** The fields every line about a request carries (the request id is bound in `request.log`). */
export function requestFields(request: FastifyRequest, reply: FastifyReply): Record<string, unknown> {
  const outcome = outcomes.get(request);
  const userAgent = request.headers["user-agent"];
  return {
    method: request.method,
    route: routeOf(request),
    status: outcome?.status ?? reply.statusCode,
    code: outcome?.code === undefined ? undefined : Code[outcome.code],
    durationMs: Math.round(reply.elapsedTime * 1000) / 1000,
    bytesIn: bytesInOf(request.raw),
    bytesOut: (reply.raw as Counted)[BYTES_OUT],
    clientAddress: (request.raw as Counted)[CLIENT_ADDRESS] ?? clientAddressOf(request),
    identity: outcome?.identity,
    userAgent: userAgent === undefined ? undefined : clip(userAgent, MAX_USER_AGENT_LENGTH),
  };
}

// Traffic counts, kept on the raw request and response themselves: counting costs no object per
// request, only two numbers and the counting methods set on the instances.
const BYTES_IN = Symbol("bytes received");
const BYTES_OUT = Symbol("bytes sent");
// Read when the request arrives: once an HTTP/2 stream has closed, its socket is gone.
const CLIENT_ADDRESS = Symbol("client address");
interface Counted {
  [CLIENT_ADDRESS]?: string;
  [BYTES_IN]?: number;
  [BYTES_OUT]?: number;
}
type Chunk = string | Uint8Array | null | undefined | (() => void);

function sizeOf(chunk: Chunk, encoding: unknown): number {
  if (typeof chunk === "string")
    return Buffer.byteLength(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
  return chunk instanceof Uint8Array ? chunk.byteLength : 0;
}

// Both transports hand the body to the request with `push` (HTTP/1.1's parser, HTTP/2's compat layer).
function countingPush(this: Readable & Counted, chunk: Chunk, encoding?: BufferEncoding): boolean {
  this[BYTES_IN]! += sizeOf(chunk, encoding);
  return Readable.prototype.push.call(this, chunk, encoding);
}

// What the response's body writes pass on. HTTP/2's `end(chunk)` calls `write`, HTTP/1.1's does not.
type Write = (chunk: Chunk, encoding?: unknown, callback?: unknown) => unknown;
function countingWrite(this: Counted & { write: Write }, chunk: Chunk, encoding?: unknown, callback?: unknown) {
  this[BYTES_OUT]! += sizeOf(chunk, encoding);
  return (Object.getPrototypeOf(this) as { write: Write }).write.call(this, chunk, encoding, callback);
}
function countingEnd(this: Counted & { end: Write }, chunk: Chunk, encoding?: unknown, callback?: unknown) {
  this[BYTES_OUT]! += sizeOf(chunk, encoding);
  return (Object.getPrototypeOf(this) as { end: Write }).end.call(this, chunk, encoding, callback);
}

/**
 * Counts the request's body bytes (unless it declares its length) and the response's body bytes,
 * for the access log and the request metrics. Call before anything reads the body or writes the answer.
 */
export function countTraffic(request: FastifyRequest, reply: FastifyReply): void {
  const raw = request.raw as unknown as Readable & Counted;
  raw[CLIENT_ADDRESS] = clientAddressOf(request);
  if (request.headers["content-length"] === undefined) {
    raw[BYTES_IN] = 0;
    (raw as unknown as { push: unknown }).push = countingPush;
  }
  const res = reply.raw as unknown as Counted & Record<"write" | "end", Write>;
  res[BYTES_OUT] = 0;
  res.write = countingWrite;
  if (reply.raw instanceof ServerResponse) res.end = countingEnd;
}

/** A request's body bytes in and out, as counted (countTraffic) or declared; undefined: not known. */
export function trafficOf(request: FastifyRequest, reply: FastifyReply): { in?: number; out?: number } {
  return { in: bytesInOf(request.raw), out: (reply.raw as Counted)[BYTES_OUT] };
}

function bytesInOf(raw: unknown): number | undefined {
  const counted = (raw as Counted)[BYTES_IN];
  if (counted !== undefined) return counted;
  const declared = Number((raw as IncomingMessage).headers["content-length"]);
  return Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined;
}

/** How bad an answered request was. */
export function levelOf(status: number, request: FastifyRequest): "debug" | "info" | "warn" | "error" {
  // 501: a method this server does not serve is the caller's mistake, not a fault.
  if (status >= 500 && status !== 501) return "error";
  // A 401 to a request without credentials is the protocol's challenge (every `docker pull` starts
  // with one); credentials refused, or a permission denied, is worth an operator's look.
  if (status === 403 || (status === 401 && request.headers.authorization !== undefined)) return "warn";
  if (status >= 400) return "info";
  return "debug";
}

/**
 * The client-facing reason, kept short: clients may send long values that errors repeat. A path
 * no route matched is left out: the line's route says there was none, and the raw path is not logged.
 */
function reasonOf(thrown: unknown): string | undefined {
  const message =
    thrown instanceof ConnectError ? thrown.rawMessage : thrown instanceof Error ? thrown.message : undefined;
  return message === undefined
    ? undefined
    : clip(message.replace(/(no route for \S+) \S+/, "$1 (path not logged)"), 300);
}

export interface RequestLogOptions {
  /** one info line per request, successes too (default); off: successes at debug only */
  accessLog: boolean;
}

export class RequestLog extends LogController {
  readonly accessLog: boolean;

  constructor(opts: RequestLogOptions) {
    super({ disableRequestLogging: false, requestIdLogLabel: REQUEST_ID_LABEL });
    this.accessLog = opts.accessLog;
  }

  // Fastify's own "incoming request" line would double every request.
  override incomingRequest(): void {}

  override requestCompleted(_error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const log = request.log as Logger;
    const outcome = outcomes.get(request);
    const failed = reply.statusCode >= 400 || outcome?.status !== undefined;
    // The common case, a success nobody logs, costs no object.
    if (!failed && !log.isLevelEnabled(this.accessLog ? "info" : "debug")) return;
    const fields = requestFields(request, reply);
    const chosen = outcomes.get(request)?.level;
    if (chosen) return void request.log[chosen](fields, "request answered");
    const level = levelOf(fields.status as number, request);
    if (level === "debug") {
      if (this.accessLog) log.info(fields, "request");
      else log.debug(fields, "request");
      return;
    }
    const thrown = outcome?.thrown;
    if (level === "error") {
      // The fault's stack, once; a deliberate error answer (no fault) has none worth printing.
      if (thrown instanceof Error) fields.err = thrown;
      log.error(fields, "request failed: server fault");
    } else {
      fields.reason = reasonOf(thrown);
      log[level](
        fields,
        level === "warn" ? "request refused: credentials or permission" : "request refused: client error",
      );
    }
  }
}
