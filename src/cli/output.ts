// How the client commands print what the API answered: `-o table` (aligned columns, long text
// cut short), `wide` (more columns, nothing cut), `json` (the API's JSON; a list is an array),
// `id` (one uid per line), `terse` (the table's values tab-separated, no header: for `cut`/`awk`),
// and `tree` for groups. Colors only on a terminal, never with NO_COLOR (FORCE_COLOR forces them).
import { toJson, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { UsageError } from "./errors.js";
import type { CliIo, CliOutput } from "./io.js";
import type { OutputFormat } from "./settings.js";

export interface Column<T> {
  header: string;
  value(row: T): string;
  /** shown only with -o wide */
  wide?: boolean;
  /** cut to this many characters in -o table */
  max?: number;
}

export interface View<T> {
  columns: Column<T>[];
  id(row: T): string;
  json(row: T): unknown;
}

/** A view of a generated message type: JSON is the API's own (proto3 JSON mapping). */
export function messageView<D extends DescMessage>(
  schema: D,
  columns: Column<MessageShape<D>>[],
  id: (row: MessageShape<D>) => string = (row) => (row as unknown as { uid: string }).uid,
): View<MessageShape<D>> {
  return { columns, id, json: (row) => toJson(schema, row) };
}

export function useColor(stream: Pick<CliOutput, "isTTY">, env: NodeJS.ProcessEnv): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "" && env.FORCE_COLOR !== "0") return true;
  return stream.isTTY === true && env.TERM !== "dumb";
}

export interface Styles {
  bold(s: string): string;
  dim(s: string): string;
  red(s: string): string;
  green(s: string): string;
}

export function styles(enabled: boolean): Styles {
  const wrap = (open: number, close: number) => (s: string) => (enabled ? `\x1b[${open}m${s}\x1b[${close}m` : s);
  return { bold: wrap(1, 22), dim: wrap(2, 22), red: wrap(31, 39), green: wrap(32, 39) };
}

/** A timestamp as an ISO date and time to the second, UTC; "" when unset. */
export function time(ts: Timestamp | undefined): string {
  if (!ts || (ts.seconds === 0n && ts.nanos === 0)) return "";
  return timestampDate(ts)
    .toISOString()
    .replace(/\.\d{3}Z$/, "Z");
}

function cut(text: string, max: number | undefined): string {
  const oneLine = text.replace(/\s*\n\s*/g, " ");
  if (max === undefined || [...oneLine].length <= max) return oneLine;
  return [...oneLine].slice(0, max - 1).join("") + "…";
}

function table(headers: string[], rows: string[][], style: Styles): string {
  const width = (s: string) => [...s].length;
  const widths = headers.map((h, i) => Math.max(width(h), ...rows.map((r) => width(r[i]!))));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c + " ".repeat(widths[i]! - width(c))))
      .join("  ")
      .trimEnd();
  return [style.bold(line(headers)), ...rows.map(line)].join("\n") + "\n";
}

export class Printer {
  readonly style: Styles;
  private readonly out: CliOutput;
  /** prints on `io`'s stdout, in colors when that is a terminal (and the environment allows) */
  constructor(
    readonly format: OutputFormat,
    io: Pick<CliIo, "stdout" | "env">,
  ) {
    this.out = io.stdout;
    this.style = styles(useColor(io.stdout, io.env));
  }

  write(text: string): void {
    this.out.write(text);
  }

  /** Rows of a list (an empty list prints the header alone in table form, `[]` in JSON). */
  list<T>(view: View<T>, rows: T[]): void {
    this.write(this.render(view, rows, true));
  }

  /** One resource (JSON: the object itself). */
  one<T>(view: View<T>, row: T): void {
    this.write(this.render(view, [row], false));
  }

  /** A message for people (table/wide); scripts asking for json/id/terse get `data` or nothing. */
  done(text: string, data?: { id?: string; json?: unknown }): void {
    if (this.format === "json") {
      if (data?.json !== undefined) this.write(JSON.stringify(data.json, null, 2) + "\n");
    } else if (this.format === "id" || this.format === "terse") {
      if (data?.id !== undefined) this.write(data.id + "\n");
    } else this.write(text + "\n");
  }

