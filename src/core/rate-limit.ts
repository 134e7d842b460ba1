// Token buckets by key (a client address, an identity): each key may spend `burst` requests at
// once and regains `perSecond` of them each second. Memory stays bounded however many keys
// appear: full buckets are the same as absent ones and are dropped first.

export interface RateLimit {
  /** requests regained per second */
  perSecond: number;
  /** requests that may be spent at once */
  burst: number;
}

interface Bucket {
  tokens: number;
  /** when `tokens` was last brought up to date, in ms */
  at: number;
}

const MAX_KEYS = 100_000;

export class TokenBuckets {
  readonly #buckets = new Map<string, Bucket>();

  constructor(
    readonly limit: RateLimit,
    private readonly now: () => number = Date.now,
  ) {}

  /** Spends one request of `key`: 0 when allowed, else the seconds until one is available (nothing is spent). */
  take(key: string): number {
    const bucket = this.#current(key);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return this.#secondsUntilOne(bucket);
  }

  /** The seconds until `key` may spend a request (0: now), spending nothing. */
  wait(key: string): number {
    const bucket = this.#buckets.get(key);
    if (!bucket) return 0;
    this.#refill(bucket);
    return bucket.tokens >= 1 ? 0 : this.#secondsUntilOne(bucket);
  }

  #current(key: string): Bucket {
    let bucket = this.#buckets.get(key);
    if (bucket) {
      this.#refill(bucket);
      return bucket;
    }
    if (this.#buckets.size >= MAX_KEYS) this.#evict();
    bucket = { tokens: this.limit.burst, at: this.now() };
    this.#buckets.set(key, bucket);
    return bucket;
  }

  #refill(bucket: Bucket): void {
    const now = this.now();
    bucket.tokens = Math.min(this.limit.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.limit.perSecond);
    bucket.at = now;
  }

  #secondsUntilOne(bucket: Bucket): number {
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.limit.perSecond));
  }

  #evict(): void {
    for (const [key, bucket] of this.#buckets) {
      this.#refill(bucket);
      if (bucket.tokens >= this.limit.burst) this.#buckets.delete(key);
    }
    // Still full of busy keys: forget the oldest tenth (they start again with a full bucket).
    if (this.#buckets.size >= MAX_KEYS) {
      let drop = MAX_KEYS / 10;
      for (const key of this.#buckets.keys()) {
        if (drop-- <= 0) break;
        this.#buckets.delete(key);
      }
    }
  }
}
