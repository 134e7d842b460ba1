// The hosted registry's tag history (/v2/<name>/_chainguard/history/<tag>): every digest the tag
// pointed at, oldest first, optionally between `start` and `end` (RFC 3339).
import type { TagsRepository } from "../storage/tags.js";
import { TAG_PATTERN as TAG } from "../names.js";
import { OciError, manifestUnknown } from "./errors.js";
import { queryOf, sendJson, type Query, type RepoRequest } from "./http.js";
import type { MethodHandlers } from "./router.js";

/** At most this many records per tag-history answer (here and in the v1 ListTagHistory). */
export const MAX_HISTORY = 1_000;

export interface HistoryRouteDeps {
  tags: TagsRepository;
}

/** Any method lists (as it always has). */
export function historyHandlers(deps: HistoryRouteDeps): MethodHandlers {
  return { "*": (r) => history(deps, r) };
}

async function history(deps: HistoryRouteDeps, { request, reply, repo, reference: tag }: RepoRequest) {
  if (!TAG.test(tag)) throw manifestUnknown(tag.slice(0, 200));
  const query = queryOf(request);
  const rows = await deps.tags.history(repo.uid, tag, time(query, "start"), time(query, "end"), MAX_HISTORY);
  const body = { history: rows.map((r) => ({ updateTimestamp: r.update_time.toISOString(), digest: r.digest })) };
  return sendJson(reply, body);
}

/** The time a query parameter names, if any. */
function time(query: Query, name: string): Date | undefined {
  const value = query[name];
  if (value === undefined || value === "") return undefined;
  const date = new Date(value);
  if (Number.isNaN(date.getTime()))
    throw new OciError(400, "UNSUPPORTED", `${name} must be an RFC 3339 time`, { [name]: value.slice(0, 100) });
  return date;
}
