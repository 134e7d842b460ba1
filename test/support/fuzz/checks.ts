// What every answer to a fuzz or attack case must satisfy, whatever was sent:
//   - no 5xx and no INTERNAL / UNKNOWN / DATA_LOSS / UNAVAILABLE, no transport failure (a reset
//     stream, a closed connection, no answer). One exception: a well-formed UNIMPLEMENTED answer
//     (HTTP 501 + code 12 + ErrorInfo), which is what a method this server does not implement
//     deliberately answers (grpc-gateway maps code 12 to 501);
//   - every error is AIP-193 shaped (the protocol readers in wire.ts check the shape: REST a
//     strict google.rpc.Status whose code matches the HTTP status by grpc-gateway's mapping, or
//     413/414/431 for a request too large; Connect {code, message, details}; gRPC
//     grpc-status-details-bin) and carries an ErrorInfo with a reason and the server's domain;
//   - no error shows a stack trace or an internal path, and none echoes a long run (over ~100
//     characters) of any input value, nor is it large.
import { CODE_NAMES, clip, type Outcome, type Problem } from "./wire.js";

/** Text that only a stack trace, an exception's name or a source path puts in an answer. */
export const LEAK_MARKERS = ["    at ", ".ts:", ".js:", "/work/", "node_modules", "Error:", "file://"];

const ECHO_WINDOW = 100;
const ECHO_STRIDE = 20;
/** Largest error body accepted: an error says what is wrong, it does not carry the request back. */
const MAX_ERROR_BYTES = 16 * 1024;

const BAD_CODES = new Set([2, 13, 14, 15]); // UNKNOWN, INTERNAL, UNAVAILABLE, DATA_LOSS

/** Runs of `ECHO_WINDOW`+`ECHO_STRIDE` or more characters of an input found in the texts. */
function echoed(texts: string[], inputs: readonly string[]): string | undefined {
  const long = inputs.filter((s) => s.length >= ECHO_WINDOW + ECHO_STRIDE);
  if (!long.length) return undefined;
  const windows = new Set<string>();
  for (const t of texts) {
    if (t.length < ECHO_WINDOW) continue;
    for (let i = 0; i + ECHO_WINDOW <= t.length; i++) windows.add(t.slice(i, i + ECHO_WINDOW));
  }
  if (!windows.size) return undefined;
  for (const s of long) {
    for (let i = 0; i + ECHO_WINDOW <= s.length; i += ECHO_STRIDE) {
      const w = s.slice(i, i + ECHO_WINDOW);
      if (windows.has(w)) return w;
    }
  }
  return undefined;
}

export interface CheckOptions {
  /** the server's error domain (ErrorInfo.domain) */
  domain: string;
  /** every value the request carried (strings of the message, raw path, query, body, headers) */
  inputs: readonly string[];
  /** a 2xx would be a security failure (a forged credential, ...): say why */
  mustFail?: string;
  /**
   * The request's HTTP/2 header list is beyond what Node's nghttp2 takes at all (one field over
   * 64 KiB, or thousands of fields): the stack refuses the stream (RST_STREAM REFUSED_STREAM) or
   * the session (COMPRESSION_ERROR) before any handler can answer, and that is accepted here.
   * (Header lists the stack takes but over 16 KiB get an AIP-193 answer, checked as usual.)
   */
  http2StackLimit?: boolean;
}

const STACK_REFUSAL = /REFUSED_STREAM|RST_STREAM 7|COMPRESSION_ERROR|error code 9\b/;

export function check(o: Outcome, opts: CheckOptions): Problem[] {
  if (opts.http2StackLimit) {
    const said = [...o.texts, ...o.problems.map((p) => `${p.kind} ${p.detail}`)].join("\n");
    if (o.code !== 0 && STACK_REFUSAL.test(said)) return [];
  }
  const problems = [...o.problems];
  const name = o.code === undefined ? undefined : CODE_NAMES[o.code];
  const unimplemented = o.code === 12 && o.errorInfos.length > 0;
  if (o.status !== undefined && o.status >= 500 && !(o.status === 501 && unimplemented)) {
    problems.push({ kind: `HTTP ${o.status}${name ? ` ${name}` : ""}`, detail: clip(o.body ?? o.texts.join(" | ")) });
  } else if (o.code !== undefined && BAD_CODES.has(o.code)) {
    problems.push({ kind: `answered ${name}`, detail: clip(o.texts.join(" | ")) });
  }
  if (o.code === 0 && opts.mustFail) {
    problems.push({ kind: `accepted: ${opts.mustFail}`, detail: clip(o.body ?? "") });
  }
  if (o.code !== undefined && o.code !== 0) {
    if (!o.errorInfos.length) {
      problems.push({ kind: `${name} error without ErrorInfo`, detail: clip(o.body ?? o.texts.join(" | ")) });
    } else if (!o.errorInfos.some((i) => i.domain === opts.domain && i.reason !== "")) {
      problems.push({
        kind: `${name} ErrorInfo without reason or with another domain`,
        detail: clip(JSON.stringify(o.errorInfos)),
      });
    }
  }
  const isError = o.code !== 0;
  if (isError) {
    const raw = o.body ?? "";
    const haystack = [raw, ...o.texts].join("\n");
    const sent = opts.inputs.join("\n");
    for (const marker of LEAK_MARKERS) {
      if (haystack.includes(marker) && !sent.includes(marker)) {
        const at = haystack.indexOf(marker);
        problems.push({
          kind: `error shows ${JSON.stringify(marker)} (stack trace or internal detail)`,
          detail: clip(haystack.slice(Math.max(0, at - 80), at + 80)),
        });
      }
    }
    const size = Math.max(
      Buffer.byteLength(raw),
      o.texts.reduce((n, t) => n + t.length, 0),
    );
    if (size > MAX_ERROR_BYTES) {
      problems.push({
        kind: `error answer of ${size > 1_000_000 ? ">1 MB" : ">16 KiB"}`,
        detail: clip(raw || o.texts.join(" | ")),
      });
    }
    const echo = echoed(o.texts.length ? o.texts : [raw], opts.inputs);
    if (echo) problems.push({ kind: "error echoes over 100 characters of the input", detail: clip(echo, 60) });
  }
  return problems;
}
