// gRPC, gRPC-Web and Connect on Fastify (in place of @connectrpc/connect-fastify, whose plugin
// this follows), with one addition: errors Connect raises itself, before or around our handlers
// (an undecodable body, a bad envelope, an unsupported content type, a body over the limit), are
// rewritten into our AIP-193 form on the way out, in each protocol's own encoding. Our handlers'
// errors already have that form and pass unchanged.
import { constants as http2Constants, type ServerHttp2Stream } from "node:http2";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Code, ConnectError, createConnectRouter, type ConnectRouter, type ContextValues } from "@connectrpc/connect";
import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import { httpStatusFor } from "../core/errors.js";
import * as connect from "@connectrpc/connect/protocol-connect";
import * as grpc from "@connectrpc/connect/protocol-grpc";
import * as grpcWeb from "@connectrpc/connect/protocol-grpc-web";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import { STRICT_UTF8_DECODER } from "../core/strings.js";
import type { RpcServiceRouteConfig } from "./request-log.js";

export interface ConnectRoutesOptions {
  routes(router: ConnectRouter): void;
  readMaxBytes: number;
  /** values our handlers read from their HandlerContext (e.g. the client's address) */
  contextValues(request: FastifyRequest): ContextValues;
  /** the AIP-193 form of an error that does not have it yet */
  normalize(error: ConnectError): ConnectError;
  /**
   * The error a call answered with, once it is known (for gRPC, when the trailers are written),
   * and the HTTP status it stands for (gRPC and gRPC-Web send 200 and the code in trailers).
   */
  answered(request: FastifyRequest, error: ConnectError, status: number): void;
}

