// Identities aggregate: assumable identities in a group, or root-level (humans).
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { IamRepository, type Row } from "./schema.js";
import { FOREIGN_KEY_VIOLATION, sqlState } from "../../storage/errors.js";
import { missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, getByUid, updateByUid } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";

export type IdentityRow = Row<"identities">;

export interface IdentityFields {
  name: string;
  description: string;
  company: string;
  relationship_type: number;
  /** canonical JSON of the relationship's value */
  relationship: unknown;
  issuer: string | null;
  subject: string | null;
}

function columns(f: IdentityFields) {
  return { ...f, relationship: JSON.stringify(f.relationship) };
}

export class IdentitiesRepository extends IamRepository {
  /** Inserts an identity; missing when the parent group does not exist. */
  async insert(
    uid: string,
    parentUid: string | null,
    fields: IdentityFields,
    now: Date,
  ): Promise<WriteResult<IdentityRow>> {
    const times = { last_seen_time: now, create_time: now, update_time: now };
    try {
      return ok(
        await this.db
          .insertInto("identities")
          .values({ uid, parent_uid: parentUid, ...columns(fields), email: "", email_unverified: "", ...times })
          .returningAll()
          .executeTakeFirstOrThrow(),
      );
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return missing("group", parentUid ?? "");
      throw err;
    }
  }

  get(uid: string, freshness?: Freshness): Promise<IdentityRow | undefined> {
    return getByUid(this.db, "identities", uid, freshness);
  }

  async update(
    uid: string,
    change: (current: IdentityRow) => Promise<IdentityFields>,
    now: Date,
  ): Promise<WriteResult<IdentityRow>> {
    const row = await updateByUid(this.db, "identities", uid, async (current) => ({
      ...columns(await change(current)),
      update_time: now,
    }));
    return updated(row, "identity", uid);
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "identities", uid);
  }

  /** The identity whose exact issuer/subject these are: a root-level one first, then by uid. */
  async lookup(issuer: string, subject: string): Promise<IdentityRow | undefined> {
    return this.db
      .selectFrom("identities")
      .selectAll()
      .where("issuer", "=", issuer)
      .where("subject", "=", subject)
      .orderBy((eb) => eb("parent_uid", "is", null), "desc")
      .orderBy("uid")
      .limit(1)
      .executeTakeFirst();
  }

  /**
   * Registers a human on first sign-in, or refreshes it on later ones: a root-level identity
   * whose claim match is the upstream's (issuer, subject).
   */
  async upsertHuman(h: {
    uid: string;
    name: string;
    issuer: string;
    subject: string;
    /** a verified email the platform vouches for; undefined keeps the one recorded before */
    email: string | undefined;
    emailUnverified: string;
    now: Date;
  }): Promise<IdentityRow> {
    const relationship = JSON.stringify({ issuer: h.issuer, subject: h.subject });
    return this.db
      .insertInto("identities")
      .values({
        uid: h.uid,
        parent_uid: null,
        name: h.name,
        description: "",
        company: "",
        email: h.email ?? "",
        email_unverified: h.emailUnverified,
        relationship_type: 1,
        relationship,
        issuer: h.issuer,
        subject: h.subject,
        last_seen_time: h.now,
        create_time: h.now,
        update_time: h.now,
      })
      .onConflict((oc) =>
        oc.column("uid").doUpdateSet({
          ...(h.email !== undefined ? { email: h.email } : {}),
          email_unverified: h.emailUnverified,
          last_seen_time: h.now,
        }),
      )
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** Records a successful token exchange. */
  async touch(uid: string, now: Date): Promise<void> {
    await this.db.updateTable("identities").set({ last_seen_time: now }).where("uid", "=", uid).execute();
  }

  listQuery(filter: { uidp?: UIDPFilter; name: string; relationshipType: number }) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("identities"), filter.uidp);
      if (filter.name !== "") q = q.where("name", "=", filter.name);
      if (filter.relationshipType !== 0) q = q.where("relationship_type", "=", filter.relationshipType);
      return q;
    };
  }
}
