// The indexer as the images module starts it: on the module's settings, over the registry's
// exports, hooked into every manifest push, with the images pushed before this module queued once.
// Answered unstarted: `indexer.start()` once its listeners are subscribed.
import type { ModuleContext } from "../platform/module.js";
import type { RegistryExports } from "../registry/api.js";
import { Indexer, INVENTORY_LEASE_MS } from "./indexer.js";
import { readInventoryIsolated } from "./inventory/isolated-read.js";
import { IMAGES_DEFAULTS, type ImagesSettings } from "./settings.js";
import type { InventoriesRepository } from "./storage/inventories.js";
import type { ReportsRepository } from "./storage/reports.js";

/** An attached SBOM larger than this is not read (the layers are). */
const MAX_SBOM_BYTES = 64 * 1024 * 1024;

export async function startIndexer(
  ctx: ModuleContext<ImagesSettings>,
  { inventories, reports }: { inventories: InventoriesRepository; reports: ReportsRepository },
  registry: RegistryExports,
): Promise<Indexer> {
  const settings = ctx.moduleSettings;
  const limits = settings?.inventoryLimits;
  const indexer = new Indexer({
    db: ctx.db,
    inventories,
    reports,
    registry,
    // In a thread of its own: a hostile layer can neither hold the event loop nor the heap.
    read: (source) =>
      readInventoryIsolated(source, {
        limits,
        deadlineMs: settings?.inventoryReadDeadlineMs ?? IMAGES_DEFAULTS.inventoryReadDeadlineMs,
        maxHeapMiB: settings?.inventoryReadHeapMiB ?? IMAGES_DEFAULTS.inventoryReadHeapMiB,
      }),
    concurrency: settings?.inventoryConcurrency ?? IMAGES_DEFAULTS.inventoryConcurrency,
    pollIntervalMs: settings?.pollIntervalMs ?? IMAGES_DEFAULTS.pollIntervalMs,
    leaseMs: settings?.inventoryLeaseMs ?? INVENTORY_LEASE_MS,
    maxSbomBytes: limits?.maxSbomBytes ?? MAX_SBOM_BYTES,
    logger: ctx.logger,
    now: ctx.now,
  });
  registry.onManifestStored((manifest) => indexer.queueOnPush(manifest));
  // An embedded database on disk is this process's alone: a lease left is a killed process's.
  if (ctx.dataDir) await inventories.releaseAll();
  await indexer.backfill();
  // Not started here: the module subscribes its onInventory listeners first, then starts it.
  return indexer;
}
