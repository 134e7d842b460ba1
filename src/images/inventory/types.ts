// What an image holds, as the inventory reader finds it and the tables keep it: the contract
// between the reader (inventory/), the SBOM writers and parsers (sbom/), the matcher (matching/)
// and the services.

export type { ImageRuntimeConfig, InstalledPackage, Inventory, PackageSource } from "../storage/inventory-types.js";

/** Why an image could not be read: recorded on the image, never thrown past the indexer. */
export class InventoryError extends Error {
  override name = "InventoryError";
}
