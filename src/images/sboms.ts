// The v1 Registry's SBOM methods (GetSbom, GetRawSbom) and the extension's GetImageSbom (either
// format), answered from an image's stored inventory: the document is written on each request (it
// is a pure function of the inventory, so the same document every time), never stored.
import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { checkDigest } from "./image-manifests.js";
import { failedPrecondition, invalidArgument, notFound } from "../core/errors.js";
import { requireUid } from "../core/validate.js";
import {
  ComponentGraph_Edge_Type,
  ComponentGraph_NodeSchema,
  Sbom2_Source,
  Sbom2Schema,
} from "../gen/platform/tenant/v1/sbom.platform_pb.js";
import { ImageSbomSchema, type GetImageSbomRequest, type ImageSbom } from "../gen/bulwark/registry/v1/images_pb.js";
import { RawSbomSchema } from "../gen/platform/registry/v1/registry.platform_pb.js";
import type { PublicUrls } from "../platform/config.js";
import type { RegistryExports, V1ImageMethodHandlers } from "../registry/api.js";
import type { Inventory } from "./inventory/types.js";
import { CYCLONEDX_FORMAT, CYCLONEDX_MEDIA_TYPE, cyclonedxOf } from "./sbom/cyclonedx.js";
import { SBOM_TOOL, SPDX_FORMAT, SPDX_MEDIA_TYPE, spdxOf } from "./sbom/spdx.js";
import type { SbomSubject } from "./sbom/subject.js";
import type { InventoriesRepository } from "./storage/inventories.js";

export interface SbomDeps {
  registry: Pick<RegistryExports, "repoName" | "manifestIn">;
  inventories: Pick<InventoriesRepository, "get">;
  urls: Readonly<PublicUrls>;
}

const INDEX_TYPES = new Set([
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
]);
/** The platform an index is read at when the request names none (as the hosted API does). */
const DEFAULT_ARCH = "amd64";

interface IndexManifest {
  manifests?: { digest?: unknown; platform?: { architecture?: unknown; variant?: unknown; os?: unknown } }[];
}

/** The image manifest of `arch` in an index ("amd64", "arm64", "arm/v7"), if it has one. */
function platformOf(index: IndexManifest, arch: string): string | undefined {
  const [architecture, variant] = arch.split("/");
  const match = (index.manifests ?? []).find(
    (m) =>
      m.platform?.architecture === architecture &&
      (variant === undefined || m.platform?.variant === variant) &&
      (m.platform?.os === undefined || m.platform.os === "linux"),
  );
  return typeof match?.digest === "string" ? match.digest : undefined;
}

/** The image a request names, with its read inventory; the errors the methods answer otherwise. */
async function imageOf(
  deps: SbomDeps,
  repoId: string,
  digest: string,
  arch: string,
  /** the request's name for the repo's uid, for error details */
  repoField = "repo_id",
): Promise<{ subject: SbomSubject; inventory: Inventory }> {
  requireUid(repoField, repoId);
  if (arch.length > 64) throw invalidArgument({ field: "arch", description: "at most 64 characters" });
  checkDigest("digest", digest);
  const repoName = await deps.registry.repoName(repoId);
  if (repoName === undefined) throw notFound("repo", repoId);
  const manifest = await deps.registry.manifestIn(repoId, digest);
  if (!manifest) throw notFound("image", `${repoName}@${digest}`);
  let imageDigest = digest;
  if (INDEX_TYPES.has(manifest.mediaType)) {
    const wanted = arch || DEFAULT_ARCH;
    const index = JSON.parse(Buffer.from(manifest.content).toString("utf8")) as IndexManifest;
    const platform = platformOf(index, wanted);
    if (!platform) throw notFound("platform", `${wanted} of ${repoName}@${digest}`);
    imageDigest = platform;
  }
  const [row] = await deps.inventories.get([imageDigest]);
  if (!row || row.state === "pending")
    throw failedPrecondition({
      type: "INVENTORY_PENDING",
      description: `the contents of ${imageDigest} are still being read; try again in a moment`,
    });
  if (row.state === "failed")
    throw failedPrecondition({
      type: "INVENTORY_FAILED",
      description: `the contents of ${imageDigest} could not be read: ${row.error ?? "unknown error"}`,
    });
  return {
    subject: {
      repoName,
      registryHost: deps.urls.registryAudience,
      digest: imageDigest,
      apiBase: deps.urls.apiAudience,
      indexTime: row.indexTime ?? row.discoverTime,
    },
    inventory: row,
  };
}

