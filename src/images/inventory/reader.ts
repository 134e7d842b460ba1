// Reading one image manifest's inventory: its config (os, architecture, created, the runtime
// config), and its installed packages — from an SBOM attached to it when one parses, else from
// the package databases its layers leave in the root filesystem. Every image is untrusted input:
// whatever is wrong with it, or too big, ends in an InventoryError naming why, and memory stays
// bounded by the limits below whatever the layers hold.
import type { Readable } from "node:stream";
import { packagesFromSbom, type SbomPackages } from "../sbom/parse.js";
import {
  APK_DBS,
  DPKG_STATUS,
  DPKG_STATUS_DIR,
  isForeignLayer,
  KeptFiles,
  OS_RELEASES,
  readLayer,
  type LayerDescriptor,
  type LayerLimits,
  type LayerReadState,
} from "./layers.js";
import { parseApkInstalled, parseDpkgStatus, parseOsRelease } from "./package-dbs.js";
import { runtimeConfigOf, stringOf } from "./image-config.js";
import { parsePurl } from "../storage/purl.js";
import {
  InventoryError,
  type ImageRuntimeConfig,
  type InstalledPackage,
  type Inventory,
  type PackageSource,
} from "./types.js";

/** An SBOM document attached to an image (a referrer). */
export interface AttachedSbom {
  artifactType: string;
  content: Uint8Array;
}

/** How much of the attached SBOMs a read may load: each is loaded only when the one before did not parse. */
export interface SbomBudget {
  /** documents at most */
  maxCount: number;
  /** one document's bytes at most (a larger one is skipped) */
  maxEachBytes: number;
  /** all the documents' bytes together at most (the next one that would pass it ends the list) */
  maxTotalBytes: number;
}

/** What the reader needs of an image: its manifest, its blobs, and the SBOMs attached to it. */
export interface ImageSource {
  manifest: Uint8Array;
  /** a blob's content, streamed; undefined when the store does not hold it */
  openBlob(digest: string): Promise<Readable | undefined>;
  /**
   * the SBOM documents attached to the image (referrers), newest first, within `budget`: loaded
   * one at a time as the reader asks for the next
   */
  sboms(budget: SbomBudget): AsyncIterable<AttachedSbom>;
  /** aborted when the read is no longer wanted (the indexer stopping, the image requeued) */
  signal?: AbortSignal;
}

export interface InventoryLimits extends LayerLimits {
  /** the largest image config read */
  maxConfigBytes: number;
  /** the most layers an image may have */
  maxLayers: number;
  /** an attached SBOM larger than this is not read (the layers are) */
  maxSbomBytes: number;
  /** attached SBOMs tried at most (newest first) */
  maxSboms: number;
  /** the attached SBOMs tried, all together, at most */
  maxSbomTotalBytes: number;
  /** packages an image may list (its databases together, or its SBOM) */
  maxPackages: number;
}

const MiB = 1024 * 1024;
export const DEFAULT_INVENTORY_LIMITS: InventoryLimits = {
  maxConfigBytes: 8 * MiB,
  maxLayers: 256,
  maxSbomBytes: 32 * MiB,
  maxSboms: 5,
  maxSbomTotalBytes: 64 * MiB,
  maxPackages: 50_000,
  maxPackageDbBytes: 16 * MiB,
  maxKeptBytes: 64 * MiB,
  maxKeptFiles: 20_000,
  maxDecompressedBytes: 64 * 1024 * MiB,
  maxEntries: 2_000_000,
  // zstd -19 writes 8 MiB windows; only --long (or --ultra) writes larger ones.
  maxZstdWindowBytes: 8 * MiB,
  // A real layer moves at most 64 (full blocks in an 8 MiB window): twice that.
  maxZstdWorkPerByte: 128,
};

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json";
const INDEX_TYPES = new Set([
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
]);
const IMAGE_CONFIG_TYPES = new Set([
  "application/vnd.oci.image.config.v1+json",
  "application/vnd.docker.container.image.v1+json",
]);
const SPDX_JSON = "application/spdx+json";
const CYCLONEDX_JSON = "application/vnd.cyclonedx+json";

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

function parseJson(bytes: Uint8Array, what: string): Json {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw new InventoryError(`the ${what} is not valid UTF-8 JSON`);
  }
  if (!isObject(doc)) throw new InventoryError(`the ${what} is not a JSON object`);
  return doc;
}

