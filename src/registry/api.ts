// The registry module's public face: the only file of the registry that code outside it (other
// features, server/, cli/) imports (test/architecture.test.ts). Beside the module, what
// `bulwark registry gc` needs to collect garbage on a database it opens itself.
export { registryModule, openBlobStore, type RegistryExports } from "./module.js";
export { collectGarbage, type GcReport } from "./gc.js";
export type { RegistrySettings } from "./settings.js";
