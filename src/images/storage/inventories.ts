// Image inventories: one row per image-manifest digest, which is also the indexing queue
// (pending rows). A replica claims a pending row with a lease (SKIP LOCKED, so replicas never
// wait on each other); a replica killed mid-read leaves its lease to run out, and the next claim
// counts that as an attempt. The packages are kept twice: in the row (the inventory as read, for
// the API) and in image_packages (indexed by name and origin, for finding the images an advisory
// concerns), replaced together on every save.
import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import type { ImageRuntimeConfig, InstalledPackage, Inventory, PackageSource } from "./inventory-types.js";
import { parsePurl } from "./purl.js";
import type { ImagesDb } from "./schema.js";

/** Reads of one image that end unfinished (a failure that may pass, or the reader's death) before it counts as failed. */
export const MAX_INVENTORY_ATTEMPTS = 3;

export type InventoryState = "pending" | "done" | "failed";

/** Why a read failed: the image itself (it stays failed) or something a later read may not meet (a push retries it). */
export type InventoryFailureKind = "image" | "transient";

/** A claimed read: only its holder saves, renews, fails or releases it, and only until another claim supersedes it. */
export interface InventoryLease {
  digest: string;
  token: string;
}

/** An image's row: its place in the queue and, once done, what it holds. */
export interface InventoryRow extends Inventory {
  digest: string;
  state: InventoryState;
  /** why the last read failed (failed, or pending a retry) */
  error: string | null;
  errorKind: InventoryFailureKind | null;
  /** reads begun (claims) */
  attempts: number;
  discoverTime: Date;
  /** when the inventory was read; absent until done */
  indexTime?: Date;
}

/** Rows inserted by one statement: well below PostgreSQL's 65,535 parameters. */
const PACKAGE_CHUNK = 2000;

export class InventoriesRepository {
  constructor(private readonly db: ImagesDb) {}

  /**
   * Queues `digest` for reading unless it is known already; answers its state after. An image
   * whose reads failed for a transient reason (the store, the reading process) is queued again,
   * its attempts anew; one failed as bad stays failed. The row is locked until the caller's
   * transaction ends (a push's), so an indexer saving it at the same time either finished before
   * (the caller sees "done") or saves after the push committed (and then sees the push's repo
   * among those holding the image).
   */
  async enqueue(digest: string, now: Date): Promise<InventoryState> {
    const { rows } = await sql<{ state: InventoryState }>`
      insert into image_inventories (digest, discover_time) values (${digest}, ${now})
      on conflict (digest) do update set
        state = case when image_inventories.state = 'failed' and image_inventories.error_kind = 'transient'
          then 'pending' else image_inventories.state end,
        attempts = case when image_inventories.state = 'failed' and image_inventories.error_kind = 'transient'
          then 0 else image_inventories.attempts end
      returning state`.execute(this.db);
    return rows[0]!.state;
  }

  /**
   * Whether `enqueue` would change anything for `digest` (it is unknown, or failed for a transient
   * reason), else its state: a plain read, which the embedded database answers from memory until
   * the queue changes.
   */
  async stateOf(digest: string): Promise<InventoryState | "to queue"> {
    const row = await this.db
      .selectFrom("image_inventories")
      .select(["state", "error_kind"])
      .where("digest", "=", digest)
      .executeTakeFirst();
    if (!row || (row.state === "failed" && row.error_kind === "transient")) return "to queue";
    return row.state as InventoryState;
  }

  /** Queues each of `digests` not known yet (the one-time backfill of images pushed earlier). */
  async enqueueMany(digests: readonly string[], now: Date): Promise<void> {
    for (let i = 0; i < digests.length; i += PACKAGE_CHUNK)
      await this.db
        .insertInto("image_inventories")
        .values(digests.slice(i, i + PACKAGE_CHUNK).map((digest) => ({ digest, discover_time: now })))
        .onConflict((oc) => oc.column("digest").doNothing())
        .execute();
  }

  /**
   * Reads `digest` again from the start (an SBOM was attached to it): pending, error cleared. A
   * read in progress loses its lease, so its result is not saved (see `save`), and its attempts
   * still count: requeues cannot keep an image's reads going forever. A finished image's
   * attempts start anew. Nothing when the image is unknown (its own push will queue it).
   * Whether it was known.
   */
  async requeue(digest: string, _now: Date): Promise<boolean> {
    const { rows } = await sql<{ digest: string }>`
      update image_inventories set
        attempts = case when state = 'pending' then attempts else 0 end,
        state = 'pending', lease_until = null, lease_token = null, error = null, error_kind = null
      where digest = ${digest}
      returning digest`.execute(this.db);
    return rows.length > 0;
  }

