// The registry module: the OCI distribution API at /v2/ and its token endpoint, the Repos and
// Tags API over the same tables (chainguard.platform.registry.v2beta1), blob storage on the
// filesystem or an S3-compatible bucket, and online garbage collection.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { ANONYMOUS_SUBJECT, AuthEvents, authModule } from "../auth/api.js";
import { iamModule } from "../iam/api.js";
import type { Logger } from "pino";
import type { ServiceBinding } from "../core/service.js";
import { sharedProbe } from "../platform/health.js";
import type { FeatureModule, ModuleContext, ReadinessCheck } from "../platform/module.js";
import type { RegistrySettings } from "./settings.js";
import type { Db, SnapshotQuery } from "../storage/db.js";
import { collectGarbage, CollectionRunningError, type GcReport, type GcRepositories } from "./gc.js";
import { RegistryMetrics } from "./metrics.js";
import * as m006 from "./migrations/006_registry.js";
import * as m015 from "./migrations/015_registry_image_reads.js";
import { RegistryEvents } from "./oci/events.js";
import { registerOciRoutes } from "./oci/routes.js";
import type { BlobStore } from "./storage/blob-store.js";
import { FilesystemBlobStore } from "./storage/fs-blob-store.js";
import { tracedBlobStore } from "./traced-blob-store.js";
import { tracingEnabled } from "../platform/tracing.js";
import { registerTokenRoute } from "./token.js";
import { RepoSchema, ReposService } from "../gen/chainguard/platform/registry/v2beta1/repos_pb.js";
import { TagSchema, TagsService } from "../gen/chainguard/platform/registry/v2beta1/tags_pb.js";
import { RegistryExtensionsService } from "../gen/bulwark/registry/v1/visibility_pb.js";
import { RegistryMaintenanceService } from "../gen/bulwark/registry/v1/maintenance_pb.js";
import { file_chainguard_platform_registry_v2_repos } from "../gen/chainguard/platform/registry/v2/repos_pb.js";
import { file_chainguard_platform_registry_v2_tags } from "../gen/chainguard/platform/registry/v2/tags_pb.js";
import { GaTwins } from "../platform/ga-twins.js";
import { Registry } from "../gen/platform/registry/v1/registry.platform_pb.js";
import { v1RegistryService, type V1RegistryStores } from "./v1.js";
import { imageAccess, ManifestHooks, type ImageAccess } from "./image-access.js";
import { artifactPusher, type ArtifactPusher } from "./artifacts.js";
import { v1ImageMethodServer, type V1ImageMethodHandlers } from "./v1-image-methods.js";
import { reposService, repoListing } from "./repos.js";
import { tagsService, tagListing } from "./tags.js";
import { repoVisibilityService } from "./visibility.js";
import { registryMaintenanceService } from "./maintenance.js";
import { RepositoryNames } from "./names.js";
import { BlobsRepository } from "./storage/blobs.js";
import { ManifestsRepository } from "./storage/manifests.js";
import { ReposRepository } from "./storage/repos.js";
import { TagsRepository } from "./storage/tags.js";
import { UploadsRepository } from "./storage/uploads.js";

export const DEFAULT_GC_GRACE_MS = 3600 * 1000;

export function registryRepositories(db: Db) {
  const tags = new TagsRepository(db);
  return {
    repos: new ReposRepository(db),
    tags,
    blobs: new BlobsRepository(db),
    manifests: new ManifestsRepository(db, tags),
    uploads: new UploadsRepository(db),
  };
}

export interface RegistryExports extends ImageAccess, ArtifactPusher {
  store: BlobStore;
  /** one garbage collection now (what `bulwark registry gc` and the schedule run); waits for `exclusive` work */
  collectGarbage(options?: { dryRun?: boolean; graceMs?: number }): Promise<GcReport>;
  /**
   * Runs `work` while no garbage collection of this server runs: a collection asked for meanwhile
   * waits (a backup copies blobs a collection could otherwise delete under it).
   */
  exclusive<T>(work: () => Promise<T>): Promise<T>;
  /** answers some of the v1 Registry's image methods (GetSbom, ...): the images module, at its start */
  serveV1Registry(handlers: V1ImageMethodHandlers): void;
  /** a repo's name as pulls name it ("org/team/app"), by its uid; undefined when there is no such repo */
  repoName(repoUid: string): Promise<string | undefined>;
  /** the uid of the repo a name as pulls name it ("org/team/app") resolves to; undefined when none */
  repoByName(name: string): Promise<string | undefined>;
}

/** A blob the registry recorded: its digest ("sha256:<hex>") and size in bytes. */
export interface RecordedBlob {
  digest: string;
  size: number;
}

/**
 * Every blob the database records, read on a database held for a snapshot (OpenDatabase.snapshot):
 * exactly the blobs that snapshot's manifests and links can name. A blob's row is committed only
 * once its bytes are in the store (BlobsRepository.record), so each is there.
 */
