// Every feature the server runs, in start order (a module may use what an earlier one exports).
// This list is the only place that names features: adding one is adding its module here.
import { authModule } from "../auth/api.js";
import { eventsModule, type EventsSettings } from "../events/api.js";
import { iamModule } from "../iam/api.js";
import { imagesModule, type ImagesSettings } from "../images/api.js";
import { operationsModule } from "../operations/api.js";
import type { FeatureModule } from "../platform/module.js";
import { registryModule, type RegistrySettings } from "../registry/api.js";
import { vulnerabilitiesModule, type AdvisorySettings } from "../vulnerabilities/api.js";

export const MODULES: readonly FeatureModule<any, any>[] = [
  iamModule,
  authModule,
  eventsModule,
  registryModule,
  vulnerabilitiesModule,
  imagesModule,
  operationsModule,
];

/** Each feature's own settings, by module name (`ServerConfig.moduleSettings`; `ctx.moduleSettings`). */
export interface ModuleSettings {
  events?: EventsSettings;
  registry?: RegistrySettings;
  vulnerabilities?: AdvisorySettings;
  images?: ImagesSettings;
}
