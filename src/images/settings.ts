// The images module's settings (its `moduleSettings`: `bulwark serve --attach-sboms`,
// --inventory-concurrency, ...). Absent: the defaults below.
import type { InventoryLimits } from "./inventory/reader.js";

export interface ImagesSettings {
  /** also push each generated SBOM to the image's repo as an OCI referrer (`--attach-sboms`) */
  attachSboms?: boolean;
  /** images read at once by this replica (0: this replica reads none; default 1) */
  inventoryConcurrency?: number;
  /** how often a replica looks for work other replicas queued (default 1 s) */
  pollIntervalMs?: number;
  /**
   * bounds on reading one image (inventory/reader.ts InventoryLimits: decompressed bytes,
   * entries, package database sizes, ...); absent: the reader's defaults
   */
  inventoryLimits?: Partial<InventoryLimits>;
  /** how long reading one image may take before it is stopped and recorded as failed (default 10 min) */
  inventoryReadDeadlineMs?: number;
  /** the heap of the thread reading one image, MiB (default 256) */
  inventoryReadHeapMiB?: number;
  /**
   * how long a replica holds an image it reads without renewing (renewed every third of it); a
   * killed replica's read moves on after this (default 30 s)
   */
  inventoryLeaseMs?: number;
}

export const IMAGES_DEFAULTS = {
  inventoryConcurrency: 1,
  pollIntervalMs: 1000,
  inventoryReadDeadlineMs: 10 * 60 * 1000,
  inventoryReadHeapMiB: 256,
} as const;
