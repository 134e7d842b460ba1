// Registry traffic as events: `dev.chainguard.registry.push.v1` for a pushed manifest or a
// completed (or mounted) blob, recorded in the push's own transaction, and
// `dev.chainguard.registry.pull.v1` for a manifest or blob HEAD or GET, recorded before the
// answer leaves — failures of both too, with the OCI error the client got (a failed push's once
// its transaction rolled back). Bodies carry the hosted
// registry's fields; `location` is always "" (no geolocation database is shipped).
import type { FastifyRequest } from "fastify";
import type { CallContext } from "../../core/service.js";
import { parentOf } from "../../core/uidp.js";
import type { RawBuilder } from "kysely";
import { actorOf, type EventInsert, type EventJournal, type EventRecord } from "../../platform/events.js";
import { withinTransaction } from "../../storage/ambient-transaction.js";
import type { Db } from "../../storage/db.js";
import type { ResolvedName } from "../names.js";
import type { OciAnswer } from "./errors.js";
import type { RepoRequest } from "./http.js";

export const PUSH_EVENT = "dev.chainguard.registry.push.v1";
export const PULL_EVENT = "dev.chainguard.registry.pull.v1";

/** What was pushed or pulled. */
export interface Transferred {
  type: "manifest" | "blob";
  /** "" when a failed pull never learnt it (an unknown tag) */
  digest: string;
  /** the tag, when the request's reference was one */
  tag?: string;
}

/** Where a request's event belongs: the repo, else the group its name resolved to, else the name itself. */
interface Place {
  subject: string;
  group?: string;
  repoId: string;
}

export class RegistryEvents {
  constructor(
    private readonly journal: EventJournal,
    private readonly db: Db,
    private readonly now: () => Date,
  ) {}

  /** Runs a push's database work with its event in one transaction (no body may stream inside). */
  inPush<T>(work: () => Promise<T>): Promise<T> {
    return withinTransaction(this.db, work);
  }

  /** Records a push; called inside `inPush`, once the change is made. */
  pushed(r: RepoRequest, what: Transferred): Promise<void> {
    return this.#record(PUSH_EVENT, r.request, r.call, r.name, placeOfRepo(r.repo.uid), what);
  }

  /**
   * A push's event for the push's own statement to insert (see EventJournal.insertWithin), when
   * `condition` holds there: the same event `pushed` records.
   */
  pushedWithin(r: RepoRequest, what: Transferred, condition: RawBuilder<unknown>): EventInsert {
    const event = this.#event(PUSH_EVENT, r.request, r.call, r.name, placeOfRepo(r.repo.uid), what);
    return this.journal.insertWithin(event, condition);
  }

  /** Records a successful pull (a manifest or blob HEAD or GET), before the answer is sent. */
  pulled(r: RepoRequest, what: Transferred): Promise<void> {
    if (!isPull(r.request.method)) return Promise.resolve();
    return this.#record(PULL_EVENT, r.request, r.call, r.name, placeOfRepo(r.repo.uid), what);
  }

  /** Records a failed pull with the OCI error the client is answered with. */
  pullFailed(
    request: FastifyRequest,
    call: CallContext,
    name: string,
    resolved: ResolvedName | undefined,
    what: Transferred,
    answer: OciAnswer,
  ): Promise<void> {
    if (!isPull(request.method)) return Promise.resolve();
    return this.#failed(PULL_EVENT, request, call, name, resolved, what, answer);
  }

  /**
   * Records a failed push (a manifest PUT or an upload's completion) with the OCI error the
   * client is answered with. Called after the push's transaction rolled back, so it is recorded
   * on its own.
   */
  pushFailed(
    request: FastifyRequest,
    call: CallContext,
    name: string,
    resolved: ResolvedName | undefined,
    what: Transferred,
    answer: OciAnswer,
  ): Promise<void> {
    return this.#failed(PUSH_EVENT, request, call, name, resolved, what, answer);
  }

  #failed(
    type: string,
    request: FastifyRequest,
    call: CallContext,
    name: string,
    resolved: ResolvedName | undefined,
    what: Transferred,
    answer: OciAnswer,
  ): Promise<void> {
    const place: Place = resolved?.repo
      ? placeOfRepo(resolved.repo.uid)
      : resolved
        ? { subject: resolved.group.uid, group: resolved.group.uid, repoId: "" }
        : { subject: name, repoId: "" };
    const error = { code: answer.code, message: answer.message, status: answer.status };
    return this.#record(type, request, call, name, place, what, error);
  }

  #record(
    type: string,
    request: FastifyRequest,
    call: CallContext,
    repository: string,
    place: Place,
    what: Transferred,
    error?: { code: string; message: string; status: number },
  ): Promise<void> {
    const event = this.#event(type, request, call, repository, place, what, error);
    // A pull changes nothing: it is recorded with the other pulls of the moment, so the read
    // path pays no write of its own.
    if (type === PULL_EVENT) {
      this.journal.recordSoon(event);
      return Promise.resolve();
    }
    return this.journal.record(event);
  }

  #event(
    type: string,
    request: FastifyRequest,
    call: CallContext,
    repository: string,
    place: Place,
    what: Transferred,
    error?: { code: string; message: string; status: number },
  ): EventRecord {
    const body = {
      repository,
      repo_id: place.repoId,
      ...(what.tag !== undefined ? { tag: what.tag } : {}),
      digest: what.digest,
      type: what.type,
      ...(type === PULL_EVENT ? { method: request.method } : {}),
      remote_address: call.clientAddress ?? "",
      location: "",
      user_agent: request.headers["user-agent"] ?? "",
      // The SDK's civil.DateTime: UTC without an offset (Go's layout 2006-01-02T15:04:05.999999999).
      when: this.now().toISOString().replace(/Z$/, ""),
      ...(error ? { error } : {}),
    };
    return {
      type,
      source: "registry" as const,
      subject: place.subject,
      group: place.group,
      actor: actorOf(call),
      body,
      traceparent: call.headers.get("traceparent") ?? undefined,
    };
  }
}

function placeOfRepo(repoUid: string): Place {
  return { subject: repoUid, group: parentOf(repoUid), repoId: repoUid };
}

function isPull(method: string): boolean {
  return method === "GET" || method === "HEAD";
}
