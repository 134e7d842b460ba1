// Navigation: the console's state lives in the URL (path + query), so every view can be shared or
// bookmarked and Back works. The History API, without a router library: the console has a flat
// table of pages (routes.tsx) whose state is all in query parameters.
import { useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from "react";

const NAVIGATED = "bulwark:navigated";

function subscribe(listener: () => void): () => void {
  window.addEventListener("popstate", listener);
  window.addEventListener(NAVIGATED, listener);
  return () => {
    window.removeEventListener("popstate", listener);
    window.removeEventListener(NAVIGATED, listener);
  };
}

const snapshot = () => location.pathname + location.search;

/** The current path and query (re-renders on navigation). */
export function useLocation(): { path: string; query: URLSearchParams } {
  const href = useSyncExternalStore(subscribe, snapshot);
  const url = new URL(href, location.origin);
  return { path: url.pathname, query: url.searchParams };
}

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (to === snapshot()) return;
  if (options.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  window.dispatchEvent(new Event(NAVIGATED));
  if (!options.replace) window.scrollTo(0, 0);
}

/** A console URL: a path and query parameters (empty and undefined values are left out). */
export function href(path: string, params: Record<string, string | number | boolean | undefined> = {}): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "" && v !== false) query.set(k, String(v));
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/**
 * Query parameters as state: `[params, update]`. `update` merges (undefined or "" removes a key);
 * by default it replaces the history entry (typing in a filter), `push` adds one (opening a page).
 */
export function useQueryState(): [
  URLSearchParams,
  (changes: Record<string, string | number | undefined>, options?: { push?: boolean }) => void,
] {
  const { query } = useLocation();
  // Read at the time of the update (it may come after an await): never back to a page left since.
  const update = (changes: Record<string, string | number | undefined>, options: { push?: boolean } = {}) => {
    const path = location.pathname;
    const next = new URLSearchParams(location.search);
    for (const [k, v] of Object.entries(changes)) {
      if (v === undefined || v === "") next.delete(k);
      else next.set(k, String(v));
    }
    const text = next.toString();
    navigate(text ? `${path}?${text}` : path, { replace: !options.push });
  };
  return [query, update];
}

/** An in-console link: a real anchor (open in a new tab works), navigated without a reload. */
export function Link({ to, onClick, ...rest }: AnchorHTMLAttributes<HTMLAnchorElement> & { to: string }) {
  const follow = (event: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(event);
    if (
      event.defaultPrevented ||
      event.button !== 0 ||
      event.metaKey ||
      event.ctrlKey ||
      event.shiftKey ||
      event.altKey
    )
      return;
    event.preventDefault();
    navigate(to);
  };
  return <a href={to} onClick={follow} {...rest} />;
}
