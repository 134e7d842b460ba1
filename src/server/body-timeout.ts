// A request body that stops arriving (a Content-Length of 100 and 10 bytes sent) would hold its
// handler, and the connection, for as long as the client keeps it open. Each body gets an idle
// limit instead: when no byte has arrived for that long, the request is answered 400 in its own
// protocol and its connection is closed (what was read cannot be told from the next request).
// Idle, not total: a large upload that keeps sending is never cut off.
import type { ServerHttp2Stream } from "node:http2";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ConnectError } from "@connectrpc/connect";
import { invalidArgument } from "../core/errors.js";
import { clientErrorAnswer, shapeOfRequest } from "./protocol-errors.js";

/** The default idle limit on a request body. */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;

/** The HTTP/2 stream a request came on, if it came on one. */
function streamOf(request: FastifyRequest): ServerHttp2Stream | undefined {
  return (request.raw as unknown as { stream?: ServerHttp2Stream }).stream;
}

/** Whether the client has sent all of its body (HTTP/2: it closed its side; a GET does so with its headers). */
function bodyComplete(request: FastifyRequest): boolean {
  const raw = request.raw;
  if (raw.complete || raw.readableEnded) return true;
  const stream = streamOf(request);
  return stream !== undefined && (stream.endAfterHeaders || stream.state?.remoteClose === 1);
}

/** Whether the request says a body follows (a Content-Length above 0, or chunked framing; HTTP/2: not yet ended). */
function expectsBody(request: FastifyRequest): boolean {
  if (bodyComplete(request)) return false;
  const length = request.headers["content-length"];
  if (length !== undefined) return length !== "0";
  return request.headers["transfer-encoding"] !== undefined || request.raw.httpVersionMajor === 2;
}

/**
 * Watches the request's body: each chunk restarts the clock, its end stops it. `wireError` maps
 * the timeout's error to the wire form, as for any other error.
 */
export function limitBodyIdle(
  request: FastifyRequest,
  reply: FastifyReply,
  timeoutMs: number,
  wireError: (err: unknown) => ConnectError,
): void {
  if (!expectsBody(request)) return;
  const raw = request.raw;
  const stream = streamOf(request);
  const timer = setTimeout(() => {
    // All of it arrived, or bytes wait for its reader (a slow consumer pauses the source): not the client's idling.
    if (bodyComplete(request)) return stop();
    if (raw.readableLength > 0 || (stream?.readableLength ?? 0) > 0) return void timer.refresh();
    stop();
    answerTimeout(request, reply, stream, timeoutMs, wireError);
  }, timeoutMs);
  timer.unref();
  // Every chunk reaches the request through `push` (HTTP/1.1's parser, HTTP/2's stream alike).
  // Watching there, not with a 'data' listener, leaves how and when it is read to its handler.
  const push = raw.push;
  raw.push = function (this: typeof raw, ...args: Parameters<typeof push>) {
    timer.refresh();
    return push.apply(this, args);
  };
  const stop = () => {
    clearTimeout(timer);
    raw.push = push;
  };
  raw.once("end", stop);
  raw.once("close", stop);
  reply.raw.once("finish", stop);
}

function answerTimeout(
  request: FastifyRequest,
  reply: FastifyReply,
  stream: ServerHttp2Stream | undefined,
  timeoutMs: number,
  wireError: (err: unknown) => ConnectError,
): void {
  const raw = request.raw;
  const res = reply.raw;
  if (res.headersSent) return void raw.destroy();
  const answer = clientErrorAnswer(
    wireError(
      invalidArgument({ field: "body", description: `no byte of the request body arrived for ${timeoutMs / 1000} s` }),
    ),
    shapeOfRequest(request),
  );
  // The handler still waits on the body: its answer, whenever it comes, goes nowhere.
  reply.hijack();
  res.writeHead(answer.status, {
    ...(reply.getHeaders() as Record<string, string>),
    ...answer.headers,
    ...(stream ? {} : { connection: "close" }),
  });
  res.end(answer.body, () => {
    // The handler still reading the body learns it will not come (an error on the request's
    // stream): otherwise it would wait, holding what it opened (an upload's file), forever.
    const timedOut = Object.assign(new Error("the request body stopped arriving"), { code: "BODY_TIMEOUT" });
    raw.destroy(timedOut);
    if (stream) stream.close();
    else raw.socket?.destroy();
  });
}
