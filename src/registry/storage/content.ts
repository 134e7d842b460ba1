// The OCI distribution API's view of the registry tables: names resolved to groups and repos,
// blobs and their links, manifests and what they reference, tags moved by pushes, upload
// sessions, discovery (tags, catalog, referrers, history). Plain SQL through Kysely; no
// transaction is ever held open across a request or response body (PGlite has one connection).
import { sql, type Kysely, type Transaction } from "kysely";
import { newChildUidp } from "../../core/uidp.js";
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, sqlState } from "../../storage/errors.js";

type Db = Kysely<any>;
type Executor = Db | Transaction<any>;

export interface RepoRef {
  uid: string;
  parent_uid: string;
  name: string;
  public: boolean;
}

export interface BlobRow {
  digest: string;
  size: number;
}

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

export interface UploadRow {
  id: string;
  repo_uid: string;
  size: number;
  update_time: Date;
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

export class RegistryContent {
  constructor(private readonly db: Db) {}

  // --- repos (name resolution and the catalog) ---

  async ref(parentUid: string, name: string): Promise<RepoRef | undefined> {
    const r = await sql<RepoRef>`
      select uid, parent_uid, name, public from repos where parent_uid = ${parentUid} and name = ${name}`.execute(
      this.db,
    );
    return r.rows[0];
  }

  /** The repo, created on first push (its uid is new); concurrent first pushes agree on one. */
  async ensureRepo(parentUid: string, name: string, now: Date): Promise<RepoRef | undefined> {
    try {
      await sql`
        insert into repos (uid, parent_uid, name, create_time, update_time)
        values (${newChildUidp(parentUid)}, ${parentUid}, ${name}, ${now}, ${now})
        on conflict (parent_uid, name) do nothing`.execute(this.db);
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return undefined;
      throw err;
    }
    return this.ref(parentUid, name);
  }

  /** Every repo under the given subtrees ("all": everywhere): its path and group. */
  async catalog(visibility: "all" | readonly string[]): Promise<{ name: string; parent_uid: string }[]> {
    const within =
      visibility === "all"
        ? sql`true`
        : sql.join(
            visibility.map((v) => sql`(r.uid like ${v.replace(/[\\%_]/g, "\\$&") + "/%"})`),
            sql` or `,
          );
    const r = await sql<{ name: string; parent_uid: string }>`
      select r.name, r.parent_uid from repos r where ${within}`.execute(this.db);
    return r.rows;
  }

  // --- blobs ---

  /** The blob if `repo` holds it. */
  async blob(repoUid: string, digest: string): Promise<BlobRow | undefined> {
    const r = await sql<BlobRow>`
      select b.digest, b.size from repo_blobs l join blobs b on b.digest = l.digest
      where l.repo_uid = ${repoUid} and l.digest = ${digest}`.execute(this.db);
    const row = r.rows[0];
    return row && { digest: row.digest, size: num(row.size) };
  }

  /**
   * Records a complete blob and links it into a repo, ending the upload session if any; false when
   * the repo was deleted meanwhile. `placeBytes` moves the bytes into place last, while this
   * transaction holds the blob's row: a garbage collector removing the same digest either finished
   * first (its row and bytes are gone, and these bytes arrive afresh) or waits until the link
   * stands and then keeps the blob. A push stays whole however short the grace window.
   */
  async storeBlob(
    repoUid: string,
    digest: string,
    size: number,
    now: Date,
    uploadId: string | undefined,
    placeBytes: () => Promise<void>,
  ): Promise<boolean> {
    try {
      await this.db.transaction().execute(async (trx) => {
        await sql`
          insert into blobs (digest, size, create_time, touch_time) values (${digest}, ${size}, ${now}, ${now})
          on conflict (digest) do update set touch_time = excluded.touch_time`.execute(trx);
        await sql`
          insert into repo_blobs (repo_uid, digest, link_time) values (${repoUid}, ${digest}, ${now})
          on conflict (repo_uid, digest) do update set link_time = excluded.link_time`.execute(trx);
        if (uploadId) await sql`delete from uploads where id = ${uploadId}`.execute(trx);
        // Last, so nothing can roll back after the bytes are in place but the commit itself.
        await placeBytes();
      });
      return true;
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return false;
      throw err;
    }
  }

