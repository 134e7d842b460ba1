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
  /** how long a delivery is retried, counted from the event's time, before it is marked failed (default 24 h) */
  deliveryRetryForMs?: number;
  /** the first retry's delay bound; each later one doubles it, the delay drawn between half the bound and the bound (default 1 s) */
  deliveryBackoffMinMs?: number;
  /** the longest backoff between two attempts (default 10 min); a receiver's longer Retry-After is still honoured */
  deliveryBackoffMaxMs?: number;
  /** how long a replica holds a subscription it delivers to without renewing (default 30 s) */
  deliveryLeaseMs?: number;
  /** how often a replica looks for due deliveries besides its own new events (default 1 s) */
  deliveryPollMs?: number;
  /** the deadline of one delivery request (default 10 s) */
  deliveryTimeoutMs?: number;
  /** subscriptions one replica delivers to at once (default 16; 0: this replica delivers nothing) */
  deliveryConcurrency?: number;
}

export const DEFAULT_RETENTION_MS = 90 * 24 * 60 * 60 * 1000;
export const DEFAULT_RETENTION_EVERY_MS = 60 * 1000;
