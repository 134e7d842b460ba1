// The messages between the server and the thread that reads one image's inventory
// (isolated-read.ts, read-worker.ts). The thread asks, the server answers each question once by
// its id: the thread never touches the blob store, it is handed the bytes the server reads.
import type { AttachedSbom, InventoryLimits, SbomBudget } from "./reader.js";
import type { Inventory } from "./types.js";

/** What the reading thread is given to read one image. */
export interface ReadInput {
  manifest: Uint8Array;
  limits: Partial<InventoryLimits>;
}

/** A question of the reading thread; `id` names its answer. */
export type Question =
  | { op: "open"; id: number; stream: number; digest: string }
  | { op: "pull"; id: number; stream: number }
  | { op: "sbom"; id: number; budget: SbomBudget };

/** A failure of the server's source (the store), by its number: the server rethrows the original. */
export interface SourceFailureRef {
  ref: number;
  message: string;
}

export type Answer =
  | { id: number; found: boolean }
  | { id: number; chunk: Uint8Array }
  | { id: number; end: true }
  | { id: number; sbom: AttachedSbom | null }
  | { id: number; failure: SourceFailureRef };

/** Told without an answer: a blob stream the thread no longer reads, and how the read ended. */
export type Notice =
  | { op: "close"; stream: number }
  | { op: "done"; inventory: Inventory }
  | { op: "failed"; inventoryError?: string; source?: number; other?: string };

export type FromReader = Question | Notice;

/** What the server sends the thread: the next image to read, or an answer to a question. */
export type ToReader = { read: ReadInput } | Answer;