function descriptorOf(v: unknown, where: string): LayerDescriptor {
  if (
    !isObject(v) ||
    typeof v.mediaType !== "string" ||
    typeof v.digest !== "string" ||
    typeof v.size !== "number" ||
    !Number.isSafeInteger(v.size) ||
    v.size < 0
  )
    throw new InventoryError(`the manifest's ${where} is not a descriptor (mediaType, digest, size)`);
  return { mediaType: v.mediaType, digest: v.digest, size: v.size };
}

/** The image manifest's config and layers; anything but an OCI or Docker schema 2 image manifest is refused. */
function parseImageManifest(bytes: Uint8Array): { config: LayerDescriptor; layers: LayerDescriptor[] } {
  const doc = parseJson(bytes, "manifest");
  const mediaType = typeof doc.mediaType === "string" ? doc.mediaType : undefined;
  if (mediaType && INDEX_TYPES.has(mediaType))
    throw new InventoryError("an image index has no layers of its own: read each of its manifests");
  // The OCI image manifest's mediaType field is optional; Docker's is required.
  if (
    doc.schemaVersion !== 2 ||
    (mediaType !== undefined && mediaType !== OCI_MANIFEST && mediaType !== DOCKER_MANIFEST)
  )
    throw new InventoryError(
      `not an OCI or Docker schema 2 image manifest (media type ${JSON.stringify(mediaType ?? null)}, schemaVersion ${JSON.stringify(doc.schemaVersion ?? null)})`,
    );
  const config = descriptorOf(doc.config, "config");
  if (!IMAGE_CONFIG_TYPES.has(config.mediaType))
    throw new InventoryError(
      `not a container image: its config's media type is ${JSON.stringify(config.mediaType.slice(0, 200))}`,
    );
  if (!Array.isArray(doc.layers)) throw new InventoryError("the manifest has no layers array");
  return { config, layers: doc.layers.map((l, i) => descriptorOf(l, `layers[${i}]`)) };
}

async function openRequired(source: ImageSource, digest: string, what: string): Promise<Readable> {
  const blob = await source.openBlob(digest);
  if (!blob) throw new InventoryError(`the ${what}'s blob ${digest} is missing from the store`);
  return blob;
}

async function readConfig(source: ImageSource, descriptor: LayerDescriptor, limits: InventoryLimits): Promise<Json> {
  if (descriptor.size > limits.maxConfigBytes)
    throw new InventoryError(`the config is ${descriptor.size} bytes, more than the ${limits.maxConfigBytes} allowed`);
  const blob = await openRequired(source, descriptor.digest, "config");
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of blob) {
      size += (chunk as Buffer).length;
      if (size > limits.maxConfigBytes)
        throw new InventoryError(`the config is more than the ${limits.maxConfigBytes} bytes allowed`);
      chunks.push(chunk as Buffer);
    }
  } finally {
    blob.destroy();
  }
  return parseJson(Buffer.concat(chunks), "config");
}

