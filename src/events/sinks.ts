// Where a subscription may deliver: an absolute https URL on a public address. Checked when a
// subscription is created or changed, on what the URL itself says (its scheme, its parts, a
// literal address); the address a host name resolves to is checked when the delivery connects.
// `serve --allow-insecure-sinks` also permits http and loopback or private addresses (development
// and tests).
import type { FieldViolation } from "../core/errors.js";
import { addressCategory } from "../platform/outbound-addresses.js";

export interface SinkRules {
  allowInsecure: boolean;
}

/** Host names that mean this machine without resolving them (RFC 6761). */
function isLoopbackName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, "");
  return h === "localhost" || h.endsWith(".localhost");
}

/** Why `sink` cannot be a subscription's sink, or nothing. */
export function sinkViolations(sink: string, rules: SinkRules, field = "sink"): FieldViolation[] {
  const problem = sinkProblem(sink, rules);
  return problem ? [{ field, description: problem }] : [];
}

function sinkProblem(sink: string, { allowInsecure }: SinkRules): string | undefined {
  // Its length is bounded by the string rule every request passes first (core/strings.ts).
  if (sink === "") return "is required";
  let url: URL;
  try {
    url = new URL(sink);
  } catch {
    return "must be an absolute URL (https://host/path)";
  }
  if (url.protocol !== "https:" && !(allowInsecure && url.protocol === "http:"))
    return allowInsecure ? "must be an http or https URL" : "must be an https URL";
  // Credentials in a URL end up in logs and lists; the delivery carries its own Authorization.
  if (url.username || url.password) return "must not hold a user name or password";
  if (url.hash || sink.includes("#")) return "must not have a fragment";
  if (url.hostname === "") return "must name a host";
  if (allowInsecure) return undefined;
  if (isLoopbackName(url.hostname)) return `${url.hostname} is a loopback host`;
  // The URL parser has already turned every spelling of an IPv4 address (0x7f.1, 2130706433)
  // into dotted decimal, so the literal check sees what a connection would use.
  const category = addressCategory(url.hostname);
  if (category !== undefined && category !== "public") return `${url.hostname} is a ${category} address`;
  return undefined;
}
