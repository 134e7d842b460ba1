// RoleBindings aggregate: (identity, role) granted at a group. Uniqueness, existence and
// visibility of both references are enforced by the database; the checks here make the errors
// precise. Reads are hydrated with the identity, group and role in one query per page.
import { sql, type RawBuilder, type Transaction } from "kysely";
import type { Grant } from "../../core/access.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { isUsableFrom } from "../../core/uidp.js";
import { IamRepository, type IamDb, type IamTables, type Row } from "./schema.js";
import { UNIQUE_VIOLATION, sqlState } from "../../storage/errors.js";
import { conflict, missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, takeFreshness, updateByUid, withFreshnessProbe } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";

export type RoleBindingRow = Row<"role_bindings">;

export interface HydratedBinding {
  uid: string;
  parent_uid: string;
  identity_uid: string;
  role_uid: string;
  create_time: Date;
  identity_name: string;
  identity_description: string;
  identity_email: string;
  relationship_type: number;
  relationship: unknown;
  group_name: string;
  group_description: string;
  role_name: string;
  role_description: string;
}

export interface NewBinding {
  uid: string;
  parentUid: string;
  identityUid: string;
  roleUid: string;
}

type Executor = IamDb | Transaction<IamTables>;

/**
 * The authorization change counter (migration 009) as an expression a read can select beside
 * its data, so one statement tells whether grants cached at some value are still current.
 */
export const AUTHZ_EPOCH: RawBuilder<string> = sql<string>`(select value::text from authz_epoch)`;

/** An identity's grants as of one snapshot, with the change counter of that snapshot. */
export interface GrantsSnapshot {
  epoch: string;
  /** absent when the identity does not exist */
  identity?: { uid: string; parentUid: string | null };
  grants: Grant[];
}

/** A write that must not happen: thrown inside a transaction (rolling it back), answered as its result. */
class Refused extends Error {
  constructor(readonly result: WriteResult<never>) {
    super(result.kind);
  }
}

/** Refuses unless the group exists and every identity and role exists and is usable from it. */
async function checkReferences(
  db: Executor,
  groupUid: string,
  refs: { identityUid: string; roleUid: string }[],
): Promise<void> {
  const group = await db.selectFrom("groups").select("uid").where("uid", "=", groupUid).executeTakeFirst();
  if (!group) throw new Refused(missing("group", groupUid));
  const identityUids = [...new Set(refs.map((r) => r.identityUid))];
  const roleUids = [...new Set(refs.map((r) => r.roleUid))];
  const [identities, roles] = await Promise.all([
    db.selectFrom("identities").select("uid").where("uid", "in", identityUids).execute(),
    db.selectFrom("roles").select("uid").where("uid", "in", roleUids).execute(),
  ]);
  const knownIdentities = new Set(identities.map((r) => r.uid));
  const knownRoles = new Set(roles.map((r) => r.uid));
  // An invisible reference is answered like a missing one: it does not reveal other trees.
  for (const uid of identityUids)
    if (!knownIdentities.has(uid) || !isUsableFrom(uid, groupUid)) throw new Refused(missing("identity", uid));
  for (const uid of roleUids)
    if (!knownRoles.has(uid) || !isUsableFrom(uid, groupUid)) throw new Refused(missing("role", uid));
}

function duplicate(b: { parentUid: string; identityUid: string; roleUid: string }): WriteResult<never> {
  return conflict(
    "role binding",
    b.parentUid,
    `identity ${b.identityUid} already has role ${b.roleUid} in group ${b.parentUid}`,
  );
}

/** The transaction's result, or the result a Refused carried out of it. */
async function refusable<T>(write: () => Promise<WriteResult<T>>): Promise<WriteResult<T>> {
  try {
    return await write();
  } catch (err) {
    if (err instanceof Refused) return err.result;
    throw err;
  }
}

export class RoleBindingsRepository extends IamRepository {
  /** Creates all bindings or none. */
  async insertAll(bindings: NewBinding[], now: Date): Promise<WriteResult<HydratedBinding[]>> {
    const seen = new Set<string>();
    for (const b of bindings) {
      const key = `${b.parentUid} ${b.identityUid} ${b.roleUid}`;
      if (seen.has(key)) return duplicate(b);
      seen.add(key);
    }
    return refusable(() =>
      this.db.transaction().execute(async (trx) => {
        for (const parent of new Set(bindings.map((b) => b.parentUid))) {
          await checkReferences(
            trx,
            parent,
            bindings.filter((b) => b.parentUid === parent),
          );
        }
        const existing = await this.findExisting(trx, bindings);
        if (existing) throw new Refused(duplicate(existing));
        const times = { create_time: now, update_time: now };
        try {
          await trx
            .insertInto("role_bindings")
            .values(
              bindings.map((b) => ({
                uid: b.uid,
                parent_uid: b.parentUid,
                identity_uid: b.identityUid,
                role_uid: b.roleUid,
                ...times,
              })),
            )
            .execute();
        } catch (err) {
          // A concurrent create of the same binding won the race.
          if (sqlState(err) === UNIQUE_VIOLATION) throw new Refused(duplicate(bindings[0]!));
          throw err;
        }
        return ok(
          await this.hydrate(
            bindings.map((b) => b.uid),
            trx,
          ),
        );
      }),
    );
  }

  /** The first of `bindings` that already exists, in one query. */
  private async findExisting(db: Executor, bindings: NewBinding[]): Promise<NewBinding | undefined> {
    const hits = await db
      .selectFrom("role_bindings")
      .select(["parent_uid", "identity_uid", "role_uid"])
      .where((eb) =>
        eb.or(
          bindings.map((b) =>
            eb.and([
              eb("parent_uid", "=", b.parentUid),
              eb("identity_uid", "=", b.identityUid),
              eb("role_uid", "=", b.roleUid),
            ]),
          ),
        ),
      )
      .execute();
    const found = new Set(hits.map((h) => `${h.parent_uid} ${h.identity_uid} ${h.role_uid}`));
    return bindings.find((b) => found.has(`${b.parentUid} ${b.identityUid} ${b.roleUid}`));
  }