  /**
   * Leases the oldest pending image whose lease is free or ran out, until `now + leaseMs`, and
   * counts the attempt; undefined when none is waiting. An image whose earlier reads all ended
   * unfinished `MAX_INVENTORY_ATTEMPTS` times is marked failed (transient: a push of it tries
   * again) instead of being read again.
   */
  async claim(now: Date, leaseMs: number): Promise<InventoryLease | undefined> {
    await sql`
      update image_inventories set state = 'failed', lease_until = null, lease_token = null,
        error = coalesce(error, ${`reading the image stopped unfinished ${MAX_INVENTORY_ATTEMPTS} times (the reading process ended or its lease ran out)`}),
        error_kind = coalesce(error_kind, 'transient')
      where state = 'pending' and attempts >= ${MAX_INVENTORY_ATTEMPTS} and (lease_until is null or lease_until < ${now})`.execute(
      this.db,
    );
    const until = new Date(now.getTime() + leaseMs);
    const token = randomUUID();
    const { rows } = await sql<{ digest: string }>`
      update image_inventories i set lease_until = ${until}, lease_token = ${token}, attempts = i.attempts + 1
      from (
        select digest from image_inventories
        where state = 'pending' and (lease_until is null or lease_until < ${now})
        order by discover_time, digest
        limit 1
        for update skip locked
      ) picked
      where i.digest = picked.digest
      returning i.digest`.execute(this.db);
    const digest = rows[0]?.digest;
    return digest === undefined ? undefined : { digest, token };
  }

  /** Extends a read's lease (a long read); false when the read no longer holds it (requeued, or claimed again). */
  async renew(lease: InventoryLease, now: Date, leaseMs: number): Promise<boolean> {
    const r = await this.db
      .updateTable("image_inventories")
      .set({ lease_until: new Date(now.getTime() + leaseMs) })
      .where("digest", "=", lease.digest)
      .where("state", "=", "pending")
      .where("lease_token", "=", lease.token)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * Frees every lease: on an embedded database, whose one process at a time is this one, a lease
   * left is a killed process's, and its read resumes now instead of when the lease runs out (the
   * killed read still counts as an attempt).
   */
  async releaseAll(): Promise<void> {
    await this.db
      .updateTable("image_inventories")
      .set({ lease_until: null, lease_token: null })
      .where("state", "=", "pending")
      .where("lease_until", "is not", null)
      .execute();
  }

  /** Gives a read's lease back unfinished (a server stopping): not counted as an attempt. */
  async release(lease: InventoryLease): Promise<void> {
    await sql`
      update image_inventories set lease_until = null, lease_token = null, attempts = greatest(attempts - 1, 0)
      where digest = ${lease.digest} and state = 'pending' and lease_token = ${lease.token}`.execute(this.db);
  }

  /**
   * Records what a read found (done) and replaces the image's packages, in one transaction.
   * Only while the read still holds its lease: an image requeued or claimed again meanwhile is
   * read again instead. Whether it was saved.
   */
  async save(lease: InventoryLease, inventory: Inventory, now: Date): Promise<boolean> {
    const { digest } = lease;
    return this.db.transaction().execute(async (trx) => {
      const r = await trx
        .updateTable("image_inventories")
        .set({
          state: "done",
          lease_until: null,
          lease_token: null,
          error: null,
          error_kind: null,
          os: inventory.os,
          architecture: inventory.architecture,
          variant: inventory.variant,
          created: inventory.created ?? null,
          config: JSON.stringify(inventory.config),
          size_compressed: inventory.sizeCompressed,
          size_uncompressed: inventory.sizeUncompressed,
          package_source: inventory.packageSource,
          distro: inventory.distro,
          distro_version: inventory.distroVersion,
          packages: JSON.stringify(inventory.packages),
          index_time: now,
        })
        .where("digest", "=", digest)
        .where("state", "=", "pending")
        .where("lease_token", "=", lease.token)
        .executeTakeFirst();
      if (r.numUpdatedRows === 0n) return false;
      await trx.deleteFrom("image_packages").where("digest", "=", digest).execute();
      const rows = inventory.packages.map((p) => ({
        digest,
        type: p.type,
        name: p.name,
        version: p.version,
        origin: p.origin || p.name,
      }));
      for (let i = 0; i < rows.length; i += PACKAGE_CHUNK)
        await trx
          .insertInto("image_packages")
          .values(rows.slice(i, i + PACKAGE_CHUNK))
          .onConflict((oc) => oc.doNothing())
          .execute();
      return true;
    });
  }

