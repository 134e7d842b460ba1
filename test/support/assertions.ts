// Assertions on REST answers, shared by the suites: a 200's body, and AIP-193 errors (a
// google.rpc.Status as JSON: code, message, and details with the ErrorInfo first).
import assert from "node:assert/strict";
import type { Json } from "./fixtures.js";
import type { JsonResponse } from "./http.js";
import { ERROR_DOMAIN } from "./server.js";

export const ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo";
export const BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest";
export const RESOURCE_INFO = "type.googleapis.com/google.rpc.ResourceInfo";

/** A 200 answer's body. */
export function ok(res: JsonResponse, what = ""): Json {
  assert.equal(res.status, 200, `${what}: ${JSON.stringify(res.body)}`);
  return res.body as Json;
}

/** An AIP-193 error body with this HTTP status and google.rpc code; ErrorInfo first. */
export function assertRpcError(res: JsonResponse, status: number, code: number, where: string): Json {
  const ctx = `${where}: HTTP ${res.status} ${JSON.stringify(res.body)}`;
  assert.equal(res.status, status, ctx);
  assert.equal(res.headers.get("content-type")?.split(";")[0], "application/json", ctx);
  const body = res.body as Json;
  assert.equal(body?.code, code, ctx);
  assert.equal(typeof body.message, "string", ctx);
  assert.ok(Array.isArray(body.details) && body.details.length >= 1, ctx);
  assert.equal(body.details[0]["@type"], ERROR_INFO, ctx);
  assert.equal(body.details[0].domain, ERROR_DOMAIN, ctx);
  return body;
}

export function assertUnauthenticated(res: JsonResponse, where: string): void {
  const body = assertRpcError(res, 401, 16, where);
  assert.equal(body.details[0].reason, "UNAUTHENTICATED", where);
  assert.match(body.message, /^Unauthenticated: /, where);
  assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer\b/, `${where}: WWW-Authenticate`);
}

export function assertPermissionDenied(res: JsonResponse, where: string): void {
  const body = assertRpcError(res, 403, 7, where);
  assert.equal(body.details[0].reason, "PERMISSION_DENIED", where);
}

export function assertNotFound(res: JsonResponse, where: string): void {
  const body = assertRpcError(res, 404, 5, where);
  assert.equal(body.details[0].reason, "NOT_FOUND", where);
}

/** NOT_FOUND naming the resource in a ResourceInfo, the detail after the ErrorInfo. */
export function assertResourceNotFound(res: JsonResponse, resourceType: string, resourceName?: string): void {
  const where = `${resourceType} ${resourceName ?? ""}`;
  assertNotFound(res, where);
  const info = (res.body as Json).details[1];
  assert.equal(info?.["@type"], RESOURCE_INFO, `${where}: ${JSON.stringify(res.body)}`);
  assert.equal(info.resourceType, resourceType);
  if (resourceName !== undefined) assert.equal(info.resourceName, resourceName);
}

/** The field violations of the answer's BadRequest (which it must have). */
export function fieldViolations(res: { body: any }): Array<{ field: string; description: string }> {
  const detail = (res.body?.details ?? []).find((d: Json) => d["@type"] === BAD_REQUEST);
  assert.ok(detail, `no BadRequest in ${JSON.stringify(res.body)}`);
  return detail.fieldViolations;
}

export interface InvalidOptions {
  /** no other field is violated */
  only?: boolean;
  /** the violation's description: equal to a string, or matching a RegExp */
  description?: string | RegExp;
}

/**
 * INVALID_ARGUMENT as the server answers it: HTTP 400, code 3, the ErrorInfo (reason
 * INVALID_ARGUMENT, the server's domain) and then a BadRequest with a violation of `field`.
 * Returns that violation.
 */
export function assertInvalid(
  res: JsonResponse,
  field: string,
  where = "",
  opts: InvalidOptions & { first?: boolean } = {},
): { field: string; description: string } {
  const body = assertRpcError(res, 400, 3, where);
  assert.deepEqual(body.details[0], { "@type": ERROR_INFO, reason: "INVALID_ARGUMENT", domain: ERROR_DOMAIN }, where);
  assert.equal(body.details[1]?.["@type"], BAD_REQUEST, `${where}: ${JSON.stringify(body)}`);
  const violations = fieldViolations(res);
  const violation = violations.find((v) => v.field === field);
  assert.ok(violation, `${where}: expected a violation of ${field}, got ${JSON.stringify(violations)}`);
  if (opts.first) assert.ok(body.message.startsWith(`Invalid argument: ${field}: `), `${where}: ${body.message}`);
  if (opts.only)
    assert.deepEqual(
      violations.map((v) => v.field),
      [field],
      where,
    );
  if (typeof opts.description === "string") assert.equal(violation.description, opts.description, where);
  else if (opts.description) assert.match(violation.description, opts.description, where);
  return violation;
}

/**
 * assertInvalid about `field` first: the message names it ("Invalid argument: <field>: ..."), as
 * it names the only or first violation.
 */
export function assertInvalidArgument(
  res: JsonResponse,
  field: string,
  where = "",
  opts: InvalidOptions = {},
): { field: string; description: string } {
  return assertInvalid(res, field, where, { ...opts, first: true });
}

/** A RegExp matching `text` literally, anywhere (for a description that contains it). */
export function literally(text: string): RegExp {
  return new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
}
