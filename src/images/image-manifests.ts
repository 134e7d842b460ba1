// What the image read RPCs need of a stored manifest, read from its JSON alone: whether it is an
// index, its platforms (an index's `manifests[].platform`) under the names the hosted API uses
// ("amd64", "arm64", "arm/v7"), and an image's size as stored (config + layers, compressed) —
// known as soon as the push is, before the inventory is read.
import { failedPrecondition, invalidArgument, notFound } from "../core/errors.js";
import { quote } from "../core/strings.js";

/** The registry's digests: sha256 and sha512, lowercase hex (as the registry stores them). */
const DIGEST = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;

/** What the registry's exports answer for a stored manifest. */
export interface StoredManifest {
  mediaType: string;
  content: Uint8Array;
}

/** The registry reads these RPCs use (a subset of the registry module's exports). */
export interface ManifestReads {
  /** the manifest `digest` as stored in the repo, if the repo holds it */
  manifestIn(repoUid: string, digest: string): Promise<StoredManifest | undefined>;
}

interface Descriptor {
  mediaType?: string;
  digest?: string;
  size?: number;
  platform?: { os?: string; architecture?: string; variant?: string };
}

interface ManifestJson {
  mediaType?: string;
  manifests?: Descriptor[];
  config?: Descriptor;
  layers?: Descriptor[];
}

const INDEX_TYPES = new Set([
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
]);

/** One platform image of an index (or the image itself). */
export interface PlatformImage {
  digest: string;
  /** "amd64", "arm64", "arm/v7"; "" when the index does not say */
  arch: string;
  os: string;
}

/** A manifest the repo holds, parsed: an index with its platform images, or an image. */
export type ParsedManifest =
  | { kind: "index"; digest: string; platforms: PlatformImage[] }
  | { kind: "image"; digest: string; config: { digest: string; size: number }; layersSize: number };

/** A digest field must be one the registry could hold: anything else is the client's error. */
export function checkDigest(field: string, digest: string): void {
  if (digest === "") throw invalidArgument({ field, description: "is required" });
  if (!DIGEST.test(digest))
    throw invalidArgument({ field, description: `${quote(digest)} is not a digest (sha256:<64 hex>)` });
}

/**
 * The platform's name as the hosted API spells it: the architecture, with its variant when it
 * tells platforms apart ("arm/v7"); arm64's usual "v8" adds nothing.
 */
export function archName(p: { architecture?: string; variant?: string }): string {
  const arch = p.architecture ?? "";
  const variant = p.variant ?? "";
  return variant && !(arch === "arm64" && variant === "v8") ? `${arch}/${variant}` : arch;
}

/** Whether `wanted` ("arm64", "arm/v7", "linux/amd64") names this platform. */
export function archMatches(wanted: string, platform: { arch: string; os: string }): boolean {
  const name = wanted.startsWith(`${platform.os}/`) ? wanted.slice(platform.os.length + 1) : wanted;
  return name === platform.arch || name === platform.arch.split("/")[0];
}

/** The manifest `digest` of the repo, parsed; NOT_FOUND when the repo does not hold it. */
export async function readManifest(reads: ManifestReads, repoUid: string, digest: string): Promise<ParsedManifest> {
  const stored = await reads.manifestIn(repoUid, digest);
  if (!stored) throw notFound("manifest", `${repoUid}@${digest}`);
  return parseManifest(digest, stored);
}

export function parseManifest(digest: string, stored: StoredManifest): ParsedManifest {
  // The registry validated the JSON when it was pushed; a manifest that is neither an index nor
  // an image (an artifact, an SBOM) is not an image these RPCs describe.
  const json = JSON.parse(Buffer.from(stored.content).toString("utf8")) as ManifestJson;
  const mediaType = json.mediaType || stored.mediaType;
  if (INDEX_TYPES.has(mediaType) || (Array.isArray(json.manifests) && !json.config)) {
    const platforms = (json.manifests ?? [])
      // Attestations and other non-platform entries (buildx writes "unknown/unknown") are no image.
      .filter((m) => m.platform && m.platform.os !== "unknown" && typeof m.digest === "string")
      .map((m) => ({ digest: m.digest!, arch: archName(m.platform!), os: m.platform!.os ?? "" }));
    return { kind: "index", digest, platforms };
  }
  if (!json.config?.digest)
    throw failedPrecondition({ type: "NOT_AN_IMAGE", description: `${digest} is not an image manifest or index` });
  const layersSize = (json.layers ?? []).reduce((sum, l) => sum + (Number(l.size) || 0), 0);
  return {
    kind: "image",
    digest,
    config: { digest: json.config.digest, size: Number(json.config.size) || 0 },
    layersSize,
  };
}

/** The default platform of an index when none is asked for (ImagesService.GetSize says amd64). */
export const DEFAULT_ARCH = "amd64";

/** The index's platform image `wanted` names (default amd64); NOT_FOUND naming the ones it has. */
export function pickPlatform(index: Extract<ParsedManifest, { kind: "index" }>, wanted: string): PlatformImage {
  const arch = wanted || DEFAULT_ARCH;
  const found = index.platforms.find((p) => archMatches(arch, p));
  if (found) return found;
  const has = index.platforms.map((p) => p.arch).join(", ") || "none";
  throw notFound("platform", `${arch} in ${index.digest} (it has: ${has})`);
}

/**
 * The image manifest for `arch` of the manifest `digest` (itself when it is an image, the
 * platform's when an index), parsed.
 */
export async function imageFor(
  reads: ManifestReads,
  repoUid: string,
  digest: string,
  arch: string,
): Promise<Extract<ParsedManifest, { kind: "image" }>> {
  const top = await readManifest(reads, repoUid, digest);
  if (top.kind === "image") return top;
  const platform = pickPlatform(top, arch);
  const image = await readManifest(reads, repoUid, platform.digest);
  if (image.kind !== "image")
    throw failedPrecondition({ type: "NOT_AN_IMAGE", description: `${platform.digest} is not an image manifest` });
  return image;
}

/** config + layers, as stored */
export const sizeOf = (image: Extract<ParsedManifest, { kind: "image" }>) => image.config.size + image.layersSize;
