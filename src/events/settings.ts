// The events module's settings (`bulwark serve` fills them from its flags).
export interface EventsSettings {
  /** permit sinks over http and on loopback or private addresses (development and tests) */
  allowInsecureSinks?: boolean;
}
