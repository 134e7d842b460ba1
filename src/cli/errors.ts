// What the CLI says when something fails: one or a few sentences a person can act on, never a
// stack trace. Exit codes: 0 success, 1 an error (the server refused, it could not be reached, a
// file is missing, ...), 2 a usage error (unknown command or option, a missing or malformed argument).
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";

export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_USAGE = 2;

/** An error meant for the user; its message is printed as is. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_ERROR,
  ) {
    super(message);
  }
}

/** The command line itself is wrong (exit status 2). */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, EXIT_USAGE);
  }
}

/** Network failures by their system error code, in words. */
const NETWORK_CAUSES: Record<string, string> = {
  ECONNREFUSED: "connection refused (is the server running?)",
  ENOTFOUND: "no such host",
  EAI_AGAIN: "the host name could not be resolved now",
  ETIMEDOUT: "the connection timed out",
  ECONNRESET: "the connection was reset",
  EHOSTUNREACH: "the host is unreachable",
  ENETUNREACH: "the network is unreachable",
  EPIPE: "the connection was closed",
  CERT_HAS_EXPIRED: "the server's TLS certificate has expired",
  DEPTH_ZERO_SELF_SIGNED_CERT: "the server's TLS certificate is self-signed",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "the server's TLS certificate cannot be verified",
  ERR_TLS_CERT_ALTNAME_INVALID: "the server's TLS certificate is for another host",
};

/** The system error code somewhere in an error's cause chain (fetch and Node's http nest them). */
function networkCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 6; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code in NETWORK_CAUSES) return code;
    const errors = (e as { errors?: unknown }).errors; // AggregateError (IPv4 and IPv6 both refused)
    if (Array.isArray(errors)) {
      const inner = errors.map(networkCode).find(Boolean);
      if (inner) return inner;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** An unreachable server: the URL and the cause. Undefined when the error is not a network failure. */
export function unreachable(url: string, err: unknown): CliError | undefined {
  const code = networkCode(err);
  if (code) return new CliError(`cannot reach ${url}: ${NETWORK_CAUSES[code]} [${code}]`);
  if (err instanceof TypeError && err.message === "fetch failed")
    return new CliError(`cannot reach ${url}: ${err.message}`);
  if (err instanceof ConnectError && err.code === Code.Unavailable && !err.findDetails(ErrorInfoSchema).length)
    return new CliError(`cannot reach ${url}: ${err.rawMessage}`);
  return undefined;
}

/** "the name is required" → "The name is required." */
function sentence(text: string): string {
  const t = text.trim();
  if (!t) return t;
  return t[0]!.toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? "" : ".");
}

const CODE_WORDS: Partial<Record<Code, string>> = {
  [Code.InvalidArgument]: "the request is invalid",
  [Code.NotFound]: "not found",
  [Code.AlreadyExists]: "it already exists",
  [Code.PermissionDenied]: "permission denied",
  [Code.Unauthenticated]: "not authenticated",
  [Code.FailedPrecondition]: "the request cannot be carried out now",
  [Code.ResourceExhausted]: "too many requests: try again shortly",
  [Code.Unimplemented]: "this server does not implement that",
  [Code.DeadlineExceeded]: "the server did not answer in time",
  [Code.Aborted]: "the request conflicted with another change: try again",
};

/** The server's refusal as sentences: its message, then each field violation on its own line. */
export function describeServerError(err: ConnectError, hint?: string): CliError {
  const lines = [sentence(err.rawMessage || CODE_WORDS[err.code] || Code[err.code] || "the server refused")];
  for (const bad of err.findDetails(BadRequestSchema))
    for (const v of bad.fieldViolations) {
      const text = sentence(v.description);
      // The message often repeats the one violation; say it once.
      if (!lines[0]!.includes(v.description)) lines.push(`  ${v.field ? `${v.field}: ` : ""}${text}`);
    }
  if (hint) lines.push(hint);
  return new CliError(lines.join("\n"));
}

export interface Hints {
  /** what to do about UNAUTHENTICATED (a token to get) */
  unauthenticated: string;
  /** what to do about PERMISSION_DENIED; by default: ask for a role */
  permissionDenied?: string;
}

const ASK_FOR_A_ROLE = "Ask an owner of the group for a role that allows it (see `bulwark auth token capabilities`).";

/** Any failure of a call to the API, in words. */
export function explain(err: unknown, apiUrl: string, hints: Hints): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof ConnectError && err.cause instanceof CliError) return err.cause;
  const down = unreachable(apiUrl, err);
  if (down) return down;
  if (err instanceof ConnectError)
    return describeServerError(
      err,
      err.code === Code.Unauthenticated
        ? hints.unauthenticated
        : err.code === Code.PermissionDenied
          ? (hints.permissionDenied ?? ASK_FOR_A_ROLE)
          : undefined,
    );
  return new CliError(err instanceof Error ? err.message : String(err));
}
