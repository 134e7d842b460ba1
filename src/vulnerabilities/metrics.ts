// The in-memory advisory answers as Prometheus gauges (in the server's registry, ctx.metrics):
// how ListAdvisories' answer cache is used and what it holds, and the size of querybatch's
// package index. Read from memory at scrape time.
import { Gauge } from "prom-client";
import type { MetricsRegistry } from "../platform/telemetry.js";
import type { PackageIndex } from "./feeds.js";
import type { ListAdvisoriesCache } from "./list-cache.js";

export function registerVulnerabilityMetrics(
  registry: MetricsRegistry,
  answers: ListAdvisoriesCache,
  packageIndex: PackageIndex,
): void {
  const registers = [registry];
  new Gauge({
    name: "bulwark_advisories_list_cache_requests",
    help:
      'ListAdvisories requests since start by how the answer cache served them: "hit" (kept answer), "miss" ' +
      '(made and kept), "joined" (shared an answer another request was making)',
    labelNames: ["outcome"],
    registers,
    collect() {
      const s = answers.stats;
      this.set({ outcome: "hit" }, s.hits);
      this.set({ outcome: "miss" }, s.misses);
      this.set({ outcome: "joined" }, s.joined);
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
  new Gauge({
    name: "bulwark_advisories_package_index_builds",
    help: "Times querybatch's package index was built since start (once per change of the advisories)",
    registers,
    collect() {
      this.set(packageIndex.stats?.builds ?? 0);
    },
  });
}
