// How a fuzz case reaches the server and what came back, per protocol: REST (fetch, HTTP/1.1),
// Connect (fetch; JSON or binary), gRPC (the Connect client over h2), and the raw forms the
// attack cases need: gRPC over a bare node:http2 stream, gRPC-Web over HTTP/1.1, and HTTP/1.1
// written byte for byte on a socket. Each answer becomes an `Outcome`, parsed leniently: what
// does not parse is recorded as a problem, never thrown.
import http2 from "node:http2";
import net from "node:net";
import {
  fromBinary,
  getOption,
  hasOption,
  toBinary,
  toJson,
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescService,
  type JsonObject,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import { http } from "../../../src/gen/google/api/annotations_pb.js";
import { ErrorInfoSchema } from "../../../src/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../../src/gen/google/rpc/status_pb.js";
import { errorDetailsRegistry, statusFromRestBody } from "../grpc.js";
import { HANG_MS } from "../wait.js";

export interface Problem {
  /** the failure class: stable across cases, so failures group by it */
  kind: string;
  /** this case's particulars */
  detail: string;
}

export interface Outcome {
  protocol: string;
  /** HTTP status, where the protocol exposes one */
  status?: number;
  contentType?: string;
  /** the raw body (REST, Connect, gRPC-Web, raw HTTP), as text */
  body?: string;
  /** google.rpc code of the answer: 0 = OK; undefined when none could be read */
  code?: number;
  errorInfos: { reason: string; domain: string }[];
  /** every readable string of an error: message and detail fields */
  texts: string[];
  /** protocol-level problems found while reading the answer */
  problems: Problem[];
}

/**
 * How long any one request may take before it counts as a hang: by default the tests' hang limit,
 * so that a loaded machine's slowness is never reported as a hang.
 */
export const TIMEOUT_MS = Number(process.env.FUZZ_TIMEOUT_MS ?? HANG_MS);

export const CODE_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(Code)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => [v as number, k.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase()]),
);

const CONNECT_CODES: Record<string, number> = Object.fromEntries(
  Object.entries(CODE_NAMES).map(([n, name]) => [name.toLowerCase(), Number(n)]),
);

/** grpc-gateway's HTTP status for a google.rpc code (independent of src/). */
export function httpStatusOf(code: number): number {
  return (
    {
      1: 499,
      2: 500,
      3: 400,
      4: 504,
      5: 404,
      6: 409,
      7: 403,
      8: 429,
      9: 400,
      10: 409,
      11: 400,
      12: 501,
      13: 500,
      14: 503,
      15: 500,
      16: 401,
    }[code] ?? 500
  );
}

export const clip = (s: string, n = 160): string => {
  const flat = JSON.stringify(s.length > n ? s.slice(0, n) : s);
  return s.length > n ? `${flat}…(${s.length} chars)` : flat;
};

/** Every string inside a JSON value. */
function jsonStrings(v: unknown, out: string[] = []): string[] {
  if (typeof v === "string") out.push(v);
  else if (Array.isArray(v)) for (const x of v) jsonStrings(x, out);
  else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) (out.push(k), jsonStrings(x, out));
  return out;
}

/** Every string field of a message, recursively. */
export function messageStrings(desc: DescMessage, msg: Message, out: string[] = [], depth = 0): string[] {
  if (depth > 8) return out;
  const m = msg as unknown as Record<string, unknown>;
  const visit = (f: DescField, v: unknown) => {
    if (typeof v === "string") out.push(v);
    else if (f.fieldKind === "message" && v && typeof v === "object")
      messageStrings(f.message, v as Message, out, depth + 1);
    else if (f.fieldKind === "list" && Array.isArray(v)) {
      for (const x of v)
        if (typeof x === "string") out.push(x);
        else if (f.listKind === "message" && x) messageStrings(f.message, x as Message, out, depth + 1);
    } else if (f.fieldKind === "map" && v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        out.push(k);
        if (typeof x === "string") out.push(x);
        else if (f.mapKind === "message" && x) messageStrings(f.message, x as Message, out, depth + 1);
      }
    }
  };
  for (const f of desc.fields) {
    if (f.oneof) {
      const o = m[f.oneof.localName] as { case?: string; value?: unknown } | undefined;
      if (o?.case === f.localName) visit(f, o.value);
    } else visit(f, m[f.localName]);
  }
  return out;
}

