// What readiness checks share: a probe that costs a request to another service (an S3 bucket) is
// asked by every /readyz of every load balancer; one run answers all the concurrent askers, and a
// success is kept for a while. A failure is never kept: the next probe tries again at once.

/**
 * `probe`, shared: callers while a run is in progress get that run's outcome; a success is
 * answered without running again for `successForMs` (0: every call after a run runs anew).
 */
export function sharedProbe(
  probe: () => Promise<void>,
  { successForMs, now = Date.now }: { successForMs: number; now?: () => number },
): () => Promise<void> {
  let running: Promise<void> | undefined;
  let succeededAt: number | undefined;
  return () => {
    if (succeededAt !== undefined && now() - succeededAt < successForMs) return Promise.resolve();
    running ??= probe()
      .then(() => void (succeededAt = now()))
      .catch((err: unknown) => {
        succeededAt = undefined;
        throw err;
      })
      .finally(() => (running = undefined));
    return running;
  };
}

/**
 * A readiness failure whose reason may be shown to probes ("unreachable", "not migrated"): words
 * that name the condition, never an internal message. `cause` goes to the server's log only.
 */
export class NotReady extends Error {
  constructor(
    readonly reason: string,
    cause?: unknown,
  ) {
    super(reason, { cause });
  }
}
