// The registry module's settings (its `moduleSettings`: `bulwark serve`'s --blob-dir, --s3-*,
// --registry-gc-every and --registry-gc-grace; `bulwark registry gc`'s blob options).
import type { ObjectStorageSettings } from "../storage/object-storage.js";

export interface RegistrySettings {
  /** blobs on this directory (default: `registry/` in the data directory) */
  blobDirectory?: string;
  /** blobs in an S3-compatible bucket instead (production, several replicas) */
  objectStorage?: ObjectStorageSettings;
  /** run garbage collection this often (absent: never; `bulwark registry gc` runs it by hand) */
  gcIntervalMs?: number;
  /** how long unreferenced content is kept (default: one hour) */
  gcGraceMs?: number;
}