  async get(uid: string, freshness?: Freshness): Promise<HydratedBinding | undefined> {
    return (await this.hydrate([uid], this.db, freshness))[0];
  }

  /** Changes the identity and/or role of a binding, under the row lock. */
  async update(
    uid: string,
    change: (current: RoleBindingRow) => { identityUid: string; roleUid: string },
    now: Date,
  ): Promise<WriteResult<HydratedBinding>> {
    try {
      return await refusable(async () => {
        const row = await updateByUid(this.db, "role_bindings", uid, async (current, trx) => {
          const next = change(current);
          await checkReferences(trx, current.parent_uid, [next]);
          return { identity_uid: next.identityUid, role_uid: next.roleUid, update_time: now };
        });
        return updated(row && (await this.get(row.uid)), "role binding", uid);
      });
    } catch (err) {
      if (sqlState(err) === UNIQUE_VIOLATION) {
        return conflict("role binding", uid, "the group already has a binding of that identity to that role");
      }
      throw err;
    }
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "role_bindings", uid);
  }

  /** Binds unless the same binding exists already (sign-in's default role, accepted invites). */
  async ensure(b: NewBinding, now: Date): Promise<void> {
    await this.db
      .insertInto("role_bindings")
      .values({
        uid: b.uid,
        parent_uid: b.parentUid,
        identity_uid: b.identityUid,
        role_uid: b.roleUid,
        create_time: now,
        update_time: now,
      })
      .onConflict((oc) => oc.columns(["parent_uid", "identity_uid", "role_uid"]).doNothing())
      .execute();
  }

  /** An identity's bindings with their group and role, for "who am I". */
  bindingsOf(identityUid: string) {
    return this.db
      .selectFrom("role_bindings as rb")
      .innerJoin("groups as g", "g.uid", "rb.parent_uid")
      .innerJoin("roles as r", "r.uid", "rb.role_uid")
      .select([
        "g.uid as group_uid",
        "g.name as group_name",
        "g.description as group_description",
        "r.uid as role_uid",
        "r.name as role_name",
        "r.description as role_description",
        "r.capabilities",
      ])
      .where("rb.identity_uid", "=", identityUid)
      .orderBy("rb.uid")
      .execute();
  }

  /** Where an identity holds which capabilities: one query, read on every request. */
  /** The change counter now (see AUTHZ_EPOCH). */
  async authzEpoch(): Promise<string> {
    const { rows } = await sql<{ epoch: string }>`select ${AUTHZ_EPOCH} as epoch`.execute(this.db);
    return String(rows[0]!.epoch);
  }

  /** The identity, its grants and the change counter, read in one statement (one snapshot). */
  async grantsSnapshot(identityUid: string): Promise<GrantsSnapshot> {
    const { rows } = await sql<{
      epoch: string;
      identity_uid: string | null;
      identity_parent_uid: string | null;
      at: string | null;
      capabilities: number[] | null;
    }>`
      select e.value::text as epoch, i.uid as identity_uid, i.parent_uid as identity_parent_uid,
             rb.parent_uid as at, r.capabilities
      from authz_epoch e
      left join identities i on i.uid = ${identityUid}
      left join role_bindings rb on rb.identity_uid = i.uid
      left join roles r on r.uid = rb.role_uid`.execute(this.db);
    const first = rows[0]!;
    return {
      epoch: String(first.epoch),
      identity:
        first.identity_uid === null ? undefined : { uid: first.identity_uid, parentUid: first.identity_parent_uid },
      grants: rows
        .filter((r) => r.at !== null && r.capabilities !== null)
        .map((r) => ({ at: r.at!, capabilities: new Set(r.capabilities) })),
    };
  }

  /** The bindings with their identity, group and role, in the order of `uids`: one query. */
  async hydrate(uids: string[], db: Executor = this.db, freshness?: Freshness): Promise<HydratedBinding[]> {
    if (uids.length === 0) return [];
    const query = db
      .selectFrom("role_bindings as rb")
      .innerJoin("identities as i", "i.uid", "rb.identity_uid")
      .innerJoin("groups as g", "g.uid", "rb.parent_uid")
      .innerJoin("roles as r", "r.uid", "rb.role_uid")
      .select([
        "rb.uid",
        "rb.parent_uid",
        "rb.identity_uid",
        "rb.role_uid",
        "rb.create_time",
        "i.name as identity_name",
        "i.description as identity_description",
        "i.email as identity_email",
        "i.relationship_type",
        "i.relationship",
        "g.name as group_name",
        "g.description as group_description",
        "r.name as role_name",
        "r.description as role_description",
      ])
      .where("rb.uid", "in", uids);
    const rows = (await withFreshnessProbe(query, freshness).execute()).map((r) => takeFreshness(r, freshness));
    const byUid = new Map(rows.map((r) => [r.uid, r as HydratedBinding]));
    return uids.map((u) => byUid.get(u)).filter((r): r is HydratedBinding => r !== undefined);
  }

  listQuery(filter: { uidp?: UIDPFilter; identity: string; group: string; role: string }) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("role_bindings"), filter.uidp);
      if (filter.identity !== "") q = q.where("identity_uid", "=", filter.identity);
      if (filter.group !== "") q = q.where("parent_uid", "=", filter.group);
      if (filter.role !== "") q = q.where("role_uid", "=", filter.role);
      return q;
    };
  }
}
