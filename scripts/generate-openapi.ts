// Writes openapi/: the OpenAPI 3.1 description of every served REST route, one document per API
// version (src/server/openapi.ts, openapi-files.ts). Which RPCs the server implements is its
// bindings' to say, so a server is started on a throwaway data directory and asked. Run by
// `npm run generate`; the committed files are checked against fresh ones in
// test/server/openapi.test.ts and served at /openapi.json and /openapi/<version>.json.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { startServer } from "../src/server/start.js";
import { API_VERSIONS } from "../src/server/openapi.js";
import { openApiFile, openApiTexts } from "../src/server/openapi-files.js";

const dataDir = mkdtempSync(join(tmpdir(), "bulwark-openapi-"));
try {
  const server = await startServer({
    port: 0,
    host: "127.0.0.1",
    dataDir,
    errorDomain: "openapi.invalid",
    logger: pino({ level: "silent" }),
    rateLimits: false,
  });
  let texts;
  try {
    texts = openApiTexts(server.bindings);
  } finally {
    await server.close();
  }
  for (const version of API_VERSIONS) {
    writeFileSync(openApiFile(version), texts[version]);
    console.log(`wrote ${openApiFile(version)}`);
  }
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
