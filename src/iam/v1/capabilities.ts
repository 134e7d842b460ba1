// v1 roles carry capabilities as their names ("groups.list"), v2beta1 as Capability values: the
// enum's `name` value option is the one mapping between the two.
import { getOption } from "@bufbuild/protobuf";
import { Capability, CapabilitySchema, name } from "../../gen/capabilities/capabilities_pb.js";
import { invalidArgument, type FieldViolation } from "../../core/errors.js";
import { quote } from "../../core/strings.js";

const NAME_OF = new Map<number, string>();
const VALUE_OF = new Map<string, Capability>();
for (const value of CapabilitySchema.values) {
  const text = getOption(value, name);
  if (!text) continue;
  NAME_OF.set(value.number, text);
  VALUE_OF.set(text, value.number as Capability);
}

/** The v1 names of capability values (a value without a name keeps its enum name). */
export function capabilityStrings(values: readonly Capability[]): string[] {
  return values.map((v) => NAME_OF.get(v) ?? Capability[v] ?? String(v));
}

/** The capability values of v1 names; an unknown name is INVALID_ARGUMENT naming the first one. */
export function capabilityValues(strings: readonly string[], field = "capabilities"): Capability[] {
  const values: Capability[] = [];
  for (const [i, text] of strings.entries()) {
    const value = VALUE_OF.get(text);
    if (value === undefined) {
      const violation: FieldViolation = { field: `${field}[${i}]`, description: `unknown capability ${quote(text)}` };
      throw invalidArgument(violation);
    }
    values.push(value);
  }
  return values;
}
