// The report worker's in-process copy of every matchable advisory, indexed by artifact name and
// by purl key (type/name), so matching an image reads no advisory rows in the steady state (the
// candidates of a 300-package image are ~5,000 rows of the wolfi corpus: most of a match's cost).
//
// Freshness, per replica: each batch asks `lastChange()` (the max of an indexed column: one cheap
// query). When it moved, the advisories changed since the previous stamp (minus the watermark's
// lookback, for imports that began earlier but committed later) are read again by their names
// and purls and replace their entries by uid (advisories are never deleted). The worker also
// hands over each advisory look of checkAdvisories, so a late commit that queued images has its
// advisories re-read before those images are matched. Every replica keeps its own copy and
// stamp, so an import on one replica reaches the others' next batch.
import { purlTypeAndName } from "./storage/inventories.js";

export interface CachedAdvisory {
  uid: string;
  artifactName: string;
  purl: string;
}

export interface AdvisorySource<A extends CachedAdvisory> {
  advisoriesForPackages(names: string[], purls: string[]): Promise<A[]>;
  advisoriesChangedSince(after: Date | undefined): Promise<{ names: string[]; purls: string[] }>;
  lastChange(): Promise<Date | undefined>;
}

/** The cached advisories as the worker reads them for one batch. */
export interface AdvisoryView<A> {
  byName: ReadonlyMap<string, readonly A[]>;
  /** by "type/name" of the advisory's purl */
  byPurl: ReadonlyMap<string, readonly A[]>;
  /** when the advisories last changed (the reports' db_build_time) */
  lastChange: Date | undefined;
}

/** "pkg:deb/debian/openssl@3.0?arch=amd64" → "deb/openssl": what a versionless advisory purl and a package share. */
export function purlKey(purl: string): string | undefined {
  const p = purlTypeAndName(purl);
  return p && `${p.type}/${p.name}`;
}

export class AdvisoryCache<A extends CachedAdvisory> {
  #byUid = new Map<string, A>();
  #view: AdvisoryView<A> | undefined;
  /** lastChange() when the copy was last brought up to date */
  #stamp: Date | undefined;
  /** names and purls to read again before the next use (handed over by the advisories' look) */
  #stale = { names: new Set<string>(), purls: new Set<string>() };
  /** rows read from the database so far (the bench and tests check the steady state reads none) */
  rowsRead = 0;

  constructor(
    private readonly source: AdvisorySource<A>,
    private readonly lookbackMs: number,
  ) {}

  /** Marks advisories to read again before the next use (names and versionless purls). */
  invalidate(names: readonly string[], purls: readonly string[]): void {
    for (const n of names) this.#stale.names.add(n);
    for (const p of purls) this.#stale.purls.add(p);
  }

  /** The advisories as of now: one lastChange() query, and re-reads only when something changed. */
  async current(): Promise<AdvisoryView<A>> {
    const lastChange = await this.source.lastChange();
    if (!this.#view) {
      // First use: everything (names and purls of every advisory, then their rows).
      const all = await this.source.advisoriesChangedSince(undefined);
      await this.#reload(all.names, all.purls);
    } else if (lastChange?.getTime() !== this.#stamp?.getTime()) {
      const since = this.#stamp ? new Date(this.#stamp.getTime() - this.lookbackMs) : undefined;
      const changed = await this.source.advisoriesChangedSince(since);
      this.invalidate(changed.names, changed.purls);
    }
    if (this.#stale.names.size > 0 || this.#stale.purls.size > 0) {
      const { names, purls } = this.#stale;
      this.#stale = { names: new Set(), purls: new Set() };
      await this.#reload([...names], [...purls]);
    }
    this.#stamp = lastChange;
    if (this.#view!.lastChange?.getTime() !== lastChange?.getTime()) this.#view = { ...this.#view!, lastChange };
    return this.#view!;
  }

  async #reload(names: string[], purls: string[]): Promise<void> {
    if (names.length > 0 || purls.length > 0) {
      const rows = await this.source.advisoriesForPackages(names, purls);
      this.rowsRead += rows.length;
      for (const a of rows) this.#byUid.set(a.uid, a);
    }
    // Rebuilt whole (an update may move an advisory to another name or purl), in uid order as the
    // database answers, so a recomputation considers them in the same order as before.
    const byName = new Map<string, A[]>();
    const byPurl = new Map<string, A[]>();
    const ordered = [...this.#byUid.values()].sort((a, b) => (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0));
    for (const a of ordered) {
      if (a.artifactName) push(byName, a.artifactName, a);
      const key = a.purl ? purlKey(a.purl) : undefined;
      if (key) push(byPurl, key, a);
    }
    this.#view = { byName, byPurl, lastChange: this.#view?.lastChange };
  }
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
