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
import { parseManifest } from "./oci/manifest.js";
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

export function artifactPusher(deps: ArtifactDeps): ArtifactPusher {
  return {
    async pushArtifact(repoUid, artifact) {
      const parsed = parseManifest(artifact.manifest, artifact.mediaType);
      const digest = digestOf(artifact.manifest, "sha256");
      if (await deps.manifests.get(repoUid, digest, false)) return { digest, stored: false };
      const repository = await deps.repoName(repoUid);
      if (repository === undefined) throw new Error(`no repo ${repoUid} to push an artifact to`);
      const given = new Map(artifact.blobs.map((b) => [digestOf(b, "sha256"), b]));
      for (const needed of parsed.blobs)
        if (!given.has(needed)) throw new Error(`the artifact's manifest names the blob ${needed}, not given`);

      // The bytes are staged first (as an upload's are, outside the transaction) and moved into
      // place by the blob's record, as a completed upload's are.
      const staged = new Map<string, string>();
      try {
        for (const [blobDigest, bytes] of given) {
          const uploadId = randomUUID();
          staged.set(blobDigest, uploadId);
          await deps.store.appendUpload(uploadId, 0, Readable.from([Buffer.from(bytes)]));
        }
        const now = deps.now();
        const event = (type: "blob" | "manifest", what: string) =>
          deps.events.record({
            type: PUSH_EVENT,
            source: "registry",
            subject: repoUid,
            group: parentOf(repoUid),
            actor: { subject: SERVER_SUBJECT },
            // the body a client's push has (registry/oci/events.ts); no client: no address or agent
            body: {
              repository,
              repo_id: repoUid,
              digest: what,
              type,
              remote_address: "",
              location: "",
              user_agent: "",
              when: now.toISOString().replace(/Z$/, ""),
            },
          });
        await withinTransaction(deps.db, async () => {
          for (const [blobDigest, bytes] of given) {
            const uploadId = staged.get(blobDigest)!;
            const ok = await deps.blobs.store(repoUid, blobDigest, bytes.length, now, undefined, () =>
              deps.store.commitUpload(uploadId, blobDigest, bytes.length),
            );
            if (!ok) throw new Error(`the repo ${repoUid} was deleted while an artifact was pushed to it`);
            staged.delete(blobDigest);
            await event("blob", blobDigest);
          }
          const put = await deps.manifests.put({
            repoUid,
            digest,
            mediaType: parsed.mediaType,
            content: artifact.manifest,
            artifactType: parsed.artifactType,
            subject: parsed.subject,
            annotations: parsed.annotations,
            blobs: parsed.blobs,
            children: parsed.children,
            now,
          });
          if (put.kind !== "ok") throw new Error(`the artifact's manifest names the unknown ${put.digest}`);
          await event("manifest", digest);
          await deps.manifestHooks.stored({
            repoUid,
            digest,
            mediaType: parsed.mediaType,
            artifactType: parsed.artifactType,
            subjectDigest: parsed.subject,
            annotations: parsed.annotations,
          });
        });
        return { digest, stored: true };
      } finally {
        // what a failure left staged (a committed upload's staging is gone already)
        for (const uploadId of staged.values()) await deps.store.deleteUpload(uploadId).catch(() => undefined);
      }
    },
  };
}
