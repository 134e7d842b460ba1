// Advisory documents as they arrive for import, parsed into one normalized shape: the advisory
// YAML of wolfi-dev/advisories (schema-version 2, 2.0.x) and OSV JSON records. The server parses
// (the CLI only sends files), so every import is validated by the same code, with line numbers.

export { EVENT_KINDS } from "./storage/model.js";
export type { EventKind, ParsedAdvisory, ParsedDocument, ParsedEvent, ParsedSeverity } from "./storage/model.js";

/** A document that cannot be imported; `line` is 1-based when known. */
export class DocumentError extends Error {
  constructor(
    message: string,
    readonly line?: number,
  ) {
    super(message);
    this.name = "DocumentError";
  }
}