export async function recordedBlobs(query: SnapshotQuery): Promise<RecordedBlob[]> {
  const rows = await query<{ digest: string; size: string | number }>(`select digest, size from blobs order by digest`);
  return rows.map((r) => ({ digest: r.digest, size: Number(r.size) }));
}

/** A queue of one: each run starts after the one before it ended. */
function serialized(): <T>(work: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return (work) => {
    const run = tail.then(work, work);
    tail = run.catch(() => undefined);
    return run;
  };
}

/** The blob store the settings ask for; `fallbackDir` when nothing is configured. */
export async function openBlobStore(settings: RegistrySettings | undefined, fallbackDir: string): Promise<BlobStore> {
  // The S3 client is loaded only when configured: it is a tenth of the server's start-up otherwise.
  if (settings?.objectStorage) {
    const { S3BlobStore } = await import("./storage/s3-blob-store.js");
    return new S3BlobStore(settings.objectStorage);
  }
  // Directories are made on the first write: a server that never stores a blob leaves no trace.
  return new FilesystemBlobStore(settings?.blobDirectory ?? fallbackDir);
}

/** How long a writable bucket is taken as still writable: each probe costs S3 requests. */
const OBJECT_STORAGE_PROBE_KEPT_MS = 5_000;

/**
 * /readyz: the blob store takes a write. A small upload is staged and dropped again, through the
 * same calls a push makes (an upload id of its own: no push can collide with it, and one left
 * behind by a crash is pruned with the abandoned uploads). Concurrent probes share one; on a
 * bucket a success is kept a few seconds.
 */
function blobStoreWritable(store: BlobStore): ReadinessCheck {
  const probe = async () => {
    const uploadId = randomUUID();
    try {
      await store.appendUpload(uploadId, 0, Readable.from([Buffer.from("bulwark readiness probe\n")]));
    } finally {
      await store.deleteUpload(uploadId);
    }
  };
  const successForMs = store.kind === "filesystem" ? 0 : OBJECT_STORAGE_PROBE_KEPT_MS;
  return { name: "blob store", run: sharedProbe(probe, { successForMs }) };
}

/** chainguard.platform.registry.v2: the same services under the GA name, from the same handlers */
const GA = new GaTwins(
  [ReposService, TagsService],
  [file_chainguard_platform_registry_v2_repos, file_chainguard_platform_registry_v2_tags],
);

/** the bindings plus the v1 Registry adapter onto them */
/** How many of the blobs touched last a replica's store is asked for at start. */
const SHARED_STORE_SAMPLE = 5;

/**
 * Refuses to start on a blob store that holds none of the blobs the database recorded last:
 * replicas on one database must share one store (the same directory, or the same bucket), or
 * each would answer for blobs it never received. A database without blobs cannot tell.
 */
async function refuseUnsharedStore(
  blobs: BlobsRepository,
  store: BlobStore,
  settings: RegistrySettings | undefined,
): Promise<void> {
  const sample = await blobs.lastTouched(SHARED_STORE_SAMPLE);
  if (sample.length === 0) return;
  for (const digest of sample) if (await store.has(digest)) return;
  const where = settings?.objectStorage
    ? `the bucket ${settings.objectStorage.bucket}`
    : `the directory ${settings?.blobDirectory ?? "(default)"}`;
  throw new Error(
    `the registry's blob store (${where}) holds none of the ${sample.length} blobs this database recorded last: ` +
      "every replica on one database must use the same blob store (the same --blob-dir on a shared filesystem, or the same --s3-bucket)",
  );
}

/** A repo's name as pulls name it ("org/team/app"), by its uid; undefined when there is no such repo. */
function repoNameOf(repos: ReposRepository, names: RepositoryNames) {
  return async (uid: string): Promise<string | undefined> => {
    const repo = await repos.get(uid);
    return repo && (await names.namesOf([repo]))[0];
  };
}

/**
 * Collections (the schedule's, those asked for: counted) and exclusive work (backups) take turns in
 * this process; a second collection asked for while one runs is refused (CollectionRunningError),
 * as on another replica (gc.ts's lock), not queued. A dry run removes nothing and waits for nobody.
 */
function garbageCollection(
  ctx: { db: Db; logger: Logger },
  repos: GcRepositories,
  store: BlobStore,
  graceMs: number,
  metrics: RegistryMetrics,
) {
  const exclusive = serialized();
  let collecting = false;
  const collect = (options: { dryRun?: boolean; graceMs?: number }) =>
    collectGarbage(ctx.db, repos, store, {
      graceMs: options.graceMs ?? graceMs,
      dryRun: options.dryRun,
      logger: ctx.logger,
    });
  const gc = metrics.counted(async (options: { dryRun?: boolean; graceMs?: number } = {}) => {
    if (options.dryRun) return collect(options);
    if (collecting) throw new CollectionRunningError();
    collecting = true;
    try {
      return await exclusive(() => collect(options));
    } finally {
      collecting = false;
    }
  });
  const scheduledGc = async () => {
    try {
      await gc();
    } catch (err) {
      if (!(err instanceof CollectionRunningError)) throw err;
      ctx.logger.info("registry garbage collection skipped: another one is running");
    }
  };
  return { gc, scheduledGc, exclusive };
}