function outcome(protocol: string, rest: Partial<Outcome> = {}): Outcome {
  return { protocol, errorInfos: [], texts: [], problems: [], ...rest };
}

/** The kind of every problem that is a request left unanswered. */
export const HANG = `no answer within ${TIMEOUT_MS} ms`;

function failed(protocol: string, err: unknown): Outcome {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") {
    return outcome(protocol, { problems: [{ kind: HANG, detail: e.message }] });
  }
  const why = e?.cause?.code ?? e?.name ?? "error";
  return outcome(protocol, {
    problems: [
      { kind: `transport failure (${why})`, detail: `${e?.message ?? String(err)} ${e?.cause?.message ?? ""}` },
    ],
  });
}

// ---------------------------------------------------------------------------------------------
// Reading error bodies.

/** An error body of transcoded REST (or a plain route): google.rpc.Status as JSON. */
export function readRestAnswer(protocol: string, status: number, contentType: string, body: string): Outcome {
  const o = outcome(protocol, { status, contentType, body });
  if (status >= 200 && status < 300) {
    o.code = 0;
    return o;
  }
  if (status < 400) {
    o.problems.push({ kind: `unexpected HTTP ${status}`, detail: clip(body) });
    return o;
  }
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    o.problems.push({
      kind: `HTTP ${status} error body is not JSON (${contentType.split(";")[0] || "no content-type"})`,
      detail: clip(body),
    });
    return o;
  }
  o.texts = jsonStrings(json);
  if (contentType.split(";")[0]?.trim() !== "application/json") {
    o.problems.push({ kind: `HTTP ${status} error with content-type ${contentType || "(none)"}`, detail: clip(body) });
  }
  try {
    statusFromRestBody(json);
  } catch (err) {
    o.problems.push({
      kind: `HTTP ${status} error body is not a google.rpc.Status`,
      detail: `${(err as Error).message}: ${clip(body)}`,
    });
  }
  const obj = (json && typeof json === "object" ? json : {}) as JsonObject;
  const code = obj.code;
  if (typeof code !== "number" || code <= 0 || code > 16) {
    o.problems.push({ kind: `HTTP ${status} error without a google.rpc code`, detail: clip(body) });
  } else {
    o.code = code;
    // grpc-gateway's mapping, or for a request too large the HTTP status that says so (413 body,
    // 414 URI, 431 headers) with INVALID_ARGUMENT or RESOURCE_EXHAUSTED in the body.
    const sizeStatus = [413, 414, 431].includes(status) && (code === 3 || code === 8);
    if (httpStatusOf(code) !== status && !sizeStatus) {
      o.problems.push({ kind: `HTTP ${status} carries ${CODE_NAMES[code]}`, detail: clip(body) });
    }
  }
  if (typeof obj.message !== "string" || obj.message === "") {
    o.problems.push({ kind: `HTTP ${status} error without a message`, detail: clip(body) });
  }
  for (const d of Array.isArray(obj.details) ? obj.details : []) {
    const dd = d as JsonObject;
    if (dd?.["@type"] === "type.googleapis.com/google.rpc.ErrorInfo") {
      o.errorInfos.push({ reason: String(dd.reason ?? ""), domain: String(dd.domain ?? "") });
    }
  }
  return o;
}

/** Strings of every google.rpc detail, plus the ErrorInfos among them. */
function readDetails(o: Outcome, details: { typeName: string; bytes: Uint8Array }[]): void {
  for (const d of details) {
    const desc = errorDetailsRegistry.getMessage(d.typeName);
    if (!desc) {
      o.problems.push({ kind: `error detail of unknown type ${d.typeName}`, detail: "" });
      continue;
    }
    let msg: Message;
    try {
      msg = fromBinary(desc, d.bytes);
    } catch (err) {
      o.problems.push({ kind: `undecodable ${d.typeName} detail`, detail: (err as Error).message });
      continue;
    }
    o.texts.push(...messageStrings(desc, msg));
    if (desc.typeName === ErrorInfoSchema.typeName) {
      const info = msg as unknown as { reason: string; domain: string };
      o.errorInfos.push({ reason: info.reason, domain: info.domain });
    }
  }
}

