// Every list page pages through the API's list engine the same way, with its state in the URL:
// `order_by` (a field, " desc" for descending), `page_size`, and the position — the cursor of the
// next page (`page_token`, from the previous answer's next_page_token) or an offset (`skip`, to
// jump to a page or go back). The engine's total_count says how many there are in all.
import type { ReactNode } from "react";
import { useQueryState } from "../router";
import { useLoad, type Loaded } from "./load";
import { Button } from "./forms";
import { Empty, ErrorNote, Loading } from "./feedback";

export interface PageRequest {
  pageSize: number;
  pageToken: string;
  skip: number;
  orderBy: string;
}

export interface PageResult<T> {
  items: T[];
  nextPageToken: string;
  totalCount?: bigint | number;
}

export interface PagedList<T> {
  loaded: Loaded<PageResult<T>>;
  items: T[];
  /** 1-based */
  page: number;
  pageSize: number;
  orderBy: string;
  total?: number;
  /** at the list's start (no cursor, no offset) */
  atStart: boolean;
  sortBy(field: string): void;
  next(): void;
  goTo(page: number): void;
  setPageSize(size: number): void;
}

const PAGE_SIZES = [10, 25, 50, 100];

/**
 * A list whose position and order live in the URL's query. `deps` are the filters: a change of
 * filter starts again at page 1 (the caller clears the position when it sets a filter: `resetPosition`).
 */
export function usePagedList<T>(
  fetch: (request: PageRequest) => Promise<PageResult<T>>,
  deps: readonly unknown[],
  options: { defaultOrder?: string; defaultPageSize?: number } = {},
): PagedList<T> {
  const [query, setQuery] = useQueryState();
  const pageSize = Number(query.get("page_size")) || options.defaultPageSize || 25;
  const orderBy = query.get("order_by") ?? options.defaultOrder ?? "";
  const pageToken = query.get("page_token") ?? "";
  const skip = Math.max(0, Number(query.get("skip")) || 0);
  const page = Math.max(1, Number(query.get("page")) || 1);
  const loaded = useLoad(
    () => fetch({ pageSize, pageToken, skip, orderBy }),
    [pageSize, orderBy, pageToken, skip, ...deps],
  );
  const total = loaded.data?.totalCount === undefined ? undefined : Number(loaded.data.totalCount);
  return {
    loaded,
    items: loaded.data?.items ?? [],
    page,
    pageSize,
    orderBy,
    total,
    atStart: !pageToken && skip === 0,
    sortBy(field) {
      const next = orderBy === field ? `${field} desc` : field;
      setQuery({ order_by: next, page_token: undefined, skip: undefined, page: undefined });
    },
    next() {
      const token = loaded.data?.nextPageToken;
      if (token) setQuery({ page_token: token, skip: undefined, page: page + 1 }, { push: true });
    },
    goTo(target) {
      const n = Math.max(1, Math.floor(target));
      setQuery(
        { page_token: undefined, skip: n > 1 ? (n - 1) * pageSize : undefined, page: n > 1 ? n : undefined },
        { push: true },
      );
    },
    setPageSize(size) {
      setQuery({ page_size: size, page_token: undefined, skip: undefined, page: undefined });
    },
  };
}

/** Query keys of the list position: a page clears them when a filter changes. */
export const resetPosition = { page_token: undefined, skip: undefined, page: undefined } as const;

export function Pager<T>({ list, noun }: { list: PagedList<T>; noun: string }) {
  const { page, pageSize, total, items, loaded } = list;
  const first = (page - 1) * pageSize + 1;
  const last = first + items.length - 1;
  const pages = total === undefined ? undefined : Math.max(1, Math.ceil(total / pageSize));
  return (
    <nav className="pager" aria-label={`Pages of ${noun}`}>
      <span role="status">
        {items.length === 0 ? `No ${noun}` : `${first}–${last}${total === undefined ? "" : ` of ${total}`} ${noun}`}
      </span>
      <Button onClick={() => list.goTo(page - 1)} disabled={page <= 1 || loaded.loading}>
        Previous
      </Button>
      <span>
        Page {page}
        {pages === undefined ? "" : ` of ${pages}`}
      </span>
      <Button onClick={list.next} disabled={!loaded.data?.nextPageToken || loaded.loading}>
        Next
      </Button>
      <label>
        Per page{" "}
        <select value={pageSize} onChange={(e) => list.setPageSize(Number(e.target.value))}>
          {PAGE_SIZES.map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
      </label>
    </nav>
  );
}

export interface Column<T> {
  header: string;
  /** the list engine's order_by field, when the column sorts */
  sort?: string;
  cell(row: T): ReactNode;
  /** a class for the cell (e.g. "num") */
  className?: string;
}

/** A table of one page of a list, with sortable headers (aria-sort) and the pager below it. */
export function ListTable<T>({
  list,
  columns,
  rowKey,
  caption,
  noun,
  empty,
}: {
  list: PagedList<T>;
  columns: Column<T>[];
  rowKey: (row: T) => string;
  caption: string;
  noun: string;
  empty?: ReactNode;
}) {
  const { loaded } = list;
  if (loaded.error)
    return (
      <>
        <ErrorNote error={loaded.error} />
        {!list.atStart && <Button onClick={() => list.goTo(1)}>Back to the first page</Button>}
      </>
    );
  if (loaded.loading && !loaded.data) return <Loading what={noun} />;
  return (
    <div className="list">
      {list.items.length === 0 ? (
        <Empty>{empty ?? `No ${noun}.`}</Empty>
      ) : (
        <div className="table-scroll">
          <DataTable list={list} columns={columns} rowKey={rowKey} caption={caption} rows={list.items} />
        </div>
      )}
      <Pager list={list} noun={noun} />
    </div>
  );
}

/** A plain table (any rows); sortable headers when a paged list is given. */
export function DataTable<T>({
  rows,
  columns,
  rowKey,
  caption,
  list,
}: {
  rows: T[];
  columns: Column<T>[];
  rowKey: (row: T) => string;
  caption: string;
  list?: PagedList<T>;
}) {
  const sortState = (field: string): "ascending" | "descending" | undefined => {
    if (!list) return undefined;
    if (list.orderBy === field) return "ascending";
    if (list.orderBy === `${field} desc`) return "descending";
    return undefined;
  };
  return (
    <table>
      <caption className="visually-hidden">{caption}</caption>
      <thead>
        <tr>
          {columns.map((c) => (
            <th key={c.header} scope="col" aria-sort={c.sort ? (sortState(c.sort) ?? "none") : undefined}>
              {c.sort && list ? (
                <button type="button" className="sort" onClick={() => list.sortBy(c.sort!)}>
                  {c.header}
                  <span aria-hidden="true">
                    {sortState(c.sort) === "ascending" ? " ▲" : sortState(c.sort) === "descending" ? " ▼" : ""}
                  </span>
                </button>
              ) : (
                c.header
              )}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={rowKey(row)}>
            {columns.map((c) => (
              <td key={c.header} className={c.className} data-label={c.header}>
                {c.cell(row)}
              </td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}
