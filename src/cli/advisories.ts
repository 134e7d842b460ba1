// `bulwark advisories import`: sends advisory documents (advisory YAML, OSV JSON; files or
// directories) to the server's import RPC with the caller's token, a batch at a time. The server
// parses and stores them, so an import works while it holds the embedded database. Documents the
// server cannot take are reported with file and line and skipped; the rest import.
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  AdvisoryDocumentSchema,
  AdvisoryImportService,
  type AdvisoryDocument,
  type DocumentResult,
} from "../gen/bulwark/vulnerabilities/v1/import_pb.js";
import { CliError } from "./errors.js";
import type { CliOutput } from "./io.js";

/** Most characters of one document (the server's limit for a document's content). */
export const MAX_DOCUMENT_CHARACTERS = 262_144;
/** Bytes of documents per request: well under the server's 1 MiB request limit. */
const BATCH_BYTES = 512 * 1024;
const BATCH_DOCUMENTS = 200;
/** Requests in flight at once. */
const CONCURRENCY = 2;

const DOCUMENT_FILE = /\.(ya?ml|json)$/i;

export interface ImportOptions {
  paths: string[];
  /** the import service's client, authenticated as the caller */
  client: Client<typeof AdvisoryImportService>;
  group?: string;
  author?: string;
  origin?: string;
  /** progress and problems go here (stderr) */
  say(line: string): void;
  /** a progress bar is drawn when this is a terminal */
  progress?: CliOutput;
}

export interface ImportSummary {
  files: number;
  advisories: number;
  created: number;
  updated: number;
  unchanged: number;
  eventsAdded: number;
  eventsRemoved: number;
  skipped: number;
}

/** Every document file under `paths`, sorted; a named file is taken whatever its extension. */
async function documentFiles(paths: string[]): Promise<string[]> {
  const files: string[] = [];
  const walk = async (dir: string) => {
    const entries = await readdir(dir, { withFileTypes: true });
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (e.name.startsWith(".")) continue;
      const path = join(dir, e.name);
      if (e.isDirectory()) await walk(path);
      else if (e.isFile() && DOCUMENT_FILE.test(e.name)) files.push(path);
    }
  };
  for (const path of paths) {
    const info = await stat(path).catch(() => {
      throw new CliError(`${path}: no such file or directory`);
    });
    if (info.isDirectory()) await walk(path);
    else files.push(path);
  }
  return files;
}

/** The file as a document, or why it cannot be one (checked here, so one bad file never fails a batch). */
async function readDocument(path: string): Promise<AdvisoryDocument | string> {
  const bytes = await readFile(path);
  let content: string;
  try {
    content = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return "not UTF-8 text";
  }
  if (content.includes("\u0000")) return "contains a NUL character";
  if (content.length > MAX_DOCUMENT_CHARACTERS && [...content].length > MAX_DOCUMENT_CHARACTERS)
    return `larger than ${MAX_DOCUMENT_CHARACTERS} characters`;
  return create(AdvisoryDocumentSchema, { name: path, content });
}

function progressBar(out: CliOutput, done: number, total: number): void {
  const width = 30;
  const filled = total ? Math.round((done / total) * width) : width;
  out.write(`\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} files`);
}

export async function importAdvisories(opts: ImportOptions): Promise<ImportSummary> {
  const files = await documentFiles(opts.paths);
  const client = opts.client;
  const summary: ImportSummary = {
    files: files.length,
    advisories: 0,
    created: 0,
    updated: 0,
    unchanged: 0,
    eventsAdded: 0,
    eventsRemoved: 0,
    skipped: 0,
  };
  const bar = opts.progress?.isTTY ? opts.progress : undefined;
  let done = 0;
  const advance = (n: number) => {
    done += n;
    if (bar) progressBar(bar, done, files.length);
  };
  const report = (line: string) => {
    if (bar) bar.write("\r\x1b[K");
    opts.say(line);
    if (bar) progressBar(bar, done, files.length);
  };
  const record = (r: DocumentResult) => {
    if (r.problem) {
      summary.skipped++;
      report(`${r.name}${r.problem.line ? `:${r.problem.line}` : ""}: ${r.problem.message} (skipped)`);
      return;
    }
    summary.created += r.advisoriesCreated;
    summary.updated += r.advisoriesUpdated;
    summary.unchanged += r.advisoriesUnchanged;
    summary.advisories += r.advisoriesCreated + r.advisoriesUpdated + r.advisoriesUnchanged;
    summary.eventsAdded += r.eventsAdded;
    summary.eventsRemoved += r.eventsRemoved;
  };

  // Batches are chosen by file size up front and read lazily, so memory holds only the batches
  // in flight; choosing is synchronous, so the workers never take the same file.
  const sizes = await Promise.all(files.map(async (f) => (await stat(f)).size));
  let next = 0;
  const take = (): string[] | undefined => {
    const paths: string[] = [];
    let bytes = 0;
    while (next < files.length && paths.length < BATCH_DOCUMENTS) {
      if (paths.length > 0 && bytes + sizes[next]! > BATCH_BYTES) break;
      bytes += sizes[next]!;
      paths.push(files[next++]!);
    }
    return paths.length ? paths : undefined;
  };
  const worker = async () => {
    for (let paths = take(); paths; paths = take()) {
      const batch: AdvisoryDocument[] = [];
      for (const path of paths) {
        const doc = await readDocument(path);
        if (typeof doc !== "string") batch.push(doc);
        else {
          summary.skipped++;
          report(`${path}: ${doc} (skipped)`);
          advance(1);
        }
      }
      if (batch.length === 0) continue;
      // A refusal or an unreachable server ends the import; the caller puts it in words.
      const response = await client.importAdvisories({
        parent: opts.group ?? "",
        documents: batch,
        author: opts.author ?? "",
        origin: opts.origin ?? "",
      });
      for (const r of response.results) record(r);
      advance(batch.length);
    }
  };
  if (bar) progressBar(bar, 0, files.length);
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  } finally {
    if (bar) bar.write("\n");
  }
  return summary;
}

export function summaryLine(s: ImportSummary): string {
  return (
    `${s.files} files: ${s.advisories} advisories (${s.created} created, ${s.updated} updated, ` +
    `${s.unchanged} unchanged), ${s.eventsAdded} events added, ${s.eventsRemoved} removed; ${s.skipped} skipped`
  );
}
