// Manifests: stored per repo by digest, with the blobs and child manifests they need (foreign
// keys: a manifest cannot name a blob its repo does not hold, an index a manifest its repo does
// not hold), their subject (the referrers API) and the tag a push moves with them.
import { sql } from "kysely";
import type { Db } from "../../storage/db.js";
import { FOREIGN_KEY_VIOLATION, sqlState } from "../../storage/errors.js";
import { RegistryRepository, type RegistryDb } from "./tables.js";
import type { TagsRepository } from "./tags.js";

export interface ManifestRow {
  digest: string;
  media_type: string;
  size: number;
  content: Uint8Array;
}

export interface ReferrerRow {
  digest: string;
  media_type: string;
  size: number;
  artifact_type: string | null;
  annotations: Record<string, string> | null;
}

/** What a manifest PUT stores: the bytes and what they reference, already validated. */
export interface NewManifest {
  repoUid: string;
  digest: string;
  mediaType: string;
  content: Uint8Array;
  artifactType?: string;
  subject?: string;
  annotations?: Record<string, string>;
  blobs: string[];
  children: string[];
  tag?: string;
  now: Date;
}

export type PutManifestResult =
  { kind: "ok" } | { kind: "blob_unknown"; digest: string } | { kind: "manifest_unknown"; digest: string };

export type DeleteManifestResult = { kind: "deleted" } | { kind: "not_found" } | { kind: "referenced"; by: string };

const num = (v: unknown) => Number(v);

export class ManifestsRepository extends RegistryRepository {
  constructor(
    db: Db,
    /** moves a pushed tag in the push's transaction */
    private readonly tags: TagsRepository,
  ) {
    super(db);
  }

  async get(repoUid: string, digest: string, withContent: boolean): Promise<ManifestRow | undefined> {
    const content = withContent ? sql`content` : sql`null::bytea as content`;
    const r = await sql<ManifestRow>`
      select digest, media_type, size, ${content} from manifests
      where repo_uid = ${repoUid} and digest = ${digest}`.execute(this.db);
    const row = r.rows[0];
    return row && { ...row, size: num(row.size) };
  }

  /**
   * Stores a manifest with its references and moves the tag, in one transaction. Every blob it
   * names must be linked into the repo and every child manifest stored there; the foreign keys
   * hold that even against a concurrent delete or garbage collection.
   */
  async put(m: NewManifest): Promise<PutManifestResult> {
    try {
      return await this.db.transaction().execute(async (trx) => {
        const missing = await firstMissing(trx, m);
        if (missing) return missing;
        await sql`
          insert into manifests (repo_uid, digest, media_type, artifact_type, subject_digest, annotations, size,
                                 content, create_time)
          values (${m.repoUid}, ${m.digest}, ${m.mediaType}, ${m.artifactType ?? null}, ${m.subject ?? null},
                  ${m.annotations ? JSON.stringify(m.annotations) : null}::jsonb, ${m.content.length}, ${m.content},
                  ${m.now})
          on conflict (repo_uid, digest) do nothing`.execute(trx);
        for (const blob of new Set(m.blobs))
          await sql`insert into manifest_blobs (repo_uid, manifest_digest, blob_digest)
            values (${m.repoUid}, ${m.digest}, ${blob}) on conflict do nothing`.execute(trx);
        for (const child of new Set(m.children))
          await sql`insert into manifest_children (repo_uid, manifest_digest, child_digest)
            values (${m.repoUid}, ${m.digest}, ${child}) on conflict do nothing`.execute(trx);
        if (m.tag !== undefined) await this.tags.move(m.repoUid, m.tag, m.digest, m.now, trx);
        return { kind: "ok" } as const;
      });
    } catch (err) {
      // A reference removed between the check and the insert (a concurrent delete).
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) {
        const missing = await firstMissing(this.db, m);
        if (missing) return missing;
      }
      throw err;
    }
  }

  /** Deletes a manifest and every tag pointing at it; refused while an index in the repo names it. */
  async delete(repoUid: string, digest: string): Promise<DeleteManifestResult> {
    try {
      return await this.db.transaction().execute(async (trx) => {
        const r = await sql`delete from manifests where repo_uid = ${repoUid} and digest = ${digest}`.execute(trx);
        if (num(r.numAffectedRows ?? 0) === 0) return { kind: "not_found" } as const;
        await sql`delete from tags where repo_uid = ${repoUid} and digest = ${digest}`.execute(trx);
        return { kind: "deleted" } as const;
      });
    } catch (err) {
      if (sqlState(err) !== FOREIGN_KEY_VIOLATION) throw err;
      const by = await sql<{ manifest_digest: string }>`
        select manifest_digest from manifest_children where repo_uid = ${repoUid} and child_digest = ${digest}
        limit 1`.execute(this.db);
      return { kind: "referenced", by: by.rows[0]?.manifest_digest ?? "an index" };
    }
  }

  async referrers(repoUid: string, subject: string, artifactType?: string): Promise<ReferrerRow[]> {
    const filter = artifactType === undefined ? sql`` : sql`and artifact_type = ${artifactType}`;
    const r = await sql<ReferrerRow>`
      select digest, media_type, size, artifact_type, annotations from manifests
      where repo_uid = ${repoUid} and subject_digest = ${subject} ${filter}
      order by create_time, digest limit 10000`.execute(this.db);
    return r.rows.map((row) => ({ ...row, size: num(row.size) }));
  }
}

async function firstMissing(db: RegistryDb, m: NewManifest): Promise<PutManifestResult | undefined> {
  if (m.blobs.length) {
    const have = await sql<{ digest: string }>`
      select digest from repo_blobs where repo_uid = ${m.repoUid} and digest in (${sql.join(m.blobs)})`.execute(db);
    const held = new Set(have.rows.map((r) => r.digest));
    const absent = m.blobs.find((d) => !held.has(d));
    if (absent) return { kind: "blob_unknown", digest: absent };
  }
  if (m.children.length) {
    const have = await sql<{ digest: string }>`
      select digest from manifests where repo_uid = ${m.repoUid} and digest in (${sql.join(m.children)})`.execute(db);
    const held = new Set(have.rows.map((r) => r.digest));
    const absent = m.children.find((d) => !held.has(d));
    if (absent) return { kind: "manifest_unknown", digest: absent };
  }
  return undefined;
}
