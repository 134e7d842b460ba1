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

/** The answer for whatever a registry route threw. `challenge` is the WWW-Authenticate value for a 401. */
export function sendOciError(
  reply: FastifyReply,
  wire: ConnectError,
  thrown: unknown,
  challenge: string,
): FastifyReply {
  let status: number;
  let code: OciCode;
  let message: string;
  let detail: unknown;
  if (thrown instanceof OciError) {
    ({ status, code, message, detail } = thrown);
    for (const [name, value] of Object.entries(thrown.headers)) reply.header(name, value);
  } else {
    [status, code] = byGrpcCode[wire.code] ?? [500, "UNKNOWN"];
    message = wire.rawMessage;
    // The retry hint of a rate limit travels as a header on every protocol.
    const retryAfter = wire.metadata.get("retry-after");
    if (retryAfter) reply.header("retry-after", retryAfter);
  }
  if (status === 401) reply.header("www-authenticate", challenge);
  const error: Record<string, unknown> = { code, message };
  if (detail !== undefined) error.detail = detail;
  return reply
    .code(status)
    .header("content-type", "application/json; charset=utf-8")
    .send(JSON.stringify({ errors: [error] }));
}
