// Manifests: stored per repo by digest, with the blobs and child manifests they need (foreign
// keys: a manifest cannot name a blob its repo does not hold, an index a manifest its repo does
// not hold), their subject (the referrers API) and the tag a push moves with them.
import { sql, type RawBuilder } from "kysely";
import { compiledOnce } from "../../storage/compiled.js";
import type { Db } from "../../storage/db.js";
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, constraintOf, sqlState } from "../../storage/errors.js";
import { RegistryRepository, type AliasedBuilder, type RegistryDb } from "./tables.js";
import type { TagsRepository } from "./tags.js";

export interface ManifestRow {
  digest: string;
  media_type: string;
  size: number;
  /** null when not asked for */
  content: Uint8Array | null;
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
  /** created: whether the manifest is new in the repo (false: it was there, only a tag moved) */
  | { kind: "ok"; created: boolean }
  | { kind: "blob_unknown"; digest: string }
  | { kind: "manifest_unknown"; digest: string };

/** A push's event for its statement to insert: the platform's EventInsert, restated (a feature's storage imports no service code). */
export interface InsertWithin {
  ctes: RawBuilder<unknown>;
  columns: RawBuilder<unknown>;
  inserted(row: { event_seq?: unknown; event_deliveries?: unknown } | undefined): void;
}

export type DeleteManifestResult = { kind: "deleted" } | { kind: "not_found" } | { kind: "referenced"; by: string };

export class ManifestsRepository extends RegistryRepository {
  constructor(
    db: Db,
    /** moves a pushed tag in the push's transaction */
    private readonly tags: TagsRepository,
  ) {
    super(db);
  }

  /** The manifest, with its bytes unless `withContent` is false (a HEAD). */
  async get(repoUid: string, digest: string, withContent: boolean): Promise<ManifestRow | undefined> {
    const [row] = await (withContent ? manifestWithContent : manifestWithoutContent)(this.db, repoUid, digest);
    return row && { ...row, size: Number(row.size) };
  }

  /**
   * Stores a manifest with its references and moves the tag, in one statement whatever the number
   * of references (a push naming 200 layers costs what a push naming one does). Every blob it
   * names must be linked into the repo and every child manifest stored there: the foreign keys
   * hold that, even against a concurrent delete or garbage collection, and when they refuse the
   * push the first reference missing is looked up. A manifest the repo holds already is left as
   * it is (its references were stored with it): only the tag moves.
   */
  async put(m: NewManifest): Promise<PutManifestResult> {
    for (let attempt = 0; ; attempt++) {
      try {
        // A transaction of its own (a savepoint inside a push's): a refused statement leaves the
        // caller's transaction usable for the look-up below.
        return await this.db.transaction().execute(async (trx) => {
          const { rows } = await this.#putStatement(m).execute(trx);
          return { kind: "ok", created: rows[0]?.created === true } as const;
        });
      } catch (err) {
        if (sqlState(err) === FOREIGN_KEY_VIOLATION) {
          const missing = await firstMissing(this.db, m);
          if (missing) return missing;
        }
        // A new tag's uid collided (64 random bits): tried again with another.
        if (sqlState(err) === UNIQUE_VIOLATION && constraintOf(err) === "tags_pkey" && attempt < 3) continue;
        throw err;
      }
    }
  }

  /**
   * A push of a manifest the repo holds already (a new tag on an image): moves the tag (if any)
   * and inserts the push's event in one statement, so neither needs a transaction; nothing when
   * the repo does not hold it (false: push it whole with `put`). The manifest's row is locked
   * until the statement ends, so a garbage collection deleting it meanwhile either finished
   * first (then it is not held) or waits.
   */
  async pushHeld(
    m: { repoUid: string; digest: string; tag?: string; now: Date },
    event: (held: RawBuilder<unknown>) => InsertWithin,
  ): Promise<boolean> {
    const source = sql`held`;
    for (let attempt = 0; ; attempt++) {
      const insert = event(sql`exists (select 1 from held)`);
      const tagMove =
        m.tag === undefined ? sql`select 1` : this.tags.moveStatement(m.repoUid, m.tag, m.digest, m.now, source);
      try {
        const { rows } = await sql<{ held: boolean; event_seq: unknown; event_deliveries: unknown }>`
          with held as (
            select 1 from manifests where repo_uid = ${m.repoUid} and digest = ${m.digest} for key share
          ),
          t as (${tagMove}),
          ${insert.ctes}
          select exists (select 1 from held) as held, ${insert.columns}`.execute(this.db);
        insert.inserted(rows[0]);
        return rows[0]?.held === true;
      } catch (err) {
        // A new tag's uid collided (64 random bits): tried again with another.
        if (sqlState(err) === UNIQUE_VIOLATION && constraintOf(err) === "tags_pkey" && attempt < 3) continue;
        throw err;
      }
    }
  }