/** A Connect unary answer: 200 with the message, or an error {code, message, details}. */
export function readConnectAnswer(protocol: string, status: number, contentType: string, body: string): Outcome {
  const o = outcome(protocol, { status, contentType, body });
  if (status === 200) {
    o.code = 0;
    return o;
  }
  let json: JsonValue;
  try {
    json = JSON.parse(body) as JsonValue;
  } catch {
    o.problems.push({
      kind: `HTTP ${status} Connect error body is not JSON (${contentType.split(";")[0] || "no content-type"})`,
      detail: clip(body),
    });
    return o;
  }
  const obj = (json && typeof json === "object" && !Array.isArray(json) ? json : {}) as JsonObject;
  const code = typeof obj.code === "string" ? CONNECT_CODES[obj.code] : undefined;
  if (code === undefined) {
    o.problems.push({ kind: `HTTP ${status} Connect error without a Connect code`, detail: clip(body) });
  } else o.code = code;
  if (typeof obj.message === "string") o.texts.push(obj.message);
  const details: { typeName: string; bytes: Uint8Array }[] = [];
  for (const d of Array.isArray(obj.details) ? obj.details : []) {
    const dd = d as JsonObject;
    if (typeof dd?.type !== "string" || typeof dd.value !== "string") {
      o.problems.push({ kind: "Connect error detail without type/value", detail: clip(JSON.stringify(d)) });
      continue;
    }
    details.push({ typeName: dd.type, bytes: new Uint8Array(Buffer.from(dd.value, "base64")) });
    if (dd.debug !== undefined) o.texts.push(...jsonStrings(dd.debug));
  }
  readDetails(o, details);
  return o;
}

/** google.rpc.Status from a `grpc-status-details-bin` value (base64, padded or not). */
function readStatusDetails(o: Outcome, value: string | undefined): void {
  if (!value) return;
  try {
    const status = fromBinary(StatusSchema, new Uint8Array(Buffer.from(value, "base64")));
    o.texts.push(status.message);
    readDetails(
      o,
      status.details.map((any) => ({
        typeName: any.typeUrl.slice(any.typeUrl.lastIndexOf("/") + 1),
        bytes: any.value,
      })),
    );
  } catch (err) {
    o.problems.push({ kind: "undecodable grpc-status-details-bin", detail: (err as Error).message });
  }
}

function readGrpcStatus(o: Outcome, fields: Record<string, string | undefined>): void {
  const raw = fields["grpc-status"];
  if (raw === undefined) {
    o.problems.push({ kind: "gRPC answer without grpc-status", detail: clip(JSON.stringify(fields)) });
    return;
  }
  o.code = Number(raw);
  const message = fields["grpc-message"];
  if (message) {
    try {
      o.texts.push(decodeURIComponent(message));
    } catch {
      o.texts.push(message);
    }
  }
  readStatusDetails(o, fields["grpc-status-details-bin"]);
}

// ---------------------------------------------------------------------------------------------
// REST.

/** A served unary RPC with its REST rules. */
export interface Rpc {
  service: DescService;
  method: DescMethod;
  /** "GroupsService.GetGroup" */
  name: string;
  rules: HttpRule[];
}

export interface HttpRule {
  verb: string;
  path: string;
  body: string;
}

export function httpRules(method: DescMethod): HttpRule[] {
  if (!hasOption(method, http)) return [];
  const rule = getOption(method, http);
  return [rule, ...rule.additionalBindings].flatMap((r) =>
    r.pattern.case && r.pattern.case !== "custom" && typeof r.pattern.value === "string"
      ? [{ verb: r.pattern.case.toUpperCase(), path: r.pattern.value, body: r.body }]
      : [],
  );
}

