// The vulnerabilities module's public face: the only file of it that code outside it (other
// features, server/, cli/) imports (test/architecture.test.ts).
export { vulnerabilitiesModule } from "./module.js";
export type { AdvisorySettings } from "./settings.js";
