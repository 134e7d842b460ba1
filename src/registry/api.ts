// The registry module's public face: the only file of the registry that code outside it (other
// features, server/, cli/) imports (test/architecture.test.ts). Beside the module, what
// `bulwark registry gc` needs to collect garbage on a database it opens itself (the blob store,
// the registry's repositories over that database, the collection).
export {
  registryModule,
  openBlobStore,
  registryRepositories,
  recordedBlobs,
  type RecordedBlob,
  type RegistryExports,
} from "./module.js";
export { collectGarbage, CollectionRunningError, type GcReport } from "./gc.js";
export type { RegistrySettings } from "./settings.js";
export type { BlobStore } from "./storage/blob-store.js";
export type { V1ImageMethodHandlers } from "./v1-image-methods.js";
export {
  isImageManifest,
  IMAGE_CONFIG_TYPES,
  type ImageAccess,
  type StoredManifest,
  type StoredReferrer,
} from "./image-access.js";
