// /openapi.json (the committed, generated description of the REST API) and /docs (a page that
// renders it with Swagger UI, served from our own origin: no CDN). Anonymous, like /healthz: they
// describe the API, never data.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { FastifyInstance } from "fastify";
import { PACKAGE_ROOT as ROOT } from "../core/package-files.js";
import { MODULES } from "./modules.js";
import { openApiDocument } from "./openapi.js";

export const OPENAPI_FILE = join(ROOT, "openapi", "openapi.json");

/** The document for the registered modules, as the committed file holds it. */
export function openApiText(): string {
  const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
  return (
    JSON.stringify(
      openApiDocument(
        MODULES.flatMap((m) => m.services),
        version,
      ),
      null,
      2,
    ) + "\n"
  );
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Bulwark API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/init.js"></script>
</body>
</html>
`;

const INIT = `window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });\n`;

export function registerDocsRoutes(fastify: FastifyInstance): void {
  const document = readFileSync(OPENAPI_FILE);
  const swaggerUi = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  const assets: Record<string, { type: string; body: Buffer | string }> = {
    "swagger-ui.css": { type: "text/css; charset=utf-8", body: readFileSync(join(swaggerUi, "swagger-ui.css")) },
    "swagger-ui-bundle.js": {
      type: "text/javascript; charset=utf-8",
      body: readFileSync(join(swaggerUi, "swagger-ui-bundle.js")),
    },
    "init.js": { type: "text/javascript; charset=utf-8", body: INIT },
  };
  fastify.get("/openapi.json", async (_request, reply) =>
    reply.header("content-type", "application/json").header("cache-control", "public, max-age=300").send(document),
  );
  fastify.get("/docs", async (_request, reply) => reply.header("content-type", "text/html; charset=utf-8").send(PAGE));
  fastify.get<{ Params: { name: string } }>("/docs/assets/:name", async (request, reply) => {
    const asset = assets[request.params.name];
    if (!asset) return reply.callNotFound();
    return reply.header("content-type", asset.type).header("cache-control", "public, max-age=3600").send(asset.body);
  });
}
