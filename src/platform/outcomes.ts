// Repository outcomes (storage/results.ts) as API answers, written once for every service.
import { alreadyExists, failedPrecondition, notFound } from "../core/errors.js";
import type { DeleteResult, WriteResult } from "../storage/results.js";

/** The row, or NOT_FOUND naming the resource. */
export function found<Row>(row: Row | undefined, resource: string, uid: string): Row {
  if (row === undefined) throw notFound(resource, uid);
  return row;
}

/** The written row, or NOT_FOUND for what was missing, or ALREADY_EXISTS for a conflict. */
export function written<Row>(result: WriteResult<Row>): Row {
  switch (result.kind) {
    case "ok":
      return result.row;
    case "missing":
      throw notFound(result.resource, result.uid);
    case "conflict":
      throw alreadyExists(result.resource, result.uid, result.description);
  }
}

/** A delete's answer: {} when deleted; NOT_FOUND; or FAILED_PRECONDITION naming what still refers to it. */
export function deleted(result: DeleteResult, resource: string, uid: string): Record<string, never> {
  if (result.kind === "not_found") throw notFound(resource, uid);
  if (result.kind === "not_empty") {
    throw failedPrecondition({
      type: "RESOURCE_NOT_EMPTY",
      description: `cannot delete ${resource} with ${result.blockedBy.join(", ")}`,
    });
  }
  return {};
}
