// The registry's traffic and upkeep as Prometheus metrics (in the server's registry, ctx.metrics):
// blob bytes received and blob and manifest bytes served, pushes (manifest PUTs) and pulls
// (manifest GETs) by outcome, and garbage collections with what they freed. Outcomes are "ok" or
// the OCI error code the client was answered with (a bounded set); nothing names a repo or digest.
import { Counter } from "prom-client";
import type { MetricsRegistry } from "../platform/telemetry.js";
import type { GcReport } from "./gc.js";

/** What a transfer moved: the bytes of a blob or of a manifest. */
export type TransferKind = "blob" | "manifest";

export class RegistryMetrics {
  readonly #received: Counter;
  readonly #sent: Counter<"kind">;
  readonly #pushes: Counter<"outcome">;
  readonly #pulls: Counter<"outcome">;
  readonly #gcRuns: Counter<"outcome">;
  readonly #gcFreedBytes: Counter;
  readonly #gcFreedBlobs: Counter;
  readonly #gcFreedManifests: Counter;

  constructor(registry: MetricsRegistry) {
    const registers = [registry];
    this.#received = new Counter({
      name: "bulwark_registry_received_bytes_total",
      help: "Blob upload body bytes received (monolithic pushes and chunks)",
      registers,
    });
    this.#sent = new Counter({
      name: "bulwark_registry_sent_bytes_total",
      help: "Blob and manifest body bytes served to pulls (GET; a range counts its length)",
      labelNames: ["kind"],
      registers,
    });
    this.#pushes = new Counter({
      name: "bulwark_registry_pushes_total",
      help: 'Manifest pushes (PUT), by outcome: "ok" or the OCI error code answered',
      labelNames: ["outcome"],
      registers,
    });
    this.#pulls = new Counter({
      name: "bulwark_registry_pulls_total",
      help: 'Manifest pulls (GET), by outcome: "ok" or the OCI error code answered (the anonymous challenge round trip is not counted)',
      labelNames: ["outcome"],
      registers,
    });
    this.#gcRuns = new Counter({
      name: "bulwark_registry_gc_runs_total",
      help: 'Garbage collections run (scheduled or asked for; dry runs not counted), by outcome: "ok" or "error"',
      labelNames: ["outcome"],
      registers,
    });
    this.#gcFreedBytes = new Counter({
      name: "bulwark_registry_gc_freed_bytes_total",
      help: "Blob bytes garbage collection removed",
      registers,
    });
    this.#gcFreedBlobs = new Counter({
      name: "bulwark_registry_gc_freed_blobs_total",
      help: "Blobs garbage collection removed",
      registers,
    });
    this.#gcFreedManifests = new Counter({
      name: "bulwark_registry_gc_freed_manifests_total",
      help: "Manifests garbage collection removed",
      registers,
    });
    // Present from the start (at 0), so rates and alerts see a series before the first event.
    this.#pushes.inc({ outcome: "ok" }, 0);
    this.#pulls.inc({ outcome: "ok" }, 0);
    this.#gcRuns.inc({ outcome: "ok" }, 0);
    this.#gcRuns.inc({ outcome: "error" }, 0);
    for (const kind of ["blob", "manifest"]) this.#sent.inc({ kind }, 0);
  }

  received(bytes: number): void {
    if (bytes > 0) this.#received.inc(bytes);
  }

  sent(kind: TransferKind, bytes: number): void {
    if (bytes > 0) this.#sent.inc({ kind }, bytes);
  }

  pushed(outcome: string): void {
    this.#pushes.inc({ outcome });
  }

  pulled(outcome: string): void {
    this.#pulls.inc({ outcome });
  }

  /** A garbage collection that counts each run it makes and what it freed (a dry run is no run). */
  counted<O extends { dryRun?: boolean }>(
    collect: (options?: O) => Promise<GcReport>,
  ): (options?: O) => Promise<GcReport> {
    return async (options) => {
      let report: GcReport;
      try {
        report = await collect(options);
      } catch (err) {
        if (!options?.dryRun) this.#gcRuns.inc({ outcome: "error" });
        throw err;
      }
      if (!options?.dryRun) {
        this.#gcRuns.inc({ outcome: "ok" });
        this.#gcFreedBytes.inc(report.bytes);
        this.#gcFreedBlobs.inc(report.blobs);
        this.#gcFreedManifests.inc(report.manifests);
      }
      return report;
    };
  }
}
