// The images module: what is inside each pushed image and which advisories affect it. It reads
// every pushed image's config and installed packages in the background (inventory/), writes
// SBOMs from them (sbom/), matches them against the advisories the server holds (matching/),
// keeps each image's vulnerability reports as the advisories change (reports), and serves them:
// chainguard.platform.registry.Vulnerabilities, the image methods of the v1 Registry service,
// ImagesService (v2beta1 and v2) and the extension bulwark.registry.v1.ImageContentsService.
import { ImageContentsService } from "../gen/bulwark/registry/v1/images_pb.js";
import { file_chainguard_platform_registry_v2_images } from "../gen/chainguard/platform/registry/v2/images_pb.js";
import { ImagesService } from "../gen/chainguard/platform/registry/v2beta1/images_pb.js";
import { GaTwins } from "../platform/ga-twins.js";
import type { FeatureModule } from "../platform/module.js";
import { registryModule } from "../registry/api.js";
import { imageContentsService, newestReportOfOurs } from "./contents.js";
import { imagesService, v1ImageInfoHandlers } from "./image-info.js";
import { vulnerabilitiesModule } from "../vulnerabilities/api.js";
import { Vulnerabilities } from "../gen/platform/registry/v1/vulnerabilities.platform_pb.js";
import { reportAdvisories } from "./reports.js";
import { vulnerabilitiesBinding } from "./vulnerabilities.js";
import type { Db } from "../storage/db.js";
import * as m014 from "./migrations/014_images.js";
import type { ImagesSettings } from "./settings.js";
import { InventoriesRepository } from "./storage/inventories.js";
import { ReportsRepository } from "./storage/reports.js";
import { imagesDb } from "./storage/schema.js";

export function imagesRepositories(db: Db) {
  const images = imagesDb(db);
  return {
    inventories: new InventoriesRepository(images),
    reports: new ReportsRepository(images),
  };
}

export type ImagesExports = Record<string, never>;

/** chainguard.platform.registry.v2.ImagesService: the v2beta1 service under its GA name */
const GA = new GaTwins([ImagesService], [file_chainguard_platform_registry_v2_images]);

export const imagesModule: FeatureModule<ReturnType<typeof imagesRepositories>, ImagesExports, ImagesSettings> = {
  name: "images",
  migrations: { "014_images": m014 },
  services: [Vulnerabilities, ...GA.services, ImagesService, ImageContentsService],
  listings: {},
  repositories: imagesRepositories,

  async start(ctx) {
    const { inventories, reports } = ctx.repositoriesOf(imagesModule);
    const registry = ctx.exportsOf(registryModule);
    const advisories = reportAdvisories(ctx.exportsOf(vulnerabilitiesModule));
    const vulnerabilities = vulnerabilitiesBinding({ reports, registry, inventories, advisories, now: ctx.now });
    const reads = { registry, inventories };
    registry.serveV1Registry(v1ImageInfoHandlers(reads));
    return {
      bindings: [
        vulnerabilities,
        ...GA.bind([imagesService(reads)]),
        imageContentsService({ ...reads, newestReport: newestReportOfOurs(vulnerabilities) }),
      ],
      exports: {},
    };
  },
};
