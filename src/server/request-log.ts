// One line per answered request that went wrong, at the level its cause deserves: a client's
// mistake at info, a refused credential or permission at warn, a server fault at error with the
// fault's one stack. Every line names the method, the route's template (never the raw path, which
// holds uids), the status and the request's id. Fastify calls `requestCompleted` once the answer is
// out on every route, hijacked ones (Connect, gRPC) included; what the transports learnt on the way
// (the RPC code, what was thrown, a finer route template) is noted on the request's `Outcome`.
// Successful requests are logged at debug: an access log builds on the same fields.
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { LogController, type FastifyReply, type FastifyRequest } from "fastify";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import { clip } from "../core/errors.js";

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

/** The fields every line about a request carries (the request id is bound in `request.log`). */
export function requestFields(request: FastifyRequest, reply: FastifyReply): Record<string, unknown> {
  const outcome = outcomes.get(request);
  const fields: Record<string, unknown> = {
    method: request.method,
    route: outcome?.route ?? request.routeOptions.url ?? "(no route)",
    status: outcome?.status ?? reply.statusCode,
  };
  if (outcome?.code !== undefined) fields.code = Code[outcome.code];
  return fields;
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

export class RequestLog extends LogController {
  constructor() {
    super({ disableRequestLogging: false, requestIdLogLabel: REQUEST_ID_LABEL });
  }

  // Fastify's own "incoming request" line would double every request.
  override incomingRequest(): void {}

  override requestCompleted(_error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    // The common case, a success with debug off, costs no object.
    if (
      reply.statusCode < 400 &&
      outcomes.get(request)?.status === undefined &&
      !(request.log as Logger).isLevelEnabled("debug")
    )
      return;
    const fields = requestFields(request, reply);
    const chosen = outcomes.get(request)?.level;
    if (chosen) return void request.log[chosen](fields, "request answered");
    const level = levelOf(fields.status as number, request);
    const thrown = outcomes.get(request)?.thrown;
    if (level === "error") {
      // The fault's stack, once; a deliberate error answer (no fault) has none worth printing.
      request.log.error(
        { ...fields, ...(thrown instanceof Error ? { err: thrown } : {}) },
        "request failed: server fault",
      );
    } else if (level === "debug") {
      request.log.debug(fields, "request answered");
    } else {
      const reason = reasonOf(thrown);
      request.log[level](
        { ...fields, ...(reason ? { reason } : {}) },
        level === "warn" ? "request refused: credentials or permission" : "request refused: client error",
      );
    }
  }
}
