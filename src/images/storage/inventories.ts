// Image inventories: one row per image-manifest digest, which is also the indexing queue
// (pending rows). A replica claims a pending row with a lease (SKIP LOCKED, so replicas never
// wait on each other); a replica killed mid-read leaves its lease to run out, and the next claim
// counts that as an attempt. The packages are kept twice: in the row (the inventory as read, for
// the API) and in image_packages (indexed by name and origin, for finding the images an advisory
// concerns), replaced together on every save.
import { sql } from "kysely";
import type { ImageRuntimeConfig, InstalledPackage, Inventory, PackageSource } from "../inventory/types.js";
import type { ImagesDb } from "./schema.js";

/** Reads of one image that end unfinished (a failure that may pass, or the reader's death) before it counts as failed. */
export const MAX_INVENTORY_ATTEMPTS = 3;

export type InventoryState = "pending" | "done" | "failed";

/** An image's row: its place in the queue and, once done, what it holds. */
export interface InventoryRow extends Inventory {
  digest: string;
  state: InventoryState;
  /** why the last read failed (failed, or pending a retry) */
  error: string | null;
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
   * Queues `digest` for reading unless it is known already; answers its state after. The row is
   * locked until the caller's transaction ends (a push's), so an indexer saving it at the same
   * time either finished before (the caller sees "done") or saves after the push committed (and
   * then sees the push's repo among those holding the image).
   */
  async enqueue(digest: string, now: Date): Promise<InventoryState> {
    const { rows } = await sql<{ state: InventoryState }>`
      insert into image_inventories (digest, discover_time) values (${digest}, ${now})
      on conflict (digest) do update set state = image_inventories.state
      returning state`.execute(this.db);
    return rows[0]!.state;
  }

  /**
   * Reads `digest` again from the start (an SBOM was attached to it): pending, attempts and error
   * cleared. A read in progress loses its lease, so its result is not saved (see `save`). Nothing
   * when the image is unknown (its own push will queue it). Whether it was known.
   */
  async requeue(digest: string, _now: Date): Promise<boolean> {
    const r = await this.db
      .updateTable("image_inventories")
      .set({ state: "pending", attempts: 0, lease_until: null, error: null })
      .where("digest", "=", digest)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * Leases the oldest pending image whose lease is free or ran out, until `now + leaseMs`, and
   * counts the attempt; undefined when none is waiting. An image whose earlier reads all ended
   * unfinished `MAX_INVENTORY_ATTEMPTS` times is marked failed instead of being read again.
   */
  async claim(now: Date, leaseMs: number): Promise<string | undefined> {
    await sql`
      update image_inventories set state = 'failed', lease_until = null,
        error = coalesce(error, ${`reading the image stopped unfinished ${MAX_INVENTORY_ATTEMPTS} times (the reading process ended or its lease ran out)`})
      where state = 'pending' and attempts >= ${MAX_INVENTORY_ATTEMPTS} and lease_until < ${now}`.execute(this.db);
    const until = new Date(now.getTime() + leaseMs);
    const { rows } = await sql<{ digest: string }>`
      update image_inventories i set lease_until = ${until}, attempts = i.attempts + 1
      from (
        select digest from image_inventories
        where state = 'pending' and (lease_until is null or lease_until < ${now})
        order by discover_time, digest
        limit 1
        for update skip locked
      ) picked
      where i.digest = picked.digest
      returning i.digest`.execute(this.db);
    return rows[0]?.digest;
  }

  /** Extends a read's lease (a long read); false when the read no longer holds it (requeued). */
  async renew(digest: string, now: Date, leaseMs: number): Promise<boolean> {
    const r = await this.db
      .updateTable("image_inventories")
      .set({ lease_until: new Date(now.getTime() + leaseMs) })
      .where("digest", "=", digest)
      .where("state", "=", "pending")
      .where("lease_until", "is not", null)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * Records what a read found (done) and replaces the image's packages, in one transaction.
   * Only while the read still holds its lease: an image requeued meanwhile is read again
   * instead. Whether it was saved.
   */
  async save(digest: string, inventory: Inventory, now: Date): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const r = await trx
        .updateTable("image_inventories")
        .set({
          state: "done",
          lease_until: null,
          error: null,
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
        .where("lease_until", "is not", null)
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
   * Records a read that failed with `error`: failed at once, or with `retry` (a failure that may
   * pass: a blob not readable now) pending again until `MAX_INVENTORY_ATTEMPTS` reads failed.
   * Only while the read holds its lease (see `save`). The resulting state; undefined if not held.
   */
  async fail(
    digest: string,
    error: string,
    _now: Date,
    options: { retry?: boolean } = {},
  ): Promise<InventoryState | undefined> {
    const { rows } = await sql<{ state: InventoryState }>`
      update image_inventories set lease_until = null, error = ${error},
        state = case when ${options.retry === true}::boolean and attempts < ${MAX_INVENTORY_ATTEMPTS} then 'pending' else 'failed' end
      where digest = ${digest} and state = 'pending' and lease_until is not null
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

  /**
   * The digests of read images holding a package an advisory names: by `names` (a package or its
   * origin, as wolfi advisories name source packages) or by `purls` (their type and name, or
   * origin; namespace, version and qualifiers aside: OSV ranges decide those later). Sorted.
   */
  async digestsWithPackages(names: string[], purls: string[]): Promise<string[]> {
    const wanted = purls.map(purlTypeAndName).filter((p) => p !== undefined);
    if (names.length === 0 && wanted.length === 0) return [];
    const types = wanted.map((p) => p.type);
    const purlNames = wanted.map((p) => p.name);
    const { rows } = await sql<{ digest: string }>`
      select digest from image_packages where name = any(${names}::text[]) or origin = any(${names}::text[])
      union
      select p.digest from image_packages p
        join unnest(${types}::text[], ${purlNames}::text[]) as w(type, name)
          on p.type = w.type and (p.name = w.name or p.origin = w.name)
      order by digest`.execute(this.db);
    return rows.map((r) => r.digest);
  }
}

/** A purl's type and (decoded) name: "pkg:deb/debian/openssl@3.0?arch=amd64" → deb, openssl. */
export function purlTypeAndName(purl: string): { type: string; name: string } | undefined {
  const m = /^pkg:([a-zA-Z][a-zA-Z0-9.+-]*)\/([^?#@]*)/.exec(purl);
  if (!m) return undefined;
  const name = m[2]!.split("/").filter(Boolean).at(-1);
  if (!name) return undefined;
  try {
    return { type: m[1]!.toLowerCase(), name: decodeURIComponent(name) };
  } catch {
    return undefined;
  }
}
