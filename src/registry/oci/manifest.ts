// Manifest validation: the four media types a registry must take (OCI image manifest and index,
// Docker schema 2 manifest and list), what each references, its subject and artifact type.
import { isDigest } from "./digest.js";
import { manifestInvalid, OciError } from "./errors.js";

export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
export const DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json";
export const DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json";
const INDEX_TYPES = new Set([OCI_INDEX, DOCKER_LIST]);
export const MANIFEST_TYPES = new Set([OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST]);

/** The largest manifest accepted (the spec asks registries to take at least 4 MiB). */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;

const MEDIA_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$/;

export interface ParsedManifest {
  mediaType: string;
  /** config and layers: blobs the repo must hold */
  blobs: string[];
  /** an image manifest's layers' media types, in order (foreign ones included; an index: none) */
  layerMediaTypes: string[];
  /** an index's manifests: manifests the repo must hold */
  children: string[];
  subject?: string;
  artifactType?: string;
  annotations?: Record<string, string>;
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A descriptor's digest, checked: mediaType, digest and a non-negative size are required. */
function descriptor(v: unknown, where: string): Json & { digest: string } {
  if (!isObject(v)) throw manifestInvalid(`${where} must be a descriptor object`);
  if (typeof v.mediaType !== "string" || !MEDIA_TYPE.test(v.mediaType))
    throw manifestInvalid(`${where}.mediaType must be a media type`);
  if (typeof v.digest !== "string") throw manifestInvalid(`${where}.digest is required`);
  if (!isDigest(v.digest))
    throw new OciError(400, "DIGEST_INVALID", `${where}.digest is not a sha256 or sha512 digest`, {
      digest: v.digest.slice(0, 200),
    });
  if (typeof v.size !== "number" || !Number.isSafeInteger(v.size) || v.size < 0)
    throw manifestInvalid(`${where}.size must be a non-negative integer`);
  return v as Json & { digest: string };
}

function annotationsOf(v: unknown, where: string): Record<string, string> | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v) || !Object.values(v).every((x) => typeof x === "string"))
    throw manifestInvalid(`${where} must map strings to strings`);
  return v as Record<string, string>;
}

/**
 * Parses and checks a manifest sent with `contentType`. The body's `mediaType`, when present,
 * must agree with the Content-Type; without a Content-Type the body's own is used.
 */
export function parseManifest(bytes: Uint8Array, contentType: string | undefined): ParsedManifest {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw manifestInvalid("manifest is not valid UTF-8 JSON");
  }
  if (!isObject(doc)) throw manifestInvalid("manifest must be a JSON object");
  if (doc.schemaVersion !== 2) throw manifestInvalid("schemaVersion must be 2");
  const declared = contentType?.split(";")[0]!.trim().toLowerCase() || undefined;
  const own = typeof doc.mediaType === "string" ? doc.mediaType : undefined;
  if (doc.mediaType !== undefined && own === undefined) throw manifestInvalid("mediaType must be a string");
  if (declared && own && declared !== own)
    throw manifestInvalid(`the mediaType field (${own.slice(0, 100)}) differs from the Content-Type`);
  const mediaType = declared ?? own;
  if (!mediaType) throw manifestInvalid("the manifest's media type is unknown: send a Content-Type");
  if (!MANIFEST_TYPES.has(mediaType))
    throw manifestInvalid(`unsupported manifest media type ${mediaType.slice(0, 100)}`);

  const annotations = annotationsOf(doc.annotations, "annotations");
  const subject = doc.subject === undefined ? undefined : descriptor(doc.subject, "subject").digest;
  if (doc.artifactType !== undefined && (typeof doc.artifactType !== "string" || !MEDIA_TYPE.test(doc.artifactType)))
    throw manifestInvalid("artifactType must be a media type");
  const artifactType = doc.artifactType as string | undefined;

  if (INDEX_TYPES.has(mediaType)) {
    if (!Array.isArray(doc.manifests)) throw manifestInvalid("an index needs a manifests array");
    const children = doc.manifests.map((m, i) => {
      const d = descriptor(m, `manifests[${i}]`);
      annotationsOf(d.annotations, `manifests[${i}].annotations`);
      return d.digest;
    });
    return { mediaType, blobs: [], layerMediaTypes: [], children, subject, artifactType, annotations };
  }
  if (doc.manifests !== undefined) throw manifestInvalid("an image manifest has no manifests array");
  const config = descriptor(doc.config, "config");
  if (!Array.isArray(doc.layers)) throw manifestInvalid("an image manifest needs a layers array");
  // Foreign (non-distributable) layers are fetched from their URLs, never pushed here.
  const descriptors = doc.layers.map((l, i) => descriptor(l, `layers[${i}]`));
  const layers = descriptors
    .filter((l) => !/foreign|nondistributable/.test(l.mediaType as string))
    .map((l) => l.digest);
  return {
    mediaType,
    blobs: [config.digest, ...layers],
    layerMediaTypes: descriptors.map((l) => l.mediaType as string),
    children: [],
    subject,
    // What the referrers API reports: the artifactType field, else the config's media type.
    artifactType: artifactType ?? (config.mediaType as string),
    annotations,
  };
}
