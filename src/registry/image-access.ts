// What the images module (which starts after the registry and which the registry must not import)
// uses of the registry's content: a hook called inside every manifest push's transaction (so
// what it queues commits with the push, or not at all), and reads of stored manifests, referrers,
// tags and the repos holding an image. The reads span repos: an image is read once per digest,
// whichever repos hold it. A referrer (an attached SBOM) speaks for an image only from a repo
// holding the image, and only while every repo holding it is in one organization: otherwise
// one tenant's document would decide what another tenant's image is said to contain.
import { sql } from "kysely";
import { afterCommit } from "../storage/ambient-transaction.js";
import type { Db } from "../storage/db.js";
import { DOCKER_MANIFEST, OCI_MANIFEST } from "./oci/manifest.js";
import { registryDb, type RegistryDb } from "./storage/tables.js";
import type { TagsRepository } from "./storage/tags.js";

/** A manifest as a push stored it. */
export interface StoredManifest {
  repoUid: string;
  digest: string;
  mediaType: string;
  /** the manifest's artifactType, else its config's media type (an image manifest's: an image config type) */
  artifactType?: string;
  subjectDigest?: string;
  annotations?: Record<string, string>;
  /** an image manifest's layers' media types (an index: none) */
  layerMediaTypes: readonly string[];
  /** whether the push stored it in this repo (false: the repo had it already, e.g. a tag moved onto it) */
  created: boolean;
}

/**
 * Called inside the push's transaction for a manifest the push stored; for one the repo held
 * already (created false: a new tag on it), once the push committed. A failure fails the push
 * (the client's answer).
 */
export type ManifestStoredListener = (manifest: StoredManifest) => Promise<void>;

/** A referrer of an image, from a repo holding it. */
export interface StoredReferrer {
  repoUid: string;
  digest: string;
  mediaType: string;
  artifactType: string | null;
  annotations: Record<string, string> | null;
  createTime: Date;
}

/** The config media types of a container image (OCI and Docker). */
export const IMAGE_CONFIG_TYPES: readonly string[] = [
  "application/vnd.oci.image.config.v1+json",
  "application/vnd.docker.container.image.v1+json",
];

/** Whether a layer media type is a tar archive (plain, gzip or zstd; OCI or Docker; foreign ones too). */
export function isTarLayer(mediaType: string): boolean {
  return /\.tar(?:$|[+.])/.test(mediaType.split(";")[0]!.trim().toLowerCase());
}

/**
 * Whether a stored manifest is a (platform) image: an image manifest with an image config, and
 * a root filesystem: a tar layer, or none at all (a `FROM scratch` config-only image). Cosign
 * signatures and attestations also carry an image config, but their layers are JSON documents
 * (simplesigning, DSSE, in-toto): they are not images, and never read.
 */
export function isImageManifest(
  mediaType: string,
  artifactType: string | null | undefined,
  layerMediaTypes: readonly string[],
): boolean {
  return (
    (mediaType === OCI_MANIFEST || mediaType === DOCKER_MANIFEST) &&
    IMAGE_CONFIG_TYPES.includes(artifactType ?? "") &&
    (layerMediaTypes.length === 0 || layerMediaTypes.some(isTarLayer))
  );
}

/** An image manifest's layers' media types (the manifest as stored, so valid JSON). */
function layerMediaTypesOf(content: Uint8Array): string[] {
  const doc = JSON.parse(Buffer.from(content).toString("utf8")) as { layers?: { mediaType?: unknown }[] };
  return (doc.layers ?? []).map((l) => (typeof l.mediaType === "string" ? l.mediaType : ""));
}

/** Image manifests read per page by `imageManifests` (their contents are looked at). */
const IMAGE_MANIFESTS_PAGE = 500;

/** The registry's exports about image contents (RegistryExports extends this). */
export interface ImageAccess {
  /**
   * `listener` runs inside every successful manifest push's transaction, after the manifest is
   * stored; for a push of a manifest the repo held already, after that push committed
   */
  onManifestStored(listener: ManifestStoredListener): void;
  /** `then` runs once the calling push (or any transaction scope) committed; at once outside one */
  afterPushCommits(then: () => void): void;
  /** a manifest by digest, from whichever repo holds it */
  manifestOf(digest: string): Promise<{ mediaType: string; content: Uint8Array } | undefined>;
  /** a manifest of one repo */
  manifestIn(repoUid: string, digest: string): Promise<{ mediaType: string; content: Uint8Array } | undefined>;
  /**
   * the manifests whose subject is `digest`, of the given artifact types, in the repos holding
   * `digest` — none when repos of several organizations hold it (see `referrerHonoured`);
   * newest first, each digest once
   */
  referrersOf(digest: string, artifactTypes: readonly string[]): Promise<StoredReferrer[]>;
  /**
   * whether a referrer pushed to `repoUid` speaks for `subjectDigest`: the repo holds the subject,
   * and every repo holding it is in the repo's organization
   */
  referrerHonoured(repoUid: string, subjectDigest: string): Promise<boolean>;
  /** the repos holding the manifest `digest` (sorted) */
  reposHolding(digest: string): Promise<string[]>;
  /** the repos holding each of `digests` (sorted; a digest no repo holds is absent), in one query */
  reposHoldingMany(digests: readonly string[]): Promise<Map<string, string[]>>;
  /** the digest a tag of a repo points at */
  resolveTag(repoUid: string, tag: string): Promise<string | undefined>;
  /** every stored image manifest's digest (each once, sorted): for queueing what was pushed before the images module */
  imageManifests(): Promise<string[]>;
}

