// Rate limits of every request, RPC and plain route alike: per client address, per identity,
// stricter for endpoints that take foreign credentials (the token exchange, the OAuth token and
// device endpoints), and for failed authentications, per address and per claimed principal.
// A credential that verifies is served whatever others did from the same address or in the same
// name: only the caller's own identity limit applies to it. Buckets are kept in this process:
// with several replicas each enforces the limits on what it receives.
import { Code, ConnectError, resourceExhausted } from "../core/errors.js";
import { TokenBuckets, type RateLimit } from "../core/rate-limit.js";
import type { CallContext, FailureBudget } from "../core/service.js";

export interface RateLimitSettings {
  /** every RPC and plain route, per client address (a call whose credentials verify is exempt) */
  address?: RateLimit;
  /** every authenticated call, per identity */
  identity?: RateLimit;
  /** calls that present credentials of another kind (token exchange, OAuth token and device endpoints), per address */
  sensitive?: RateLimit;
  /**
   * failed authentications, per address and (separately) per principal the credentials name;
   * once either is spent, failing credentials are answered 429 instead of 401 until it refills
   */
  failedAuthentication?: RateLimit;
}

/** Which limit refused a request (the metrics' `limit` label). */
export type LimitName =
  "address" | "identity" | "sensitive" | "failed_authentication_address" | "failed_authentication_principal";

const refusedBy = new WeakMap<object, LimitName>();

/** The limit a refusal (RESOURCE_EXHAUSTED from these limits) came from; undefined for any other error. */
export function limitOf(err: unknown): LimitName | undefined {
  return typeof err === "object" && err !== null ? refusedBy.get(err) : undefined;
}

/** RESOURCE_EXHAUSTED for `what`, remembering which limit said so. */
function refusal(limit: LimitName, what: string, wait: number) {
  const err = resourceExhausted(what, wait);
  refusedBy.set(err, limit);
  return err;
}

export const DEFAULT_RATE_LIMITS: Required<RateLimitSettings> = {
  address: { perSecond: 200, burst: 400 },
  identity: { perSecond: 100, burst: 200 },
  sensitive: { perSecond: 2, burst: 30 },
  failedAuthentication: { perSecond: 0.2, burst: 20 },
};

/** What a call is, for its limits. */
export interface CallKind {
  /** it presents foreign credentials (or guesses at codes): the stricter limits apply */
  sensitive: boolean;
}

export class RequestLimits implements FailureBudget {
  readonly #address?: TokenBuckets;
  readonly #identity?: TokenBuckets;
  readonly #sensitive?: TokenBuckets;
  readonly #failedByAddress?: TokenBuckets;
  readonly #failedByPrincipal?: TokenBuckets;
  /** calls whose failure was charged already (by whoever refused their credentials) */
  readonly #charged = new WeakSet<CallContext>();

  constructor(settings: RateLimitSettings, now: () => number = Date.now) {
    const buckets = (limit?: RateLimit) => (limit ? new TokenBuckets(limit, now) : undefined);
    this.#address = buckets(settings.address);
    this.#identity = buckets(settings.identity);
    this.#sensitive = buckets(settings.sensitive);
    this.#failedByAddress = buckets(settings.failedAuthentication);
    this.#failedByPrincipal = buckets(settings.failedAuthentication);
  }

  /**
   * Before anything else: throws RESOURCE_EXHAUSTED when the caller's address is over a limit.
   * A call that presents credentials (and takes no foreign ones) is not refused here for its
   * address: whether they verify decides (afterAuthorization, afterFailure), so a flood from one
   * address cannot lock out a valid token sent from it.
   */
  admit(call: CallContext, kind: CallKind): void {
    call.failureBudget = this;
    const address = call.clientAddress ?? "unknown";
    if (kind.sensitive) spend(this.#sensitive, "sensitive", address, "token requests per client address");
    const wait = this.#address?.take(address) ?? 0;
    if (wait === 0) return;
    const refused = refusal("address", "requests per client address", wait);
    if (kind.sensitive || !call.headers.has("authorization")) throw refused;
    // Held until the credentials are checked (only those that cost no database read or fetch).
    call.addressLimitRefusal = refused;
  }

  /**
   * Once the authorizer let the call through: a verified caller spends its identity's budget;
   * a call that is anonymous after all is held to the address limit admit deferred.
   */
  afterAuthorization(call: CallContext): void {
    if (call.principal) {
      spend(this.#identity, "identity", call.principal.uid, "requests per identity");
      return;
    }
    if (call.addressLimitRefusal) throw call.addressLimitRefusal;
  }

  /**
   * After a call failed: charges it (below) unless whoever refused its credentials did, and then
   * threw the answer already.
   */
  afterFailure(err: unknown, call: CallContext): unknown {
    return this.#charged.has(call) ? err : this.charge(err, call);
  }

  /**
   * A failed authentication (UNAUTHENTICATED or PERMISSION_DENIED before any principal was
   * established) spends one of its address's and of its claimed principal's budgets, once per
   * call. Answers the error to send: RESOURCE_EXHAUSTED once either budget is spent, or when the
   * call was over its address limit.
   */
  charge(err: unknown, call: CallContext): unknown {
    this.#charged.add(call);
    // Only credentials that were presented and refused count: a request without any (the
    // registry's challenge round trip) or a caller who authenticated but lacks a grant spends nothing.
    const failedAuthentication =
      err instanceof ConnectError &&
      call.headers.has("authorization") &&
      call.principal === undefined &&
      (err.code === Code.Unauthenticated || err.code === Code.PermissionDenied);
    // Over its address budget and never verified: whatever stopped it, the answer is the limit's.
    if (!failedAuthentication) return call.principal === undefined ? (call.addressLimitRefusal ?? err) : err;
    const byAddress = this.#failedByAddress?.take(call.clientAddress ?? "unknown") ?? 0;
    // An address that spent its budget spends no principal's: it cannot reset or drain others'.
    if (byAddress > 0)
      return refusal("failed_authentication_address", "failed authentications per client address", byAddress);
    const principal = call.claimedPrincipal;
    const byPrincipal = principal === undefined ? 0 : (this.#failedByPrincipal?.take(principal) ?? 0);
    if (byPrincipal > 0)
      return refusal("failed_authentication_principal", "failed authentications in this principal's name", byPrincipal);
    return call.addressLimitRefusal ?? err;
  }
}

function spend(buckets: TokenBuckets | undefined, limit: LimitName, key: string, what: string): void {
  const wait = buckets?.take(key) ?? 0;
  if (wait > 0) throw refusal(limit, what, wait);
}
