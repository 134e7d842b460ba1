// The outbox: every RPC whose method names an event (`chainguard.annotations.events`) runs in
// one transaction with the event that records it — the type its proto names, the resource's UIDP
// as subject, its group, the caller as actor and the response as body — so an answered change
// always has its event and a failed one never does. Every protocol and API version passes here
// (core/service.ts invoke); the v1 adapters record their own method's event, once.
import {
  getOption,
  hasOption,
  type DescMessage,
  type DescMethod,
  type DescMethodUnary,
  type Message,
} from "@bufbuild/protobuf";
import { EventAttributes_Audience, events as eventsOption } from "../gen/annotations/events_pb.js";
import { iam_scope } from "../gen/annotations/auth_pb.js";
import { toRestJson } from "../core/rest-json.js";
import { declaredScopeOf, type CallContext, type CallRecorder } from "../core/service.js";
import { parentOf } from "../core/uidp.js";
import { actorOf, type EventRecord } from "../platform/events.js";
import { withinTransaction } from "../storage/ambient-transaction.js";
import type { Db } from "../storage/db.js";
import type { Journal } from "./journal.js";
import { redactSecrets } from "./redact.js";

interface EventSpec {
  type: string;
  /** INTERNAL events are kept in the audit trail but delivered to no subscription */
  internal: boolean;
}

const specs = new WeakMap<DescMethod, EventSpec | null>();

/**
 * Mutating methods of the published protos that name no event (their protos cannot change): the
 * event their change is.
 */
const UNANNOTATED: Readonly<Record<string, EventSpec>> = {
  // v1: creates a group invite (to a group it names), like GroupInvites.Create
  "chainguard.platform.iam.GroupInvites.CreateWithGroup": {
    type: "dev.chainguard.api.iam.group_invite.created.v1",
    internal: false,
  },
};

/** The event a method names, if any. */
export function eventSpecOf(method: DescMethod): EventSpec | undefined {
  let spec = specs.get(method);
  if (spec === undefined) {
    const option = hasOption(method, eventsOption) ? getOption(method, eventsOption) : undefined;
    spec = option?.type
      ? { type: option.type, internal: option.audience !== EventAttributes_Audience.CUSTOMER }
      : (UNANNOTATED[`${method.parent.typeName}.${method.name}`] ?? null);
    specs.set(method, spec);
  }
  return spec ?? undefined;
}

export class RpcRecorder implements CallRecorder {
  constructor(
    private readonly db: Db,
    private readonly journal: Journal,
  ) {}

  record<T>(method: DescMethodUnary, request: unknown, call: CallContext, handle: () => Promise<T>): Promise<T> {
    const spec = eventSpecOf(method);
    if (!spec) return handle();
    return withinTransaction(this.db, async () => {
      const response = await handle();
      // Written last, with the commit (one round trip on PostgreSQL).
      this.journal.recordLast({
        ...rpcEvent(spec.type, method, request as Message, response as Message, call),
        undelivered: spec.internal,
      });
      return response;
    });
  }
}

/** The first non-empty string among `names` of a message. */
function stringField(message: Record<string, unknown>, names: readonly string[]): string | undefined {
  for (const name of names) {
    const value = message[name];
    if (typeof value === "string" && value) return value;
  }
  return undefined;
}

/** The value of the request's iam_scope field (descending into a scoped message). */
function scopeOf(desc: DescMessage, message: Record<string, unknown>): string | undefined {
  const field = desc.fields.find((f) => getOption(f, iam_scope));
  if (!field) return undefined;
  const value = message[field.localName];
  if (field.fieldKind === "message")
    return value && typeof value === "object" ? scopeOf(field.message, value as Record<string, unknown>) : undefined;
  return typeof value === "string" && value ? value : undefined;
}

/** The value of the scope field the server declared for a method whose proto marks none. */
function declaredScope(method: DescMethodUnary, request: Message): string | undefined {
  const declared = declaredScopeOf(method);
  const field = declared && method.input.fields.find((f) => f.name === declared.field);
  const value = field ? (request as unknown as Record<string, unknown>)[field.localName] : undefined;
  return typeof value === "string" && value ? value : undefined;
}

const ID_FIELDS = ["uid", "id"];

/**
 * The group an event belongs to, from its type and subject: a group's own events (and a group's
 * account associations, keyed by the group) belong to it; a tag's to its repo's group; anything
 * else to its parent. A subject taken from the request's scope (a parent) is the group itself.
 */
export function groupOf(type: string, subject: string, subjectIsScope: boolean): string | undefined {
  if (!subject) return undefined;
  if (subjectIsScope && /\.created\.batch\.|\.advisories\.imported\./.test(type)) return subject;
  if (/\.iam\.group\.|\.iam\.account_associations\./.test(type)) return subject;
  if (/\.registry\.tag\./.test(type)) return parentOf(parentOf(subject) ?? "");
  return parentOf(subject);
}

function rpcEvent(
  type: string,
  method: DescMethodUnary,
  request: Message,
  response: Message,
  call: CallContext,
): EventRecord {
  const fromResponse = stringField(response as never, ID_FIELDS);
  const fromRequest = fromResponse ?? stringField(request as never, ID_FIELDS);
  const fromScope = fromRequest
    ? undefined
    : (scopeOf(method.input, request as never) ?? declaredScope(method, request));
  const subject = fromRequest ?? fromScope ?? "";
  return {
    type,
    subject,
    group: groupOf(type, subject, fromScope !== undefined),
    actor: actorOf(call),
    // The REST answer's JSON, so the body reads as the response did (timestamps with milliseconds).
    body: redactSecrets(toRestJson(method.output, response as never)),
    traceparent: call.headers.get("traceparent") ?? undefined,
  };
}
