// `serve --attach-sboms`: once an image's inventory is read, its SPDX SBOM is pushed into every
// repo holding the image as an OCI referrer (an artifact manifest whose subject is the image), so
// referrer-aware tools (cosign, oras, `GET /v2/<name>/referrers/<digest>`) find it. The document
// is a pure function of the inventory, so the artifact is the same bytes (the same digest) every
// time: pushing it again changes nothing. The annotation marks it as ours: the indexer neither
// reads it back as an input nor reads its subject again for it (indexer.ts).
import type { Logger } from "pino";
import type { RegistryExports } from "../registry/api.js";
import type { PublicUrls } from "../platform/config.js";
import { GENERATED_SBOM_ANNOTATION } from "./indexer.js";
import type { Inventory } from "./inventory/types.js";
import { SPDX_MEDIA_TYPE, spdxOf } from "./sbom/spdx.js";
import type { InventoriesRepository } from "./storage/inventories.js";
import { createHash } from "node:crypto";

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
/** The OCI empty descriptor's media type and its blob, `{}` (image-spec: "Guidance for an Empty Descriptor"). */
const OCI_EMPTY = "application/vnd.oci.empty.v1+json";
const EMPTY_BLOB = new TextEncoder().encode("{}");

const sha256 = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

export interface SbomAttachDeps {
  registry: Pick<RegistryExports, "reposHolding" | "repoName" | "manifestIn" | "pushArtifact">;
  inventories: Pick<InventoriesRepository, "get">;
  urls: Readonly<PublicUrls>;
  logger: Logger;
}

/** The referrer artifact of an SBOM document about `subject` (an image manifest of `mediaType` and `size`). */
export function sbomArtifact(
  document: Uint8Array,
  subject: { digest: string; mediaType: string; size: number },
): { manifest: Uint8Array; blobs: Uint8Array[] } {
  const manifest = {
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    artifactType: SPDX_MEDIA_TYPE,
    config: { mediaType: OCI_EMPTY, digest: sha256(EMPTY_BLOB), size: EMPTY_BLOB.length },
    layers: [{ mediaType: SPDX_MEDIA_TYPE, digest: sha256(document), size: document.length }],
    subject,
    annotations: { [GENERATED_SBOM_ANNOTATION]: "true" },
  };
  return { manifest: new TextEncoder().encode(JSON.stringify(manifest)), blobs: [EMPTY_BLOB, document] };
}

/** The indexer's listener: attaches the image's SBOM in each repo holding it. Failures are the caller's to log. */
export function sbomAttacher(deps: SbomAttachDeps): (digest: string, inventory: Inventory) => Promise<void> {
  return async (digest, inventory) => {
    const [row] = await deps.inventories.get([digest]);
    // the SBOM's creation time is the read's (what GetSbom answers too)
    const indexTime = row?.indexTime ?? row?.discoverTime ?? new Date();
    for (const repoUid of await deps.registry.reposHolding(digest)) {
      const [repoName, image] = await Promise.all([
        deps.registry.repoName(repoUid),
        deps.registry.manifestIn(repoUid, digest),
      ]);
      if (repoName === undefined || !image) continue; // deleted meanwhile
      const subject = {
        repoName,
        registryHost: deps.urls.registryAudience,
        digest,
        apiBase: deps.urls.apiAudience,
        indexTime,
      };
      const document = new TextEncoder().encode(JSON.stringify(spdxOf(subject, inventory)));
      const artifact = sbomArtifact(document, { digest, mediaType: image.mediaType, size: image.content.length });
      const pushed = await deps.registry.pushArtifact(repoUid, { mediaType: OCI_MANIFEST, ...artifact });
      if (pushed.stored)
        deps.logger.debug({ repo: repoName, digest, sbom: pushed.digest }, "an image's SBOM was attached");
    }
  };
}