  /**
   * The manifest's row, its references (each once, only when the row is new) and the tag's move,
   * as one statement: the references' rows are checked against their foreign keys at its end.
   * Its text is the same whatever the number of references (arrays), so PostgreSQL prepares it once.
   * The bytes travel as base64 text, decoded by the database: PGlite's own encoding of a bytea
   * parameter takes milliseconds for a manifest of 30 KB (200 layers), base64 microseconds.
   */
  #putStatement(m: NewManifest) {
    const tagMove = m.tag === undefined ? sql`select 1` : this.tags.moveStatement(m.repoUid, m.tag, m.digest, m.now);
    return sql<{ created: boolean }>`
      with m as (
        insert into manifests (repo_uid, digest, media_type, artifact_type, subject_digest, annotations, size, content, create_time)
        values (${m.repoUid}, ${m.digest}, ${m.mediaType}, ${m.artifactType ?? null}, ${m.subject ?? null},
          ${m.annotations ? JSON.stringify(m.annotations) : null}::jsonb, ${m.content.length}, decode(${base64(m.content)}, 'base64'), ${m.now})
        on conflict (repo_uid, digest) do nothing
        returning repo_uid, digest
      ),
      b as (
        insert into manifest_blobs (repo_uid, manifest_digest, blob_digest)
        select m.repo_uid, m.digest, r.digest from m cross join unnest(${[...new Set(m.blobs)]}::text[]) as r (digest)
      ),
      c as (
        insert into manifest_children (repo_uid, manifest_digest, child_digest)
        select m.repo_uid, m.digest, r.digest from m cross join unnest(${[...new Set(m.children)]}::text[]) as r (digest)
      ),
      t as (${tagMove})
      select exists (select 1 from m) as created`;
  }

  /** Deletes a manifest and every tag pointing at it; refused while an index in the repo names it. */
  async delete(repoUid: string, digest: string): Promise<DeleteManifestResult> {
    try {
      return await this.db.transaction().execute(async (trx) => {
        const r = await trx
          .deleteFrom("manifests")
          .where("repo_uid", "=", repoUid)
          .where("digest", "=", digest)
          .executeTakeFirst();
        if (r.numDeletedRows === 0n) return { kind: "not_found" } as const;
        await this.tags.deleteByDigest(repoUid, digest, trx);
        return { kind: "deleted" } as const;
      });
    } catch (err) {
      if (sqlState(err) !== FOREIGN_KEY_VIOLATION) throw err;
      const by = await this.db
        .selectFrom("manifest_children")
        .select("manifest_digest")
        .where("repo_uid", "=", repoUid)
        .where("child_digest", "=", digest)
        .limit(1)
        .executeTakeFirst();
      return { kind: "referenced", by: by?.manifest_digest ?? "an index" };
    }
  }

  /** The manifests whose subject is `subject`, oldest first (at most 10,000). */
  async referrers(repoUid: string, subject: string, artifactType?: string): Promise<ReferrerRow[]> {
    const rows =
      artifactType === undefined
        ? await referrersOf(this.db, repoUid, subject)
        : await referrersOfType(this.db, repoUid, subject, artifactType);
    return rows.map((row) => ({ ...row, size: Number(row.size) }));
  }

  // --- garbage collection ---