  /**
   * Records a read that failed with `error` (shown to callers: never an internal error's text) of
   * `kind`: failed at once, or with `retry` (a failure that may pass: a blob not readable now)
   * pending again until `MAX_INVENTORY_ATTEMPTS` reads failed. Only while the read holds its
   * lease (see `save`). The resulting state; undefined if not held.
   */
  async fail(
    lease: InventoryLease,
    error: string,
    _now: Date,
    options: { kind: InventoryFailureKind; retry?: boolean },
  ): Promise<InventoryState | undefined> {
    const { rows } = await sql<{ state: InventoryState }>`
      update image_inventories set lease_until = null, lease_token = null, error = ${error}, error_kind = ${options.kind},
        state = case when ${options.retry === true}::boolean and attempts < ${MAX_INVENTORY_ATTEMPTS} then 'pending' else 'failed' end
      where digest = ${lease.digest} and state = 'pending' and lease_token = ${lease.token}
      returning state`.execute(this.db);
    return rows[0]?.state;
  }

  /** The rows of `digests` that exist (any state), in no particular order. */
  async get(digests: string[]): Promise<InventoryRow[]> {
    if (digests.length === 0) return [];
    const rows = await this.db.selectFrom("image_inventories").selectAll().where("digest", "in", digests).execute();
    return rows.map((r) => ({
      digest: r.digest,
      state: r.state,
      error: r.error,
      errorKind: r.error_kind,
      attempts: r.attempts,
      discoverTime: r.discover_time,
      indexTime: r.index_time ?? undefined,
      os: r.os,
      architecture: r.architecture,
      variant: r.variant,
      created: r.created ?? undefined,
      config: (r.config ?? {}) as ImageRuntimeConfig,
      sizeCompressed: Number(r.size_compressed ?? 0),
      sizeUncompressed: Number(r.size_uncompressed ?? 0),
      packageSource: r.package_source as PackageSource,
      distro: r.distro,
      distroVersion: r.distro_version,
      packages: r.packages as InstalledPackage[],
    }));
  }

  /** Where a read image's packages came from (PackageSource); undefined when unknown or not read. */
  async packageSourceOf(digest: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom("image_inventories")
      .select("package_source")
      .where("digest", "=", digest)
      .where("state", "=", "done")
      .executeTakeFirst();
    return row?.package_source;
  }

  /**
   * The digests of read images holding a package an advisory names: by `names` (a package or its
   * origin, as wolfi advisories name source packages) or by `purls` (their type and name, or
   * origin; namespace, version and qualifiers aside: OSV ranges decide those later). Sorted.
   */
  async digestsWithPackages(names: string[], purls: string[]): Promise<string[]> {
    return [...(await this.packagesConcerned(names, purls)).keys()];
  }

  /**
   * The images whose packages any of `names` (a package or origin name) or `purls` (versionless:
   * type and name, or origin) concern, each with the names and purls it concerns.
   */
  async packagesConcerned(
    names: string[],
    purls: string[],
  ): Promise<Map<string, { names: string[]; purls: string[] }>> {
    const wanted = purls
      .map((purl) => ({ purl, key: purlTypeAndName(purl) }))
      .filter((p): p is { purl: string; key: { type: string; name: string } } => p.key !== undefined);
    const out = new Map<string, { names: string[]; purls: string[] }>();
    if (names.length === 0 && wanted.length === 0) return out;
    const { rows } = await sql<{ digest: string; key: string; is_purl: boolean }>`
      select digest, name as key, false as is_purl from image_packages where name = any(${names}::text[])
      union
      select digest, origin, false from image_packages where origin = any(${names}::text[])
      union
      select p.digest, w.purl, true from image_packages p
        join unnest(${wanted.map((w) => w.key.type)}::text[], ${wanted.map((w) => w.key.name)}::text[],
                    ${wanted.map((w) => w.purl)}::text[]) as w(type, name, purl)
          on p.type = w.type and (p.name = w.name or p.origin = w.name)
      order by digest, key`.execute(this.db);
    for (const r of rows) {
      let entry = out.get(r.digest);
      if (!entry) out.set(r.digest, (entry = { names: [], purls: [] }));
      (r.is_purl ? entry.purls : entry.names).push(r.key);
    }
    return out;
  }
}

/** A purl's type and (decoded) name: "pkg:deb/debian/openssl@3.0?arch=amd64" → deb, openssl. */
export function purlTypeAndName(purl: string): { type: string; name: string } | undefined {
  const parsed = parsePurl(purl);
  return parsed && { type: parsed.type, name: parsed.name };
}