/** Percent-encodes a path value (lone surrogates become U+FFFD); keeps "/" unless asked not to. */
export function encodePathValue(value: string, keepSlash: boolean): string {
  const enc = encodeURIComponent(wellFormed(value));
  return keepSlash ? enc.replace(/%2F/gi, "/") : enc;
}

function fieldOf(desc: DescMessage, name: string): DescField | undefined {
  return desc.fields.find((f) => f.name === name);
}

/** Reads and removes the value at a dotted path of a JSON object (proto or JSON names). */
function takeJsonValue(desc: DescMessage, root: JsonObject, path: string[]): JsonValue | undefined {
  let d: DescMessage | undefined = desc;
  let obj: JsonObject = root;
  for (let i = 0; i < path.length; i++) {
    const f: DescField | undefined = d ? fieldOf(d, path[i]!) : undefined;
    const key = f && f.jsonName in obj ? f.jsonName : path[i]!;
    const v: JsonValue | undefined = obj[key];
    if (i === path.length - 1) {
      delete obj[key];
      return v;
    }
    if (!v || typeof v !== "object" || Array.isArray(v)) return undefined;
    obj = v;
    d = f?.fieldKind === "message" ? f.message : undefined;
  }
  return undefined;
}

function flattenQuery(prefix: string, v: JsonValue, out: [string, string][]): void {
  if (v === null) return;
  if (Array.isArray(v)) {
    for (const x of v) out.push([prefix, typeof x === "object" ? JSON.stringify(x) : String(x)]);
  } else if (typeof v === "object") {
    for (const [k, x] of Object.entries(v)) flattenQuery(prefix ? `${prefix}.${k}` : k, x, out);
  } else out.push([prefix, String(v)]);
}

/**
 * JSON text (or a URL) with every U+FFFD turned into a lone surrogate: the escape \\ud800 in JSON
 * strings, the CESU-8 bytes %ED%A0%80 (not UTF-8) in percent-encoded text.
 */
export function withSurrogates(text: string, kind: "json" | "url"): string {
  return kind === "json" ? text.replace(/\ufffd/g, "\\ud800") : text.replace(/%EF%BF%BD/gi, "%ED%A0%80");
}

export interface RestRequest {
  method: string;
  /** path and query */
  url: string;
  body?: string;
}

/** Lone surrogates replaced by U+FFFD (String.prototype.toWellFormed, which ES2023 lacks). */
export function wellFormed(s: string): string {
  return s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
}

/**
 * The REST request for a JSON request object by the rule, as a client builds it: path variables
 * taken from the object, then the body (`*`: what is left; a field: that field), the rest as
 * query parameters (dotted paths, repeated keys). Any JSON goes, including values of the wrong
 * type (objects in a path or query become their JSON text).
 */
export function restFromJson(
  desc: DescMessage,
  rule: HttpRule,
  json: JsonObject,
  opts: { encodeSlash?: boolean; surrogates?: boolean } = {},
): RestRequest {
  const root = structuredClone(json);
  const path = rule.path.replace(/\{([a-zA-Z0-9_.]+)(?:=([^}]*))?\}/g, (_m, variable: string, pattern?: string) => {
    const v = takeJsonValue(desc, root, variable.split("."));
    const text = v === undefined || v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
    return encodePathValue(text, !opts.encodeSlash && (pattern ?? "*").includes("**"));
  });
  let body: string | undefined;
  if (rule.body === "*") {
    body = JSON.stringify(root);
    for (const k of Object.keys(root)) delete root[k];
  } else if (rule.body) {
    const f = fieldOf(desc, rule.body);
    const key = f && f.jsonName in root ? f.jsonName : rule.body;
    body = JSON.stringify(root[key] ?? (f?.fieldKind === "message" ? {} : null));
    delete root[key];
  }
  const query: [string, string][] = [];
  for (const [k, v] of Object.entries(root)) flattenQuery(k, v, query);
  const qs = query
    .map(([k, v]) => `${encodeURIComponent(wellFormed(k))}=${encodeURIComponent(wellFormed(v))}`)
    .join("&");
  const url = path + (qs ? `?${qs}` : "");
  if (!opts.surrogates) return { method: rule.verb, url, body };
  return {
    method: rule.verb,
    url: withSurrogates(url, "url"),
    body: body === undefined ? undefined : withSurrogates(body, "json"),
  };
}