  /** Cross-repository mount: links `digest` into `repoUid` if `fromUid` holds it. */
  async mountBlob(repoUid: string, fromUid: string, digest: string, now: Date): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      // Locked, so a collector cannot take the source link (and then the blob) before this link stands.
      const held = await sql`
        select 1 from repo_blobs where repo_uid = ${fromUid} and digest = ${digest} for share`.execute(trx);
      if (!held.rows.length) return false;
      await sql`update blobs set touch_time = ${now} where digest = ${digest}`.execute(trx);
      await sql`
        insert into repo_blobs (repo_uid, digest, link_time) values (${repoUid}, ${digest}, ${now})
        on conflict (repo_uid, digest) do update set link_time = excluded.link_time`.execute(trx);
      return true;
    });
  }

  /** Unlinks a blob from a repo; refused while a manifest there needs it. */
  async unlinkBlob(repoUid: string, digest: string): Promise<DeleteManifestResult> {
    try {
      const r = await sql`delete from repo_blobs where repo_uid = ${repoUid} and digest = ${digest}`.execute(this.db);
      return num(r.numAffectedRows ?? 0) > 0 ? { kind: "deleted" } : { kind: "not_found" };
    } catch (err) {
      if (sqlState(err) !== FOREIGN_KEY_VIOLATION) throw err;
      const by = await sql<{ manifest_digest: string }>`
        select manifest_digest from manifest_blobs where repo_uid = ${repoUid} and blob_digest = ${digest} limit 1`.execute(
        this.db,
      );
      return { kind: "referenced", by: by.rows[0]?.manifest_digest ?? "a manifest" };
    }
  }

  // --- uploads ---

  async createUpload(id: string, repoUid: string, now: Date): Promise<void> {
    await sql`insert into uploads (id, repo_uid, size, create_time, update_time)
      values (${id}, ${repoUid}, 0, ${now}, ${now})`.execute(this.db);
  }

  async upload(id: string, repoUid: string): Promise<UploadRow | undefined> {
    const r = await sql<UploadRow>`
      select id, repo_uid, size, update_time from uploads where id = ${id} and repo_uid = ${repoUid}`.execute(this.db);
    const row = r.rows[0];
    return row && { ...row, size: num(row.size) };
  }

  /** Records bytes appended to an upload, if nobody else moved it meanwhile. */
  async advanceUpload(id: string, from: number, to: number, now: Date): Promise<boolean> {
    const r = await sql`update uploads set size = ${to}, update_time = ${now}
      where id = ${id} and size = ${from}`.execute(this.db);
    return num(r.numAffectedRows ?? 0) === 1;
  }

  async deleteUpload(id: string): Promise<boolean> {
    const r = await sql`delete from uploads where id = ${id}`.execute(this.db);
    return num(r.numAffectedRows ?? 0) === 1;
  }

  // --- manifests and tags ---

  async digestOfTag(repoUid: string, tag: string): Promise<string | undefined> {
    const r = await sql<{ digest: string }>`
      select digest from tags where repo_uid = ${repoUid} and name = ${tag}`.execute(this.db);
    return r.rows[0]?.digest;
  }

  async manifest(repoUid: string, digest: string, withContent: boolean): Promise<ManifestRow | undefined> {
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
  async putManifest(m: NewManifest): Promise<PutManifestResult> {
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
        if (m.tag !== undefined) await moveTag(trx, m.repoUid, m.tag, m.digest, m.now);
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

  /** Deletes a tag; false when there was none. */
  async deleteTag(repoUid: string, tag: string): Promise<boolean> {
    const r = await sql`delete from tags where repo_uid = ${repoUid} and name = ${tag}`.execute(this.db);
    return num(r.numAffectedRows ?? 0) > 0;
  }

  /** Deletes a manifest and every tag pointing at it; refused while an index in the repo names it. */
  async deleteManifest(repoUid: string, digest: string): Promise<DeleteManifestResult> {
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

  /** Tag names after `last`, in byte order; one more than `limit` tells whether more remain. */
  async tagNames(repoUid: string, last: string | undefined, limit: number): Promise<string[]> {
    // One JSON array instead of a row per tag: thousands of rows cost PGlite far more than one value.
    const r = await sql<{ names: string[] | string | null }>`
      select json_agg(name order by name) as names from (
        select name from tags where repo_uid = ${repoUid} ${last === undefined ? sql`` : sql`and name > ${last}`}
        order by name limit ${limit}) page`.execute(this.db);
    const names = r.rows[0]?.names ?? [];
    return typeof names === "string" ? (JSON.parse(names) as string[]) : names;
  }

  async referrers(repoUid: string, subject: string, artifactType?: string): Promise<ReferrerRow[]> {
    const filter = artifactType === undefined ? sql`` : sql`and artifact_type = ${artifactType}`;
    const r = await sql<ReferrerRow>`
      select digest, media_type, size, artifact_type, annotations from manifests
      where repo_uid = ${repoUid} and subject_digest = ${subject} ${filter}
      order by create_time, digest limit 10000`.execute(this.db);
    return r.rows.map((row) => ({ ...row, size: num(row.size) }));
  }

  async tagHistory(
    repoUid: string,
    tag: string,
    start: Date | undefined,
    end: Date | undefined,
    limit: number,
  ): Promise<{ digest: string; update_time: Date }[]> {
    const r = await sql<{ digest: string; update_time: Date }>`
      select digest, update_time from tag_history
      where repo_uid = ${repoUid} and tag = ${tag}
        ${start ? sql`and update_time >= ${start}` : sql``} ${end ? sql`and update_time <= ${end}` : sql``}
      order by update_time, id limit ${limit}`.execute(this.db);
    return r.rows;
  }
}

async function firstMissing(db: Executor, m: NewManifest): Promise<PutManifestResult | undefined> {
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

/** Points `tag` at `digest` (creating it with a fresh uid); the tag_history trigger records the move. */
async function moveTag(trx: Transaction<any>, repoUid: string, tag: string, digest: string, now: Date): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await sql`
        insert into tags (uid, repo_uid, name, digest, update_time)
        values (${newChildUidp(repoUid)}, ${repoUid}, ${tag}, ${digest}, ${now})
        on conflict (repo_uid, name) do update set digest = excluded.digest, update_time = excluded.update_time
        where tags.digest is distinct from excluded.digest`.execute(trx);
      return;
    } catch (err) {
      // A uid collision (64 random bits) is retried; anything else is not ours to handle.
      if (sqlState(err) !== UNIQUE_VIOLATION || attempt > 2) throw err;
    }
  }
}