  /**
   * A printer for rows that keep coming (`--follow`): -o json writes one compact JSON object per
   * line (JSON Lines: an array cannot be streamed); table and wide write the header once, then
   * each batch with every column as wide as the widest value seen so far; id and terse as a list.
   */
  stream<T>(view: View<T>): (rows: T[]) => void {
    if (this.format === "json") return (rows) => rows.forEach((r) => this.write(JSON.stringify(view.json(r)) + "\n"));
    if (this.format !== "table" && this.format !== "wide") return (rows) => this.list(view, rows);
    const wide = this.format === "wide";
    const columns = view.columns.filter((c) => wide || !c.wide);
    const widths = columns.map((c) => [...c.header].length);
    let headerWritten = false;
    return (rows) => {
      const cells = rows.map((r) => columns.map((c) => cut(c.value(r), wide ? undefined : c.max)));
      for (const row of cells) row.forEach((cell, i) => (widths[i] = Math.max(widths[i]!, [...cell].length)));
      const line = (values: string[]) =>
        values
          .map((v, i) => (i === values.length - 1 ? v : v + " ".repeat(widths[i]! - [...v].length)))
          .join("  ")
          .trimEnd();
      if (!headerWritten) {
        this.write(this.style.bold(line(columns.map((c) => c.header))) + "\n");
        headerWritten = true;
      }
      this.write(cells.map((row) => line(row) + "\n").join(""));
    };
  }

  private render<T>(view: View<T>, rows: T[], many: boolean): string {
    switch (this.format) {
      case "json":
        return JSON.stringify(many ? rows.map((r) => view.json(r)) : view.json(rows[0]!), null, 2) + "\n";
      case "id":
        return rows.map((r) => view.id(r) + "\n").join("");
      case "terse": {
        const columns = view.columns.filter((c) => !c.wide);
        return rows.map((r) => columns.map((c) => cut(c.value(r), undefined)).join("\t") + "\n").join("");
      }
      case "table":
      case "wide": {
        const wide = this.format === "wide";
        const columns = view.columns.filter((c) => wide || !c.wide);
        return table(
          columns.map((c) => c.header),
          rows.map((r) => columns.map((c) => cut(c.value(r), wide ? undefined : c.max))),
          this.style,
        );
      }
      case "tree":
        throw new UsageError("-o tree is for `iam organizations list` and `iam folders list`");
    }
  }
}

export interface TreeNode {
  uid: string;
  label: string;
}

/** Groups as a tree by their uids (a child's uid extends its parent's): roots first, children indented. */
export function renderTree(nodes: TreeNode[], style: Styles): string {
  const byParent = new Map<string, TreeNode[]>();
  const present = new Set(nodes.map((n) => n.uid));
  const parentOf = (uid: string) => {
    // The nearest listed ancestor (a caller may see a group but not its parent).
    for (let p = uid.lastIndexOf("/"); p > 0; p = uid.lastIndexOf("/", p - 1)) {
      const candidate = uid.slice(0, p);
      if (present.has(candidate)) return candidate;
    }
    return "";
  };
  for (const n of [...nodes].sort((a, b) => a.label.localeCompare(b.label) || a.uid.localeCompare(b.uid))) {
    const parent = parentOf(n.uid);
    byParent.set(parent, [...(byParent.get(parent) ?? []), n]);
  }
  const lines: string[] = [];
  const walk = (parent: string, prefix: string) => {
    const children = byParent.get(parent) ?? [];
    children.forEach((n, i) => {
      const last = i === children.length - 1;
      const branch = parent === "" ? "" : last ? "└── " : "├── ";
      lines.push(`${prefix}${branch}${style.bold(n.label)} ${style.dim(`(${n.uid})`)}`);
      walk(n.uid, parent === "" ? "" : prefix + (last ? "    " : "│   "));
    });
  };
  walk("", "");
  return lines.length ? lines.join("\n") + "\n" : "";
}

/** Every item of a paged list, page after page, up to `limit` (0: all). */
export async function listAll<T>(
  page: (pageToken: string, pageSize: number) => Promise<{ items: T[]; nextPageToken: string }>,
  limit = 0,
): Promise<T[]> {
  const out: T[] = [];
  let token = "";
  for (;;) {
    const want = limit > 0 ? Math.min(200, limit - out.length) : 200;
    const { items, nextPageToken } = await page(token, want);
    out.push(...items);
    if (!nextPageToken || (limit > 0 && out.length >= limit)) break;
    token = nextPageToken;
  }
  return limit > 0 ? out.slice(0, limit) : out;
}