/** The REST request a client would send for `msg` by the rule (proto or JSON field names). */
export function restRequest(
  method: DescMethod,
  rule: HttpRule,
  msg: Message,
  opts: { jsonNames: boolean; encodeSlash: boolean; surrogates?: boolean },
): RestRequest {
  const json = toJson(method.input, msg as never, { useProtoFieldName: !opts.jsonNames }) as JsonObject;
  return restFromJson(method.input, rule, json, opts);
}

/**
 * fetch, once more if a kept-alive connection was reset before any answer: the server may close an
 * idle connection (its 5 s keep-alive) just as a slow, loaded client reuses it. A server that resets
 * on the request itself does so again, and that is reported.
 */
async function fetchRetryingStaleConnection(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    const code = ((err as { cause?: { code?: string } }).cause ?? {}).code;
    if (code !== "ECONNRESET" && code !== "UND_ERR_SOCKET") throw err;
    return await fetch(url, init);
  }
}

export async function sendRest(
  baseUrl: string,
  req: Omit<RestRequest, "body"> & { body?: string | Uint8Array },
  headers: Record<string, string>,
  protocol = "rest",
): Promise<Outcome> {
  try {
    const res = await fetchRetryingStaleConnection(baseUrl + req.url, {
      method: req.method,
      headers: req.body === undefined ? headers : { "content-type": "application/json", ...headers },
      body: req.body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const text = await res.text();
    return readRestAnswer(protocol, res.status, res.headers.get("content-type") ?? "", text);
  } catch (err) {
    return failed(protocol, err);
  }
}

// ---------------------------------------------------------------------------------------------
// Connect (unary, POST).

export function connectPath(service: DescService, method: DescMethod): string {
  return `/${service.typeName}/${method.name}`;
}

export async function sendConnect(
  baseUrl: string,
  path: string,
  contentType: string,
  body: string | Uint8Array,
  headers: Record<string, string>,
  protocol: string,
): Promise<Outcome> {
  try {
    const res = await fetchRetryingStaleConnection(baseUrl + path, {
      method: "POST",
      headers: { "content-type": contentType, "connect-protocol-version": "1", ...headers },
      body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const buf = Buffer.from(await res.arrayBuffer());
    return readConnectAnswer(protocol, res.status, res.headers.get("content-type") ?? "", buf.toString("utf8"));
  } catch (err) {
    return failed(protocol, err);
  }
}

export function connectJson(desc: DescMessage, msg: Message): string {
  return JSON.stringify(toJson(desc, msg as never));
}

export function protoBytes(desc: DescMessage, msg: Message): Uint8Array {
  return toBinary(desc, msg as never);
}

// ---------------------------------------------------------------------------------------------
// gRPC through the Connect client (h2, binary).

export class GrpcCaller {
  private readonly manager: Http2SessionManager;
  private readonly transport: Transport;
  private readonly clients = new Map<string, Client<DescService>>();

  constructor(baseUrl: string) {
    // Node's HTTP/2 client counts the unsent rest of every request the server cut short (RST
    // after an over-limit answer) against its 10 MB session memory and then resets every stream
    // itself; grpc-js lifts that limit for the same reason, and so does this client.
    this.manager = new Http2SessionManager(baseUrl, undefined, { maxSessionMemory: 1024 });
    this.transport = createGrpcTransport({ baseUrl, sessionManager: this.manager });
  }

  async call(
    service: DescService,
    method: DescMethod,
    msg: Message,
    headers: Record<string, string>,
  ): Promise<Outcome> {
    let client = this.clients.get(service.typeName);
    if (!client) this.clients.set(service.typeName, (client = createClient(service, this.transport)));
    const o = outcome("grpc");
    try {
      const fn = (client as unknown as Record<string, (m: Message, o: object) => Promise<unknown>>)[method.localName]!;
      await fn.call(client, msg, { headers, timeoutMs: TIMEOUT_MS });
      o.code = 0;
    } catch (err) {
      if (!(err instanceof ConnectError)) return failed("grpc", err);
      if (err.code === Code.DeadlineExceeded && !err.findDetails(ErrorInfoSchema).length) {
        return outcome("grpc", { problems: [{ kind: HANG, detail: err.message }] });
      }
      o.code = err.code;
      o.texts.push(err.rawMessage);
      for (const d of err.findDetails(errorDetailsRegistry)) {
        o.texts.push(
          ...messageStrings(d.$typeName ? errorDetailsRegistry.getMessage(d.$typeName)! : ErrorInfoSchema, d),
        );
      }
      for (const info of err.findDetails(ErrorInfoSchema))
        o.errorInfos.push({ reason: info.reason, domain: info.domain });
    }
    return o;
  }

  close(): void {
    this.manager.abort();
  }
}

// ---------------------------------------------------------------------------------------------
// Raw forms for the attack cases.

/** A gRPC length-prefixed message: flags byte, 4-byte big-endian length, payload. */
export function envelope(payload: Uint8Array, flags = 0, declaredLength = payload.length): Uint8Array {
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, declaredLength >>> 0);
  out.set(payload, 5);
  return out;
}

/** One gRPC call over a fresh h2 stream with exactly these bytes as the request body. */
export async function rawGrpc(
  baseUrl: string,
  path: string,
  body: Uint8Array,
  headers: Record<string, string>,
  session?: http2.ClientHttp2Session,
): Promise<Outcome> {
  const own = !session;
  const s = session ?? http2.connect(baseUrl);
  const o = outcome("grpc-raw");
  try {
    return await new Promise<Outcome>((resolve) => {
      s.once("error", (err) => resolve(failed("grpc-raw", err)));
      let timer: NodeJS.Timeout;
      const stream = s.request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/grpc+proto",
        te: "trailers",
        ...headers,
      });
      timer = setTimeout(() => {
        o.problems.push({ kind: HANG, detail: path });
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }, TIMEOUT_MS);
      let fields: Record<string, string | undefined> = {};
      const chunks: Buffer[] = [];
      let done = false;
      // The call is over once its status arrives (trailers, or headers of a trailers-only
      // answer), even while the server still leaves part of the request body unread.
      const finish = () => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        o.body = Buffer.concat(chunks).toString("latin1");
        if (o.status === undefined) {
          o.problems.push({ kind: `stream reset without an answer (RST_STREAM ${stream.rstCode})`, detail: path });
        } else if (o.status !== 200) {
          o.problems.push({ kind: `gRPC call answered HTTP ${o.status}`, detail: clip(o.body) });
        } else {
          readGrpcStatus(o, fields);
          if (fields["grpc-status"] === undefined && stream.rstCode) {
            o.problems.push({ kind: `stream reset (RST_STREAM ${stream.rstCode})`, detail: path });
          }
        }
        if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
        resolve(o);
      };
      stream.on("response", (h) => {
        o.status = Number(h[":status"]);
        o.contentType = String(h["content-type"] ?? "");
        fields = { ...fields, ...pick(h) };
        if (fields["grpc-status"] !== undefined) stream.once("end", finish);
      });
      stream.on("trailers", (t) => {
        fields = { ...fields, ...pick(t) };
        setImmediate(finish);
      });
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("error", () => undefined);
      stream.on("close", finish);
      stream.end(body);
    });
  } finally {
    if (own) s.destroy();
  }
}