export function sbomV1Handlers(deps: SbomDeps): V1ImageMethodHandlers {
  return {
    async getSbom(req) {
      const { subject, inventory } = await imageOf(deps, req.repoId, req.digest, req.arch);
      const document = spdxOf(subject, inventory);
      const raw = Buffer.from(JSON.stringify(document), "utf8");
      const edgeType = { DESCRIBES: ComponentGraph_Edge_Type.DESCRIBES, CONTAINS: ComponentGraph_Edge_Type.CONTAINS };
      return create(Sbom2Schema, {
        id: req.repoId,
        rawSbom: raw,
        graph: {
          nodes: document.packages.map((p) =>
            create(ComponentGraph_NodeSchema, {
              typedNode: {
                case: "package",
                value: {
                  id: p.SPDXID,
                  name: p.name,
                  version: p.versionInfo,
                  license: p.licenseDeclared,
                  purl: p.externalRefs.find((r) => r.referenceType === "purl")?.referenceLocator ?? "",
                },
              },
            }),
          ),
          edges: document.relationships.map((r) => ({
            subjectId: r.spdxElementId,
            predicateId: r.relatedSpdxElement,
            type: edgeType[r.relationshipType],
          })),
        },
        tool: SBOM_TOOL,
        format: SPDX_FORMAT,
        generatedAt: timestampFromDate(subject.indexTime),
        // the packages came from an SBOM attached to the image: ours restates what it said
        source: inventory.packageSource.startsWith("sbom:") ? Sbom2_Source.INGESTED : Sbom2_Source.GENERATED,
        name: document.name,
        digest: `sha256:${createHash("sha256").update(raw).digest("hex")}`,
      });
    },
    async getRawSbom(req) {
      const { subject, inventory } = await imageOf(deps, req.repoId, req.digest, req.arch);
      return create(RawSbomSchema, { rawSbom: JSON.stringify(spdxOf(subject, inventory)) });
    },
  };
}

/** The formats GetImageSbom writes, by the name a request gives ("" is the first). */
const SBOM_FORMATS = {
  spdx: { format: SPDX_FORMAT, mediaType: SPDX_MEDIA_TYPE, write: spdxOf },
  cyclonedx: { format: CYCLONEDX_FORMAT, mediaType: CYCLONEDX_MEDIA_TYPE, write: cyclonedxOf },
} as const;

/** bulwark.registry.v1.ImageContentsService.GetImageSbom: an image's SBOM as SPDX or CycloneDX JSON. */
export function imageSbomHandler(deps: SbomDeps): (req: GetImageSbomRequest) => Promise<ImageSbom> {
  return async (req) => {
    const name = req.format || "spdx";
    if (!Object.hasOwn(SBOM_FORMATS, name))
      throw invalidArgument({
        field: "format",
        description: `${JSON.stringify(req.format)} is not a format: spdx or cyclonedx`,
      });
    const format = SBOM_FORMATS[name as keyof typeof SBOM_FORMATS];
    const { subject, inventory } = await imageOf(deps, req.repoUid, req.digest, req.arch, "repo_uid");
    return create(ImageSbomSchema, {
      format: format.format,
      mediaType: format.mediaType,
      document: JSON.stringify(format.write(subject, inventory)),
    });
  };
}
