// Rate limits of every request, RPC and plain route alike: per client address, per identity,
// stricter for endpoints that take foreign credentials (the token exchange, the OAuth token and
// device endpoints), and for addresses that keep failing to authenticate. Buckets are kept in
// this process: with several replicas each enforces the limits on what it receives.
import { Code, ConnectError, resourceExhausted } from "../core/errors.js";
import { TokenBuckets, type RateLimit } from "../core/rate-limit.js";
import type { CallContext } from "../core/service.js";

export interface RateLimitSettings {
  /** every RPC and plain route, per client address */
  address?: RateLimit;
  /** every authenticated call, per identity */
  identity?: RateLimit;
  /** calls that present credentials of another kind (token exchange, OAuth token and device endpoints), per address */
  sensitive?: RateLimit;
  /** failed authentications per address; once spent, the address may not present credentials until it refills */
  failedAuthentication?: RateLimit;
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

export class RequestLimits {
  readonly #address?: TokenBuckets;
  readonly #identity?: TokenBuckets;
  readonly #sensitive?: TokenBuckets;
  readonly #failed?: TokenBuckets;

  constructor(settings: RateLimitSettings, now: () => number = Date.now) {
    const buckets = (limit?: RateLimit) => (limit ? new TokenBuckets(limit, now) : undefined);
    this.#address = buckets(settings.address);
    this.#identity = buckets(settings.identity);
    this.#sensitive = buckets(settings.sensitive);
    this.#failed = buckets(settings.failedAuthentication);
  }

  /** Before anything else: throws RESOURCE_EXHAUSTED when the caller's address is over a limit. */
  admit(call: CallContext, kind: CallKind): void {
    const address = call.clientAddress ?? "unknown";
    if (kind.sensitive || call.headers.has("authorization")) {
      const wait = this.#failed?.wait(address) ?? 0;
      if (wait > 0) throw resourceExhausted("failed authentications per client address", wait);
    }
    spend(this.#address, address, "requests per client address");
    if (kind.sensitive) spend(this.#sensitive, address, "token requests per client address");
  }

  /** Once the caller is known. */
  admitIdentity(identity: string): void {
    spend(this.#identity, identity, "requests per identity");
  }

  /**
   * After a call failed: a failed authentication (UNAUTHENTICATED; for sensitive calls also
   * PERMISSION_DENIED, a refused exchange) spends one of the address's budget.
   */
  afterFailure(err: unknown, call: CallContext, kind: CallKind): void {
    // Only credentials that were presented and refused count: a request without any (the
    // registry's challenge round trip) or a caller who authenticated but lacks a grant spends nothing.
    const failedAuthentication =
      err instanceof ConnectError &&
      call.headers.has("authorization") &&
      call.principal === undefined &&
      (err.code === Code.Unauthenticated || (kind.sensitive && err.code === Code.PermissionDenied));
    if (failedAuthentication) this.#failed?.take(call.clientAddress ?? "unknown");
  }
}

function spend(buckets: TokenBuckets | undefined, key: string, what: string): void {
  const wait = buckets?.take(key) ?? 0;
  if (wait > 0) throw resourceExhausted(what, wait);
}
