// The vulnerabilities module: advisories and their events (chainguard.platform.vulnerabilities
// .v2beta1.AdvisoriesService), their import from advisory YAML and OSV documents (the extension
// bulwark.vulnerabilities.v1.AdvisoryImportService), and the feeds derived from them: an
// OSV-compatible API (/v1/vulns, /v1/query, /v1/querybatch) and a secdb (/vulnerabilities/secdb.json).
import type { FeatureModule } from "../platform/module.js";
import type { Db } from "../storage/db.js";
import { AdvisoriesService, AdvisorySchema } from "../gen/chainguard/platform/vulnerabilities/v2beta1/advisories_pb.js";
import { AdvisoryImportService } from "../gen/bulwark/vulnerabilities/v1/import_pb.js";
import { file_chainguard_platform_vulnerabilities_v2_advisories } from "../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { GaTwins } from "../platform/ga-twins.js";
import * as m007 from "./migrations/007_advisories.js";
import * as m011 from "./migrations/011_wolfi_ecosystem.js";
import * as m016 from "./migrations/016_advisory_search_and_counts.js";
import * as m017 from "./migrations/017_advisories_epoch.js";
import { advisoriesService, advisoryListing } from "./advisories.js";
import { PackageIndex, registerFeedRoutes } from "./feeds.js";
import { registerVulnerabilityMetrics } from "./metrics.js";
import { ListAdvisoriesCache } from "./list-cache.js";
import { advisoryImportService } from "./import.js";
import { advisorySharedGrants, type AdvisorySettings } from "./settings.js";
import { AdvisoriesRepository } from "./storage/advisories.js";
import { vulnerabilitiesExports, type VulnerabilitiesExports } from "./exports.js";

export function vulnerabilityRepositories(db: Db) {
  return { advisories: new AdvisoriesRepository(db) };
}

/** chainguard.platform.vulnerabilities.v2: the same service under the GA name, from the same handlers */
const GA = new GaTwins([AdvisoriesService], [file_chainguard_platform_vulnerabilities_v2_advisories]);

export const vulnerabilitiesModule: FeatureModule<
  ReturnType<typeof vulnerabilityRepositories>,
  VulnerabilitiesExports,
  AdvisorySettings
> = {
  name: "vulnerabilities",
  migrations: {
    "007_advisories": m007,
    "011_wolfi_ecosystem": m011,
    "016_advisory_search_and_counts": m016,
    "017_advisories_epoch": m017,
  },
  services: [AdvisoriesService, AdvisoryImportService, ...GA.services],
  listings: GA.listings({ [AdvisorySchema.typeName]: advisoryListing }),
  repositories: vulnerabilityRepositories,
  // Public advisory groups: every authenticated caller may read their advisories (and the feeds
  // answer anonymous callers from them).
  sharedGrants: advisorySharedGrants,

  async start(ctx) {
    const { advisories } = ctx.repositoriesOf(vulnerabilitiesModule);
    const answers = new ListAdvisoriesCache(ctx.lists);
    const packageIndex = new PackageIndex(advisories);
    registerVulnerabilityMetrics(ctx.metrics, answers, packageIndex);
    return {
      bindings: GA.bind([
        advisoriesService({ advisories, lists: ctx.lists, answers }),
        advisoryImportService({
          advisories,
          defaultGroup: ctx.moduleSettings?.publicGroups[0],
          now: ctx.now,
        }),
      ]),
      routes(router) {
        registerFeedRoutes(router, { advisories, packageIndex, publicGroups: ctx.moduleSettings?.publicGroups ?? [] });
      },
      exports: vulnerabilitiesExports(advisories, ctx.moduleSettings?.publicGroups ?? []),
    };
  },
};
