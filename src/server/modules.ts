// Every feature the server runs, in start order (a module may use what an earlier one exports).
// This list is the only place that names features: adding one is adding its module here.
import { authModule } from "../auth/module.js";
import { iamModule } from "../iam/module.js";
import type { FeatureModule } from "../platform/module.js";
import { registryModule } from "../registry/module.js";
import { vulnerabilitiesModule } from "../vulnerabilities/module.js";

export const MODULES: readonly FeatureModule<any, any>[] = [
  iamModule,
  authModule,
  registryModule,
  vulnerabilitiesModule,
];
