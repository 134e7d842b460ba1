// Errors answered outside the services' own path, in the request's protocol and AIP-193 form:
// what Connect raises itself (undecodable bodies, bad envelopes), and requests refused before any
// handler runs (request heads over 16 KiB, malformed HTTP/1.1, an unsupported Expect).
import { create, createRegistry, toJson } from "@bufbuild/protobuf";
import { AnySchema, anyPack } from "@bufbuild/protobuf/wkt";
import { errorToJsonBytes as connectErrorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus as grpcSetTrailerStatus } from "@connectrpc/connect/protocol-grpc";
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
import { Code, ConnectError, clip, httpStatusFor, invalidArgument, isOutgoingDetail } from "../core/errors.js";
import { shortenQuotedValues } from "../core/strings.js";
import { HEADERS_TIMEOUT_MS, type ClientErrorAnswer, type ClientProblem } from "./dual-server.js";

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

/** The error for a request Node's HTTP/1.1 layer refuses before any handler runs. */
export function clientError(problem: ClientProblem): ConnectError {
  switch (problem) {
    case "headers too large":
      return new ConnectError(
        "Resource exhausted: request headers (with the URL) exceed 16 KiB",
        Code.ResourceExhausted,
      );
    case "expectation":
      return invalidArgument({ field: "expect", description: "only 100-continue is supported" });
    case "headers timeout":
      return invalidArgument({
        field: "request",
        description: `the request's headers did not all arrive within ${HEADERS_TIMEOUT_MS / 1000} s`,
      });
    case "malformed":
      return invalidArgument({ field: "request", description: "malformed HTTP request" });
  }
}

/**
 * An error Connect raised itself (our handlers' errors carry ErrorInfo already): a request it
 * could not decode is the client's fault (INVALID_ARGUMENT, not INTERNAL); its message is kept
 * short and never repeats much of the request.
 */
export function normalizeProtocolError(error: ConnectError, wireError: (err: unknown) => ConnectError): ConnectError {
  const hasInfo = error.details.some((d) => ("desc" in d ? d.desc.typeName : d.type) === ErrorInfoSchema.typeName);
  if (hasInfo) return error;
  const reason = clip(shortenQuotedValues(error.rawMessage), 200);
  if (error.code === Code.Internal || error.code === Code.Unknown)
    return wireError(invalidArgument({ field: "body", description: `cannot decode the request: ${reason}` }));
  if (error.code === Code.InvalidArgument) return wireError(invalidArgument({ field: "request", description: reason }));
  return wireError(new ConnectError(reason, error.code, error.metadata));
}

/** An RPC path of Connect or gRPC-Web ("/package.Service/Method"); REST paths have no dotted first segment. */
const RPC_PATH = /^\/[A-Za-z_][\w]*(?:\.[\w]+)+\/[A-Za-z_]\w*(?:\?|$)/;

/** Whether a path (without its query) names an RPC the way Connect and gRPC do. */
export function isRpcPath(path: string): boolean {
  return RPC_PATH.test(path);
}

/** What a request refused before routing says of its protocol. */
export interface RequestShape {
  path: string;
  contentType: string;
}

/** The request line and content type in the first bytes Node's HTTP/1.1 parser read. */
export function shapeOfReceived(received: Buffer | undefined): RequestShape {
  const head = received?.subarray(0, 8192).toString("latin1") ?? "";
  return {
    path: /^[A-Z]+ (\S+)/.exec(head)?.[1] ?? "",
    contentType: /\r\ncontent-type:\s*([^\r\n;]*)/i.exec(head)?.[1]?.trim().toLowerCase() ?? "",
  };
}

/** What decides an answer's protocol, of a request Fastify parsed. */
export function shapeOfRequest(request: {
  url: string;
  headers: Record<string, string | string[] | undefined>;
}): RequestShape {
  return {
    path: request.url,
    contentType: String(request.headers["content-type"] ?? "")
      .split(";")[0]!
      .trim()
      .toLowerCase(),
  };
}

/**
 * The answer, in the request's own protocol as far as its path and content type tell it, to a
 * request refused before any handler: gRPC and gRPC-Web get a trailers-only status in headers,
 * Connect its JSON error, anything else google.rpc.Status JSON.
 */
export function clientErrorAnswer(error: ConnectError, request: RequestShape): ClientErrorAnswer {
  const status = error.code === Code.ResourceExhausted ? 431 : httpStatusFor(error.code);
  if (request.contentType.startsWith("application/grpc")) {
    const trailer = grpcSetTrailerStatus(new Headers(), error);
    return { status: 200, headers: { "content-type": request.contentType, ...Object.fromEntries(trailer) }, body: "" };
  }
  if (RPC_PATH.test(request.path)) {
    return { status, headers: { "content-type": "application/json" }, body: connectErrorToJsonBytes(error, {}) };
  }
  return { status, headers: { "content-type": "application/json" }, body: JSON.stringify(statusJson(error)) };
}

/** HTTP/1.1's limit on the request head (Node's default), applied to HTTP/2 requests too. */
export const MAX_HEADER_BYTES = 16 * 1024;

/** The size of a request's header list as HTTP/2 counts it (RFC 9113 §6.5.2: name + value + 32 each). */
export function headerListSize(rawHeaders: string[]): number {
  let size = 0;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) size += rawHeaders[i]!.length + rawHeaders[i + 1]!.length + 32;
  return size;
}