function pick(h: http2.IncomingHttpHeaders): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const k of ["grpc-status", "grpc-message", "grpc-status-details-bin"]) {
    const v = h[k];
    if (v !== undefined) out[k] = Array.isArray(v) ? v[0] : String(v);
  }
  return out;
}

/** One gRPC-Web call over HTTP/1.1 with exactly these bytes as the body. */
export async function rawGrpcWeb(
  baseUrl: string,
  path: string,
  body: Uint8Array,
  headers: Record<string, string>,
): Promise<Outcome> {
  try {
    const res = await fetch(baseUrl + path, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", ...headers },
      body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const buf = Buffer.from(await res.arrayBuffer());
    return readGrpcWebAnswer(res.status, (name) => res.headers.get(name) ?? undefined, buf);
  } catch (err) {
    return failed("grpc-web", err);
  }
}

/** A gRPC-Web answer: the status in the headers (trailers-only) or in the trailer frame. */
export function readGrpcWebAnswer(status: number, header: (name: string) => string | undefined, buf: Buffer): Outcome {
  const o = outcome("grpc-web", { status, contentType: header("content-type") ?? "" });
  o.body = buf.toString("latin1");
  if (status !== 200) {
    o.problems.push({ kind: `gRPC-Web call answered HTTP ${status}`, detail: clip(o.body) });
    return o;
  }
  const fields: Record<string, string | undefined> = {};
  for (const k of ["grpc-status", "grpc-message", "grpc-status-details-bin"]) {
    const v = header(k);
    if (v !== undefined) fields[k] = v;
  }
  // Frames: flags, length, payload; the trailer frame has flag 0x80 and "name: value\r\n" lines.
  for (let i = 0; i + 5 <= buf.length;) {
    const flags = buf[i]!;
    const len = buf.readUInt32BE(i + 1);
    const payload = buf.subarray(i + 5, i + 5 + len);
    if (flags & 0x80) {
      for (const line of payload.toString("latin1").split("\r\n")) {
        const at = line.indexOf(":");
        if (at > 0) fields[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
      }
    }
    i += 5 + len;
  }
  readGrpcStatus(o, fields);
  return o;
}

/** How an answer read off a raw connection is judged (default: as REST). */
export type AnswerReader = (status: number, header: (name: string) => string | undefined, body: Buffer) => Outcome;

export const restReader: AnswerReader = (status, header, body) =>
  readRestAnswer("http1-raw", status, header("content-type") ?? "", body.toString("utf8"));
export const connectReader: AnswerReader = (status, header, body) =>
  readConnectAnswer("connect", status, header("content-type") ?? "", body.toString("utf8"));
export const grpcWebReader: AnswerReader = readGrpcWebAnswer;

/** One parsed HTTP/1.x answer, or undefined while more bytes are needed. */
function parseHttp1(
  raw: Buffer,
  closed: boolean,
): { status: number; headers: Map<string, string>; body: Buffer } | undefined {
  // Interim answers (100 Continue) come before the real one.
  while (/^HTTP\/1\.[01] 1\d\d /.test(raw.subarray(0, 16).toString("latin1")) && raw.indexOf("\r\n\r\n") >= 0) {
    raw = raw.subarray(raw.indexOf("\r\n\r\n") + 4);
  }
  const end = raw.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const head = raw.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? "")?.[1] ?? 0);
  const headers = new Map<string, string>();
  for (const line of head.slice(1)) {
    const at = line.indexOf(":");
    if (at > 0) headers.set(line.slice(0, at).trim().toLowerCase(), line.slice(at + 1).trim());
  }
  let body: Buffer = raw.subarray(end + 4);
  if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) {
    if (!closed && !body.includes("0\r\n\r\n")) return undefined;
    body = dechunk(body);
  } else if (headers.has("content-length")) {
    if (!closed && body.length < Number(headers.get("content-length"))) return undefined;
  } else if (!closed && status !== 204 && status !== 304) return undefined;
  return { status, headers, body };
}

