// Event delivery as Prometheus metrics (in the server's registry, ctx.metrics): attempts by outcome
// and deliveries given up (failed for good), counted as they happen; the backlog (pending
// deliveries, and the age of the oldest) read with one query at scrape time, never per request.
import { Counter, Gauge } from "prom-client";
import { scrapeRead, type MetricsRegistry } from "../platform/telemetry.js";
import type { DeliveryQueue } from "./storage/delivery-queue.js";

/** What the delivery worker reports of its attempts. */
export interface DeliveryMetrics {
  /** one attempt: delivered (a 2xx), or failed (any other answer, none, or the creator's access lost) */
  attempted(delivered: boolean): void;
  /** a delivery failed for good: its retry period is over */
  gaveUp(): void;
}

export function eventsMetrics(registry: MetricsRegistry, queue: DeliveryQueue): DeliveryMetrics {
  const registers = [registry];
  const attempts = new Counter({
    name: "bulwark_events_delivery_attempts_total",
    help: 'Event delivery attempts, by outcome: "delivered" or "failed" (to be retried, or given up)',
    labelNames: ["outcome"],
    registers,
  });
  const failed = new Counter({
    name: "bulwark_events_deliveries_failed_total",
    help: "Event deliveries given up (failed for good) once their retry period was over",
    registers,
  });
  attempts.inc({ outcome: "delivered" }, 0);
  attempts.inc({ outcome: "failed" }, 0);
  const backlog = scrapeRead(registry, "events", () => queue.backlog());
  new Gauge({
    name: "bulwark_events_deliveries_pending",
    help: "Event deliveries waiting to be delivered (the outbox's depth), read at scrape",
    registers,
    async collect() {
      const read = await backlog();
      if (read) this.set(read.pending);
    },
  });
  new Gauge({
    name: "bulwark_events_oldest_pending_delivery_age_seconds",
    help: "How long the oldest pending delivery has waited (0: none pending), read at scrape",
    registers,
    async collect() {
      const read = await backlog();
      if (read) this.set(read.oldestAgeSeconds);
    },
  });
  return {
    attempted: (delivered) => attempts.inc({ outcome: delivered ? "delivered" : "failed" }),
    gaveUp: () => failed.inc(),
  };
}
