// Independent models of what the List RPCs answer, for the suites that walk their pages.

/**
 * What a walk with `skip` on every page must return, page by page, over the `expected` items in
 * order: each page's items, how many were skipped before it (in all), and whether more follow.
 */
export function skipWalkModel(
  expected: string[],
  pageSize: number,
  skip: number,
): { uids: string[]; skipped: number; more: boolean }[] {
  const pages: { uids: string[]; skipped: number; more: boolean }[] = [];
  let pos = 0;
  let skipped = 0;
  for (;;) {
    const start = Math.min(pos + skip, expected.length);
    skipped += start - pos;
    const rows = expected.slice(start, start + pageSize);
    const more = start + pageSize < expected.length;
    pages.push({ uids: rows, skipped, more });
    pos = start + rows.length;
    if (!more) return pages;
  }
}
