// /openapi.json and /openapi/<version>.json (the committed, generated descriptions of the REST
// API, one per API version; /openapi.json is the default version's) and /docs (a page that renders
// them with Swagger UI, served from our own origin: no CDN). Anonymous, like /healthz: they
// describe the API, never data.
import { readFile } from "node:fs/promises";
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

/**
 * A file read when first asked for, then kept (~3 MiB of documents and Swagger UI that most
 * servers are never asked for stay out of memory, and out of start-up). Undefined, and asked again
 * next time, while it cannot be read (a document not written yet: scripts/generate-openapi.ts
 * starts a server to write them).
 */
function onDemand(path: string): () => Promise<Buffer | undefined> {
  let read: Promise<Buffer | undefined> | undefined;
  return () =>
    (read ??= readFile(path).catch(() => {
      read = undefined;
      return undefined;
    }));
}

export function registerDocsRoutes(fastify: FastifyInstance): void {
  const documents = new Map(API_VERSIONS.map((v) => [v as string, onDemand(openApiFile(v))]));
  const swaggerUi = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  const asset = (name: string, type: string) => ({ type, body: onDemand(join(swaggerUi, name)) });
  const assets: Record<string, { type: string; body: () => Promise<Buffer | string | undefined> }> = {
    "swagger-ui.css": asset("swagger-ui.css", "text/css; charset=utf-8"),
    "swagger-ui-bundle.js": asset("swagger-ui-bundle.js", "text/javascript; charset=utf-8"),
    "swagger-ui-standalone-preset.js": asset("swagger-ui-standalone-preset.js", "text/javascript; charset=utf-8"),
    "init.js": { type: "text/javascript; charset=utf-8", body: async () => INIT },
  };
  const sendDocument = async (reply: FastifyReply, version: string | undefined) => {
    const document = version === undefined ? undefined : await documents.get(version)?.();
    if (!document) return reply.callNotFound();
    return reply
      .header("content-type", "application/json")
      .header("cache-control", "public, max-age=300")
      .send(document);
  };
  fastify.get("/openapi.json", async (_request, reply) => sendDocument(reply, API_VERSIONS[0]));
  fastify.get<{ Params: { version: string } }>("/openapi/:version.json", async (request, reply) =>
    sendDocument(reply, request.params.version),
  );
  fastify.get("/docs", async (_request, reply) => reply.header("content-type", "text/html; charset=utf-8").send(PAGE));
  fastify.get<{ Params: { name: string } }>("/docs/assets/:name", async (request, reply) => {
    const asset = Object.hasOwn(assets, request.params.name) ? assets[request.params.name] : undefined;
    const body = await asset?.body();
    if (!asset || body === undefined) return reply.callNotFound();
    return reply.header("content-type", asset.type).header("cache-control", "public, max-age=3600").send(body);
  });
}
