// AIP-193 errors, built once and used by every service and both transports.
// Services throw the ConnectErrors made here; the transports pass every thrown value through
// `toWireError`, which adds the ErrorInfo (reason + configured domain) and hides anything
// unexpected behind a plain INTERNAL so no stack trace or SQL text reaches a client.
import { Code, ConnectError } from "@connectrpc/connect";
import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
  ResourceInfoSchema,
  RetryInfoSchema,
} from "../gen/google/rpc/error_details_pb.js";
import { isValidUidp } from "./uidp.js";

export { Code, ConnectError };

export interface FieldViolation {
  field: string;
  description: string;
}

export interface PreconditionViolation {
  type: string;
  description: string;
}

type OutgoingDetail = { desc: DescMessage; value: MessageInitShape<DescMessage> };

function detail<D extends DescMessage>(desc: D, value: MessageInitShape<D>): OutgoingDetail {
  return { desc, value: value as MessageInitShape<DescMessage> };
}

/** INVALID_ARGUMENT with a BadRequest detail; message "Invalid argument: <field>: <reason>". */
export function invalidArgument(violations: FieldViolation[] | FieldViolation): ConnectError {
  // A field path can come from the client (an unknown query parameter): never repeat a long one.
  const list = (Array.isArray(violations) ? violations : [violations]).map((v) => ({
    field: clip(v.field, 128),
    description: clip(v.description, 512),
  }));
  const message = "Invalid argument: " + list.map((v) => `${v.field}: ${v.description}`).join("; ");
  return new ConnectError(message, Code.InvalidArgument, undefined, [
    detail(BadRequestSchema, { fieldViolations: list }),
  ]);
}

/** `text` cut to about `max` UTF-16 units, never inside a surrogate pair (half a pair is not UTF-8). */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max) + "…";
}

/** FAILED_PRECONDITION with a PreconditionFailure detail; message "Precondition failed: <reason>". */
export function failedPrecondition(violations: PreconditionViolation[] | PreconditionViolation): ConnectError {
  const list = Array.isArray(violations) ? violations : [violations];
  const message = "Precondition failed: " + list.map((v) => v.description).join("; ");
  return new ConnectError(message, Code.FailedPrecondition, undefined, [
    detail(PreconditionFailureSchema, { violations: list }),
  ]);
}

/** NOT_FOUND with a ResourceInfo detail naming what was looked for. */
export function notFound(resourceType: string, resourceName: string): ConnectError {
  // A real uid is named in full; anything else the client sent is cut short.
  const shown = isValidUidp(resourceName) ? resourceName : clip(resourceName, 64);
  return new ConnectError(`Not found: ${resourceType} ${shown || '""'}`, Code.NotFound, undefined, [
    detail(ResourceInfoSchema, {
      resourceType,
      resourceName: shown,
      description: `${resourceType} not found`,
    }),
  ]);
}

export function alreadyExists(resourceType: string, resourceName: string, description: string): ConnectError {
  return new ConnectError(`Already exists: ${description}`, Code.AlreadyExists, undefined, [
    detail(ResourceInfoSchema, { resourceType, resourceName, description }),
  ]);
}

/**
 * RESOURCE_EXHAUSTED (HTTP 429): a rate limit. RetryInfo says when to try again; the
 * `retry-after` metadata becomes the HTTP Retry-After header (Connect, REST) or gRPC metadata.
 */
export function resourceExhausted(limit: string, retryAfterSeconds: number): ConnectError {
  const seconds = Math.max(1, Math.ceil(retryAfterSeconds));
  return new ConnectError(
    `Resource exhausted: too many requests (${limit}); retry in ${seconds} s`,
    Code.ResourceExhausted,
    { "retry-after": String(seconds) },
    [
      detail(RetryInfoSchema, { retryDelay: { seconds: BigInt(seconds) } }),
      detail(QuotaFailureSchema, { violations: [{ subject: limit, description: "rate limit exceeded" }] }),
    ],
  );
}

/** UNAUTHENTICATED (HTTP 401): no usable credentials. */
export function unauthenticated(reason: string): ConnectError {
  return new ConnectError(`Unauthenticated: ${reason}`, Code.Unauthenticated);
}

/** PERMISSION_DENIED (HTTP 403): authenticated, but not allowed. */
export function permissionDenied(reason: string): ConnectError {
  return new ConnectError(`Permission denied: ${reason}`, Code.PermissionDenied);
}

export function unimplemented(what: string): ConnectError {
  return new ConnectError(`Unimplemented: ${what}`, Code.Unimplemented);
}

/** google.rpc.Code names, used as the ErrorInfo reason ("INVALID_ARGUMENT", ...). */
export function codeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** grpc-gateway's mapping from gRPC code to HTTP status. */
export function httpStatusFor(code: Code): number {
  switch (code) {
    case Code.Canceled:
      return 499;
    case Code.Unknown:
      return 500;
    case Code.InvalidArgument:
      return 400;
    case Code.DeadlineExceeded:
      return 504;
    case Code.NotFound:
      return 404;
    case Code.AlreadyExists:
      return 409;
    case Code.PermissionDenied:
      return 403;
    case Code.Unauthenticated:
      return 401;
    case Code.ResourceExhausted:
      return 429;
    case Code.FailedPrecondition:
      return 400;
    case Code.Aborted:
      return 409;
    case Code.OutOfRange:
      return 400;
    case Code.Unimplemented:
      return 501;
    case Code.Internal:
      return 500;
    case Code.Unavailable:
      return 503;
    case Code.DataLoss:
      return 500;
    default:
      return 500;
  }
}

export type UnexpectedErrorLogger = (err: unknown) => void;

/**
 * Normalizes anything thrown by a handler into the error sent on the wire: a ConnectError whose
 * first detail is ErrorInfo{reason, domain}. Unknown errors are logged and replaced by INTERNAL.
 */
export function toWireError(err: unknown, domain: string, logUnexpected: UnexpectedErrorLogger): ConnectError {
  let ce: ConnectError;
  if (err instanceof ConnectError) {
    ce = err;
  } else {
    logUnexpected(err);
    ce = new ConnectError("Internal error", Code.Internal);
  }
  const hasInfo = ce.details.some((d) => ("desc" in d ? d.desc.typeName : d.type) === ErrorInfoSchema.typeName);
  // A message must encode as UTF-8 (gRPC percent-encodes it; JSON decoders reject half pairs).
  const message = (ce.rawMessage as unknown as { toWellFormed(): string }).toWellFormed();
  if (message !== ce.rawMessage) ce = new ConnectError(message, ce.code, ce.metadata, ce.details as OutgoingDetail[]);
  if (hasInfo) return ce;
  const details = [detail(ErrorInfoSchema, { reason: codeName(ce.code), domain }), ...ce.details];
  return new ConnectError(ce.rawMessage, ce.code, ce.metadata, details as OutgoingDetail[]);
}

export function isOutgoingDetail(d: ConnectError["details"][number]): d is OutgoingDetail {
  return "desc" in d;
}
