// The vulnerabilities module's public face: the only file of it that code outside it (other
// features, server/, cli/) imports (test/architecture.test.ts).
export { vulnerabilitiesModule } from "./module.js";
export type { AdvisorySettings } from "./settings.js";
export type { MatchableAdvisory, VulnerabilitiesExports } from "./exports.js";
// The ordering and OSV range evaluation the feeds use, for matching image packages the same way.
export { compareApk, compareVersions, isAffected, type OsvRange } from "./versions.js";
