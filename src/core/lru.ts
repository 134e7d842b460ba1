// A bounded map that forgets the least recently used entry first (nearly: an entry just used is
// kept for at least half the capacity's worth of new entries): the verified-token and grants
// caches use it, so an attacker presenting many distinct credentials costs memory only up to
// the bound.
export class LruCache<K, V> {
  /** Map order is recency order: the first entry is the one to forget. */
  readonly #entries = new Map<K, { value: V; stamp: number }>();
  /** counts insertions; an entry's stamp says when it last moved to the end */
  #clock = 0;

  constructor(readonly capacity: number) {
    if (!(capacity > 0)) throw new Error("an LRU cache needs a positive capacity");
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: K): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    // Moved to the end only once it has drifted half-way to eviction: a hot entry (every
    // request's token) then costs one lookup, and still can never be the one forgotten.
    if (this.#clock - entry.stamp >= this.capacity / 2) {
      this.#entries.delete(key);
      entry.stamp = ++this.#clock;
      this.#entries.set(key, entry);
    }
    return entry.value;
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, { value, stamp: ++this.#clock });
    if (this.#entries.size > this.capacity) this.#entries.delete(this.#entries.keys().next().value as K);
  }

  delete(key: K): void {
    this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
  }
}