/** The listeners of manifest pushes: the push path calls `stored`. */
export class ManifestHooks {
  readonly #listeners: ManifestStoredListener[] = [];

  add(listener: ManifestStoredListener): void {
    this.#listeners.push(listener);
  }

  async stored(manifest: StoredManifest): Promise<void> {
    for (const listener of this.#listeners) await listener(manifest);
  }
}

/** The reads, over the registry's tables. */
export function imageAccess(db: Db, tags: TagsRepository, hooks: ManifestHooks): ImageAccess {
  const registry = registryDb(db);
  return {
    onManifestStored: (listener) => hooks.add(listener),
    afterPushCommits: afterCommit,
    manifestOf: (digest) => manifestWhere(registry, digest),
    manifestIn: (repoUid, digest) => manifestWhere(registry, digest, repoUid),
    referrersOf: (digest, artifactTypes) => referrersInHoldingRepos(registry, digest, artifactTypes),
    async referrerHonoured(repoUid, subjectDigest) {
      // An organization is the first 40 hex digits of its repos' uids (the root group's uid).
      const { rows } = await sql<{ honoured: boolean }>`
        select exists (select 1 from manifests where repo_uid = ${repoUid} and digest = ${subjectDigest})
          and not exists (
            select 1 from manifests where digest = ${subjectDigest} and left(repo_uid, 40) <> left(${repoUid}, 40)
          ) as honoured`.execute(registry);
      return rows[0]?.honoured === true;
    },
    async reposHolding(digest) {
      const rows = await registry
        .selectFrom("manifests")
        .select("repo_uid")
        .where("digest", "=", digest)
        .orderBy("repo_uid")
        .execute();
      return rows.map((r) => r.repo_uid);
    },
    async reposHoldingMany(digests) {
      const holding = new Map<string, string[]>();
      if (digests.length === 0) return holding;
      // One array parameter: the statement's text stays the same whatever the number of digests.
      const rows = await registry
        .selectFrom("manifests")
        .select(["digest", "repo_uid"])
        .where(sql<boolean>`digest = any(${sql.val([...digests])}::text[])`)
        .orderBy("digest")
        .orderBy("repo_uid")
        .execute();
      for (const r of rows) {
        const repos = holding.get(r.digest);
        if (repos) repos.push(r.repo_uid);
        else holding.set(r.digest, [r.repo_uid]);
      }
      return holding;
    },
    resolveTag: (repoUid, tag) => tags.digestOf(repoUid, tag),
    async imageManifests() {
      const digests: string[] = [];
      // A page at a time: the layers are in the content, and a registry may hold many manifests.
      for (let after = ""; ;) {
        const rows = await registry
          .selectFrom("manifests")
          .select(["digest", "media_type", "artifact_type", "content"])
          .distinctOn("digest")
          .where("media_type", "in", [OCI_MANIFEST, DOCKER_MANIFEST])
          .where("artifact_type", "in", [...IMAGE_CONFIG_TYPES])
          .where("digest", ">", after)
          .orderBy("digest")
          .limit(IMAGE_MANIFESTS_PAGE)
          .execute();
        for (const r of rows)
          if (isImageManifest(r.media_type, r.artifact_type, layerMediaTypesOf(r.content))) digests.push(r.digest);
        if (rows.length < IMAGE_MANIFESTS_PAGE) return digests;
        after = rows[rows.length - 1]!.digest;
      }
    },
  };
}

async function manifestWhere(
  db: RegistryDb,
  digest: string,
  repoUid?: string,
): Promise<{ mediaType: string; content: Uint8Array } | undefined> {
  let query = db.selectFrom("manifests").select(["media_type", "content"]).where("digest", "=", digest);
  if (repoUid !== undefined) query = query.where("repo_uid", "=", repoUid);
  const row = await query.limit(1).executeTakeFirst();
  return row && { mediaType: row.media_type, content: row.content };
}

async function referrersInHoldingRepos(
  db: RegistryDb,
  digest: string,
  artifactTypes: readonly string[],
): Promise<StoredReferrer[]> {
  if (artifactTypes.length === 0) return [];
  // Only referrers in a repo that holds the image, while its holders are of one organization
  // (the first 40 hex digits of a repo's uid). The same referrer pushed to several repos is one
  // document: its newest copy answers.
  const { rows } = await sql<{
    repo_uid: string;
    digest: string;
    media_type: string;
    artifact_type: string | null;
    annotations: Record<string, string> | null;
    create_time: Date;
  }>`
    select * from (
      select distinct on (r.digest) r.repo_uid, r.digest, r.media_type, r.artifact_type, r.annotations, r.create_time
      from manifests held
      join manifests r on r.repo_uid = held.repo_uid and r.subject_digest = held.digest
      where held.digest = ${digest} and r.artifact_type = any(${[...artifactTypes]}::text[])
        and (select count(distinct left(h.repo_uid, 40)) from manifests h where h.digest = ${digest}) = 1
      order by r.digest, r.create_time desc, r.repo_uid
    ) r
    order by create_time desc, digest
    limit 1000`.execute(db);
  return rows.map((r) => ({
    repoUid: r.repo_uid,
    digest: r.digest,
    mediaType: r.media_type,
    artifactType: r.artifact_type,
    annotations: r.annotations,
    createTime: new Date(r.create_time),
  }));
}
