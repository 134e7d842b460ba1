// The operations module: what the platform's operator runs against a live server. Its route
// `GET /bulwark/admin/v1/backup` (operator only) streams a consistent backup of an embedded
// server: PostgreSQL's files of a database snapshot, its key-encryption key and every blob it records (archive.ts).
// On PostgreSQL the database and the bucket are backed up with their own tools (the README's
// procedure): the route answers FAILED_PRECONDITION.
import { join } from "node:path";
import { failedPrecondition } from "../core/errors.js";
import type { FeatureModule } from "../platform/module.js";
import { registryModule } from "../registry/api.js";
import { KEY_ENCRYPTION_KEY_FILE } from "../storage/data-dir.js";
import { backupArchive, databaseBytes } from "./archive.js";

export const BACKUP_PATH = "/bulwark/admin/v1/backup";

export const operationsModule: FeatureModule = {
  name: "operations",
  migrations: {},
  services: [],
  listings: {},
  repositories: () => ({}),

  async start(ctx) {
    const registry = ctx.exportsOf(registryModule);
    return {
      bindings: [],
      exports: {},
      routes(router) {
        router.route({
          method: "GET",
          url: BACKUP_PATH,
          access: () => ({ audience: "api", capabilities: [], operatorOnly: true }),
          handler: async (_request, reply) => {
            if (!ctx.database.snapshot || !ctx.dataDir)
              throw failedPrecondition({
                type: "BACKEND",
                description:
                  ctx.database.backend === "postgres"
                    ? 'this server runs on PostgreSQL: back up the database and the blob store with their own tools, in the order the README\'s "Backups and restore" gives'
                    : "this server's database is not in a data directory: there is nothing durable to back up",
              });
            const archive = backupArchive({
              database: ctx.database,
              store: registry.store,
              keyFile: join(ctx.dataDir, KEY_ENCRYPTION_KEY_FILE),
              exclusive: registry.exclusive,
              now: ctx.now,
              onSnapshot: (manifest) =>
                ctx.logger.info(
                  { created: manifest.created, blobs: manifest.blobs.length, databaseBytes: databaseBytes(manifest) },
                  "backup: database snapshot taken",
                ),
            });
            archive.once("error", (err) =>
              ctx.logger.error({ err }, "backup failed partway: the archive is cut short"),
            );
            return reply
              .header("content-type", "application/gzip")
              .header("content-disposition", 'attachment; filename="bulwark-backup.tar.gz"')
              .header("cache-control", "no-store")
              .send(archive);
          },
        });
      },
    };
  },
};
