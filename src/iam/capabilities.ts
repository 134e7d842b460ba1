// Capability values a role may hold: known values of the Capability enum, not UNKNOWN, and not
// internal ones (CAP_INTERNAL and those marked internal_only are for the platform's own
// services, never grantable by a customer).
import { getOption } from "@bufbuild/protobuf";
import { Capability, CapabilitySchema, internal_only } from "../gen/capabilities/capabilities_pb.js";
import type { FieldViolation } from "../core/errors.js";

const grantable = new Set(
  CapabilitySchema.values
    .filter(
      (v) => v.number !== Capability.UNKNOWN && v.number !== Capability.CAP_INTERNAL && !getOption(v, internal_only),
    )
    .map((v) => v.number),
);

export function capabilityViolations(capabilities: readonly number[], field = "capabilities"): FieldViolation[] {
  if (capabilities.length === 0) return [{ field, description: "at least one capability is required" }];
  const bad = capabilities.filter((c) => !grantable.has(c));
  if (bad.length === 0) return [];
  const names = bad.map((c) => Capability[c] ?? String(c)).join(", ");
  return [{ field, description: `not grantable capabilities: ${names}` }];
}

/** Sorted and de-duplicated, so equal sets compare and store equally. */
export function normalizeCapabilities(capabilities: readonly number[]): number[] {
  return [...new Set(capabilities)].sort((a, b) => a - b);
}
