// The v1 interface (packages chainguard.platform.iam and chainguard.platform.registry) is served
// as adapters onto the v2beta1 services: a v1 request is rewritten as the v2beta1 request that
// means the same, the v2beta1 handler (the one domain implementation) runs, and its answer is
// rewritten into v1's shape (`id` for `uid`, `items` envelopes, `createdAt`, ...). Nothing here
// reads storage.
import {
  create,
  fromBinary,
  toBinary,
  type DescMessage,
  type DescMethodUnary,
  type DescService,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { failedPrecondition, unimplemented } from "../core/errors.js";
import type { CallContext, ServiceBinding } from "../core/service.js";

/**
 * v1 lists have no paging: they answer every match. They are read from the v2beta1 list a page
 * at a time and answer at most this many items; a filter matching more is refused (use v2 to
 * page), so one call can never hold an unbounded list in memory.
 */
export const V1_LIST_LIMIT = 10_000;
const PAGE = 1_000;

type Methods<S extends DescService> = S["method"];
type In<S extends DescService, K extends keyof Methods<S>> = Methods<S>[K] extends DescMethodUnary
  ? MessageInitShape<Methods<S>[K]["input"]>
  : never;
type Out<S extends DescService, K extends keyof Methods<S>> = Methods<S>[K] extends DescMethodUnary
  ? MessageShape<Methods<S>[K]["output"]>
  : never;

/**
 * Calls a v2beta1 handler of `binding` the way the server would: the request is authorized as
 * that v2beta1 RPC first (its own `iam` rule, on this call's credentials), then handled. The v1
 * RPC was authorized by its own rule too, which asks what the RPC it is adapted onto asks
 * (test/iam/v1-iam.test.ts checks every pair); the second check matters when a v1 RPC is answered
 * from other RPCs (a summary from a list of tags, which needs the caller's visibility).
 */
export interface Delegate<S extends DescService> {
  <K extends keyof Methods<S>>(method: K, request: In<S, K>, call: CallContext): Promise<Out<S, K>>;
}

export function delegateTo<S extends DescService>(service: S, bindings: readonly ServiceBinding[]): Delegate<S> {
  const binding = bindings.find((b) => b.service.typeName === service.typeName);
  if (!binding) throw new Error(`no binding of ${service.typeName} to adapt`);
  return (async (name: string, init: unknown, call: CallContext) => {
    const method = (service.method as Record<string, DescMethodUnary>)[name]!;
    const handler = binding.handlers[method.localName];
    if (!handler) throw unimplemented(`${service.name}.${method.name} is not implemented by this server`);
    const request = create(method.input as DescMessage, init as MessageInitShape<DescMessage>);
    if (!call.authorizeAs) throw new Error(`${service.name}.${method.name} called outside the server's pipeline`);
    await call.authorizeAs(method, request);
    return create(method.output, await handler(request as never, call));
  }) as Delegate<S>;
}

/**
 * Every item of a v2beta1 list, page by page, up to V1_LIST_LIMIT. `page` fetches one page given
 * the page size and token and answers its items and the next token.
 */
export async function listAll<T>(
  page: (pageSize: number, pageToken: string) => Promise<{ items: T[]; nextPageToken: string }>,
): Promise<T[]> {
  const all: T[] = [];
  let token = "";
  do {
    const { items, nextPageToken } = await page(PAGE, token);
    all.push(...items);
    if (all.length > V1_LIST_LIMIT)
      throw failedPrecondition({
        type: "V1_LIST_LIMIT",
        description: `more than ${V1_LIST_LIMIT} items match: a v1 list answers at most ${V1_LIST_LIMIT}; narrow the filter or page through the v2 API`,
      });
    token = nextPageToken;
  } while (token !== "");
  return all;
}

/** The item with this uid as a list of zero or one: what a v1 list filtered by `id` answers. */
export async function oneOrNone<T>(get: () => Promise<T>): Promise<T[]> {
  try {
    return [await get()];
  } catch (err) {
    const code = ConnectError.from(err).code;
    // A list shows what the caller may see and nothing else: an item it may not read is absent.
    if (code === Code.NotFound || code === Code.PermissionDenied) return [];
    throw err;
  }
}

/** The `update_mask` of a v1 `PUT`: the whole resource is replaced (fields left out become zero). */
export const REPLACE_ALL = { paths: ["*"] };

/**
 * A message as another type with the same wire format (v1 and v2beta1 share many nested messages
 * field for field: OIDC settings, account details, SCIM answers): it crosses over by its bytes.
 */
export function sameWire<D extends DescMessage>(to: D, from: DescMessage, message: unknown): MessageShape<D> {
  return fromBinary(to, toBinary(from, message as MessageShape<DescMessage>));
}

/** A timestamp copied across (undefined stays undefined). */
export function sameTime(ts: Timestamp | undefined): Timestamp | undefined {
  return ts ? { ...ts } : undefined;
}

/** Whether `ts` is after `other` (both optional). */
export function isAfter(ts: Timestamp | undefined, other: Timestamp | undefined): boolean {
  if (!ts) return false;
  if (!other) return true;
  return timestampDate(ts).getTime() > timestampDate(other).getTime();
}
