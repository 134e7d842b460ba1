// The OCI distribution API (v1.1) at /v2/: pull, push, content discovery and management, plus
// the hosted registry's tag history, as plain routes. Every request is authorized by the
// server's Authorizer (registry audience) before its handler runs, by the rule the route table
// (router.ts) computes: it names the repo (or, for a first push, its group) and the action's
// capabilities; public repos are pulled without credentials. A registry token's `access` claim
// further limits it to the repositories and actions granted. Errors answer in OCI's form.
import type { FastifyReply, FastifyRequest } from "fastify";
import { Code } from "@connectrpc/connect";
import { unauthenticated } from "../../core/errors.js";
import type { CallContext } from "../../core/service.js";
import type { PublicUrls } from "../../platform/config.js";
import type { PlainRouter } from "../../platform/routes.js";
import { blobHandlers, type BlobRouteDeps } from "./blobs.js";
import { OciError, bearerChallenge, nameUnknown, ociAnswerOf, sendOciError, type OciAnswer } from "./errors.js";
import type { RegistryEvents, Transferred } from "./events.js";
import { historyHandlers, type HistoryRouteDeps } from "./history.js";
import { API_VERSION, queryOf, sendJson } from "./http.js";
import { manifestHandlers, tagOf, type ManifestRouteDeps } from "./manifests.js";
import { referrerHandlers, type ReferrerRouteDeps } from "./referrers.js";
import { OciRouteTable, type Routed, type RouteTableDeps, type Target } from "./router.js";
import { catalog, tagHandlers, type TagRouteDeps } from "./tags.js";
import { uploadHandlers, type UploadRouteDeps } from "./uploads.js";
import type { RegistryMetrics } from "../metrics.js";

export type OciDeps = RouteTableDeps &
  ManifestRouteDeps &
  BlobRouteDeps &
  UploadRouteDeps &
  TagRouteDeps &
  ReferrerRouteDeps &
  HistoryRouteDeps & { urls: PublicUrls };

export function registerOciRoutes(router: PlainRouter, deps: OciDeps): void {
  const table = new OciRouteTable(deps, {
    base: versionCheck,
    catalog: (request, reply, call) => catalog(deps, request, reply, call),
    repo: {
      manifest: manifestHandlers(deps),
      blob: blobHandlers(deps),
      ...uploadHandlers(deps),
      tags: tagHandlers(deps),
      referrers: referrerHandlers(deps),
      history: historyHandlers(deps),
    },
  });
  router.acceptStreams();
  for (const url of ["/v2/", "/v2/*"]) {
    router.route({
      method: url === "/v2/" ? ["GET"] : ["GET", "PUT", "POST", "PATCH", "DELETE"],
      url,
      access: (request) => table.access(request),
      templateOf: (request) => table.templateOf(request),
      handler: (request, reply, call) => table.dispatch(request, reply, call),
      renderError: async (wire, reply, thrown, request, call) => {
        reply.headers(API_VERSION);
        // A repo or group the caller may not see is answered as one that does not exist: by the
        // name the client used, never the uid the authorizer names.
        const name = table.nameOf(request);
        const hidden = wire.code === Code.NotFound && name !== undefined && !(thrown instanceof OciError);
        const answer = ociAnswerOf(wire, hidden ? nameUnknown(name) : thrown);
        const routed = table.routedOf(request);
        if (routed) countFailure(deps.metrics, request, routed.target, answer);
        // The client gets its OCI error even if its event cannot be recorded.
        if (routed)
          await recordFailure(deps.events, request, call, routed, answer).catch((err: unknown) =>
            request.log.error({ err }, "a failed registry request's event was not recorded"),
          );
        return sendOciError(reply, answer, bearerChallenge(deps.urls, table.challengeScope(request)));
      },
    });
  }
}

/**
 * A manifest or blob pull that failed (unknown, denied, unauthenticated, invalid) is a pull event
 * with its error, as is a failed push (a manifest PUT, an upload's completion, a monolithic
 * upload or a mount): recorded here, after the push's own transaction rolled back. A request
 * refused by the rate limits never got this far (it was not routed): a flood records nothing.
 */
function recordFailure(
  events: RegistryEvents,
  request: FastifyRequest,
  call: CallContext,
  { target, resolved }: Routed,
  answer: OciAnswer,
): Promise<void> {
  if (answer.code === "TOOMANYREQUESTS") return Promise.resolve();
  const pushed = failedPushOf(request, target);
  if (pushed) return events.pushFailed(request, call, target.name!, resolved, pushed, answer);
  if (target.endpoint !== "manifest" && target.endpoint !== "blob") return Promise.resolve();
  const what =
    target.endpoint === "blob"
      ? { type: "blob" as const, digest: target.reference }
      : tagOf(target.reference) === undefined
        ? { type: "manifest" as const, digest: target.reference }
        : { type: "manifest" as const, digest: "", tag: target.reference };
  return events.pullFailed(request, call, target.name!, resolved, what, answer);
}

/**
 * A failed manifest push (PUT) or pull (GET), by the OCI code answered. The 401 that asks a
 * client without credentials to fetch a token (how every docker pull starts) is no failure.
 */
function countFailure(metrics: RegistryMetrics, request: FastifyRequest, target: Target, answer: OciAnswer): void {
  if (target.endpoint !== "manifest") return;
  if (answer.status === 401 && request.headers.authorization === undefined) return;
  if (request.method === "PUT") metrics.pushed(answer.code);
  else if (request.method === "GET") metrics.pulled(answer.code);
}

/** What a request that pushes (rather than starts, feeds or cancels an upload) tried to push. */
function failedPushOf(request: FastifyRequest, target: Target): Transferred | undefined {
  const { endpoint, reference } = target;
  if (endpoint === "manifest" && request.method === "PUT")
    return tagOf(reference) === undefined
      ? { type: "manifest", digest: reference }
      : { type: "manifest", digest: "", tag: reference };
  const query = queryOf(request);
  // A repeated parameter arrives as an array: not a digest this push could have had.
  const named = (digest: unknown) => ({ type: "blob" as const, digest: typeof digest === "string" ? digest : "" });
  if (endpoint === "upload" && request.method === "PUT") return named(query.digest);
  if (endpoint === "uploads" && request.method === "POST") {
    if (query.digest !== undefined) return named(query.digest);
    if (query.mount !== undefined && query.from !== undefined) return named(query.mount);
  }
  return undefined;
}

/** /v2/ (any method, as it always has): whether the client speaks to a registry and is authenticated. */
function versionCheck(request: FastifyRequest, reply: FastifyReply) {
  if (!request.headers.authorization) throw unauthenticated("authentication is required");
  return sendJson(reply, {});
}
