// Writes openapi/openapi.json: the OpenAPI 3.1 description of every served REST route, from the
// protos' descriptors (src/server/openapi.ts). Run by `npm run generate`; the committed file is
// checked against a fresh one in test/server/codegen-drift.test.ts and served at /openapi.json.
import { writeFileSync } from "node:fs";
import { openApiText, OPENAPI_FILE } from "../src/server/docs-routes.js";

writeFileSync(OPENAPI_FILE, openApiText());
console.log(`wrote ${OPENAPI_FILE}`);
