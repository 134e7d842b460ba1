// Shared assertion for the unit tier: a call fails with INVALID_ARGUMENT carrying exactly the given
// BadRequest field violations, as clients receive them (services and transports rely on both).
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema } from "../../src/gen/google/rpc/error_details_pb.js";

export interface ExpectedViolation {
  field: string;
  /** exact text, or a pattern the description must match */
  description: string | RegExp;
}

/** Runs `fn`, asserts it throws INVALID_ARGUMENT with these violations (in order), returns the error. */
export function expectInvalidArgument(fn: () => unknown, ...expected: ExpectedViolation[]): ConnectError {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  assert.ok(thrown !== undefined, "expected an error, but the call succeeded");
  assert.ok(thrown instanceof ConnectError, `expected a ConnectError, got ${String(thrown)}`);
  assert.equal(thrown.code, Code.InvalidArgument, `code ${Code[thrown.code]}: ${thrown.rawMessage}`);
  const details = thrown.findDetails(BadRequestSchema);
  assert.equal(details.length, 1, "exactly one BadRequest detail");
  const violations = details[0]!.fieldViolations;
  assert.deepEqual(
    violations.map((v) => v.field),
    expected.map((e) => e.field),
    `violations: ${JSON.stringify(violations.map((v) => [v.field, v.description]))}`,
  );
  violations.forEach((v, i) => {
    const want = expected[i]!.description;
    if (typeof want === "string") assert.equal(v.description, want);
    else assert.match(v.description, want);
  });
  // The message repeats the violations, so logs and plain-text clients see them too.
  assert.ok(thrown.rawMessage.startsWith("Invalid argument: "), thrown.rawMessage);
  for (const v of violations) assert.ok(thrown.rawMessage.includes(`${v.field}: ${v.description}`), thrown.rawMessage);
  return thrown;
}
