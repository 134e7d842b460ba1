// AdvisoryImportService (a documented extension): advisory documents in, each parsed here and
// stored in its own transaction. A document that cannot be imported is reported with its line
// and leaves nothing behind; the request's other documents still import.
import { create } from "@bufbuild/protobuf";
import {
  AdvisoryImportService,
  DocumentProblemSchema,
  DocumentResultSchema,
  type DocumentResult,
} from "../gen/bulwark/vulnerabilities/v1/import_pb.js";
import { notFound } from "../core/errors.js";
import { bindService } from "../core/service.js";
import { isValidUidp } from "../core/uidp.js";
import { throwIfViolations } from "../core/validate.js";
import { CHECK_VIOLATION, UNIQUE_VIOLATION, sqlState } from "../storage/errors.js";
import { DocumentError } from "./documents.js";
import { parseAdvisoryDocument } from "./parse.js";
import type { AdvisoriesRepository } from "./storage/advisories.js";

export interface ImportDeps {
  advisories: AdvisoriesRepository;
  /** where documents go when the request names no group (the first public advisory group) */
  defaultGroup?: string;
  now: () => Date;
}

/** How many times a document is stored when concurrent imports keep creating its advisories first. */
const IMPORT_ATTEMPTS = 5;

/** Most characters of an author or origin recorded on what an import writes. */
const MAX_LABEL_LENGTH = 256;

export function advisoryImportService({ advisories, defaultGroup, now }: ImportDeps) {
  return bindService(AdvisoryImportService, {
    async importAdvisories(req, call) {
      const parent = req.parent || defaultGroup || "";
      throwIfViolations([
        ...(parent === ""
          ? [{ field: "parent", description: "is required (the server has no default advisory group)" }]
          : isValidUidp(parent)
            ? []
            : [{ field: "parent", description: "must be a group uid" }]),
        ...(req.documents.length === 0 ? [{ field: "documents", description: "is required" }] : []),
        // the first document without a name (not every one: the answer stays short)
        ...req.documents
          .map((d, i) => ({ d, i }))
          .filter(({ d }) => d.name === "")
          .slice(0, 1)
          .map(({ i }) => ({ field: `documents[${i}].name`, description: "is required" })),
        ...(req.author.length > MAX_LABEL_LENGTH
          ? [{ field: "author", description: `must be at most ${MAX_LABEL_LENGTH} characters` }]
          : []),
        ...(req.origin.length > MAX_LABEL_LENGTH
          ? [{ field: "origin", description: `must be at most ${MAX_LABEL_LENGTH} characters` }]
          : []),
      ]);
      const author = req.author || call.principal?.uid || "";
      const results: DocumentResult[] = [];
      for (const doc of req.documents) {
        const result = create(DocumentResultSchema, { name: doc.name });
        results.push(result);
        let parsed;
        try {
          parsed = parseAdvisoryDocument(doc.name, doc.content);
        } catch (err) {
          if (!(err instanceof DocumentError)) throw err;
          result.problem = create(DocumentProblemSchema, { message: err.message, line: err.line ?? 0 });
          continue;
        }
        const store = () =>
          advisories.importDocument(parent, parsed, {
            author,
            origin: req.origin || parsed.format,
            now: now(),
          });
        let counts;
        try {
          // Imports into one group wait for each other (lockGroupImports), so an advisory another
          // import created first is found, not inserted again. Should a writer that does not take
          // that lock create one first, this one conflicts, and the next attempt finds the row and
          // updates it: a few attempts.
          for (let attempt = 1; ; attempt++) {
            try {
              counts = await store();
              break;
            } catch (err) {
              if (sqlState(err) !== UNIQUE_VIOLATION || attempt >= IMPORT_ATTEMPTS) throw err;
            }
          }
        } catch (err) {
          // A value the table's rules refuse (an id too long, ...): this document only.
          if (sqlState(err) !== CHECK_VIOLATION) throw err;
          result.problem = create(DocumentProblemSchema, { message: "a value is out of the allowed range", line: 0 });
          continue;
        }
        if (!counts) throw notFound("group", parent);
        result.advisoriesCreated = counts.created;
        result.advisoriesUpdated = counts.updated;
        result.advisoriesUnchanged = counts.unchanged;
        result.eventsAdded = counts.eventsAdded;
        result.eventsRemoved = counts.eventsRemoved;
      }
      return { results };
    },
  });
}