/**
 * An HTTP/1.1 request written as-is (request line, headers, body) on a new connection; the answer
 * is read as soon as it is complete. `halfClose` ends the client's side after the request, as
 * HTTP/1.0-style clients do; otherwise the connection stays open for the answer.
 */
export async function rawHttp1(
  baseUrl: string,
  request: string | Buffer,
  opts: { halfClose?: boolean; protocol?: string } = {},
): Promise<Outcome> {
  const protocol = opts.protocol ?? "http1-raw";
  const { hostname, port } = new URL(baseUrl);
  return new Promise<Outcome>((resolve) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(Number(port), hostname);
    let done = false;
    const finish = (o: Outcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => {
      const raw = Buffer.concat(chunks);
      finish(outcome(protocol, { problems: [{ kind: HANG, detail: clip(raw.toString("latin1")) }] }));
    }, TIMEOUT_MS);
    const answer = (closed: boolean) => {
      const raw = Buffer.concat(chunks);
      const parsed = parseHttp1(raw, closed);
      if (parsed) {
        finish(
          readRestAnswer(
            protocol,
            parsed.status,
            parsed.headers.get("content-type") ?? "",
            parsed.body.toString("utf8"),
          ),
        );
      } else if (closed) {
        finish(
          outcome(protocol, {
            problems: [{ kind: "connection closed without an HTTP answer", detail: clip(raw.toString("latin1")) }],
          }),
        );
      }
    };
    socket.on("data", (c) => {
      chunks.push(c);
      answer(false);
    });
    socket.on("error", () => undefined);
    socket.on("close", () => answer(true));
    socket.on("connect", () => (opts.halfClose ? socket.end(request) : socket.write(request)));
  });
}

