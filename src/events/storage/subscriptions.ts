// Subscriptions: a sink (an HTTPS URL) under a group, with an optional type filter, and the lease
// of the replica delivering to it (event-deliveries.ts).
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import type { Freshness } from "../../core/service.js";
import type { Db } from "../../storage/db.js";
import { FOREIGN_KEY_VIOLATION, sqlState } from "../../storage/errors.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, getByUid, updateByUid } from "../../storage/table.js";
import { eventsDb, type EventsDb, type SubscriptionRow } from "./schema.js";

export interface SubscriptionFields {
  sink: string;
  /** exact types, or prefixes ending in "."; empty: every type */
  types: string[];
}

export class SubscriptionsRepository {
  private readonly db: EventsDb;
  constructor(db: Db) {
    this.db = eventsDb(db);
  }

  /** Inserts a subscription; missing when the group does not exist. */
  async insert(
    uid: string,
    parentUid: string,
    fields: SubscriptionFields,
    creator: string | undefined,
    now: Date,
  ): Promise<WriteResult<SubscriptionRow>> {
    try {
      return ok(
        await this.db
          .insertInto("event_subscriptions")
          .values({
            uid,
            parent_uid: parentUid,
            sink: fields.sink,
            types: fields.types,
            creator: creator ?? null,
            create_time: now,
            update_time: now,
          })
          .returningAll()
          .executeTakeFirstOrThrow(),
      );
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return missing("group", parentUid);
      throw err;
    }
  }

  get(uid: string, freshness?: Freshness): Promise<SubscriptionRow | undefined> {
    return getByUid(this.db, "event_subscriptions", uid, freshness);
  }

  async update(
    uid: string,
    change: (current: SubscriptionRow) => SubscriptionFields,
    now: Date,
  ): Promise<WriteResult<SubscriptionRow>> {
    const row = await updateByUid(this.db, "event_subscriptions", uid, (current) => ({
      ...change(current),
      update_time: now,
    }));
    return updated(row, "subscription", uid);
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "event_subscriptions", uid);
  }

  /** The FROM + WHERE the list engine pages (it adds the selection and the count). */
  listQuery(filter: UIDPFilter | undefined) {
    return () => applyUidpFilter(this.db.selectFrom("event_subscriptions"), filter);
  }
}
