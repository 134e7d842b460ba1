// Loading data for a view: one hook, so every page shows the same three states (loading, the
// server's error in its words, the data) and reloads the same way after a change.
import { useCallback, useEffect, useRef, useState } from "react";

export interface Loaded<T> {
  data?: T;
  error?: unknown;
  loading: boolean;
  /** loads again (after a create, a delete, ...) */
  reload(): void;
}

/** Runs `load` now and whenever `deps` change; a stale answer never replaces a newer one. */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [round, setRound] = useState(0);
  const latest = useRef(0);
  useEffect(() => {
    const ticket = ++latest.current;
    // The old data stays until the new arrives (no flicker); an old error does not.
    setState((s) => ({ data: s.data, loading: true }));
    load().then(
      (data) => ticket === latest.current && setState({ data, loading: false }),
      (error: unknown) => ticket === latest.current && setState({ error, loading: false }),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...state, reload };
}

/**
 * An action a button starts (create, delete, ...): `run` calls it, `busy` is true meanwhile and
 * `error` holds the server's refusal until the next run.
 */
export function useAction<A extends unknown[], R>(action: (...args: A) => Promise<R>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const run = async (...args: A): Promise<R | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await action(...args);
    } catch (err) {
      setError(err);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, clearError: () => setError(undefined) };
}
