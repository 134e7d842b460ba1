// Lists of messages handed unchanged to many callers (answers kept in memory). Marking one lets
// the REST layer keep the list's JSON text with it rather than write the same text for every
// caller: a marked list, and every message in it, must never change again.
const shared = new WeakSet<readonly unknown[]>();

/** Marks `list` as never changing again (see above) and returns it. */
export function markShared<T>(list: T[]): T[] {
  shared.add(list);
  return list;
}

export function isShared(list: readonly unknown[]): boolean {
  return shared.has(list);
}
