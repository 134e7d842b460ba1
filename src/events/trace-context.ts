// W3C Trace Context: an event carries the traceparent of the request that caused it, or a new
// one, and its deliveries send it on.
import { randomBytes } from "node:crypto";

const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The given traceparent when it is a valid version-00 one; else a new trace, sampled. */
export function traceparentOf(given: string | undefined): string {
  if (given && TRACEPARENT.test(given)) return given;
  return `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`;
}
