// The advisories aggregate: an advisory (publisher group, advisory id, artifact) and its events,
// written only by imports. One document is one transaction: its advisories are created, updated
// in place when their content changed (events reconciled by key: new ones appended, ones the
// document no longer has removed, the rest untouched) or left alone when unchanged.
// Listeners (the images module's reports) learn what each import changed inside its transaction.
import { createHash } from "node:crypto";
import { sql, type Expression, type Insertable, type Selectable, type SqlBool } from "kysely";
import { withinTransaction } from "../../storage/ambient-transaction.js";
import type { Db } from "../../storage/db.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { FOREIGN_KEY_VIOLATION, sqlState } from "../../storage/errors.js";
import { getByUid, takeFreshness, withFreshnessProbe } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";
import { newChildUidp } from "../../core/uidp.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import type { EventKind, ParsedAdvisory, ParsedDocument, ParsedEvent } from "./model.js";
import { vulnerabilityDb, type AdvisoriesTable, type AdvisoryEventsTable, type VulnerabilityDb } from "./schema.js";

export type AdvisoryRow = Selectable<AdvisoriesTable>;
export type AdvisoryEventRow = Selectable<AdvisoryEventsTable>;

/** The columns the feeds build OSV records and the secdb from (not the search text, digests, ...). */
const FEED_COLUMNS = [
  "uid",
  "advisory_id",
  "legacy_advisory_id",
  "artifact_name",
  "aliases",
  "severities",
  "ecosystem",
  "purl",
  "osv",
  "latest_event_type",
  "latest_event_time",
  "fixed_versions",
  "first_event_time",
] as const;
export type FeedRow = Pick<AdvisoryRow, (typeof FEED_COLUMNS)[number]>;
/** FEED_COLUMNS less the ones a light row computes (osv trimmed) or leaves empty (aliases, severities). */
const LIGHT_FEED_COLUMNS = FEED_COLUMNS.filter(
  (c): c is Exclude<(typeof FEED_COLUMNS)[number], "osv" | "aliases" | "severities"> =>
    c !== "osv" && c !== "aliases" && c !== "severities",
);

/**
 * The advisories change counter (migration 017) as a read selects it: answers kept in memory hold
 * while it has the value they were made at.
 */
const ADVISORIES_EPOCH = sql<string>`(select value::text from advisories_epoch)`;

/** A light feed row with its publishing group (what the in-memory package index keeps). */
export type IndexRow = FeedRow & { parent_uid: string };

/** The columns image vulnerability matching reads (the images module, through the exports). */
const MATCH_COLUMNS = [
  "uid",
  "parent_uid",
  "advisory_id",
  "aliases",
  "artifact_name",
  "component_location",
  "ecosystem",
  "purl",
  "latest_event_type",
  "fixed_versions",
  "severities",
  "osv",
] as const;
export type MatchRow = Pick<AdvisoryRow, (typeof MATCH_COLUMNS)[number]>;

/** What one transaction changed among the advisories (created or updated ones; none are deleted). */
export interface AdvisoryChanges {
  /** their artifact names and package URLs (without version), each once, sorted */
  names: string[];
  purls: string[];
}

/** Called inside the transaction that changed advisories, before it commits; a failure fails the change. */
export type AdvisoriesChangedListener = (changes: AdvisoryChanges) => Promise<void>;

/** ReviewState.REVIEW_STATE_APPROVED: imported advisories are published ones. */
const APPROVED = 2;

/** What one document's import did. */
export interface ImportCounts {
  created: number;
  updated: number;
  unchanged: number;
  eventsAdded: number;
  eventsRemoved: number;
}

export interface ImportMeta {
  /** recorded on the advisories and events the import writes */
  author: string;
  origin: string;
  now: Date;
}

/** The filters of ListAdvisories, as the repository applies them (all conjunctive). */
export interface AdvisoryFilter {
  uidp?: UIDPFilter;
  advisoryIds: string[];
  legacyAdvisoryIds: string[];
  artifactNames: string[];
  artifactTypes: string[];
  artifactArchitectures: string[];
  componentNames: string[];
  componentTypes: string[];
  componentLocations: string[];
  aliases: string[];
  origin?: string;
  /** conditions one and the same event must meet (empty lists: no condition) */
  event: {
    kinds: EventKind[];
    reviewStates: number[];
    authors: string[];
    excludeAuthors: string[];
    reviewers: string[];
  };
  latestEventType?: EventKind;
  /** lower-cased; matched as a substring of ids, aliases and names */
  query: string;
}

