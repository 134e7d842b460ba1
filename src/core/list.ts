// The list engine's rules: every List RPC's paging, ordering, skipping and counting, written
// once. This part decides without SQL (storage/list-query.ts fetches, platform/list.ts composes).
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
// - uidp filters: descendants_of / children_of / ancestors_of / in_root / ids, on uid/parent_uid
//   (validated here, applied by storage/list-query.ts).
import { createHash } from "node:crypto";
import { clone, toJsonString, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { UIDPFilter } from "../gen/platform/common/v1/uidp.platform_pb.js";
import { invalidArgument } from "./errors.js";
import { isValidUidp } from "./uidp.js";
import type { PageCursor, PageTokenCodec } from "./page-tokens.js";
import { quote } from "./strings.js";

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

export interface OrderKey {
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
      throw invalidArgument({
        field: "order_by",
        description: `cannot parse ${quote(part.trim())}: expected "<field>" or "<field> desc"`,
      });
    }
    const snake = camelToSnake(rawName);
    const name = resource.aliases?.[rawName] ?? resource.aliases?.[snake] ?? snake;
    const field = name === "uid" ? UID_FIELD : resource.sortable[name];
    if (!field) {
      const allowed = ["uid", ...Object.keys(resource.sortable)].join(", ");
      throw invalidArgument({
        field: "order_by",
        description: `cannot order by ${quote(rawName)}; sortable fields: ${allowed}`,
      });
    }
    if (keys.some((k) => k.name === name)) {
      throw invalidArgument({ field: "order_by", description: `${quote(rawName)} appears more than once` });
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

function keyValue(field: SortField, row: Record<string, unknown>): string {
  const v = row[field.column];
  if (v instanceof Date) return v.toISOString();
  return String(v);
}

export interface ListEngineDeps {
  tokens: PageTokenCodec;
}

/** One page's plan: everything the storage layer needs to fetch it, decided without SQL. */
export interface PagePlan {
  pageSize: number;
  /** the order's keys, uid last */
  keys: OrderKey[];
  /** the canonical order_by the walk uses */
  order: string;
  fingerprint: string;
  /** where the previous page ended, when continuing a walk */
  cursor?: PageCursor;
  skip: number;
}

/**
 * Validates the paging fields and decodes the page token. A token minted for other filters or
 * another order is rejected; an expired one restarts the walk from the first page.
 */
export async function planPage(
  deps: ListEngineDeps,
  resource: ListableResource,
  request: ListRequestFields,
  fingerprint: string,
): Promise<PagePlan> {
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
  return { pageSize, keys, order, fingerprint, cursor, skip: request.skip };
}

/** What the storage layer found for a plan. */
export interface FetchedPage<Row> {
  /** up to pageSize + 1 rows: one more than the page tells whether another page follows */
  rows: Row[];
  totalCount: bigint;
  /** how many rows the skip actually passed over (less than asked when it ran past the end) */
  skippedNow: number;
}

/** Cuts the page and mints the next page token from its last row. */
export async function finishPage<Row extends Record<string, unknown>>(
  deps: ListEngineDeps,
  plan: PagePlan,
  fetched: FetchedPage<Row>,
): Promise<ListPage<Row>> {
  const skipped = (plan.cursor?.skipped ?? 0) + fetched.skippedNow;
  const hasMore = fetched.rows.length > plan.pageSize;
  const rows = hasMore ? fetched.rows.slice(0, plan.pageSize) : fetched.rows;
  let nextPageToken = "";
  if (hasMore) {
    const last = rows[rows.length - 1]!;
    nextPageToken = await deps.tokens.encode({
      order: plan.order,
      filter: plan.fingerprint,
      after: plan.keys.map((k) => keyValue(k.field, last)),
      skipped,
    });
  }
  return { rows, nextPageToken, totalCount: fetched.totalCount, skipped };
}

/** Rejects malformed UIDPs in a filter before any query is built from it. */
export function validateUidpFilter(filter: UIDPFilter | undefined): void {
  if (!filter) return;
  const check = (field: string, value: string) => {
    if (!isValidUidp(value)) {
      throw invalidArgument({ field: `uidp.${field}`, description: `${quote(value)} is not a valid UIDP` });
    }
  };
  if (filter.descendantsOf !== "") check("descendants_of", filter.descendantsOf);
  if (filter.childrenOf !== "") check("children_of", filter.childrenOf);
  if (filter.ancestorsOf !== "") check("ancestors_of", filter.ancestorsOf);
  filter.ids.forEach((id, i) => check(`ids[${i}]`, id));
}

export interface ListResponse<Item> {
  items: Item[];
  nextPageToken: string;
  totalCount: bigint;
  skipped: number;
}