  /** How many manifests are garbage (see `isGarbage`) now. */
  async countGarbage(cutoff: Date): Promise<number> {
    const row = await this.db
      .selectFrom("manifests as m")
      .select((eb) => eb.fn.countAll<string | number>().as("n"))
      .where((eb) => isGarbage(eb, cutoff))
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** Deletes the manifests that are garbage (see `isGarbage`), re-checked in the statement; how many. */
  async deleteGarbage(cutoff: Date): Promise<number> {
    const r = await this.db
      .deleteFrom("manifests as m")
      .where((eb) => isGarbage(eb, cutoff))
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}

/**
 * A manifest is garbage when created before `cutoff`, untagged, named by no index and not
 * referring to a manifest that is kept.
 */
function isGarbage(eb: AliasedBuilder<"manifests", "m">, cutoff: Date) {
  return eb.and([
    eb("m.create_time", "<", cutoff),
    eb.not(
      eb.exists(
        eb
          .selectFrom("tags as t")
          .select(sql<number>`1`.as("one"))
          .whereRef("t.repo_uid", "=", "m.repo_uid")
          .whereRef("t.digest", "=", "m.digest"),
      ),
    ),
    eb.not(
      eb.exists(
        eb
          .selectFrom("manifest_children as c")
          .select(sql<number>`1`.as("one"))
          .whereRef("c.repo_uid", "=", "m.repo_uid")
          .whereRef("c.child_digest", "=", "m.digest"),
      ),
    ),
    eb.not(
      eb.and([
        eb("m.subject_digest", "is not", null),
        eb.exists(
          eb
            .selectFrom("manifests as s")
            .select(sql<number>`1`.as("one"))
            .whereRef("s.repo_uid", "=", "m.repo_uid")
            .whereRef("s.digest", "=", "m.subject_digest"),
        ),
      ]),
    ),
  ]);
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** The first blob or child manifest `m` names that its repo does not hold. */
async function firstMissing(db: RegistryDb, m: NewManifest): Promise<PutManifestResult | undefined> {
  if (m.blobs.length) {
    const held = await digestsIn(db, "repo_blobs", m.repoUid, m.blobs);
    const absent = m.blobs.find((d) => !held.has(d));
    if (absent) return { kind: "blob_unknown", digest: absent };
  }
  if (m.children.length) {
    const held = await digestsIn(db, "manifests", m.repoUid, m.children);
    const absent = m.children.find((d) => !held.has(d));
    if (absent) return { kind: "manifest_unknown", digest: absent };
  }
  return undefined;
}

/** Which of `digests` the repo holds, as blobs or as manifests. */
async function digestsIn(
  db: RegistryDb,
  table: "repo_blobs" | "manifests",
  repoUid: string,
  digests: string[],
): Promise<Set<string>> {
  const rows = await db
    .selectFrom(table)
    .select("digest")
    .where("repo_uid", "=", repoUid)
    .where(sql<boolean>`digest = any(${digests}::text[])`)
    .execute();
  return new Set(rows.map((r) => r.digest));
}

// The reads of manifest GETs and of the referrers API: compiled once.

const manifestWithContent = compiledOnce((db: RegistryDb, repoUid: string, digest: string) =>
  db
    .selectFrom("manifests")
    .select(["digest", "media_type", "size", "content"])
    .where("repo_uid", "=", repoUid)
    .where("digest", "=", digest),
);

/** For a HEAD: everything but the bytes. */
const manifestWithoutContent = compiledOnce((db: RegistryDb, repoUid: string, digest: string) =>
  db
    .selectFrom("manifests")
    .select(["digest", "media_type", "size", sql<Uint8Array | null>`null::bytea`.as("content")])
    .where("repo_uid", "=", repoUid)
    .where("digest", "=", digest),
);

function referrersQuery(db: RegistryDb, repoUid: string, subject: string) {
  return db
    .selectFrom("manifests")
    .select(["digest", "media_type", "size", "artifact_type", "annotations"])
    .where("repo_uid", "=", repoUid)
    .where("subject_digest", "=", subject)
    .orderBy("create_time")
    .orderBy("digest")
    .limit(10000);
}

const referrersOf = compiledOnce(referrersQuery);

const referrersOfType = compiledOnce((db: RegistryDb, repoUid: string, subject: string, artifactType: string) =>
  referrersQuery(db, repoUid, subject).where("artifact_type", "=", artifactType),
);
