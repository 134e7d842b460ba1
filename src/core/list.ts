// The list engine: every List RPC's paging, ordering, skipping and counting, written once.
//
// - page_size: default 50, max 200 (larger is coerced), negative is an error.
// - order_by: "field [asc|desc][, ...]" over the resource's sortable fields (proto, JSON and
//   column-style names); uid is appended as the final tie-breaker (in the direction of the
//   first key) so the order is total.
// - page_token: an encrypted cursor (see page-tokens.ts) holding the last row's sort key.
//   Pages are fetched by keyset (WHERE (k1, k2) > (...)), so a page costs the same at any depth.
//   A token minted for other filters or another order is rejected; an expired one restarts.
// - skip: skips that many results before the page (also from a cursor); `skipped` reports what
//   was skipped and accumulates over the pages of one walk.
// - totalCount: all matches, on every page.
// - uidp filters: descendants_of / children_of / ancestors_of / in_root / ids, on uid/parent_uid.
import { createHash } from "node:crypto";
import { clone, toJsonString, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { sql, type Expression, type ExpressionBuilder, type SelectQueryBuilder, type SqlBool } from "kysely";
import type { Visibility } from "../auth/access.js";
import type { UIDPFilter } from "../gen/platform/common/v1/uidp.platform_pb.js";
import { invalidArgument } from "./errors.js";
import { ancestorsOf, isValidUidp } from "./uidp.js";
import type { PageCursor, PageTokenCodec } from "./page-tokens.js";

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

export interface SortField {
  /** the SQL column */
  column: string;
  kind: "text" | "timestamp";
}

export interface ListableResource {
  /** sortable fields by canonical proto name, e.g. { name: ..., create_time: ... }; uid is implied */
  sortable: Record<string, SortField>;
  /** other accepted spellings, e.g. { created_at: "create_time", createTime: "create_time" } */
  aliases?: Record<string, string>;
  /** default order_by, e.g. "uid" or "create_time desc" */
  defaultOrder: string;
  /**
   * Rows that belong to no group (parent_uid null) are visible to every caller who holds the
   * List capability somewhere: built-in roles.
   */
  sharedRoots?: boolean;
}

/** The sort keys of a named resource with creation and update times (most resources). */
export const NAMED_RESOURCE_LISTING: ListableResource = {
  sortable: {
    name: { column: "name", kind: "text" },
    create_time: { column: "create_time", kind: "timestamp" },
    update_time: { column: "update_time", kind: "timestamp" },
  },
  aliases: { created_at: "create_time", updated_at: "update_time" },
  defaultOrder: "uid",
};

/** The paging fields every List request carries. */
export interface ListRequestFields {
  pageSize: number;
  pageToken: string;
  orderBy: string;
  skip: number;
}

export interface ListPage<Row> {
  rows: Row[];
  nextPageToken: string;
  totalCount: bigint;
  skipped: number;
}

interface OrderKey {
  name: string;
  field: SortField;
  desc: boolean;
}

const UID_FIELD: SortField = { column: "uid", kind: "text" };

function parseOrder(resource: ListableResource, orderBy: string): OrderKey[] {
  const text = orderBy.trim() === "" ? resource.defaultOrder : orderBy;
  const keys: OrderKey[] = [];
  for (const part of text.split(",")) {
    const words = part.trim().split(/\s+/).filter(Boolean);
    const [rawName, direction, ...rest] = words;
    if (!rawName || rest.length > 0 || (direction !== undefined && !/^(asc|desc)$/i.test(direction))) {
      throw invalidArgument({ field: "order_by", description: `cannot parse "${part.trim()}": expected "<field>" or "<field> desc"` });
    }
    const snake = camelToSnake(rawName);
    const name = resource.aliases?.[rawName] ?? resource.aliases?.[snake] ?? snake;
    const field = name === "uid" ? UID_FIELD : resource.sortable[name];
    if (!field) {
      const allowed = ["uid", ...Object.keys(resource.sortable)].join(", ");
      throw invalidArgument({ field: "order_by", description: `cannot order by "${rawName}"; sortable fields: ${allowed}` });
    }
    if (keys.some((k) => k.name === name)) {
      throw invalidArgument({ field: "order_by", description: `"${rawName}" appears more than once` });
    }
    keys.push({ name, field, desc: direction?.toLowerCase() === "desc" });
  }
  // The uid tie-breaker runs in the direction of the first key: equal names under "name desc"
  // come in uid desc order (and a single-direction order keeps the row-comparison keyset path).
  if (!keys.some((k) => k.name === "uid")) keys.push({ name: "uid", field: UID_FIELD, desc: keys[0]!.desc });
  return keys;
}

function camelToSnake(s: string): string {
  return s.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
}

function canonicalOrder(keys: OrderKey[]): string {
  return keys.map((k) => `${k.name} ${k.desc ? "desc" : "asc"}`).join(",");
}

/** A stable fingerprint of the request's filters: the request with its paging fields cleared. */
export function filterFingerprint<D extends DescMessage>(schema: D, request: MessageShape<D>): string {
  const copy = clone(schema, request) as MessageShape<D> & Partial<ListRequestFields>;
  copy.pageSize = 0;
  copy.pageToken = "";
  copy.orderBy = "";
  copy.skip = 0;
  const text = toJsonString(schema, copy);
  return createHash("sha256").update(schema.typeName).update("\0").update(text).digest("base64url").slice(0, 22);
}

function typedValue(field: SortField, value: string) {
  return field.kind === "timestamp" ? sql`${value}::timestamptz` : sql`${value}::text`;
}

function keyValue(field: SortField, row: Record<string, unknown>): string {
  const v = row[field.column];
  if (v instanceof Date) return v.toISOString();
  return String(v);
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
    const cmp = k.desc ? sql`${ref(k)} < ${typedValue(k.field, after[i]!)}` : sql`${ref(k)} > ${typedValue(k.field, after[i]!)}`;
    return sql`(${sql.join([...eqs, cmp], sql` and `)})`;
  });
  return sql<SqlBool>`(${sql.join(ors, sql` or `)})`;
}

