// W3C Trace Context: an event carries the traceparent of the request that caused it, or a new
// one, and its deliveries send it on. With tracing on, that is the active span's (the request's
// span, a child of the incoming traceparent), so a delivery continues the request's trace.
import { randomHex } from "../core/random-hex.js";
import { activeTraceparent, tracingEnabled } from "../platform/tracing.js";

const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * The active span's traceparent when tracing is on and a span is active; else the given one when
 * it is a valid version-00 one; else a new trace, sampled.
 */
export function traceparentOf(given: string | undefined): string {
  const active = tracingEnabled() ? activeTraceparent() : undefined;
  if (active) return active;
  if (given && TRACEPARENT.test(given)) return given;
  return `00-${randomHex(16)}-${randomHex(8)}-01`;
}
