// What every module reports about itself to the operator: metrics, in one Prometheus registry per
// server (a module registers its own counters, gauges and histograms in `ctx.metrics`; the server
// exposes them on /metrics when asked to). Names start with `bulwark_`; labels take bounded values
// only (route templates, codes, module names), never uids, raw paths or user input.
import { Counter, Registry } from "prom-client";

export type MetricsRegistry = Registry;

/** A registry of this server's metrics (tests run several servers in one process: one each). */
export function newMetricsRegistry(): MetricsRegistry {
  return new Registry();
}

/** The one metric of this name in `registry`, made by `make` the first time it is asked for. */
export function metricOf<M>(registry: MetricsRegistry, name: string, make: () => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? make();
}

/** How long a scrape-time read may take before the scrape goes on without it. */
export const SCRAPE_READ_TIMEOUT_MS = 2_000;

const COLLECT_FAILURES = "bulwark_metrics_collect_failures_total";

/**
 * A read made at scrape time for gauges that need the database (queue depths, ages): one cheap
 * query serves every gauge of the scrape (gauges collect concurrently; they share the read in
 * flight), never a query per request. A read that fails or outlasts `timeoutMs` leaves the gauges
 * at their last values and counts `bulwark_metrics_collect_failures_total{collector}`: a slow
 * database never holds the scrape.
 */
export function scrapeRead<T>(
  registry: MetricsRegistry,
  collector: string,
  read: () => Promise<T>,
  timeoutMs = SCRAPE_READ_TIMEOUT_MS,
): () => Promise<T | undefined> {
  const failures = metricOf(
    registry,
    COLLECT_FAILURES,
    () =>
      new Counter({
        name: COLLECT_FAILURES,
        help: "Scrape-time reads (database gauges) that failed or timed out, by collector",
        labelNames: ["collector"],
        registers: [registry],
      }),
  );
  failures.inc({ collector }, 0);
  let inFlight: Promise<T | undefined> | undefined;
  return () =>
    (inFlight ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      try {
        const timeout = new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), timeoutMs);
          timer.unref();
        });
        const value = await Promise.race([read(), timeout]);
        if (value === undefined) failures.inc({ collector });
        return value;
      } catch {
        failures.inc({ collector });
        return undefined;
      } finally {
        clearTimeout(timer);
        inFlight = undefined;
      }
    })());
}
