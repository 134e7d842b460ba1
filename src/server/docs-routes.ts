// /openapi.json and /openapi/<version>.json (the committed, generated descriptions of the REST
// API, one per API version; /openapi.json is the default version's) and /docs (a page that renders
// them with Swagger UI, served from our own origin: no CDN). Anonymous, like /healthz: they
// describe the API, never data.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { FastifyInstance, FastifyReply } from "fastify";
import { API_VERSIONS } from "./openapi.js";
import { openApiFile } from "./openapi-files.js";

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
<script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
<script src="/docs/assets/init.js"></script>
</body>
</html>
`;

const INIT = `window.ui = SwaggerUIBundle({ urls: ${JSON.stringify(
  API_VERSIONS.map((v, i) => ({ url: i === 0 ? "/openapi.json" : `/openapi/${v}.json`, name: v })),
)}, dom_id: "#swagger-ui", deepLinking: true, layout: "StandaloneLayout", presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset] });\n`;

export function registerDocsRoutes(fastify: FastifyInstance): void {
  // A document not written yet (scripts/generate-openapi.ts starts a server to write them) is not served.
  const documents = new Map(
    API_VERSIONS.flatMap((v) => (existsSync(openApiFile(v)) ? [[v as string, readFileSync(openApiFile(v))]] : [])),
  );
  const swaggerUi = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  const assets: Record<string, { type: string; body: Buffer | string }> = {
    "swagger-ui.css": { type: "text/css; charset=utf-8", body: readFileSync(join(swaggerUi, "swagger-ui.css")) },
    "swagger-ui-bundle.js": {
      type: "text/javascript; charset=utf-8",
      body: readFileSync(join(swaggerUi, "swagger-ui-bundle.js")),
    },
    "swagger-ui-standalone-preset.js": {
      type: "text/javascript; charset=utf-8",
      body: readFileSync(join(swaggerUi, "swagger-ui-standalone-preset.js")),
    },
    "init.js": { type: "text/javascript; charset=utf-8", body: INIT },
  };
  const sendDocument = (reply: FastifyReply, document: Buffer) =>
    reply.header("content-type", "application/json").header("cache-control", "public, max-age=300").send(document);
  fastify.get("/openapi.json", async (_request, reply) => {
    const document = documents.get(API_VERSIONS[0]);
    return document ? sendDocument(reply, document) : reply.callNotFound();
  });
  fastify.get<{ Params: { version: string } }>("/openapi/:version.json", async (request, reply) => {
    const document = documents.get(request.params.version);
    return document ? sendDocument(reply, document) : reply.callNotFound();
  });
  fastify.get("/docs", async (_request, reply) => reply.header("content-type", "text/html; charset=utf-8").send(PAGE));
  fastify.get<{ Params: { name: string } }>("/docs/assets/:name", async (request, reply) => {
    const asset = assets[request.params.name];
    if (!asset) return reply.callNotFound();
    return reply.header("content-type", asset.type).header("cache-control", "public, max-age=3600").send(asset.body);
  });
}
