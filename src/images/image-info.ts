// An image's platforms, size and config, and its packages' metadata: ImagesService (v2beta1, and
// v2 through its GA twin) GetArchitectures / GetSize, and the v1 Registry's GetImageConfig,
// GetArchs, GetSize and ListManifestMetadata. Platforms and sizes come from the manifests as
// pushed (available at once); the config from the config blob itself (small, and there even when
// the inventory is pending or failed); package metadata from the inventory.
import { create } from "@bufbuild/protobuf";
import type { Readable } from "node:stream";
import { failedPrecondition, invalidArgument, notFound } from "../core/errors.js";
import { bindService, type ServiceBinding, type ServiceHandlers } from "../core/service.js";
import { requireUid } from "../core/validate.js";
import * as v1 from "../gen/platform/registry/v1/registry.platform_pb.js";
import { ImagesService } from "../gen/chainguard/platform/registry/v2beta1/images_pb.js";
import { isJsonObject, runtimeConfigOf, stringOf } from "./inventory/image-config.js";
import type { ImageRuntimeConfig, InstalledPackage, Inventory } from "./inventory/types.js";
import {
  archName,
  checkDigest,
  imageFor,
  readManifest,
  sizeOf,
  type ManifestReads,
  type ParsedManifest,
} from "./image-manifests.js";

/** Config blobs are a few KiB; one far larger is refused rather than buffered. */
const MAX_CONFIG_BYTES = 4 << 20;

/** What the read RPCs take of an inventory (img-index's InventoriesRepository rows). */
export type InventoryView = Inventory & {
  digest: string;
  state: "pending" | "done" | "failed";
  error: string | null;
  /** when it was read (done or failed) */
  indexTime?: Date | null;
};

export interface ImageInfoDeps {
  registry: ManifestReads & {
    /** the registry's blob store: the config blob's bytes */
    store: { open(digest: string): Promise<Readable | undefined> };
  };
  inventories: { get(digests: string[]): Promise<InventoryView[]> };
}

interface ImageConfigJson {
  os?: string;
  architecture?: string;
  variant?: string;
  config?: ImageRuntimeConfig;
}

/**
 * The fields the API shows of a config blob as pushed (any JSON: the pusher's word), each of the
 * wrong type left out, as the inventory reader does.
 */
function configJsonOf(doc: unknown): ImageConfigJson {
  if (!isJsonObject(doc)) return {};
  return {
    os: stringOf(doc.os),
    architecture: stringOf(doc.architecture),
    variant: stringOf(doc.variant),
    config: runtimeConfigOf(doc.config),
  };
}