function digestOf(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex");
}

/** The key of each event: its content's digest and which occurrence of that content it is. */
function eventKeys(advisory: ParsedAdvisory): string[] {
  const seen = new Map<string, number>();
  return advisory.events.map((e) => {
    const digest = digestOf([e.time.toISOString(), e.kind, e.data]);
    const n = seen.get(digest) ?? 0;
    seen.set(digest, n + 1);
    return `${digest}#${n}`;
  });
}

/** The versions an event says fix the advisory: a fixed event's one, a patched event's list. */
function fixedVersionsOf(event: ParsedEvent): string[] {
  const data = event.data as { fixedVersion?: string; patchedVersions?: string[] };
  if (event.kind === "fixed") return data.fixedVersion ? [data.fixedVersion] : [];
  if (event.kind === "patched") return data.patchedVersions ?? [];
  return [];
}

function searchTextOf(a: ParsedAdvisory): string {
  return [a.advisoryId, a.legacyAdvisoryId ?? "", ...a.aliases, a.artifactName, a.componentName]
    .filter((s) => s !== "")
    .join("\n")
    .toLowerCase();
}

/** LIKE pattern matching `text` literally anywhere (the pattern's own metacharacters escaped). */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** The first key of the transaction-level advisory lock imports take (the second is the group's). */
const IMPORT_LOCK_CLASS = 0x61647669; // "advi"

/**
 * Makes imports into one group wait for each other: a transaction-level advisory lock on the group
 * (its uid's 32-bit `hashtext`; two groups that collide only wait for each other), taken before
 * anything is read. Without it, two imports of overlapping documents could each write a row the
 * other was about to (one creating an advisory the other had not seen yet while that one updated
 * it, or both creating them in opposite orders) and deadlock on PostgreSQL. One lock a group, not
 * one an advisory: an import request's documents share one transaction (its event's), so locks
 * per advisory would pile up in PostgreSQL's shared lock table and, taken document by document,
 * could again be taken in opposite orders. Taking it again in the same transaction (the request's
 * next document, a retry) is immediate.
 */
async function lockGroupImports(db: VulnerabilityDb, parentUid: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(${IMPORT_LOCK_CLASS}::int4, hashtext(${parentUid}))`.execute(db);
}

export class AdvisoriesRepository {
  private readonly db: VulnerabilityDb;

  readonly #changeListeners: AdvisoriesChangedListener[] = [];

  constructor(db: Db) {
    this.db = vulnerabilityDb(db);
  }

  /** `listener` runs inside every transaction that creates or updates advisories (each import). */
  onChanged(listener: AdvisoriesChangedListener): void {
    this.#changeListeners.push(listener);
  }

  get(uid: string, freshness?: Freshness): Promise<AdvisoryRow | undefined> {
    return getByUid(this.db, "advisories", uid, freshness);
  }

  /** The events of these advisories, oldest first, grouped by advisory uid. */
  async eventsOf(advisoryUids: readonly string[]): Promise<Map<string, AdvisoryEventRow[]>> {
    const byAdvisory = new Map<string, AdvisoryEventRow[]>(advisoryUids.map((uid) => [uid, []]));
    if (advisoryUids.length === 0) return byAdvisory;
    const rows = await this.db
      .selectFrom("advisory_events")
      .selectAll()
      .where("advisory_uid", "in", advisoryUids)
      .orderBy("advisory_uid")
      .orderBy("create_time")
      .orderBy("seq")
      .execute();
    for (const row of rows) byAdvisory.get(row.advisory_uid)!.push(row);
    return byAdvisory;
  }

  /**
   * Imports one parsed document into group `parentUid` in one transaction. Returns undefined when
   * the group does not exist.
   */
  importDocument(parentUid: string, doc: ParsedDocument, meta: ImportMeta): Promise<ImportCounts | undefined> {
    // In an ambient transaction, so the listeners' statements (through their own views of the
    // database) join the import's transaction; inside a caller's scope, the scope's.
    // The lock is taken in that transaction itself, not in the document's savepoint below: rolling a
    // failed document back must not let another import in while this request's earlier documents
    // are still uncommitted.
    return withinTransaction(this.db, async () => {
      await lockGroupImports(this.db, parentUid);
      return this.#importDocument(parentUid, doc, meta);
    });
  }

  async #importDocument(parentUid: string, doc: ParsedDocument, meta: ImportMeta): Promise<ImportCounts | undefined> {
    const counts: ImportCounts = { created: 0, updated: 0, unchanged: 0, eventsAdded: 0, eventsRemoved: 0 };
    if (doc.advisories.length === 0) return counts;
    try {
      await this.db.transaction().execute(async (trx) => {
        const existing = await trx
          .selectFrom("advisories")
          .select(["uid", "advisory_id", "artifact_name", "source_digest", "latest_event_type"])
          .where("parent_uid", "=", parentUid)
          .where(
            "advisory_id",
            "in",
            doc.advisories.map((a) => a.advisoryId),
          )
          .forUpdate()
          .execute();
        const byKey = new Map(existing.map((r) => [`${r.advisory_id}\n${r.artifact_name}`, r]));
        const newAdvisories: Insertable<AdvisoriesTable>[] = [];
        const newEvents: Insertable<AdvisoryEventsTable>[] = [];
        const changed: { uid: string; keys: string[] }[] = [];
        const changedNames = new Set<string>();
        const changedPurls = new Set<string>();
        // advisory_counts' changes: latest event type → +n/−n
        const countDeltas = new Map<EventKind, number>();
        const addCount = (kind: EventKind, n: number) => countDeltas.set(kind, (countDeltas.get(kind) ?? 0) + n);

        for (const advisory of doc.advisories) {
          const { line: _line, ...content } = advisory;
          const sourceDigest = digestOf([content, meta.author, meta.origin]);
          const current = byKey.get(`${advisory.advisoryId}\n${advisory.artifactName}`);
          if (current && current.source_digest === sourceDigest) {
            counts.unchanged++;
            continue;
          }
          const latest = advisory.events[advisory.events.length - 1]!;
          const values = {
            advisory_id: advisory.advisoryId,
            legacy_advisory_id: advisory.legacyAdvisoryId ?? null,
            author: meta.author,
            origin: meta.origin,
            artifact_name: advisory.artifactName,
            artifact_type: advisory.artifactType,
            artifact_architecture: advisory.artifactArchitecture,
            component_name: advisory.componentName,
            component_type: advisory.componentType,
            component_location: advisory.componentLocation,
            aliases: advisory.aliases,
            severities: JSON.stringify(advisory.severities),
            ecosystem: advisory.ecosystem,
            purl: advisory.purl,
            osv: advisory.osv ? JSON.stringify(advisory.osv) : null,
            latest_event_type: latest.kind,
            latest_event_time: latest.time,
            fixed_versions: fixedVersionsOf(latest),
            first_event_time: advisory.events[0]!.time,
            search_text: searchTextOf(advisory),
            source_digest: sourceDigest,
            update_time: meta.now,
          };
          changedNames.add(advisory.artifactName);
          if (advisory.purl) changedPurls.add(advisory.purl);
          let uid: string;
          if (current) {
            if (current.latest_event_type !== latest.kind) {
              addCount(current.latest_event_type, -1);
              addCount(latest.kind, 1);
            }
            uid = current.uid;
            await trx.updateTable("advisories").set(values).where("uid", "=", uid).execute();
            counts.updated++;
          } else {
            uid = newChildUidp(parentUid);
            newAdvisories.push({ uid, parent_uid: parentUid, ...values, create_time: meta.now });
            addCount(latest.kind, 1);
            counts.created++;
          }
          const keys = eventKeys(advisory);
          if (current) changed.push({ uid, keys });
          advisory.events.forEach((e, seq) =>
            newEvents.push({
              uid: newChildUidp(uid),
              advisory_uid: uid,
              event_key: keys[seq]!,
              create_time: e.time,
              seq,
              kind: e.kind,
              data: JSON.stringify(e.data),
              author: meta.author,
              reviewer: "",
              review_state: APPROVED,
              issue: null,
            }),
          );
        }

        // New advisories in a few statements (their events need them first).
        for (let i = 0; i < newAdvisories.length; i += 500)
          await trx
            .insertInto("advisories")
            .values(newAdvisories.slice(i, i + 500))
            .execute();
        // Events of changed advisories: remove what the document no longer has; keep (and do
        // not duplicate) what it still has, with its order refreshed.
        for (const { uid, keys } of changed) {
          const removed = await trx
            .deleteFrom("advisory_events")
            .where("advisory_uid", "=", uid)
            .where("event_key", "not in", keys)
            .executeTakeFirst();
          counts.eventsRemoved += Number(removed.numDeletedRows);
        }
        // Inserted in slices so one statement's parameters stay well under PostgreSQL's limit.
        for (let i = 0; i < newEvents.length; i += 2000) {
          const slice = newEvents.slice(i, i + 2000);
          const result = await trx
            .insertInto("advisory_events")
            .values(slice)
            .onConflict((oc) =>
              oc.columns(["advisory_uid", "event_key"]).doUpdateSet((eb) => ({
                create_time: eb.ref("excluded.create_time"),
                seq: eb.ref("excluded.seq"),
              })),
            )
            .returning(sql<boolean>`(xmax = 0)`.as("inserted"))
            .execute();
          counts.eventsAdded += result.filter((r) => r.inserted).length;
        }
        if (changedNames.size + changedPurls.size > 0) {
          const changes = { names: [...changedNames].sort(), purls: [...changedPurls].sort() };
          for (const listener of this.#changeListeners) await listener(changes);
        }
        await this.#addCounts(trx, parentUid, countDeltas);
      });
    } catch (err) {
      if (sqlState(err) === FOREIGN_KEY_VIOLATION) return undefined;
      throw err;
    }
    return counts;
  }

  /**
   * Appends the changes of one import to advisory_counts (rows are only added: concurrent imports
   * into one group take no locks of each other's).
   */
  async #addCounts(trx: VulnerabilityDb, parentUid: string, deltas: Map<EventKind, number>): Promise<void> {
    const changed = [...deltas].filter(([, n]) => n !== 0).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (changed.length === 0) return;
    await trx
      .insertInto("advisory_counts")
      .values(changed.map(([kind, n]) => ({ uid: parentUid, latest_event_type: kind, count: n })))
      .execute();
  }

  /**
   * The exact number of advisories `listQuery(filter)` selects, from advisory_counts, when the
   * filter is one they answer (nothing but the latest event's type and children_of, or
   * nothing); undefined
   * otherwise. `restrict` keeps the groups the caller sees (a count row's uid is the group's).
   */
  maintainedCount(filter: AdvisoryFilter, restrict: <QB>(qb: QB) => QB) {
    const e = filter.event;
    const others =
      filter.advisoryIds.length +
      filter.legacyAdvisoryIds.length +
      filter.artifactNames.length +
      filter.artifactTypes.length +
      filter.artifactArchitectures.length +
      filter.componentNames.length +
      filter.componentTypes.length +
      filter.componentLocations.length +
      filter.aliases.length +
      e.kinds.length +
      e.reviewStates.length +
      e.authors.length +
      e.excludeAuthors.length +
      e.reviewers.length;
    // uidp: none, or children_of alone (the advisories of one group: its count rows)
    const uidp = filter.uidp;
    const otherUidp = uidp
      ? Number(uidp.descendantsOf !== "") + Number(uidp.ancestorsOf !== "") + Number(uidp.inRoot) + uidp.ids.length
      : 0;
    if (others > 0 || otherUidp > 0 || filter.origin !== undefined || filter.query !== "") return undefined;
    const group = uidp?.childrenOf || undefined;
    const kind = filter.latestEventType;
    return () => {
      let q = restrict(this.db.selectFrom("advisory_counts")).select(sql<string>`coalesce(sum(count), 0)`.as("count"));
      if (group !== undefined) q = q.where("uid", "=", group);
      if (kind) q = q.where("latest_event_type", "=", kind);
      return q;
    };
  }

  /** FROM + WHERE of an advisory listing, for the list engine. */
  listQuery(filter: AdvisoryFilter) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("advisories"), filter.uidp);
      const anyOf = <C extends keyof AdvisoriesTable & string>(column: C, values: string[]) => {
        if (values.length > 0) q = q.where(column, "in", values as never);
      };
      anyOf("advisory_id", filter.advisoryIds);
      anyOf("legacy_advisory_id", filter.legacyAdvisoryIds);
      anyOf("artifact_name", filter.artifactNames);
      anyOf("artifact_type", filter.artifactTypes);
      anyOf("artifact_architecture", filter.artifactArchitectures);
      anyOf("component_name", filter.componentNames);
      anyOf("component_type", filter.componentTypes);
      anyOf("component_location", filter.componentLocations);
      if (filter.aliases.length > 0) q = q.where(sql<SqlBool>`aliases && ${sql.val(filter.aliases)}::text[]`);
      if (filter.origin !== undefined) q = q.where("origin", "=", filter.origin);
      if (filter.latestEventType) q = q.where("latest_event_type", "=", filter.latestEventType);
      if (filter.query !== "") q = q.where(sql<SqlBool>`search_text like ${containsPattern(filter.query)}`);
      const e = filter.event;
      if (
        e.kinds.length + e.reviewStates.length + e.authors.length + e.excludeAuthors.length + e.reviewers.length >
        0
      ) {
        q = q.where(({ exists, selectFrom }) => {
          let events = selectFrom("advisory_events")
            .select(sql`1`.as("one"))
            .whereRef("advisory_events.advisory_uid", "=", "advisories.uid");
          if (e.kinds.length > 0) events = events.where("advisory_events.kind", "in", e.kinds);
          if (e.reviewStates.length > 0) events = events.where("advisory_events.review_state", "in", e.reviewStates);
          if (e.authors.length > 0) events = events.where("advisory_events.author", "in", e.authors);
          if (e.excludeAuthors.length > 0) events = events.where("advisory_events.author", "not in", e.excludeAuthors);
          if (e.reviewers.length > 0) events = events.where("advisory_events.reviewer", "in", e.reviewers);
          return exists(events) as Expression<SqlBool>;
        });
      }
      return q;
    };
  }

  /**
   * Visible advisories in key order, a page at a time (for the feeds): rows after `after`
   * (artifact_name, advisory_id, uid), at most `limit`.
   */
  feedPage(
    restrict: <QB>(qb: QB) => QB,
    after: [string, string, string] | undefined,
    limit: number,
    options: { kinds?: EventKind[]; ecosystems?: readonly string[] } = {},
  ): Promise<FeedRow[]> {
    let q = restrict(this.db.selectFrom("advisories").select(FEED_COLUMNS));
    if (options.kinds) q = q.where("latest_event_type", "in", options.kinds);
    if (options.ecosystems) q = q.where("ecosystem", "in", options.ecosystems);
    if (after)
      q = q.where(
        sql<SqlBool>`(artifact_name, advisory_id, uid) > (${after[0]}::text, ${after[1]}::text, ${after[2]}::text)`,
      );
    return q.orderBy("artifact_name").orderBy("advisory_id").orderBy("uid").limit(limit).execute();
  }

  /** Visible advisories whose advisory id, legacy id or one of whose aliases is `id`. */
  findById(restrict: <QB>(qb: QB) => QB, id: string): Promise<FeedRow[]> {
    return restrict(this.db.selectFrom("advisories").select(FEED_COLUMNS))
      .where((eb) =>
        eb.or([
          eb("advisory_id", "=", id),
          eb("legacy_advisory_id", "=", id),
          sql<SqlBool>`${sql.val([id])}::text[] <@ aliases`,
        ]),
      )
      .orderBy("advisory_id")
      .orderBy("uid")
      .limit(1000)
      .execute();
  }

  /**
   * Advisories of every group whose artifact name is one of `names` or whose package URL is one
   * of `purls` (candidates only: the matcher decides), in uid order. Arrays as one parameter
   * each, so the statement's text is the same whatever the number of packages.
   */
  forPackages(names: readonly string[], purls: readonly string[]): Promise<MatchRow[]> {
    if (names.length === 0 && purls.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom("advisories")
      .select(MATCH_COLUMNS)
      .where(
        sql<SqlBool>`(artifact_name = any(${sql.val([...names])}::text[]) or purl = any(${sql.val([...purls])}::text[]))`,
      )
      .orderBy("uid")
      .execute();
  }

  /**
   * Names and purls of the advisories updated after `after` (all of them when undefined). An
   * update_time is the importing server's clock when its import began: a cache may refresh by
   * it, but only the changed-advisories hook (onChanged) is exact about late commits.
   */
  async changedSince(after: Date | undefined): Promise<AdvisoryChanges> {
    let q = this.db.selectFrom("advisories").select(["artifact_name", "purl"]).groupBy(["artifact_name", "purl"]);
    if (after) q = q.where("update_time", ">", after);
    const rows = await q.execute();
    return {
      names: [...new Set(rows.map((r) => r.artifact_name))].sort(),
      purls: [...new Set(rows.map((r) => r.purl))].sort(),
    };
  }

  /** When the advisories last changed: the latest update_time, undefined while there are none. */
  async lastChange(): Promise<Date | undefined> {
    const row = await this.db
      .selectFrom("advisories")
      .select((eb) => eb.fn.max("update_time").as("latest"))
      .executeTakeFirst();
    return row?.latest ? new Date(row.latest) : undefined;
  }

  /**
   * The advisories change counter now, read in one statement with the call's freshness probe (so
   * cached grants are confirmed by the same round trip).
   */
  async epoch(freshness?: Freshness): Promise<string> {
    const row = await withFreshnessProbe(
      this.db.selectNoFrom(ADVISORIES_EPOCH.as("epoch")),
      freshness,
    ).executeTakeFirstOrThrow();
    return String(takeFreshness(row, freshness).epoch);
  }

  /**
   * Every advisory as a light feed row (see findByPackages) with its group, in (advisory_id, uid)
   * order: what the package index is built from. Read after the counter, so the rows are at
   * least as new as the value the index is kept under.
   */
  allLight(limit: number): Promise<IndexRow[]> {
    return this.#light().select("parent_uid").orderBy("advisory_id").orderBy("uid").limit(limit).execute();
  }

  #light() {
    return this.db
      .selectFrom("advisories")
      .select(LIGHT_FEED_COLUMNS)
      .select(
        sql<
          FeedRow["osv"]
        >`case when osv is null then null else jsonb_build_object('modified', osv->'modified', 'affected', coalesce(osv->'affected', '[]'::jsonb)) end`.as(
          "osv",
        ),
      )
      .select(sql<FeedRow["aliases"]>`'{}'::text[]`.as("aliases"))
      .select(sql<FeedRow["severities"]>`'[]'::jsonb`.as("severities"));
  }

  /**
   * Visible advisories that may concern these packages: those with one of the names or purls
   * (the caller matches ecosystems and versions exactly). `light`: what deciding a match and
   * naming it (id, modified) needs — of the imported OSV record only its `modified` and
   * `affected`, not the summary, details and references a querybatch answer leaves out.
   */
  findByPackages(
    restrict: <QB>(qb: QB) => QB,
    packages: { name?: string; purls?: readonly string[] }[],
    light = false,
  ): Promise<FeedRow[]> {
    const names = [...new Set(packages.flatMap((p) => (p.name ? [p.name] : [])))];
    const purls = [...new Set(packages.flatMap((p) => (!p.name && p.purls ? p.purls : [])))];
    if (names.length === 0 && purls.length === 0) return Promise.resolve([]);
    const columns = light ? this.#light() : this.db.selectFrom("advisories").select(FEED_COLUMNS);
    return restrict(columns)
      .where((eb) =>
        eb.or([
          ...(names.length > 0 ? [eb("artifact_name", "in", names)] : []),
          ...(purls.length > 0 ? [eb("purl", "in", purls)] : []),
        ]),
      )
      .orderBy("advisory_id")
      .orderBy("uid")
      .execute();
  }
}
