// `serve --audit-log <file|->`: every event this replica records, once committed, as one JSON
// line (for a SIEM or journald). The database is the durable record: a line is written after the
// commit, so one can be lost if the process dies in between; each replica writes only the events
// it recorded itself.
import { closeSync, createWriteStream, openSync, type WriteStream } from "node:fs";
import type { Logger } from "pino";
import { eventJson } from "./audit.js";
import type { StoredEvent } from "./storage/events.js";

export interface AuditLog {
  write(event: StoredEvent): void;
  /** writes out what is buffered and closes the file */
  close(): Promise<void>;
}

/** The line an event is written as: the Event's JSON with its traceparent. */
export function auditLine(event: StoredEvent): string {
  const json = eventJson(event) as Record<string, unknown>;
  return JSON.stringify({ ...json, traceparent: event.traceparent }) + "\n";
}

/**
 * Opens the audit log: "-" is standard output; a file is opened for appending (created with
 * mode 0600) now, so a path that cannot be written fails the start rather than the first event.
 */
export function openAuditLog(target: string, logger: Logger): AuditLog {
  if (target === "-") {
    return {
      write: (event) => void process.stdout.write(auditLine(event)),
      close: () => new Promise((resolve) => process.stdout.write("", () => resolve())),
    };
  }
  const fd = openSync(target, "a", 0o600);
  let stream: WriteStream;
  try {
    stream = createWriteStream(target, { fd, flags: "a" });
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  let failed = false;
  stream.on("error", (err) => {
    // logged once; the events stay in the database
    if (!failed) logger.error({ err, path: target }, "cannot write the audit log");
    failed = true;
  });
  return {
    write: (event) => {
      if (!failed) stream.write(auditLine(event));
    },
    close: () =>
      new Promise((resolve) => {
        if (stream.closed) return resolve();
        stream.end(() => resolve());
        stream.once("error", () => resolve());
      }),
  };
}