/** The stream's text; an error past `max` bytes (the manifest's size of a blob is the pusher's word). */
async function readAtMost(stream: Readable, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > max) {
      stream.destroy();
      throw new Error(`more than ${max} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The image's config blob, parsed (its fields of the wrong type left out). */
async function readConfig(deps: ImageInfoDeps, image: Extract<ParsedManifest, { kind: "image" }>) {
  if (image.config.size > MAX_CONFIG_BYTES)
    throw failedPrecondition({
      type: "CONFIG_TOO_LARGE",
      description: `the config of ${image.digest} is ${image.config.size} bytes (at most ${MAX_CONFIG_BYTES} are read)`,
    });
  const stream = await deps.registry.store.open(image.config.digest);
  if (!stream)
    throw failedPrecondition({
      type: "BLOB_MISSING",
      description: `the config blob ${image.config.digest} of ${image.digest} is missing from the blob store`,
    });
  try {
    return configJsonOf(JSON.parse(await readAtMost(stream, MAX_CONFIG_BYTES)));
  } catch {
    throw failedPrecondition({
      type: "CONFIG_INVALID",
      description: `the config of ${image.digest} is not JSON of at most ${MAX_CONFIG_BYTES} bytes`,
    });
  }
}

/** The platform names of the manifest: an index's platforms, or the image's own from its config. */
async function architectures(deps: ImageInfoDeps, repoUid: string, digest: string): Promise<string[]> {
  const top = await readManifest(deps.registry, repoUid, digest);
  if (top.kind === "index") return [...new Set(top.platforms.map((p) => p.arch).filter(Boolean))];
  const arch = archName(await readConfig(deps, top));
  return arch ? [arch] : [];
}

/** The size of the platform image `arch` names (for an image: itself), with its platform's name. */
async function sizeFor(deps: ImageInfoDeps, repoUid: string, digest: string, arch: string) {
  const top = await readManifest(deps.registry, repoUid, digest);
  const image = await imageFor(deps.registry, repoUid, digest, arch);
  // An index names the platform; an image's own is in its config.
  const name = top.kind === "index" ? undefined : archName(await readConfig(deps, image));
  if (name !== undefined && arch && name !== arch && name.split("/")[0] !== arch)
    throw notFound("platform", `${arch} in ${digest} (it is an image for ${name || "no platform"})`);
  const platform = top.kind === "index" ? top.platforms.find((p) => p.digest === image.digest)!.arch : (name ?? "");
  return { size: sizeOf(image), arch: platform };
}

function checkRequest(repoField: string, repoUid: string, digest: string): void {
  requireUid(repoField, repoUid);
  checkDigest("digest", digest);
}

export function imagesService(deps: ImageInfoDeps): ServiceBinding {
  return bindService(ImagesService, {
    async getArchitectures(req) {
      checkRequest("repo_uid", req.repoUid, req.digest);
      return { architectures: await architectures(deps, req.repoUid, req.digest) };
    },
    async getSize(req) {
      checkRequest("repo_uid", req.repoUid, req.digest);
      const { size, arch } = await sizeFor(deps, req.repoUid, req.digest, req.architecture);
      return { size: BigInt(size), architecture: arch };
    },
  });
}

/**
 * The inventories of `digests`, in that order; FAILED_PRECONDITION (saying which and why) when
 * one is not read yet or could not be read.
 */
export async function readInventories(deps: Pick<ImageInfoDeps, "inventories">, digests: string[]) {
  const rows = new Map((await deps.inventories.get(digests)).map((r) => [r.digest, r]));
  return digests.map((digest) => {
    const row = rows.get(digest);
    if (!row || row.state === "pending")
      throw failedPrecondition({
        type: "INVENTORY_PENDING",
        description: `the packages of ${digest} are not read yet (this happens in the background after a push); try again shortly`,
      });
    if (row.state === "failed")
      throw failedPrecondition({
        type: "INVENTORY_FAILED",
        description: `the packages of ${digest} could not be read: ${row.error ?? "unknown error"}`,
      });
    return row;
  });
}

/** "pkg:apk/wolfi/libcrypto3@3.3.0-r0?arch=x86_64" with the name replaced by the origin's. */
function originPurlOf(pkg: InstalledPackage): string {
  if (pkg.origin === "" || pkg.origin === pkg.name) return "";
  const at = pkg.purl.indexOf("@");
  const slash = pkg.purl.lastIndexOf("/", at < 0 ? undefined : at);
  if (at < 0 || slash < 0) return "";
  return `${pkg.purl.slice(0, slash + 1)}${encodeURIComponent(pkg.origin)}${pkg.purl.slice(at)}`;
}

/** The image digests a ListManifestMetadata entry names (an index's: one platform, or all). */
async function digestsOf(
  deps: ImageInfoDeps,
  repoUid: string,
  entry: v1.ManifestMetadataFilterEntry,
  i: number,
): Promise<string[]> {
  const f = entry.filter;
  if (f.case === "imageDigest") {
    checkDigest(`items[${i}].image_digest`, f.value);
    const image = await readManifest(deps.registry, repoUid, f.value);
    return image.kind === "image" ? [image.digest] : image.platforms.map((p) => p.digest);
  }
  if (f.case === "indexFilter") {
    checkDigest(`items[${i}].index_filter.digest`, f.value.digest);
    if (!f.value.arch) {
      const top = await readManifest(deps.registry, repoUid, f.value.digest);
      return top.kind === "image" ? [top.digest] : top.platforms.map((p) => p.digest);
    }
    return [(await imageFor(deps.registry, repoUid, f.value.digest, f.value.arch)).digest];
  }
  throw invalidArgument({ field: `items[${i}]`, description: "names neither an image_digest nor an index_filter" });
}

/** Most entries a ListManifestMetadata call may name (each is a few reads). */
const MAX_METADATA_ENTRIES = 100;

async function manifestMetadata(deps: ImageInfoDeps, req: v1.ManifestMetadataFilter) {
  requireUid("repo_id", req.repoId);
  if (req.items.length === 0) throw invalidArgument({ field: "items", description: "name at least one image" });
  if (req.items.length > MAX_METADATA_ENTRIES)
    throw invalidArgument({ field: "items", description: `at most ${MAX_METADATA_ENTRIES} entries` });
  const digests: string[] = [];
  for (const [i, entry] of req.items.entries())
    for (const d of await digestsOf(deps, req.repoId, entry, i)) if (!digests.includes(d)) digests.push(d);
  const items = (await readInventories(deps, digests)).map((row) =>
    create(v1.ManifestMetadataSchema, {
      digest: row.digest,
      // eol_date and build_timestamp: the server knows neither (left unset).
      pkgMetadata: row.packages.map((p) => ({ purl: p.purl, originPurl: originPurlOf(p), license: p.license })),
    }),
  );
  return create(v1.ManifestMetadataListSchema, { items });
}

function imageConfigOf(json: ImageConfigJson): v1.ImageConfig {
  const c = json.config ?? {};
  const keys = (o: Record<string, object> | undefined) => Object.fromEntries(Object.keys(o ?? {}).map((k) => [k, {}]));
  return create(v1.ImageConfigSchema, {
    user: c.User ?? "",
    exposedPorts: keys(c.ExposedPorts),
    env: c.Env ?? [],
    entrypoint: c.Entrypoint ?? [],
    cmd: c.Cmd ?? [],
    volumes: keys(c.Volumes),
    workingDir: c.WorkingDir ?? "",
    labels: c.Labels ?? {},
    stopSignal: c.StopSignal ?? "",
  });
}

/** The v1 Registry's image methods this file answers (bound with the rest of v1 Registry). */
export function v1ImageInfoHandlers(deps: ImageInfoDeps) {
  return {
    async getImageConfig(req) {
      checkRequest("repo_id", req.repoId, req.digest);
      // `registry` (fetch from the registry) changes nothing: the config is always read from the blob.
      return imageConfigOf(await readConfig(deps, await imageFor(deps.registry, req.repoId, req.digest, req.arch)));
    },
    async getArchs(req) {
      checkRequest("repo_id", req.repoId, req.digest);
      return { archs: await architectures(deps, req.repoId, req.digest) };
    },
    async getSize(req) {
      checkRequest("repo_id", req.repoId, req.digest);
      const { size, arch } = await sizeFor(deps, req.repoId, req.digest, req.arch);
      return { size: BigInt(size), arch };
    },
    listManifestMetadata: (req) => manifestMetadata(deps, req),
  } satisfies ServiceHandlers<typeof v1.Registry>;
}
