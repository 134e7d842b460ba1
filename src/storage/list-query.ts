// The list engine's SQL: fetches the page a plan (core/list.ts) describes by keyset
// (WHERE (k1, k2) > (...)), so a page costs the same at any depth; counts the matches; and
// applies UIDP filters and the caller's visibility to a resource's query.
import { sql, type Expression, type ExpressionBuilder, type SelectQueryBuilder, type SqlBool } from "kysely";
import type { Visibility } from "../core/access.js";
import type { FetchedPage, OrderKey, PagePlan, SortField } from "../core/list.js";
import type { UIDPFilter } from "../gen/platform/common/v1/uidp.platform_pb.js";
import { ancestorsOf } from "../core/uidp.js";
import type { Freshness } from "../core/service.js";
import { takeFreshness, withFreshnessProbe } from "./table.js";

/** A resource's filtered query: FROM + WHERE, nothing selected yet. */
export type BaseQuery = () => SelectQueryBuilder<any, any, {}>;

function typedValue(field: SortField, value: string) {
  return field.kind === "timestamp" ? sql`${value}::timestamptz` : sql`${value}::text`;
}

/** WHERE clause selecting rows strictly after the cursor in the given order. */
function afterCursor(keys: OrderKey[], after: string[]): Expression<SqlBool> {
  const ref = (k: OrderKey) => sql.ref(k.field.column);
  const sameDirection = keys.every((k) => k.desc === keys[0]!.desc);
  if (sameDirection) {
    // Row comparison: an index range scan on (k1, ..., uid).
    const cols = sql.join(keys.map(ref));
    const vals = sql.join(keys.map((k, i) => typedValue(k.field, after[i]!)));
    return keys[0]!.desc ? sql<SqlBool>`(${cols}) < (${vals})` : sql<SqlBool>`(${cols}) > (${vals})`;
  }
  // Mixed directions: (k1 > v1) or (k1 = v1 and k2 < v2) or ...
  const ors = keys.map((k, i) => {
    const eqs = keys.slice(0, i).map((p, j) => sql`${ref(p)} = ${typedValue(p.field, after[j]!)}`);
    const value = typedValue(k.field, after[i]!);
    const cmp = k.desc ? sql`${ref(k)} < ${value}` : sql`${ref(k)} > ${value}`;
    return sql`(${sql.join([...eqs, cmp], sql` and `)})`;
  });
  return sql<SqlBool>`(${sql.join(ors, sql` or `)})`;
}

/**
 * A query answering a listing's total from a maintained count: one row with a `count` column, or
 * none when there is nothing to count.
 */
export type CountQuery = () => SelectQueryBuilder<any, any, { count: unknown }>;

/**
 * Fetches one page (and one row more) and the total count of `base` (or `counted`, when the
 * count is maintained), as the plan says. The count's statement also reads the call's freshness
 * probe.
 */
export async function fetchPage<Row extends Record<string, unknown>>(
  plan: PagePlan,
  base: BaseQuery,
  freshness?: Freshness,
  counted?: CountQuery,
): Promise<FetchedPage<Row>> {
  const cursor = plan.cursor;
  const filtered = () => (cursor ? base().where(afterCursor(plan.keys, cursor.after)) : base());
  let query = filtered().selectAll();
  for (const k of plan.keys) query = query.orderBy(sql.ref(k.field.column), k.desc ? "desc" : "asc");
  query = query.limit(plan.pageSize + 1).offset(plan.skip);
  const count = (q: SelectQueryBuilder<any, any, {}>) =>
    q.select((eb) => eb.fn.countAll().as("count")).executeTakeFirstOrThrow() as Promise<{ count: unknown }>;

  const total = counted
    ? withFreshnessProbe(counted(), freshness)
        .executeTakeFirst()
        .then((row) => (row ? takeFreshness(row as { count: unknown }, freshness) : { count: 0 }))
    : count(withFreshnessProbe(base(), freshness)).then((row) => takeFreshness(row, freshness));
  const [rows, countRow] = await Promise.all([query.execute() as Promise<Row[]>, total]);
  let skippedNow = plan.skip;
  if (rows.length === 0 && plan.skip > 0) {
    // The skip ran past the end: report how much was actually there to skip.
    skippedNow = Math.min(plan.skip, Number((await count(filtered())).count));
  }
  return { rows, totalCount: BigInt(countRow.count as string | number | bigint), skippedNow };
}

/**
 * `uid` is `root` or lies beneath it. "/" < "0" bytewise, so [root + "/", root + "0") is the
 * subtree. The range [root, root + "0") around both comes first, as plain conditions: PostgreSQL
 * bounds an index scan with those, not with an OR. Without it a keyset page near the end of a
 * subtree read on through every row after the subtree (page 10,000 of 1,000,000 filtered out
 * the 1,252 rows of the next tenant).
 */
function subtree(eb: ExpressionBuilder<any, any>, root: string) {
  return eb.and([
    eb(sql.ref("uid"), ">=", root),
    eb(sql.ref("uid"), "<", `${root}0`),
    eb.or([
      eb(sql.ref("uid"), "=", root),
      eb.and([eb(sql.ref("uid"), ">", `${root}/`), eb(sql.ref("uid"), "<", `${root}0`)]),
    ]),
  ]);
}

/**
 * Keeps only what the caller may see: rows in its visible subtrees, and (with `sharedRoots`) rows
 * that belong to no group, such as built-in roles.
 */
export function restrictToVisible<QB extends SelectQueryBuilder<any, any, any>>(
  qb: QB,
  visibility: Visibility,
  sharedRoots: boolean,
): QB {
  if (visibility === "all") return qb;
  return qb.where((eb) =>
    eb.or([
      ...visibility.map((root) => subtree(eb, root)),
      ...(sharedRoots && visibility.length > 0 ? [eb(sql.ref("parent_uid"), "is", null)] : []),
      // nothing visible: an always-false condition keeps the query valid
      eb.val(false),
    ]),
  ) as QB;
}

/**
 * The uid whose subtree holds every row `applyUidpFilter` lets through, when the filter confines
 * them to one: children_of or descendants_of (a UIDP child's uid extends its parent's).
 */
export function confinedSubtree(filter: UIDPFilter | undefined): string | undefined {
  return filter?.childrenOf || filter?.descendantsOf || undefined;
}

/**
 * Applies a UIDPFilter (validated by core/list.ts's validateUidpFilter) to a query over a table
 * with `uid` and `parent_uid` columns. descendants_of and ancestors_of include the named uid.
 */
export function applyUidpFilter<QB extends SelectQueryBuilder<any, any, any>>(
  qb: QB,
  filter: UIDPFilter | undefined,
): QB {
  if (!filter) return qb;
  let q = qb as SelectQueryBuilder<any, any, any>;
  if (filter.descendantsOf !== "") q = q.where((eb) => subtree(eb, filter.descendantsOf));
  if (filter.childrenOf !== "") q = q.where(sql.ref("parent_uid"), "=", filter.childrenOf);
  if (filter.ancestorsOf !== "")
    q = q.where(sql.ref("uid"), "in", [...ancestorsOf(filter.ancestorsOf), filter.ancestorsOf]);
  if (filter.inRoot) q = q.where(sql.ref("parent_uid"), "is", null);
  if (filter.ids.length > 0) q = q.where(sql.ref("uid"), "in", filter.ids);
  return q as QB;
}