export async function registerConnectRoutes(fastify: FastifyInstance, opts: ConnectRoutesOptions): Promise<void> {
  const router = createConnectRouter({
    readMaxBytes: opts.readMaxBytes,
    // As the REST transcoder: an unknown JSON key is an error, not silently dropped.
    // Bytes that are not UTF-8 are refused, not replaced with U+FFFD: the handler passes its
    // jsonOptions on to createJsonSerialization, which takes a textDecoder (its type leaves it out).
    jsonOptions: { ignoreUnknownFields: false, ...{ textDecoder: STRICT_UTF8_DECODER } },
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  opts.routes(router);
  await fastify.register(async (scope) => {
    // Connect reads bodies itself.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", (_request, _payload, done) => done(null, undefined));
    // One route per service, its methods found by name: a route per method (for each of the 9
    // HTTP verbs `all` registers) made ~1,900 routes and ~100 ms of each start-up.
    const byService = new Map<string, Map<string, (typeof router.handlers)[number]>>();
    for (const handler of router.handlers) {
      const methods = byService.get(handler.service.typeName) ?? new Map();
      methods.set(handler.method.name, handler);
      byService.set(handler.service.typeName, methods);
    }
    for (const [service, methods] of byService) {
      const config: RpcServiceRouteConfig = { rpcService: service, rpcMethods: methods };
      scope.all(`/${service}/:method`, { config }, async (request, reply) => {
        const handler = methods.get((request.params as { method: string }).method);
        if (!handler) return reply.callNotFound();
        reply.hijack();
        const response = await handler(
          universalRequestFromNodeRequest(request.raw, reply.raw, undefined, opts.contextValues(request)),
        );
        // Answered already (a request body that stopped arriving is answered by the idle limit).
        if (reply.raw.headersSent || reply.raw.writableEnded) return;
        endUnreadBody(request, reply);
        let fixed = response;
        try {
          const protocol = protocolOf(request);
          fixed = await rewriteErrors(response, protocol, opts.normalize, (error, status) =>
            opts.answered(request, error, status),
          );
        } catch (err) {
          // Never leave a hijacked request unanswered: send what Connect made.
          request.log.error({ err }, "could not rewrite a protocol error");
        }
        // Headers set on the reply (CORS, nosniff) go out with the response.
        for (const [name, value] of Object.entries(reply.getHeaders())) {
          if (value !== undefined) reply.raw.setHeader(name, value);
        }
        try {
          await universalResponseToNodeResponse(fixed, reply.raw);
        } catch (err) {
          // The client went away mid-response; nothing is left to tell it.
          if (ConnectError.from(err).code !== Code.Aborted) request.log.debug({ err }, "response not delivered");
        }
      });
    }
  });
}

/**
 * A request answered before its body was read (over the size limit, undecodable) must not leave
 * the rest of it in the connection: on HTTP/1.1 it would be read as the next request (so the
 * connection closes after the answer); on HTTP/2 the client is told to stop sending once the
 * trailers carrying the answer are out (RST_STREAM NO_ERROR, RFC 9113 §8.1, as grpc-go does).
 */
function endUnreadBody(request: FastifyRequest, reply: FastifyReply): void {
  const raw = request.raw;
  if (raw.complete) return;
  const stream = (raw as unknown as { stream?: ServerHttp2Stream }).stream;
  if (!stream) {
    reply.raw.setHeader("connection", "close");
    return;
  }
  stream.once("wantTrailers", () =>
    setImmediate(() => {
      if (!stream.closed) stream.close(http2Constants.NGHTTP2_NO_ERROR);
    }),
  );
}

type Protocol = "connect" | "grpc" | "grpc-web";

function protocolOf(request: FastifyRequest): Protocol {
  const type = String(request.headers["content-type"] ?? "").toLowerCase();
  if (type.startsWith("application/grpc-web")) return "grpc-web";
  if (type.startsWith("application/grpc")) return "grpc";
  return "connect";
}

/** Reports the error a call answered with and the HTTP status it stands for. */
type Report = (error: ConnectError, status: number) => void;

async function rewriteErrors(
  response: UniversalServerResponse,
  protocol: Protocol,
  normalize: (e: ConnectError) => ConnectError,
  report: Report,
): Promise<UniversalServerResponse> {
  switch (protocol) {
    case "connect":
      return rewriteConnect(response, normalize, report);
    case "grpc":
      return rewriteGrpc(response, normalize, report);
    case "grpc-web":
      return rewriteGrpcWeb(response, normalize, report);
  }
}

/** Connect unary: an error is a JSON body with a non-200 status (or, from Connect itself, no body at all). */
async function rewriteConnect(
  response: UniversalServerResponse,
  normalize: (e: ConnectError) => ConnectError,
  report: Report,
): Promise<UniversalServerResponse> {
  if (response.status === 200) return response;
  const body = decompress(await readAll(response.body), response.header?.get("content-encoding"));
  const fallback = new ConnectError(fallbackMessage(response.status), fallbackCode(response.status));
  const error = body.length > 0 ? connect.errorFromJsonBytes(body, undefined, fallback) : fallback;
  const fixed = normalize(error);
  if (fixed === error && body.length > 0) {
    report(error, response.status);
    const header = new Headers(response.header);
    header.delete("content-encoding");
    header.delete("content-length");
    return { ...response, header, body: once(body) };
  }
  const header = new Headers(response.header);
  header.set("content-type", connect.contentTypeUnaryJson);
  header.delete("content-length");
  header.delete("content-encoding");
  for (const [name, value] of fixed.metadata) header.set(name, value);
  // Statuses Connect chose from the protocol (415, 405) stay; the rest follow the code.
  const status = body.length > 0 ? connect.codeToHttpStatus(fixed.code) : response.status;
  report(fixed, status);
  return { ...response, status, header, body: once(connect.errorToJsonBytes(fixed, {})) };
}

/** gRPC: the status is in the trailers, written after the body. */
function rewriteGrpc(
  response: UniversalServerResponse,
  normalize: (e: ConnectError) => ConnectError,
  report: Report,
): UniversalServerResponse {
  const trailer = response.trailer;
  if (!trailer) return response;
  const fix = () => {
    const error = grpc.findTrailerError(trailer);
    if (!error) return;
    const fixed = normalize(error);
    report(fixed, httpStatusFor(fixed.code));
    if (fixed === error) return;
    for (const name of ["grpc-status", "grpc-message", "grpc-status-details-bin"]) trailer.delete(name);
    grpc.setTrailerStatus(trailer, fixed);
  };
  if (!response.body) {
    fix();
    return response;
  }
  const body = response.body;
  return {
    ...response,
    body: (async function* () {
      yield* body;
      fix();
    })(),
  };
}

/**
 * gRPC-Web: the trailers are the body's last envelope (flag 0x80). Messages pass through as they
 * come: a stream (reflection) answers each request while the client keeps its half open, so
 * nothing may wait for the body's end.
 */
function rewriteGrpcWeb(
  response: UniversalServerResponse,
  normalize: (e: ConnectError) => ConnectError,
  report: Report,
): UniversalServerResponse {
  const header = new Headers(response.header);
  header.delete("content-length");
  const source = response.body;
  if (!source || source instanceof Uint8Array) {
    return { ...response, header, body: rewriteEnvelopes(once(source ?? new Uint8Array(0))) };
  }
  return { ...response, header, body: rewriteEnvelopes(source) };

  async function* rewriteEnvelopes(chunks: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
    let pending: Uint8Array = new Uint8Array(0);
    for await (const chunk of chunks) {
      pending = pending.length ? concat([pending, chunk]) : chunk;
      const out: Uint8Array[] = [];
      let at = 0;
      while (at + 5 <= pending.length) {
        const length = new DataView(pending.buffer, pending.byteOffset + at + 1, 4).getUint32(0);
        if (at + 5 + length > pending.length) break;
        out.push(rewriteEnvelope(pending[at]!, pending.subarray(at + 5, at + 5 + length)));
        at += 5 + length;
      }
      pending = pending.subarray(at);
      if (out.length) yield concat(out);
    }
    if (pending.length) yield pending;
  }

  function rewriteEnvelope(flags: number, data: Uint8Array): Uint8Array {
    if ((flags & grpcWeb.trailerFlag) === 0) return envelope(flags, data);
    const compressed = (flags & 0x01) !== 0;
    const trailerData = compressed ? decompress(data, response.header?.get("grpc-encoding")) : data;
    const error = grpc.findTrailerError(grpcWeb.trailerParse(trailerData));
    if (!error) return envelope(flags, data);
    const fixed = normalize(error);
    report(fixed, httpStatusFor(fixed.code));
    if (fixed === error) return envelope(flags, data);
    const trailer = grpcWeb.trailerParse(trailerData);
    for (const name of ["grpc-status", "grpc-message", "grpc-status-details-bin"]) trailer.delete(name);
    grpc.setTrailerStatus(trailer, fixed);
    // Written uncompressed (the flag says so): error trailers are small.
    return envelope(flags & ~0x01, grpcWeb.trailerSerialize(trailer));
  }
}

/** A body Connect compressed (errors over its minimum size are), by the response's encoding. */
function decompress(bytes: Uint8Array, encoding: string | null | undefined): Uint8Array {
  if (encoding === "gzip") return gunzipSync(bytes);
  if (encoding === "br") return brotliDecompressSync(bytes);
  return bytes;
}

function envelope(flags: number, data: Uint8Array): Uint8Array {
  const framed = new Uint8Array(5 + data.length);
  framed[0] = flags;
  new DataView(framed.buffer).setUint32(1, data.length);
  framed.set(data, 5);
  return framed;
}

async function readAll(body: UniversalServerResponse["body"]): Promise<Uint8Array> {
  if (!body) return new Uint8Array(0);
  if (body instanceof Uint8Array) return body;
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return concat(chunks);
}

function concat(chunks: Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return all;
}

function once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  return (async function* () {
    yield bytes;
  })();
}

function fallbackCode(status: number): Code {
  if (status === 415) return Code.InvalidArgument;
  if (status === 405) return Code.Unimplemented;
  return connect.codeFromHttpStatus(status);
}

function fallbackMessage(status: number): string {
  if (status === 415) return "unsupported content type: use application/json or application/proto";
  if (status === 405) return "method not allowed: use POST (GET only for side-effect-free methods)";
  return `HTTP ${status}`;
}