export interface ListEngineDeps {
  tokens: PageTokenCodec;
}

/**
 * Runs one page of a List. `base` is the resource's filtered query (FROM + WHERE, nothing
 * selected); the engine adds the cursor, order, offset and limit, and counts the matches.
 */
export async function listPage<Row extends Record<string, unknown>>(
  deps: ListEngineDeps,
  resource: ListableResource,
  request: ListRequestFields,
  fingerprint: string,
  base: () => SelectQueryBuilder<any, any, {}>,
): Promise<ListPage<Row>> {
  if (request.pageSize < 0) throw invalidArgument({ field: "page_size", description: "must not be negative" });
  if (request.skip < 0) throw invalidArgument({ field: "skip", description: "must not be negative" });
  const pageSize = request.pageSize === 0 ? DEFAULT_PAGE_SIZE : Math.min(request.pageSize, MAX_PAGE_SIZE);
  const keys = parseOrder(resource, request.orderBy);
  const order = canonicalOrder(keys);

  let cursor: PageCursor | undefined;
  if (request.pageToken !== "") {
    const decoded = await deps.tokens.decode(request.pageToken);
    if (decoded.kind === "invalid") {
      throw invalidArgument({ field: "page_token", description: "invalid page token" });
    }
    if (decoded.kind === "ok") {
      cursor = decoded.cursor;
      if (cursor.filter !== fingerprint || cursor.order !== order || cursor.after.length !== keys.length) {
        throw invalidArgument({
          field: "page_token",
          description: "page token was issued for a different filter or order_by",
        });
      }
    }
    // expired: restart from the first page, as if no token was given
  }

  const filtered = () => (cursor ? base().where(afterCursor(keys, cursor.after)) : base());
  let query = filtered().selectAll();
  for (const k of keys) query = query.orderBy(sql.ref(k.field.column), k.desc ? "desc" : "asc");
  query = query.limit(pageSize + 1).offset(request.skip);

  const [rows, countRow] = await Promise.all([
    query.execute() as Promise<Row[]>,
    base().select((eb) => eb.fn.countAll().as("count")).executeTakeFirstOrThrow() as Promise<{ count: unknown }>,
  ]);
  const totalCount = BigInt(countRow.count as string | number | bigint);

  let skippedNow = request.skip;
  if (rows.length === 0 && request.skip > 0) {
    // The skip ran past the end: report how much was actually there to skip.
    const remaining = (await filtered()
      .select((eb) => eb.fn.countAll().as("count"))
      .executeTakeFirstOrThrow()) as { count: unknown };
    skippedNow = Math.min(request.skip, Number(remaining.count));
  }
  const skipped = (cursor?.skipped ?? 0) + skippedNow;

  const hasMore = rows.length > pageSize;
  const page = hasMore ? rows.slice(0, pageSize) : rows;
  let nextPageToken = "";
  if (hasMore) {
    const last = page[page.length - 1]!;
    nextPageToken = await deps.tokens.encode({
      order,
      filter: fingerprint,
      after: keys.map((k) => keyValue(k.field, last)),
      skipped,
    });
  }
  return { rows: page, nextPageToken, totalCount, skipped };
}

