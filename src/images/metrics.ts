// The images module's queues as Prometheus gauges (in the server's registry, ctx.metrics): the
// vulnerability-report queue, the inventory queue (pending and failed reads) and the advisory
// changes not yet queued, read with one query at scrape time, never per request.
import { Gauge } from "prom-client";
import { scrapeRead, type MetricsRegistry } from "../platform/telemetry.js";
import { queueDepths } from "./storage/queues.js";
import type { ImagesDb } from "./storage/schema.js";

export function registerImagesMetrics(registry: MetricsRegistry, db: ImagesDb): void {
  const registers = [registry];
  const depths = scrapeRead(registry, "images", () => queueDepths(db));
  new Gauge({
    name: "bulwark_images_report_queue_depth",
    help: "Images whose vulnerability report waits to be recomputed, read at scrape",
    registers,
    async collect() {
      const read = await depths();
      if (read) this.set(read.reports);
    },
  });
  new Gauge({
    name: "bulwark_images_inventory_queue_depth",
    help: 'Image inventories by state: "pending" (waiting to be read) or "failed" (the read failed), read at scrape',
    labelNames: ["state"],
    registers,
    async collect() {
      const read = await depths();
      if (!read) return;
      this.set({ state: "pending" }, read.inventoriesPending);
      this.set({ state: "failed" }, read.inventoriesFailed);
    },
  });
  new Gauge({
    name: "bulwark_images_advisory_changes_pending",
    help: "Advisory changes not yet turned into queued reports, read at scrape",
    registers,
    async collect() {
      const read = await depths();
      if (read) this.set(read.advisoryChanges);
    },
  });
}