function createdOf(v: unknown): Date | undefined {
  if (typeof v !== "string") return undefined;
  const date = new Date(v);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

function sbomFormat(artifactType: string): "spdx" | "cyclonedx" | undefined {
  const type = artifactType.split(";")[0]!.trim().toLowerCase();
  return type === SPDX_JSON ? "spdx" : type === CYCLONEDX_JSON ? "cyclonedx" : undefined;
}

/** The packages of the newest attached SBOM that parses (SPDX or CycloneDX JSON), if any. */
async function packagesFromAttachedSboms(
  source: ImageSource,
  limits: InventoryLimits,
): Promise<SbomPackages | undefined> {
  const budget: SbomBudget = {
    maxCount: limits.maxSboms,
    maxEachBytes: limits.maxSbomBytes,
    maxTotalBytes: limits.maxSbomTotalBytes,
  };
  let count = 0;
  let bytes = 0;
  // The source keeps to the budget; it is checked here too, the source being another module's.
  for await (const sbom of source.sboms(budget)) {
    count += 1;
    bytes += sbom.content.byteLength;
    if (count > budget.maxCount || bytes > budget.maxTotalBytes) break;
    if (!sbomFormat(sbom.artifactType) || sbom.content.byteLength > budget.maxEachBytes) continue;
    const found = packagesFromSbom(sbom.content, sbom.artifactType);
    if (found) {
      if (found.packages.length > limits.maxPackages)
        throw new InventoryError(
          `the attached SBOM lists ${found.packages.length} packages, more than the ${limits.maxPackages} allowed`,
        );
      return found;
    }
  }
  return undefined;
}

/** An SBOM without an OS package: the namespace its apk or deb purls give (pkg:apk/wolfi/...). */
function distroOfPurls(packages: InstalledPackage[]): { id: string; version: string } {
  for (const p of packages) {
    if (p.type !== "apk" && p.type !== "deb") continue;
    const namespace = parsePurl(p.purl)?.namespace;
    if (namespace) return { id: namespace.toLowerCase(), version: "" };
  }
  return { id: "", version: "" };
}

const decodeText = (bytes: Uint8Array) => new TextDecoder("utf-8").decode(bytes);

/** os-release(5): /etc/os-release, else /usr/lib/os-release. */
function distroOf(kept: KeptFiles): { id: string; version: string } {
  for (const path of OS_RELEASES) {
    const content = kept.get(path);
    if (!content) continue;
    const values = parseOsRelease(decodeText(content));
    return { id: (values.get("ID") ?? "").toLowerCase(), version: values.get("VERSION_ID") ?? "" };
  }
  return { id: "", version: "" };
}

/** The packages the kept databases list, the purl namespace being the distro (or the format's usual one). */
function packagesFromDbs(
  kept: KeptFiles,
  distro: string,
  maxPackages: number,
): { source: PackageSource; packages: InstalledPackage[] } {
  const packages: InstalledPackage[] = [];
  let apk = false;
  let dpkg = false;
  const apkDb = APK_DBS.map((path) => kept.get(path)).find((c) => c !== undefined);
  if (apkDb) {
    apk = true;
    parseApkInstalled(decodeText(apkDb), distro || "wolfi", packages, maxPackages);
  }
  const dpkgDbs = [kept.get(DPKG_STATUS), ...kept.under(DPKG_STATUS_DIR).map(([, content]) => content)];
  for (const content of dpkgDbs) {
    if (!content) continue;
    dpkg = true;
    parseDpkgStatus(decodeText(content), distro || "debian", packages, maxPackages);
  }
  const source: PackageSource = apk && dpkg ? "apk+dpkg" : apk ? "apk" : dpkg ? "dpkg" : "";
  return { source, packages };
}

/**
 * Reads an image manifest's inventory. Throws InventoryError for anything wrong with the image
 * (its manifest, config or layers, a missing blob, a limit passed); an error of the source itself
 * (the store failing) is passed on unchanged, so the caller can retry rather than record it.
 */
export async function readInventory(source: ImageSource, limits?: Partial<InventoryLimits>): Promise<Inventory> {
  const bounds: InventoryLimits = { ...DEFAULT_INVENTORY_LIMITS, ...limits };
  const manifest = parseImageManifest(source.manifest);
  if (manifest.layers.length > bounds.maxLayers)
    throw new InventoryError(
      `the image has ${manifest.layers.length} layers, more than the ${bounds.maxLayers} allowed`,
    );
  const config = await readConfig(source, manifest.config, bounds);
  const sizeCompressed = manifest.config.size + manifest.layers.reduce((sum, l) => sum + l.size, 0);

  const fromSbom = await packagesFromAttachedSboms(source, bounds);
  let found: { source: PackageSource; packages: InstalledPackage[] };
  let distro = { id: "", version: "" };
  let sizeUncompressed = 0;
  if (fromSbom) {
    found = fromSbom;
    distro = fromSbom.distro ?? distroOfPurls(fromSbom.packages);
  } else {
    const state: LayerReadState = { kept: new KeptFiles(), entries: 0, decompressedBytes: 0, keptBytes: 0 };
    for (const [index, layer] of manifest.layers.entries()) {
      if (isForeignLayer(layer.mediaType)) continue;
      const blob = await openRequired(source, layer.digest, `layer ${index + 1}`);
      await readLayer(index, layer, blob, state, bounds);
    }
    distro = distroOf(state.kept);
    found = packagesFromDbs(state.kept, distro.id, bounds.maxPackages);
    sizeUncompressed = state.decompressedBytes;
  }

  return {
    os: stringOf(config.os) ?? "",
    architecture: stringOf(config.architecture) ?? "",
    variant: stringOf(config.variant) ?? "",
    created: createdOf(config.created),
    config: runtimeConfigOf(config.config),
    sizeCompressed,
    sizeUncompressed,
    packageSource: found.source,
    distro: distro.id,
    distroVersion: distro.version,
    packages: found.packages,
  };
}
