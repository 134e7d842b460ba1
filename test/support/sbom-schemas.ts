// The official SBOM JSON schemas (test/fixtures/sbom-schemas, README.md there says where each came
// from) as ajv validators: SPDX 2.3 and CycloneDX 1.5.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";

const SCHEMAS = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "sbom-schemas");
const schema = (name: string) => JSON.parse(readFileSync(join(SCHEMAS, name), "utf8")) as object;
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

function validator(main: string, ...referenced: string[]): ValidateFunction {
  // strict off: the official schemas use keywords (e.g. `javaType`-style annotations) ajv's strict mode rejects
  const ajv = addFormats(new Ajv({ allErrors: true, strict: false }));
  // the main schema refers to the others by file name, resolved against its own $id
  const base = (schema(main) as { $id: string }).$id;
  for (const r of referenced) ajv.addSchema({ ...schema(r), $id: new URL(r, base).href });
  return ajv.compile(schema(main));
}

export const validSpdx = validator("spdx-2.3.schema.json");
export const validCycloneDx = validator(
  "bom-1.5.SNAPSHOT.schema.json",
  "spdx.SNAPSHOT.schema.json",
  "jsf-0.82.SNAPSHOT.schema.json",
);

export function assertValid(validate: ValidateFunction, document: unknown): void {
  const ok = validate(document);
  assert.ok(ok, `schema errors: ${JSON.stringify(validate.errors, null, 2)}`);
}
