// The events module's settings (`bulwark serve` fills them from its flags).
export interface EventsSettings {
  /** permit sinks over http and on loopback or private addresses (development and tests) */
  allowInsecureSinks?: boolean;
  /** how long recorded events are kept (default 90 days); older ones are pruned in the background */
  retentionMs?: number;
  /** how often the pruning runs (default every minute) */
  retentionEveryMs?: number;
  /** also write every event this replica records as one JSON line to this file ("-": standard output) */
  auditLog?: string;
}

export const DEFAULT_RETENTION_MS = 90 * 24 * 60 * 60 * 1000;
export const DEFAULT_RETENTION_EVERY_MS = 60 * 1000;
