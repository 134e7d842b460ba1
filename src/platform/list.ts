// A List RPC's answer, composed from the list engine's rules (core/list.ts) and its SQL
// (storage/list-query.ts): one call per List handler.
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { Visibility } from "../core/access.js";
import type { Freshness } from "../core/service.js";
import {
  filterFingerprint,
  finishPage,
  planPage,
  validateUidpFilter,
  type ListableResource,
  type ListEngineDeps,
  type ListRequestFields,
  type ListResponse,
} from "../core/list.js";
import type { UIDPFilter } from "../gen/platform/common/v1/uidp.platform_pb.js";
import {
  confinedSubtree,
  fetchPage,
  restrictToVisible,
  type BaseQuery,
  type CountQuery,
} from "../storage/list-query.js";
import { isAncestorOrSelf } from "../core/uidp.js";

export interface ListOptions<D extends DescMessage, Row extends Record<string, unknown>, Item> {
  lists: ListEngineDeps;
  resource: ListableResource;
  /** the request's schema: its filters (all but the paging fields) fingerprint the walk */
  schema: D;
  request: MessageShape<D> & ListRequestFields & { uidp?: UIDPFilter };
  /** the resource's filtered query (from its repository's listQuery) */
  query: BaseQuery;
  /**
   * The total from a maintained count, when the repository keeps one for these filters: used
   * when the caller sees all of `subtree` (otherwise only visible rows are counted, by query).
   */
  maintainedCount?: { subtree: string; query: CountQuery };
  /**
   * A maintained count that keeps itself to what the caller sees, through `restrict` (the same
   * restriction the rows get), for any caller; undefined when these filters have none.
   */
  visibleCount?: (restrict: <QB>(qb: QB) => QB) => CountQuery | undefined;
  /** turns a page of rows into items in one call, so hydration costs one query per page */
  toItems: (rows: Row[]) => Item[] | Promise<Item[]>;
  /** the call: its visibility (set by the authorizer for unscoped methods) and freshness probe */
  call: { visibility?: Visibility; freshness?: Freshness };
}

/**
 * Validates the filters, keeps only what the caller may see (so totalCount, cursors and skip
 * count visible rows only), runs one page and maps it. Services return
 * `{ <plural>: items, ...paging }`.
 */
export async function listResponse<D extends DescMessage, Row extends Record<string, unknown>, Item>(
  options: ListOptions<D, Row, Item>,
): Promise<ListResponse<Item>> {
  const { lists, resource, schema, request, call } = options;
  validateUidpFilter(request.uidp);
  const plan = await planPage(lists, resource, request, filterFingerprint(schema, request));
  const visibility = call.visibility ?? [];
  const seesAllOf = (subtree: string) =>
    visibility === "all" || visibility.some((root) => isAncestorOrSelf(root, subtree));
  // When the caller sees all of the subtree the filter confines the rows to, restricting them to
  // its visibility again changes nothing, and would keep PostgreSQL from reading the filter's
  // index in order: a workload's page of 50 children then cost a sort of all 1,250.
  const confinedTo = confinedSubtree(request.uidp);
  const restrict = <QB>(qb: QB): QB => restrictToVisible(qb as never, visibility, resource.sharedRoots ?? false) as QB;
  const visible = confinedTo && seesAllOf(confinedTo) ? options.query : () => restrict(options.query());
  const maintained = options.maintainedCount;
  const count = maintained && seesAllOf(maintained.subtree) ? maintained.query : options.visibleCount?.(restrict);
  const page = await finishPage(lists, plan, await fetchPage<Row>(plan, visible, call.freshness, count));
  return {
    items: await options.toItems(page.rows),
    nextPageToken: page.nextPageToken,
    totalCount: page.totalCount,
    skipped: page.skipped,
  };
}
