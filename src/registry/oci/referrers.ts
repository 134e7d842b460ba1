// Referrers (/v2/<name>/referrers/<digest>): the manifests whose subject is the digest, as an
// image index, optionally only those of one artifactType.
import type { ManifestsRepository } from "../storage/manifests.js";
import { isDigest } from "./digest.js";
import { digestInvalid } from "./errors.js";
import { queryOf, sendJson, type RepoRequest } from "./http.js";
import { OCI_INDEX } from "./manifest.js";
import type { MethodHandlers } from "./router.js";

export interface ReferrerRouteDeps {
  manifests: ManifestsRepository;
}

/** Any method lists (as it always has). */
export function referrerHandlers(deps: ReferrerRouteDeps): MethodHandlers {
  return { "*": (r) => referrers(deps, r) };
}

async function referrers(deps: ReferrerRouteDeps, { request, reply, repo, reference: digest }: RepoRequest) {
  if (!isDigest(digest)) throw digestInvalid("unsupported or malformed digest");
  const artifactType = queryOf(request).artifactType;
  const rows = await deps.manifests.referrers(repo.uid, digest, artifactType || undefined);
  if (artifactType) reply.header("oci-filters-applied", "artifactType");
  const manifests = rows.map((r) => ({
    mediaType: r.media_type,
    digest: r.digest,
    size: r.size,
    ...(r.artifact_type ? { artifactType: r.artifact_type } : {}),
    ...(r.annotations && Object.keys(r.annotations).length ? { annotations: r.annotations } : {}),
  }));
  return sendJson(reply, { schemaVersion: 2, mediaType: OCI_INDEX, manifests }, OCI_INDEX);
}
