// What every module reports about itself to the operator: metrics, in one Prometheus registry per
// server (a module registers its own counters, gauges and histograms in `ctx.metrics`; the server
// exposes them on /metrics when asked to). Names start with `bulwark_`; labels take bounded values
// only (route templates, codes, module names), never uids, raw paths or user input.
import { Registry } from "prom-client";

export type MetricsRegistry = Registry;

/** A registry of this server's metrics (tests run several servers in one process: one each). */
export function newMetricsRegistry(): MetricsRegistry {
  return new Registry();
}
