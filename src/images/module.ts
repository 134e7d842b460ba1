// The images module: what is inside each pushed image and which advisories affect it. It reads
// every pushed image's config and installed packages in the background (inventory/, indexer.ts),
// writes SBOMs from them (sbom/), matches them against the advisories the server holds
// (matching/), keeps each image's vulnerability reports as the advisories change (reports.ts),
// and serves them: chainguard.platform.registry.Vulnerabilities, the image methods of the v1
// Registry service, ImagesService (v2beta1 and v2) and the extension
// bulwark.registry.v1.ImageContentsService.
import { ImageContentsService } from "../gen/bulwark/registry/v1/images_pb.js";
import { file_chainguard_platform_registry_v2_images } from "../gen/chainguard/platform/registry/v2/images_pb.js";
import { ImagesService } from "../gen/chainguard/platform/registry/v2beta1/images_pb.js";
import { Vulnerabilities } from "../gen/platform/registry/v1/vulnerabilities.platform_pb.js";
import { GaTwins } from "../platform/ga-twins.js";
import type { FeatureModule } from "../platform/module.js";
import { registryModule } from "../registry/api.js";
import type { Db } from "../storage/db.js";
import { vulnerabilitiesModule } from "../vulnerabilities/api.js";
import { imageContentsService, newestReportOfOurs } from "./contents.js";
import { imagesService, v1ImageInfoHandlers } from "./image-info.js";
import type { Indexer } from "./indexer.js";
import { startIndexer } from "./indexer-start.js";
import { matchPackages } from "./matching/match.js";
import { registerImagesMetrics } from "./metrics.js";
import * as m014 from "./migrations/014_images.js";
import { ReportWorker } from "./reports.js";
import { IMAGES_DEFAULTS, type ImagesSettings } from "./settings.js";
import { sbomAttacher } from "./sbom-attach.js";
import { imageSbomHandler, sbomV1Handlers } from "./sboms.js";
import { AdvisoryChangesRepository } from "./storage/advisory-changes.js";
import { InventoriesRepository } from "./storage/inventories.js";
import { ReportsRepository } from "./storage/reports.js";
import { imagesDb } from "./storage/schema.js";
import { vulnReportV1Handler } from "./vuln-report-v1.js";
import { vulnerabilitiesBinding } from "./vulnerabilities.js";

export function imagesRepositories(db: Db) {
  const images = imagesDb(db);
  return {
    inventories: new InventoriesRepository(images),
    reports: new ReportsRepository(images),
    advisoryChanges: new AdvisoryChangesRepository(images),
  };
}

export interface ImagesExports {
  indexer: Pick<Indexer, "wake">;
  /** recomputes the queued vulnerability reports now (after the indexer or an advisory change queued some) */
  reports: Pick<ReportWorker, "wake">;
}

/** chainguard.platform.registry.v2.ImagesService: the v2beta1 service under its GA name */
const GA = new GaTwins([ImagesService], [file_chainguard_platform_registry_v2_images]);

export const imagesModule: FeatureModule<ReturnType<typeof imagesRepositories>, ImagesExports, ImagesSettings> = {
  name: "images",
  migrations: { "014_images": m014 },
  services: [Vulnerabilities, ImagesService, ...GA.services, ImageContentsService],
  listings: {},
  repositories: imagesRepositories,

  async start(ctx) {
    const repositories = ctx.repositoriesOf(imagesModule);
    const { inventories, reports, advisoryChanges } = repositories;
    const registry = ctx.exportsOf(registryModule);
    const advisories = ctx.exportsOf(vulnerabilitiesModule);
    const reads = { registry, inventories };
    // Each advisory change is recorded in the import's own transaction: it commits with the
    // change, and the task below turns it into queued reports on whichever replica claims it.
    advisories.onAdvisoriesChanged((change) => advisoryChanges.record(change, ctx.now()));

    const worker = new ReportWorker({
      db: ctx.db,
      reports,
      advisoryChanges,
      inventories,
      advisories,
      registry,
      match: matchPackages,
      events: ctx.events,
      now: ctx.now,
      logger: ctx.logger,
    });
    registerImagesMetrics(ctx.metrics, imagesDb(ctx.db));
    const indexer = await startIndexer(ctx, repositories, registry);
    // A read inventory has its reports queued (in the save's transaction): compute them now.
    indexer.onInventory(() => worker.wake());
    if (ctx.moduleSettings?.attachSboms)
      indexer.onInventory(sbomAttacher({ registry, inventories, urls: ctx.urls, logger: ctx.logger }));
    indexer.onReportsQueued(() => worker.wake());
    indexer.start();

    const sbomDeps = { registry, inventories, urls: ctx.urls };
    registry.serveV1Registry(sbomV1Handlers(sbomDeps));
    registry.serveV1Registry(v1ImageInfoHandlers(reads));
    registry.serveV1Registry(vulnReportV1Handler({ reports, registry, inventories, advisories }));
    const vulnerabilities = vulnerabilitiesBinding({ reports, registry, inventories, advisories, now: ctx.now });
    return {
      bindings: [
        vulnerabilities,
        ...GA.bind([imagesService(reads)]),
        imageContentsService({
          ...reads,
          newestReport: newestReportOfOurs(vulnerabilities),
          imageSbom: imageSbomHandler(sbomDeps),
        }),
      ],
      // Advisory changes (from any replica's imports) queue the images they concern; what is
      // queued is recomputed, here or on another replica, whichever claims it first.
      tasks: [
        {
          name: "vulnerability reports",
          everyMs: ctx.moduleSettings?.pollIntervalMs ?? IMAGES_DEFAULTS.pollIntervalMs,
          run: async () => {
            await worker.checkAdvisories();
            await worker.drain();
          },
        },
      ],
      exports: { indexer, reports: worker },
      async close() {
        await indexer.stop();
        await worker.close();
      },
    };
  },
};
