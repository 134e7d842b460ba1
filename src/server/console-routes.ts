// The web console (console/, built by scripts/bundle-console.mjs into dist/console/): its page at `/`
// and under /console/ (the console routes in the browser: every such path answers the same page,
// so a shared link opens where it points), and its content-hashed assets. Anonymous, like /docs:
// the page holds no data; everything it shows it asks the API for, with the signed-in person's token.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { extname, join } from "node:path";
import type { FastifyInstance, FastifyReply } from "fastify";
import { PACKAGE_ROOT } from "../core/package-files.js";

/** Where the build writes the console. */
export const CONSOLE_DIR = join(PACKAGE_ROOT, "dist", "console");

const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
};

export interface ConsoleOptions {
  /** origins besides the page's own the console calls (the issuer's, when it is published elsewhere) */
  connectOrigins(): string[];
}

/**
 * The page's policy: nothing from any other origin, no inline script or style, no framing. The
 * issuer's token endpoint is the one other origin it may call, when the issuer lives elsewhere.
 */
export function consolePolicy(connectOrigins: string[]): string {
  return [
    "default-src 'self'",
    `connect-src ${["'self'", ...connectOrigins].join(" ")}`,
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

export function registerConsoleRoutes(fastify: FastifyInstance, options: ConsoleOptions): void {
  const index = join(CONSOLE_DIR, "index.html");
  const assetsDir = join(CONSOLE_DIR, "assets");
  // Not built (a source checkout before `npm run build`): `/` keeps answering the API's 404.
  if (!existsSync(index) || !existsSync(assetsDir)) return;
  const page = readFileSync(index);
  const assets = new Map(
    readdirSync(assetsDir).map((name) => [
      name,
      { type: TYPES[extname(name)], body: readFileSync(join(assetsDir, name)) },
    ]),
  );
  const sendPage = (reply: FastifyReply) => {
    const own = new Set(options.connectOrigins().filter((o) => o !== "'self'"));
    return reply
      .header("content-type", "text/html; charset=utf-8")
      .header("content-security-policy", consolePolicy([...own]))
      .header("cache-control", "no-cache")
      .header("referrer-policy", "no-referrer")
      .header("x-frame-options", "DENY")
      .send(page);
  };
  fastify.get("/", async (_request, reply) => sendPage(reply));
  fastify.get("/console", async (_request, reply) => sendPage(reply));
  fastify.get("/console/*", async (_request, reply) => sendPage(reply));
  fastify.get<{ Params: { name: string } }>("/console/assets/:name", async (request, reply) => {
    const asset = assets.get(request.params.name);
    if (!asset?.type) return reply.callNotFound();
    // Names carry their content's hash: a new build is a new name.
    return reply
      .header("content-type", asset.type)
      .header("cache-control", "public, max-age=31536000, immutable")
      .send(asset.body);
  });
}
