// Listings: a repo's tags (/v2/<name>/tags/list) and the catalog of repos the caller may see
// (/v2/_catalog), in byte order, paged by `n` and `last` with a Link to the next page.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { CallContext } from "../../core/service.js";
import type { RepositoryNames } from "../names.js";
import type { TagsRepository } from "../storage/tags.js";
import { OciError } from "./errors.js";
import { API_VERSION, queryOf, sendJson, type RepoRequest } from "./http.js";
import type { MethodHandlers } from "./router.js";

/** The most tags or catalog entries one answer carries (clients follow Link for the rest). */
export const MAX_PAGE = 10_000;

export interface TagRouteDeps {
  tags: TagsRepository;
  names: RepositoryNames;
}

/** Any method lists (as it always has). */
export function tagHandlers(deps: TagRouteDeps): MethodHandlers {
  return { "*": (r) => listTags(deps, r) };
}

async function listTags(deps: TagRouteDeps, { request, reply, name, repo }: RepoRequest) {
  const n = pageSize(request);
  const last = queryOf(request).last;
  const names = n === 0 ? [] : await deps.tags.names(repo.uid, last, n + 1);
  const page = names.slice(0, n);
  if (names.length > n)
    reply.header("link", `</v2/${name}/tags/list?n=${n}&last=${encodeURIComponent(page.at(-1)!)}>; rel="next"`);
  return sendJson(reply, { name, tags: page });
}

export async function catalog(deps: TagRouteDeps, request: FastifyRequest, reply: FastifyReply, call: CallContext) {
  reply.headers(API_VERSION);
  const n = pageSize(request);
  const last = queryOf(request).last;
  const names = (await deps.names.catalog(call.visibility ?? [])).filter((name) => last === undefined || name > last);
  const page = names.slice(0, n);
  if (names.length > n)
    reply.header("link", `</v2/_catalog?n=${n}&last=${encodeURIComponent(page.at(-1)!)}>; rel="next"`);
  return sendJson(reply, { repositories: page });
}

function pageSize(request: FastifyRequest): number {
  const n = queryOf(request).n;
  if (n === undefined) return MAX_PAGE;
  if (!/^\d{1,9}$/.test(n)) throw new OciError(400, "UNSUPPORTED", "n must be a non-negative integer");
  return Math.min(Number(n), MAX_PAGE);
}
