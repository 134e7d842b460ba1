// Prepared statements on PGlite. PGlite's query() sends each statement as Parse, Describe, Bind,
// Describe, Execute and Sync, each a call of its own into the WebAssembly backend, and PostgreSQL
// parses, analyzes and plans the text every time: for a tag push's one statement ~0.6 ms of
// planning alone, of ~2.5 ms (measured with EXPLAIN). Here each SQL text is parsed and described
// once under a name; each run is then one call carrying Bind, Execute and Sync, and PostgreSQL
// reuses the analysis (and, after a few runs, a generic plan when it costs no more: its
// plan_cache_mode=auto, as on the PostgreSQL backend's prepared statements).
//
// The rows come back as PGlite's query() gives them (its parsers, its parseResults); the
// parameters are serialized as query() does (its serializers, by the types PostgreSQL described).
// The statements are dropped whenever the schema may have changed (`reset`).
import { parse, protocol, type PGlite, type Results } from "@electric-sql/pglite";

/** SQL worth preparing: plain data statements (not transaction control, settings or DDL). */
const PREPARABLE = /^\s*(select|insert|update|delete|with)\b/i;

/** A prepared statement gone stale: it no longer exists, or its result type changed. */
function isStale(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  return e?.code === "26000" || (e?.code === "0A000" && /cached plan/.test(String(e.message)));
}

type BackendMessage = Awaited<ReturnType<PGlite["execProtocol"]>>["messages"][number];
type RowDescription = InstanceType<typeof protocol.messages.RowDescriptionMessage>;

interface Prepared {
  name: string;
  /** the parameters' types, as PostgreSQL inferred them */
  parameterTypes: readonly number[];
  /** the RowDescription message, absent when the statement returns no rows */
  rowDescription: RowDescription | undefined;
}

let instances = 0;

export class PGlitePreparedStatements {
  readonly #statements = new Map<string, Prepared>();
  /** statements being prepared: a text run again meanwhile waits for the same one */
  readonly #pending = new Map<string, Promise<Prepared | undefined>>();
  /** names are numbered, never reused: a name is never used for two texts */
  #named = 0;
  /** statements forgotten that the backend may still hold: closed with the next one prepared */
  #toClose: string[] = [];
  /** a part of each name: two of these over one PGlite (tests open one twice) never share a name */
  readonly #prefix = `bulwark_${++instances}_`;
  /** moves at every reset: a statement prepared before one is not used */
  #resets = 0;

  constructor(
    private readonly pglite: PGlite,
    /** texts beyond this many run unprepared (e.g. IN lists of many lengths), bounding the backend's memory */
    readonly capacity = 500,
  ) {}

  /** What PGlite's query(sql, parameters) answers, from a statement prepared once per text. */
  async query<R>(sqlText: string, parameters: readonly unknown[]): Promise<Results<R>> {
    const prepared = this.#statements.get(sqlText) ?? (await this.#preparing(sqlText));
    if (!prepared)
      return parameters.length === 0 ? this.#once<R>(sqlText) : this.pglite.query<R>(sqlText, parameters as unknown[]);
    const { serializers, parsers } = this.pglite;
    const values = parameters.map((value, i) => {
      if (value === null || value === undefined) return null;
      const serializer = serializers[prepared.parameterTypes[i]!];
      return serializer ? serializer(value) : String(value);
    });
    const s = protocol.serialize;
    let messages: BackendMessage[];
    try {
      ({ messages } = await this.#exec(
        Buffer.concat([s.bind({ statement: prepared.name, values }), s.execute({}), s.sync()]),
      ));
    } catch (err) {
      if (isStale(err)) this.reset();
      throw err;
    }
    const described = prepared.rowDescription ? [prepared.rowDescription, ...messages] : messages;
    return parse.parseResults(described, parsers)[0] as Results<R>;
  }

  /**
   * A statement without parameters that is not prepared (a transaction's begin and commit, DDL,
   * settings): Parse, Bind, Describe, Execute and Sync in one call, where query() makes six. With
   * nothing to serialize, query()'s first round (learning the parameters' types) has no use. A
   * begin and a commit cost ~0.1 ms less CPU this way: 0.10-0.12 ms against 0.19-0.22
   * (bench/RESULTS.md, "nineteenth pass").
   */
  async #once<R>(sqlText: string): Promise<Results<R>> {
    const s = protocol.serialize;
    const { messages } = await this.#exec(
      Buffer.concat([s.parse({ text: sqlText }), s.bind({}), s.describe({ type: "P" }), s.execute({}), s.sync()]),
    );
    return parse.parseResults(messages, this.pglite.parsers)[0] as Results<R>;
  }

  /**
   * Sends protocol messages. PGlite gathers an exchange's answers in state of its own until the
   * exchange ends, so no two may overlap (nor one overlap a query()): its query lock is held.
   */
  #exec(message: Uint8Array) {
    return this.pglite.runExclusive(() => this.pglite.execProtocol(message));
  }

  /**
   * Forgets every statement (the schema may have changed: their result types or plans with it).
   * The backend's are closed with the next statement prepared.
   */
  reset(): void {
    if (this.#statements.size === 0 && this.#pending.size === 0) return;
    for (const { name } of this.#statements.values()) this.#toClose.push(name);
    this.#statements.clear();
    this.#pending.clear();
    this.#resets++;
  }

  #preparing(sqlText: string): Promise<Prepared | undefined> {
    if (this.#statements.size + this.#pending.size >= this.capacity || !PREPARABLE.test(sqlText))
      return Promise.resolve(undefined);
    const pending = this.#pending.get(sqlText);
    if (pending) return pending;
    const preparing: Promise<Prepared | undefined> = this.#prepare(sqlText).finally(() => {
      if (this.#pending.get(sqlText) === preparing) this.#pending.delete(sqlText);
    });
    this.#pending.set(sqlText, preparing);
    return preparing;
  }

  async #prepare(sqlText: string): Promise<Prepared | undefined> {
    const s = protocol.serialize;
    const name = `${this.#prefix}${this.#named++}`;
    const resets = this.#resets;
    // Closing a statement the backend does not hold is no error, so a failed exchange may send them again.
    const closing = this.#toClose;
    const parts = [...closing.map((n) => s.close({ type: "S", name: n })), s.parse({ name, text: sqlText })];
    const { messages } = await this.#exec(Buffer.concat([...parts, s.describe({ type: "S", name }), s.sync()]));
    this.#toClose = this.#toClose.filter((n) => !closing.includes(n));
    const prepared: Prepared = {
      name,
      parameterTypes: parse.parseDescribeStatementResults(messages),
      rowDescription: messages.find((m): m is RowDescription => m.name === "rowDescription"),
    };
    // A reset meanwhile: the statement may predate a schema change.
    if (resets !== this.#resets) {
      this.#toClose.push(name);
      return undefined;
    }
    this.#statements.set(sqlText, prepared);
    return prepared;
  }
}
