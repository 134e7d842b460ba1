// OCI distribution errors: `{"errors":[{code, message, detail}]}` with the spec's codes and
// HTTP statuses. Handlers throw OciError; anything else thrown (authorization, limits) arrives
// as the wire error every protocol answers with and is mapped here once.
import { Code, type ConnectError } from "@connectrpc/connect";
import type { FastifyReply } from "fastify";
import type { PublicUrls } from "../../platform/config.js";

export type OciCode =
  | "BLOB_UNKNOWN"
  | "BLOB_UPLOAD_INVALID"
  | "BLOB_UPLOAD_UNKNOWN"
  | "DIGEST_INVALID"
  | "MANIFEST_BLOB_UNKNOWN"
  | "MANIFEST_INVALID"
  | "MANIFEST_UNKNOWN"
  | "NAME_INVALID"
  | "NAME_UNKNOWN"
  | "SIZE_INVALID"
  | "UNAUTHORIZED"
  | "DENIED"
  | "UNSUPPORTED"
  | "TOOMANYREQUESTS"
  | "RANGE_INVALID"
  | "UNKNOWN";

export class OciError extends Error {
  constructor(
    readonly status: number,
    readonly code: OciCode,
    message: string,
    readonly detail?: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const blobUnknown = (digest: string) =>
  new OciError(404, "BLOB_UNKNOWN", "blob unknown to registry", { digest });
export const manifestUnknown = (reference: string) =>
  new OciError(404, "MANIFEST_UNKNOWN", "manifest unknown", { reference });
export const nameUnknown = (name: string) =>
  new OciError(404, "NAME_UNKNOWN", "repository name not known to registry", { name });
export const uploadUnknown = () => new OciError(404, "BLOB_UPLOAD_UNKNOWN", "blob upload unknown to registry");
export const digestInvalid = (message: string, detail?: unknown) =>
  new OciError(400, "DIGEST_INVALID", message, detail);
export const manifestInvalid = (message: string) => new OciError(400, "MANIFEST_INVALID", message);

const byGrpcCode: Partial<Record<Code, [number, OciCode]>> = {
  [Code.Unauthenticated]: [401, "UNAUTHORIZED"],
  [Code.PermissionDenied]: [403, "DENIED"],
  [Code.NotFound]: [404, "NAME_UNKNOWN"],
  // What reaches here is the text rule on a query parameter (the name is checked as NAME_INVALID
  // by the route table itself): bad parameters answer UNSUPPORTED, as `n` and `start` do.
  [Code.InvalidArgument]: [400, "UNSUPPORTED"],
  [Code.ResourceExhausted]: [429, "TOOMANYREQUESTS"],
  [Code.Unimplemented]: [405, "UNSUPPORTED"],
};

/**
 * The distribution token spec's challenge: where to get a token (the issuer's `/token`), for
 * which service, and for what scope ("repository:acme/app:pull"), if the request names one.
 */
export function bearerChallenge(urls: PublicUrls, scope?: string): string {
  const base = `Bearer realm="${urls.issuer.replace(/\/+$/, "")}/token",service="${urls.registryAudience}"`;
  return scope === undefined ? base : `${base},scope="${scope}"`;
}

/** What a registry route's failure answers: the OCI error, its HTTP status and headers. */
export interface OciAnswer {
  status: number;
  code: OciCode;
  message: string;
  detail?: unknown;
  headers: Record<string, string>;
}

/** The OCI answer for whatever a registry route threw (`wire`: the error every protocol answers with). */
export function ociAnswerOf(wire: ConnectError, thrown: unknown): OciAnswer {
  if (thrown instanceof OciError) {
    const { status, code, message, detail, headers } = thrown;
    return { status, code, message, detail, headers };
  }
  const [status, code] = byGrpcCode[wire.code] ?? [500, "UNKNOWN"];
  // The retry hint of a rate limit travels as a header on every protocol.
  const retryAfter = wire.metadata.get("retry-after");
  return { status, code, message: wire.rawMessage, headers: retryAfter ? { "retry-after": retryAfter } : {} };
}

/** Sends an OCI answer. `challenge` is the WWW-Authenticate value for a 401. */
export function sendOciError(reply: FastifyReply, answer: OciAnswer, challenge: string): FastifyReply {
  const { status, code, message, detail, headers } = answer;
  for (const [name, value] of Object.entries(headers)) reply.header(name, value);
  if (status === 401) reply.header("www-authenticate", challenge);
  const error: Record<string, unknown> = { code, message };
  if (detail !== undefined) error.detail = detail;
  return reply
    .code(status)
    .header("content-type", "application/json; charset=utf-8")
    .send(JSON.stringify({ errors: [error] }));
}
