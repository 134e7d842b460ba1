// Artifacts the server itself pushes into a repo (the images module's generated SBOMs, attached
// to their image as OCI referrers): blobs and a manifest stored as a client's push stores them —
// the same validation, the same tables, the push events and the manifest hooks — in one
// transaction, with the server as the events' actor.
import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { parentOf } from "../core/uidp.js";
import type { EventJournal } from "../platform/events.js";
import { withinTransaction } from "../storage/ambient-transaction.js";
import type { Db } from "../storage/db.js";
import type { ManifestHooks } from "./image-access.js";
import { digestOf } from "./oci/digest.js";
import { PUSH_EVENT } from "./oci/events.js";
import { parseManifest, type ParsedManifest } from "./oci/manifest.js";
import type { BlobStore } from "./storage/blob-store.js";
import type { BlobsRepository } from "./storage/blobs.js";
import type { ManifestsRepository } from "./storage/manifests.js";

/** The actor of what the server does on its own (no caller asked for it). */
export const SERVER_SUBJECT = "bulwark:server";

/** An artifact to push: its manifest (with its media type) and every blob it references. */
export interface Artifact {
  mediaType: string;
  manifest: Uint8Array;
  blobs: Uint8Array[];
}

export interface ArtifactPusher {
  /**
   * Stores the artifact in the repo as a push would; answers its manifest's digest and whether
   * it was stored now (false: the repo held it already, so nothing changed and no event).
   * Throws when the repo is gone or the manifest is invalid or names a blob not given.
   */
  pushArtifact(repoUid: string, artifact: Artifact): Promise<{ digest: string; stored: boolean }>;
}

export interface ArtifactDeps {
  db: Db;
  blobs: BlobsRepository;
  manifests: ManifestsRepository;
  store: BlobStore;
  events: EventJournal;
  manifestHooks: ManifestHooks;
  repoName(repoUid: string): Promise<string | undefined>;
  now(): Date;
}

/** `server`: the module context's database, event journal and clock. */
export function artifactPusher(
  server: Pick<ArtifactDeps, "db" | "events" | "now">,
  registry: Omit<ArtifactDeps, "db" | "events" | "now">,
): ArtifactPusher {
  const deps: ArtifactDeps = { db: server.db, events: server.events, now: server.now, ...registry };
  return {
    async pushArtifact(repoUid, artifact) {
      const parsed = parseManifest(artifact.manifest, artifact.mediaType);
      const digest = digestOf(artifact.manifest, "sha256");
      if (await deps.manifests.get(repoUid, digest, false)) return { digest, stored: false };
      const repository = await deps.repoName(repoUid);
      if (repository === undefined) throw new Error(`no repo ${repoUid} to push an artifact to`);
      const blobs = new Map(artifact.blobs.map((b) => [digestOf(b, "sha256"), b]));
      for (const needed of parsed.blobs)
        if (!blobs.has(needed)) throw new Error(`the artifact's manifest names the blob ${needed}, not given`);
      // The bytes are staged first (as an upload's are, outside the transaction) and moved into
      // place by the blob's record, as a completed upload's are.
      const staged = new Map<string, string>();
      try {
        for (const [blobDigest, bytes] of blobs) {
          const uploadId = randomUUID();
          staged.set(blobDigest, uploadId);
          await deps.store.appendUpload(uploadId, 0, Readable.from([Buffer.from(bytes)]));
        }
        await withinTransaction(deps.db, () =>
          storeArtifact(deps, { repoUid, repository, digest, parsed, content: artifact.manifest, blobs, staged }),
        );
        return { digest, stored: true };
      } finally {
        // what a failure left staged (a committed upload's staging is gone already)
        for (const uploadId of staged.values()) await deps.store.deleteUpload(uploadId).catch(() => undefined);
      }
    },
  };
}

interface StagedArtifact {
  repoUid: string;
  /** the repo's name, for the events */
  repository: string;
  digest: string;
  parsed: ParsedManifest;
  content: Uint8Array;
  blobs: Map<string, Uint8Array>;
  /** upload ids by blob digest; a blob's is removed once its bytes are in place */
  staged: Map<string, string>;
}

/** The blobs' records (placing their bytes), the manifest, their push events and the manifest hooks: inside a transaction. */
async function storeArtifact(deps: ArtifactDeps, a: StagedArtifact): Promise<void> {
  const now = deps.now();
  for (const [blobDigest, bytes] of a.blobs) {
    const uploadId = a.staged.get(blobDigest)!;
    const ok = await deps.blobs.store(a.repoUid, blobDigest, bytes.length, now, undefined, () =>
      deps.store.commitUpload(uploadId, blobDigest, bytes.length),
    );
    if (!ok) throw new Error(`the repo ${a.repoUid} was deleted while an artifact was pushed to it`);
    a.staged.delete(blobDigest);
    await recordPush(deps, a, now, "blob", blobDigest);
  }
  const { parsed } = a;
  const put = await deps.manifests.put({
    repoUid: a.repoUid,
    digest: a.digest,
    mediaType: parsed.mediaType,
    content: a.content,
    artifactType: parsed.artifactType,
    subject: parsed.subject,
    annotations: parsed.annotations,
    blobs: parsed.blobs,
    children: parsed.children,
    now,
  });
  if (put.kind !== "ok") throw new Error(`the artifact's manifest names the unknown ${put.digest}`);
  await recordPush(deps, a, now, "manifest", a.digest);
  await deps.manifestHooks.stored({
    repoUid: a.repoUid,
    digest: a.digest,
    mediaType: parsed.mediaType,
    artifactType: parsed.artifactType,
    subjectDigest: parsed.subject,
    annotations: parsed.annotations,
    layerMediaTypes: parsed.layerMediaTypes,
    created: put.created,
  });
}

/** The push event a client's push records (registry/oci/events.ts), the server its actor; no client: no address or agent. */
function recordPush(
  deps: ArtifactDeps,
  a: StagedArtifact,
  now: Date,
  type: "blob" | "manifest",
  digest: string,
): Promise<void> {
  return deps.events.record({
    type: PUSH_EVENT,
    source: "registry",
    subject: a.repoUid,
    group: parentOf(a.repoUid),
    actor: { subject: SERVER_SUBJECT },
    body: {
      repository: a.repository,
      repo_id: a.repoUid,
      digest,
      type,
      remote_address: "",
      location: "",
      user_agent: "",
      when: now.toISOString().replace(/Z$/, ""),
    },
  });
}