function withV1(bindings: ServiceBinding[], stores: V1RegistryStores): ServiceBinding[] {
  return [...bindings, v1RegistryService(bindings, stores)];
}

/** The module's blob store, as configured (traced when tracing is on). */
async function moduleBlobStore(
  ctx: ModuleContext<RegistrySettings>,
  blobs: ReturnType<typeof registryRepositories>["blobs"],
): Promise<{ store: BlobStore; temporary?: string }> {
  const settings = ctx.moduleSettings;
  // Without a data directory or a configured place (tests on a given database), a private
  // temporary directory that goes with the server.
  const temporary =
    settings?.objectStorage || settings?.blobDirectory || ctx.dataDir
      ? undefined
      : await mkdtemp(join(tmpdir(), "bulwark-blobs-"));
  const opened = await openBlobStore(settings, temporary ?? join(ctx.dataDir ?? ".", "registry"));
  const store = tracingEnabled() ? tracedBlobStore(opened) : opened;
  // On a database other processes may share (PostgreSQL), a store that holds none of the blobs
  // the database records is not the one its other replicas use.
  if (!ctx.dataDir && !temporary) await refuseUnsharedStore(blobs, store, settings);
  return { store, temporary };
}

export const registryModule: FeatureModule<
  ReturnType<typeof registryRepositories>,
  RegistryExports,
  RegistrySettings
> = {
  name: "registry",
  migrations: { "006_registry": m006, "015_registry_image_reads": m015 },
  services: [
    ReposService,
    TagsService,
    RegistryExtensionsService,
    RegistryMaintenanceService,
    ...GA.services,
    Registry,
  ],
  listings: GA.listings({ [RepoSchema.typeName]: repoListing, [TagSchema.typeName]: tagListing }),
  repositories: registryRepositories,

  async start(ctx) {
    const { repos, tags, blobs, manifests, uploads } = ctx.repositoriesOf(registryModule);
    const settings = ctx.moduleSettings;
    const { store, temporary } = await moduleBlobStore(ctx, blobs);
    const issuer = ctx.exportsOf(authModule).issuer;
    const names = new RepositoryNames(ctx.exportsOf(iamModule).groups, repos);
    const graceMs = settings?.gcGraceMs ?? DEFAULT_GC_GRACE_MS;
    const metrics = new RegistryMetrics(ctx.metrics);
    const { gc, scheduledGc, exclusive } = garbageCollection(
      ctx,
      { blobs, manifests, uploads },
      store,
      graceMs,
      metrics,
    );
    const bindings = withV1(
      GA.bind([
        reposService({ repos, lists: ctx.lists, now: ctx.now }),
        tagsService({ tags, lists: ctx.lists, now: ctx.now }),
        repoVisibilityService({ repos, tags, now: ctx.now }),
        registryMaintenanceService({ collectGarbage: gc, defaultGraceMs: graceMs }),
      ]),
      { tags },
    );
    const repoName = repoNameOf(repos, names);
    // Pushes tell the images module what they stored, inside their transaction.
    const manifestHooks = new ManifestHooks();
    const v1Registry = bindings.find((b) => b.service.typeName === Registry.typeName)!;
    return {
      bindings,
      routes(router) {
        registerOciRoutes(router, {
          repos,
          tags,
          blobs,
          manifests,
          uploads,
          names,
          store,
          events: new RegistryEvents(ctx.events, ctx.db, ctx.now),
          manifestHooks,
          metrics,
          urls: ctx.urls,
          now: ctx.now,
        });
        registerTokenRoute(router, {
          names,
          urls: ctx.urls,
          issuer,
          anonymousSubject: ANONYMOUS_SUBJECT,
          events: new AuthEvents(ctx.events),
        });
      },
      registryPaths: ["/v2", "/token"],
      readiness: [blobStoreWritable(store)],
      tasks: settings?.gcIntervalMs
        ? [{ name: "registry garbage collection", everyMs: settings.gcIntervalMs, run: scheduledGc }]
        : [],
      exports: {
        store,
        collectGarbage: gc,
        exclusive,
        serveV1Registry: v1ImageMethodServer(v1Registry),
        repoName,
        repoByName: async (name: string) => (await names.resolve(name))?.repo?.uid,
        ...imageAccess(ctx.db, tags, manifestHooks),
        // the server's own pushes (generated SBOMs attached to their images)
        ...artifactPusher(ctx, { blobs, manifests, store, manifestHooks, repoName }),
      },
      async close() {
        await store.close();
        if (temporary) await rm(temporary, { recursive: true, force: true });
      },
    };
  },
};
