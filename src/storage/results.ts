// The one result convention of every repository: a read answers the row or undefined (missing);
// a write answers a WriteResult; a delete a DeleteResult. Storage never throws API errors: the
// service layer maps these once (platform/outcomes.ts).

/** A write's outcome: the row, or which resource was missing, or what it conflicted with. */
export type WriteResult<Row> =
  | { kind: "ok"; row: Row }
  /** the written row (update) or a resource it references (its group, a role, ...) does not exist */
  | { kind: "missing"; resource: string; uid: string }
  /** a uniqueness rule refused the write */
  | { kind: "conflict"; resource: string; uid: string; description: string };

export type DeleteResult = { kind: "deleted" } | { kind: "not_found" } | { kind: "not_empty"; blockedBy: string[] };

export function ok<Row>(row: Row): WriteResult<Row> {
  return { kind: "ok", row };
}

export function missing(resource: string, uid: string): { kind: "missing"; resource: string; uid: string } {
  return { kind: "missing", resource, uid };
}

export function conflict(resource: string, uid: string, description: string): WriteResult<never> {
  return { kind: "conflict", resource, uid, description };
}

/** An update's outcome from a read-modify-write that answers undefined for a missing row. */
export function updated<Row>(row: Row | undefined, resource: string, uid: string): WriteResult<Row> {
  return row === undefined ? missing(resource, uid) : ok(row);
}