/** `uid` is `root` or lies beneath it. "/" < "0" bytewise, so [root + "/", root + "0") is the subtree. */
function subtree(eb: ExpressionBuilder<any, any>, root: string) {
  return eb.or([eb(sql.ref("uid"), "=", root), eb.and([eb(sql.ref("uid"), ">", `${root}/`), eb(sql.ref("uid"), "<", `${root}0`)])]);
}

/** Keeps only what the caller may see: rows in its visible subtrees (and shared roots). */
function restrictToVisible<QB extends SelectQueryBuilder<any, any, any>>(qb: QB, visibility: Visibility, resource: ListableResource): QB {
  if (visibility === "all") return qb;
  return qb.where((eb) =>
    eb.or([
      ...visibility.map((root) => subtree(eb, root)),
      ...(resource.sharedRoots && visibility.length > 0 ? [eb(sql.ref("parent_uid"), "is", null)] : []),
      // nothing visible: an always-false condition keeps the query valid
      eb.val(false),
    ]),
  ) as QB;
}

/**
 * Applies a UIDPFilter to a query over a table with `uid` and `parent_uid` columns.
 * descendants_of and ancestors_of include the named uid itself.
 */
export function applyUidpFilter<QB extends SelectQueryBuilder<any, any, any>>(qb: QB, filter: UIDPFilter | undefined): QB {
  if (!filter) return qb;
  const check = (field: string, value: string) => {
    if (!isValidUidp(value)) {
      throw invalidArgument({ field: `uidp.${field}`, description: `"${value}" is not a valid UIDP` });
    }
  };
  let q = qb as SelectQueryBuilder<any, any, any>;
  if (filter.descendantsOf !== "") {
    const d = filter.descendantsOf;
    check("descendants_of", d);
    // "/" < "0" bytewise, so [d + "/", d + "0") is exactly the subtree below d.
    q = q.where((eb) => subtree(eb, d));
  }
  if (filter.childrenOf !== "") {
    check("children_of", filter.childrenOf);
    q = q.where(sql.ref("parent_uid"), "=", filter.childrenOf);
  }
  if (filter.ancestorsOf !== "") {
    check("ancestors_of", filter.ancestorsOf);
    q = q.where(sql.ref("uid"), "in", [...ancestorsOf(filter.ancestorsOf), filter.ancestorsOf]);
  }
  if (filter.inRoot) {
    q = q.where(sql.ref("parent_uid"), "is", null);
  }
  if (filter.ids.length > 0) {
    filter.ids.forEach((id, i) => check(`ids[${i}]`, id));
    q = q.where(sql.ref("uid"), "in", filter.ids);
  }
  return q as QB;
}


export interface ListResponse<Item> {
  items: Item[];
  nextPageToken: string;
  totalCount: bigint;
  skipped: number;
}

/**
 * A List RPC's answer: fingerprints the request's filters, keeps only what the caller may see
 * (so totalCount, cursors and skip count visible rows only), runs one page, and turns the page's
 * rows into items in one call (so hydration costs one query per page, not one per row).
 * Services return `{ <plural>: items, ...paging }`.
 */
export async function listResponse<D extends DescMessage, Row extends Record<string, unknown>, Item>(
  deps: ListEngineDeps,
  resource: ListableResource,
  schema: D,
  request: MessageShape<D> & ListRequestFields,
  base: () => SelectQueryBuilder<any, any, {}>,
  toItems: (rows: Row[]) => Item[] | Promise<Item[]>,
  call: { visibility?: Visibility },
): Promise<ListResponse<Item>> {
  const visibility = call.visibility ?? [];
  const visible = () => restrictToVisible(base(), visibility, resource);
  const page = await listPage<Row>(deps, resource, request, filterFingerprint(schema, request), visible);
  return { items: await toItems(page.rows), nextPageToken: page.nextPageToken, totalCount: page.totalCount, skipped: page.skipped };
}
