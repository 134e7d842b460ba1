// What a resource service implements: one async function per RPC taking the decoded request and
// a transport-neutral call context. Services know neither HTTP nor gRPC; both transports call
// these handlers through `invoke`.
import {
  create,
  type DescMethod,
  type DescMethodUnary,
  type DescService,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import type { Access, Principal, VerifiedToken, Visibility } from "./access.js";
import { unauthenticated, unimplemented } from "./errors.js";
import { checkRequestStrings } from "./strings.js";

export interface CallContext {
  /** request headers, lower-cased names (gRPC metadata or HTTP headers) */
  headers: Headers;
  /** who is calling, set by the authorizer for authenticated methods */
  principal?: Principal;
  /** what the caller may do, set by the authorizer for authenticated methods */
  access?: Access;
  /** for unscoped methods: the subtrees in which the caller holds the method's capabilities */
  visibility?: Visibility;
  /** the caller's verified API token */
  token?: VerifiedToken;
  /** the client's network address (for per-address limits) */
  clientAddress?: string;
  /**
   * Whom the presented credentials name before they are verified (a Basic user that is a uid, a
   * token's `sub`), set by whoever reads them: failed authentications are limited per claimed
   * principal as well as per address.
   */
  claimedPrincipal?: string;
  /**
   * Set by the rate limits when the address is over its request budget, to answer if the call's
   * credentials do not verify: until then they are checked only where that costs no database
   * read or fetch (our own tokens), and a foreign token that would need an exchange gets this
   * answer instead.
   */
  addressLimitRefusal?: Error;
  /**
   * Set by the rate limits on every call they admit. Whoever refuses presented credentials spends
   * the failed-authentication budgets through it at once and throws what it answers, so that
   * what it records of the refusal (its audit event) is only ever a refusal answered as one.
   */
  failureBudget?: FailureBudget;
  signal?: AbortSignal;
  /**
   * Authorizes another RPC's request on this call (set by `invoke`): an adapter that answers one
   * RPC by calling other RPCs' handlers (the v1 interface) authorizes each as that RPC.
   */
  authorizeAs?: (method: DescMethod, request: unknown) => Promise<void>;
  /**
   * Set when a read-only call was authorized from cached grants that are good only if nothing
   * changed them since: reads that can (`getByUid`, the list engine) select its probe in the
   * same statement as their data and report what they saw; `invoke` has the authorizer confirm
   * the rest after the handler, and runs the call again on current grants if they changed.
   */
  freshness?: Freshness;
  /** the authorizer must read the caller's grants from the database (a call run again) */
  requireCurrentGrants?: boolean;
}

/** See CallContext.failureBudget. */
export interface FailureBudget {
  /**
   * Spends what this call's failure costs (once per call) and answers the error to send: the
   * refusal itself, or a limit's RESOURCE_EXHAUSTED once a budget is spent.
   */
  charge(err: unknown, call: CallContext): unknown;
}

/** See CallContext.freshness. */
export interface Freshness {
  /** what a read selects beside its data (storage's SQL expression; opaque here) */
  readonly probe: unknown;
  /** the value the probe read, in the snapshot of the data it was read with */
  report(value: unknown): void;
}

/** The caller's access; the authorizer sets it for every authenticated method. */
export function accessOf(call: CallContext): Access {
  if (!call.access) throw unauthenticated("a bearer token is required");
  return call.access;
}

export type UnaryHandler<M extends DescMethodUnary> = (
  request: MessageShape<M["input"]>,
  call: CallContext,
) => Promise<MessageInitShape<M["output"]>>;

type MethodsOf<S extends DescService> = S["method"];

export type ServiceHandlers<S extends DescService> = {
  [K in keyof MethodsOf<S>]?: MethodsOf<S>[K] extends DescMethodUnary ? UnaryHandler<MethodsOf<S>[K]> : never;
};

export interface ServiceBinding {
  service: DescService;
  handlers: Record<string, UnaryHandler<DescMethodUnary> | undefined>;
}

export function bindService<S extends DescService>(service: S, handlers: ServiceHandlers<S>): ServiceBinding {
  return { service, handlers: handlers as ServiceBinding["handlers"] };
}

/** Whom a token must be for: the API ({base_url}) or the registry ({registry_host}). */
export type Audience = "api" | "registry";

/** What a plain (non-RPC) route requires of its caller, as an RPC's iam annotation does. */
export interface RouteRule {
  audience: Audience;
  /** capabilities the caller must hold on `scope`, or (without a scope) the ones its visibility is computed for */
  capabilities: readonly number[];
  /** the uid the capabilities are required on; absent: the handler decides per item from `call.visibility` */
  scope?: string;
  /** the noun a NOT_FOUND answer uses for the scope ("group", "repo", ...) */
  resourceType?: string;
  /** credentials are optional: without any the call proceeds anonymously (no access set) */
  anonymous?: boolean;
  /** only the platform operator may call (operations: backups); `capabilities` and `scope` are then unused */
  operatorOnly?: boolean;
}

/**
 * Decides whether a call may proceed. Every RPC passes through `authorize` on every protocol
 * (the method's `chainguard.annotations.iam` option says which capabilities it needs); every
 * authenticated plain route through `authorizeRoute`. Both fill the call's principal, access,
 * token and visibility.
 */
export interface Authorizer {
  authorize(method: DescMethod, request: unknown, call: CallContext): Promise<void>;
  authorizeRoute(rule: RouteRule, call: CallContext): Promise<void>;
  /**
   * Whether the grants a call with `freshness` was authorized from were still current when it
   * read its data (asking the database when no read reported); false: they changed, and the
   * call's answer must not be sent.
   */
  confirm(call: CallContext): Promise<boolean>;
}

/**
 * Records what calls change (the events outbox; one module provides it): `record` runs the
 * handler, and for a method that names an event (`chainguard.annotations.events`) commits the
 * change and its event in one transaction, so an answered change always has its event and a
 * failed one never does.
 */
export interface CallRecorder {
  record<T>(method: DescMethodUnary, request: unknown, call: CallContext, handle: () => Promise<T>): Promise<T>;
}

/**
 * Runs an RPC the way every protocol does (the server's pipeline: limits, then `invoke`), so
 * REST and Connect/gRPC cannot drift apart.
 */
export type Dispatch = (
  binding: ServiceBinding,
  method: DescMethodUnary,
  request: MessageShape<DescMethodUnary["input"]>,
  call: CallContext,
) => Promise<MessageShape<DescMethodUnary["output"]>>;

export async function invoke(
  binding: ServiceBinding,
  method: DescMethodUnary,
  request: MessageShape<DescMessageOf<typeof method>>,
  call: CallContext,
  authorizer: Authorizer,
  recorder?: CallRecorder,
): Promise<MessageShape<DescMessageOf<typeof method, "output">>> {
  // Text is checked first: a NUL or an unpaired surrogate must not reach the database, not even
  // in the authorizer's lookups. Then authorization, so even an unimplemented method tells an
  // anonymous caller nothing.
  checkRequestStrings(method, request);
  call.authorizeAs ??= (other, otherRequest) => authorizer.authorize(other, otherRequest, call);
  const run = async () => {
    await authorizer.authorize(method, request, call);
    const handler = binding.handlers[method.localName];
    if (!handler) throw unimplemented(`${binding.service.name}.${method.name} is not implemented by this server`);
    const handle = async () => create(method.output, await handler(request, call));
    return recorder ? recorder.record(method, request, call, handle) : handle();
  };
  let answer: MessageShape<DescMessageOf<typeof method, "output">> | undefined;
  let failed = false;
  let failure: unknown;
  try {
    answer = await run();
  } catch (err) {
    failed = true;
    failure = err;
  }
  // Authorized from cached grants (read-only methods only): the answer, or the refusal, stands
  // only if those grants were current when the call read its data. Else once more, on current ones.
  if (call.freshness && !(await authorizer.confirm(call))) {
    call.access = call.principal = call.visibility = call.token = call.freshness = undefined;
    call.requireCurrentGrants = true;
    return run();
  }
  if (failed) throw failure;
  return answer!;
}

type DescMessageOf<M extends DescMethodUnary, K extends "input" | "output" = "input"> = M[K];

/**
 * The request field a method is scoped by when its proto marks none with `iam_scope`: a
 * reference proto we serve unchanged (CreateVulnReport's `repo_id`). Without it such a method
 * would be the operator's alone; declared (once, when the serving module loads), the authorizer
 * requires the method's capabilities on that field's uid and the outbox takes it as the event's
 * subject, exactly as for an `iam_scope` field.
 */
export interface DeclaredScope {
  /** the request field's proto name ("repo_id") */
  field: string;
  /** the noun a NOT_FOUND answer uses for it ("repo") */
  noun: string;
}

const declaredScopes = new WeakMap<DescMethod, DeclaredScope>();

export function declareScope(method: DescMethod, scope: DeclaredScope): void {
  if (!method.input.fields.some((f) => f.name === scope.field && f.fieldKind === "scalar"))
    throw new Error(`${method.parent.typeName}.${method.name} has no scalar field ${scope.field}`);
  declaredScopes.set(method, scope);
}

export function declaredScopeOf(method: DescMethod): DeclaredScope | undefined {
  return declaredScopes.get(method);
}