function dechunk(b: Buffer): Buffer {
  const parts: Buffer[] = [];
  let i = 0;
  while (i < b.length) {
    const eol = b.indexOf("\r\n", i);
    if (eol < 0) break;
    const size = parseInt(b.subarray(i, eol).toString("latin1"), 16);
    if (!size) break;
    parts.push(b.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/**
 * Several requests at once over fetch's pool of keep-alive connections, so that each pooled
 * connection serves one: a connection an earlier case left unusable (its next request is never
 * answered, or is reset) shows up here, and is discarded by the pool afterwards.
 */
export async function probeKeepAlive(baseUrl: string, n = 8): Promise<Problem[]> {
  const outcomes = await Promise.all(
    Array.from({ length: n }, () => sendRest(baseUrl, { method: "GET", url: "/healthz" }, {}, "keep-alive probe")),
  );
  const problems: Problem[] = [];
  for (const o of outcomes) {
    for (const p of o.problems) {
      problems.push({
        kind: `a later request on a kept-alive connection: ${p.kind}`,
        detail: `GET /healthz on a pooled HTTP/1.1 connection: ${p.detail}`,
      });
    }
    if (o.status !== undefined && o.status !== 200) {
      problems.push({ kind: `a later GET /healthz answered HTTP ${o.status}`, detail: clip(o.body ?? "") });
    }
  }
  return problems;
}

/**
 * Requests sent one after another on one HTTP/1.1 connection, each once the previous answer is
 * complete (the bytes of a request the server did not read still come first on the wire). The
 * server may close the connection after an answer; the requests left are then not sent (and
 * count as fine). An answer that never comes is a hang.
 */
export async function rawHttp1Sequence(
  baseUrl: string,
  requests: { bytes: string | Uint8Array; read?: AnswerReader }[],
): Promise<Outcome[]> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise<Outcome[]>((resolve) => {
    const outcomes: Outcome[] = [];
    const socket = net.connect(Number(port), hostname);
    let buffered = Buffer.alloc(0);
    let index = 0;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcomes);
    };
    let timer = setTimeout(() => undefined, 0);
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        outcomes.push(
          outcome("http1-raw", { problems: [{ kind: HANG, detail: `request ${index + 1} on the connection` }] }),
        );
        finish();
      }, TIMEOUT_MS);
    };
    const sendNext = () => {
      if (index >= requests.length) return finish();
      arm();
      socket.write(requests[index]!.bytes);
    };
    socket.on("data", (c: Buffer) => {
      buffered = Buffer.concat([buffered, c]);
      const parsed = parseHttp1(buffered, false);
      if (!parsed) return;
      const read = requests[index]?.read ?? restReader;
      outcomes.push(read(parsed.status, (n) => parsed.headers.get(n), parsed.body));
      buffered = Buffer.alloc(0);
      index++;
      if (/close/i.test(parsed.headers.get("connection") ?? "")) return finish();
      sendNext();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      if (buffered.length) {
        const parsed = parseHttp1(buffered, true);
        const read = requests[index]?.read ?? restReader;
        if (parsed) outcomes.push(read(parsed.status, (n) => parsed.headers.get(n), parsed.body));
      }
      finish();
    });
    socket.on("connect", sendNext);
  });
}
