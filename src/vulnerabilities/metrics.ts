// The in-memory advisory answers as Prometheus metrics (in the server's registry, ctx.metrics):
// how ListAdvisories' answer cache is used and what it holds, and the size of querybatch's
// package index. Read from memory at scrape time.
import { Counter, Gauge } from "prom-client";
import type { MetricsRegistry } from "../platform/telemetry.js";
import type { PackageIndex } from "./feeds.js";
import type { ListAdvisoriesCache } from "./list-cache.js";

export function registerVulnerabilityMetrics(
  registry: MetricsRegistry,
  answers: ListAdvisoriesCache,
  packageIndex: PackageIndex,
): void {
  const registers = [registry];
  // Counts kept by the cache itself, copied at scrape time.
  const counted = (counter: Counter<string>, values: Array<[Record<string, string>, number]>) => {
    counter.reset();
    for (const [labels, value] of values) counter.inc(labels, value);
  };
  new Counter({
    name: "bulwark_advisories_list_cache_requests_total",
    help:
      'ListAdvisories requests since start by how the answer cache served them: "hit" (kept answer), "miss" ' +
      '(made and kept), "joined" (shared an answer another request was making)',
    labelNames: ["outcome"],
    registers,
    collect() {
      const s = answers.stats;
      counted(this, [
        [{ outcome: "hit" }, s.hits],
        [{ outcome: "miss" }, s.misses],
        [{ outcome: "joined" }, s.joined],
      ]);
    },
  });
  new Gauge({
    name: "bulwark_advisories_list_cache_entries",
    help: "ListAdvisories answers kept",
    registers,
    collect() {
      this.set(answers.stats.entries);
    },
  });
  new Gauge({
    name: "bulwark_advisories_list_cache_bytes",
    help: "Encoded size of the ListAdvisories answers kept",
    registers,
    collect() {
      this.set(answers.stats.bytes);
    },
  });
  new Gauge({
    name: "bulwark_advisories_package_index_advisories",
    help: "Advisories read into querybatch's package index at its last build (0: not built yet)",
    registers,
    collect() {
      this.set(packageIndex.stats?.advisories ?? 0);
    },
  });
  new Counter({
    name: "bulwark_advisories_package_index_builds_total",
    help: "Times querybatch's package index was built since start (once per change of the advisories)",
    registers,
    collect() {
      counted(this, [[{}, packageIndex.stats?.builds ?? 0]]);
    },
  });
}
