// What a module records beside the RPCs (whose events the outbox records by itself): registry
// pushes and pulls, sign-ins, token exchanges, refused credentials. The events module provides
// the journal; every module gets it as `ctx.events`.
import { sql, type RawBuilder } from "kysely";
import type { CallContext } from "../core/service.js";

/** Who caused an event: the delivered data's `actor`. */
export interface EventActor {
  /** the identity's uid (or the operator's subject; for a refused credential, whom it named) */
  subject: string;
  /** for a token from an exchange or a sign-in: the original token's iss, sub, aud, email */
  act?: Readonly<Record<string, string>>;
}

export interface EventRecord {
  /** Ce-Type */
  type: string;
  /** Ce-Source: the registry's host ("registry") or the API's URL ("api", the default) */
  source?: "api" | "registry";
  /** Ce-Subject: the UIDP of the resource the event is about */
  subject: string;
  /** Ce-Group: the UIDP of the group it belongs to (who may see it); absent: none */
  group?: string;
  actor?: EventActor;
  /** the data's `body`; never a secret */
  body: unknown;
  /** the W3C trace context of the request that caused it, when it came with one */
  traceparent?: string;
}

export interface EventJournal {
  /**
   * Records an event: inside a transaction scope (storage/ambient-transaction.ts) it commits
   * with that transaction, else on its own.
   */
  record(event: EventRecord): Promise<void>;
  /**
   * Records an event that is no change (a registry pull) within a moment, in one transaction with
   * the others of that moment, so a read path pays no write of its own (on the embedded database a
   * write also ends every cached read). The event keeps the time it was given at; the ones of the
   * last moment are lost if the process dies.
   */
  recordSoon(event: EventRecord): void;
  /**
   * An event recorded by a statement of the caller's own, so a change and its event need no
   * transaction (one statement is atomic): see EventInsert. Recorded only if `condition` (SQL
   * that may name the statement's other WITH queries) holds.
   */
  insertWithin(event: EventRecord, condition: RawBuilder<unknown>): EventInsert;
}

/**
 * An event's insert, for a caller's statement: `ctes` go into its WITH list (their names start
 * with `event_`), `columns` into its final select list (`event_seq`, `event_deliveries`); once
 * the statement ran, `inserted` gets its row (in a transaction scope, the listeners hear of the
 * event once that commits).
 */
export interface EventInsert {
  ctes: RawBuilder<unknown>;
  columns: RawBuilder<unknown>;
  inserted(row: { event_seq?: unknown; event_deliveries?: unknown } | undefined): void;
}

/** A journal that records nothing: for a server run without the events module. */
export const NO_EVENTS: EventJournal = {
  record: async () => {},
  recordSoon: () => {},
  insertWithin: () => ({
    ctes: sql`event_none as (select 1)`,
    columns: sql`null::bigint as event_seq, 0 as event_deliveries`,
    inserted: () => {},
  }),
};

/** The actor of an authenticated call; undefined for an anonymous one. */
export function actorOf(call: Pick<CallContext, "principal" | "token">): EventActor | undefined {
  if (!call.principal) return undefined;
  const act = call.token?.act;
  return act && Object.keys(act).length ? { subject: call.principal.uid, act } : { subject: call.principal.uid };
}
