// REST/JSON → service handlers, derived from each method's google.api.http rule. Adding an RPC
// with an http option to a served proto adds its REST route; nothing here is per-RPC.
//
// Request building follows grpc-gateway: path variables, then the body (`*` = whole request,
// or one field), then query parameters for the remaining fields (`a.b_c=v`, proto or JSON
// names, repeated keys for lists). A PATCH without an update mask gets one made from the JSON
// keys present in the body, so "present" (not "non-default") decides what changes.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  create,
  fromJson,
  getOption,
  hasOption,
  type DescField,
  type DescMessage,
  type DescMethodUnary,
  type JsonObject,
  type JsonValue,
  type MessageShape,
} from "@bufbuild/protobuf";
import { protoCamelCase } from "@bufbuild/protobuf/reflect";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { http } from "../gen/google/api/annotations_pb.js";
import { ResourceInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { clip, invalidArgument, type FieldViolation } from "../core/errors.js";
import { isOutputOnly } from "../core/fieldmask.js";
import type { CallContext, Dispatch, ServiceBinding } from "../core/service.js";
import { compareSpecificity, compileTemplate, type CompiledTemplate } from "./http-template.js";
import { toRestJsonText } from "../core/rest-json.js";
import { NO_ROUTE, outcomeOf } from "./request-log.js";
import { MAX_ECHO_LENGTH, quote, shortenQuotedValues, strictUtf8 } from "../core/strings.js";

type Verb = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface RestRoute {
  verb: Verb;
  template: CompiledTemplate;
  binding: ServiceBinding;
  method: DescMethodUnary;
  /** "" (no body), "*" (whole request) or a top-level field name */
  body: string;
  responseBody: string;
}

export function collectRoutes(bindings: ServiceBinding[]): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const binding of bindings) {
    for (const method of binding.service.methods) {
      if (method.methodKind !== "unary" || !hasOption(method, http)) continue;
      const rules = [getOption(method, http), ...getOption(method, http).additionalBindings];
      for (const rule of rules) {
        const { case: kind, value } = rule.pattern;
        if (!kind || kind === "custom" || typeof value !== "string") continue;
        routes.push({
          verb: kind.toUpperCase() as Verb,
          template: compileTemplate(value),
          binding,
          method: method as DescMethodUnary,
          body: rule.body,
          responseBody: rule.responseBody,
        });
      }
    }
  }
  return routes.sort((a, b) => compareSpecificity(a.template, b.template));
}

function fieldByName(desc: DescMessage, name: string): DescField | undefined {
  return desc.fields.find((f) => f.name === name || f.jsonName === name);
}

/** Sets a value at a dotted field path in a JSON request object, using JSON names throughout. */
function setAtPath(root: JsonObject, desc: DescMessage, path: string[], value: JsonValue, what: string): void {
  let obj = root;
  let msg = desc;
  path.forEach((part, i) => {
    const field = fieldByName(msg, part);
    if (!field)
      throw invalidArgument({ field: path.join("."), description: `unknown ${what} ${quote(path.join("."))}` });
    if (field.name !== field.jsonName) delete obj[field.name];
    if (i === path.length - 1) {
      obj[field.jsonName] = value;
      return;
    }
    if (field.fieldKind !== "message") {
      throw invalidArgument({ field: path.join("."), description: `${quote(part)} is not a message field` });
    }
    const next = obj[field.jsonName];
    if (next === undefined || next === null || typeof next !== "object" || Array.isArray(next)) {
      obj[field.jsonName] = {};
    }
    obj = obj[field.jsonName] as JsonObject;
    msg = field.message;
  });
}

function leafField(desc: DescMessage, path: string[]): DescField | undefined {
  let msg: DescMessage | undefined = desc;
  let field: DescField | undefined;
  for (const part of path) {
    if (!msg) return undefined;
    field = fieldByName(msg, part);
    if (!field) return undefined;
    msg = field.fieldKind === "message" ? field.message : undefined;
  }
  return field;
}

/** Query-string text → the JSON value fromJson expects for that field. */
function queryValue(field: DescField, raw: string, key: string): JsonValue {
  const scalarLike = field.fieldKind === "scalar" || field.fieldKind === "list" ? field.scalar : undefined;
  if (field.fieldKind === "message" && field.message.typeName === FieldMaskSchema.typeName) {
    // Accept snake_case paths too: "update_mask=resource_limits,name".
    return raw
      .split(",")
      .map((p) => protoCamelCase(p.trim()))
      .join(",");
  }
  if (field.fieldKind === "message" && field.message.typeName === "google.protobuf.BoolValue")
    return raw === "true" ? true : raw === "false" ? false : raw;
  if (scalarLike === 8 /* BOOL */) {
    if (raw === "true" || raw === "1") return true;
    if (raw === "false" || raw === "0") return false;
    throw invalidArgument({ field: key, description: `${quote(raw)} is not a boolean` });
  }
  if (
    (field.fieldKind === "enum" || (field.fieldKind === "list" && field.listKind === "enum")) &&
    /^-?\d+$/.test(raw)
  ) {
    return Number(raw);
  }
  return raw;
}

function applyQuery(
  root: JsonObject,
  desc: DescMessage,
  query: Record<string, string | string[] | undefined>,
  bound: Set<string>,
): void {
  for (const [key, rawValue] of Object.entries(query)) {
    if (rawValue === undefined) continue;
    const path = key.split(".");
    const field = leafField(desc, path);
    if (!field) throw invalidArgument({ field: key, description: `unknown query parameter ${quote(key)}` });
    const top = fieldByName(desc, path[0]!)!;
    // The key with proto field names ("uidp.in_root" for "uidp.inRoot"), as violations name fields.
    let parent: DescMessage | undefined = desc;
    const protoKey = path
      .map((part) => {
        const f = fieldByName(parent!, part)!;
        parent = f.fieldKind === "message" ? f.message : undefined;
        return f.name;
      })
      .join(".");
    if (bound.has(top.name)) {
      throw invalidArgument({
        field: key,
        description: `${quote(key)} is taken from the path or body, not the query string`,
      });
    }
    const values = Array.isArray(rawValue) ? rawValue : [rawValue];
    if (field.fieldKind === "list") {
      setAtPath(
        root,
        desc,
        path,
        values.map((v) => queryValue(field, v, protoKey)),
        "query parameter",
      );
    } else if (
      field.fieldKind === "map" ||
      (field.fieldKind === "message" && !field.message.typeName.startsWith("google.protobuf."))
    ) {
      throw invalidArgument({ field: key, description: `${quote(key)} cannot be set from the query string` });
    } else {
      if (values.length > 1)
        throw invalidArgument({ field: key, description: `${quote(key)} is given more than once` });
      setAtPath(root, desc, path, queryValue(field, values[0]!, protoKey), "query parameter");
    }
  }
}

/** Proto paths of the JSON keys present in a body, skipping output-only fields (AIP-203). */
function presentPaths(desc: DescMessage, body: JsonObject, prefix = ""): string[] {
  const paths: string[] = [];
  for (const [key, value] of Object.entries(body)) {
    const field = fieldByName(desc, key);
    if (!field || isOutputOnly(field)) continue;
    const path = prefix + field.name;
    if (
      field.fieldKind === "message" &&
      !field.message.typeName.startsWith("google.protobuf.") &&
      value !== null &&
      typeof value === "object" &&
      !Array.isArray(value) &&
      Object.keys(value).length > 0
    ) {
      paths.push(...presentPaths(field.message, value, path + "."));
    } else {
      paths.push(path);
    }
  }
  return paths;
}

function parseBody(raw: Buffer | undefined): JsonValue | undefined {
  if (!raw || raw.length === 0) return undefined;
  const text = strictUtf8(raw);
  if (text === undefined) throw invalidArgument({ field: "body", description: "is not valid UTF-8" });
  try {
    return JSON.parse(text) as JsonValue;
  } catch (err) {
    throw invalidArgument({ field: "body", description: `malformed JSON: ${(err as Error).message}` });
  }
}

function decodeSegment(value: string, field: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw invalidArgument({ field, description: "malformed percent-encoding in path" });
  }
}

/** A form body (OAuth-style endpoints) read as more query parameters. */
function formFields(raw: Buffer): Record<string, string | string[]> {
  const fields: Record<string, string | string[]> = {};
  for (const [key, value] of new URLSearchParams(raw.toString("utf8"))) {
    const prev = fields[key];
    fields[key] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return fields;
}

export function buildRequest(
  route: RestRoute,
  match: RegExpExecArray,
  query: Record<string, string | string[] | undefined>,
  rawBody: Buffer | undefined,
  contentType = "",
): MessageShape<DescMessage> {
  const input = route.method.input;
  let root: JsonObject = {};
  const bound = new Set<string>();
  // A rule without a body takes its fields from the query string; a POSTed form adds to it.
  if (route.body === "" && rawBody?.length && /^application\/x-www-form-urlencoded\b/i.test(contentType)) {
    const form = formFields(rawBody);
    for (const [key, value] of Object.entries(form)) {
      const prev = query[key];
      query = { ...query, [key]: prev === undefined ? value : [...[prev].flat(), ...[value].flat()] };
    }
    rawBody = undefined;
  }
  const body = route.body === "" ? undefined : parseBody(rawBody);
  let bodyObject: JsonObject | undefined;

  if (route.body === "*") {
    if (body !== undefined) {
      if (body === null || typeof body !== "object" || Array.isArray(body)) {
        throw invalidArgument({ field: "body", description: "must be a JSON object" });
      }
      root = body;
    }
    for (const f of input.fields) bound.add(f.name);
  } else if (route.body !== "") {
    const field = fieldByName(input, route.body)!;
    bound.add(field.name);
    if (body !== undefined) {
      if (field.fieldKind === "message" && (body === null || typeof body !== "object" || Array.isArray(body))) {
        throw invalidArgument({ field: "body", description: "must be a JSON object" });
      }
      root[field.jsonName] = body;
      if (field.fieldKind === "message" && body && typeof body === "object" && !Array.isArray(body)) bodyObject = body;
    }
  }

  // grpc-gateway: a PATCH without update_mask gets the body's present keys as its mask. With
  // nothing writable present the patch is emptied, so nothing changes (path fields come next).
  const maskField = input.fields.find(
    (f) => f.name === "update_mask" && f.fieldKind === "message" && f.message.typeName === FieldMaskSchema.typeName,
  );
  const bodyField = route.body !== "" && route.body !== "*" ? fieldByName(input, route.body) : undefined;
  let autoMask: string[] | undefined;
  if (
    route.verb === "PATCH" &&
    maskField &&
    bodyField?.fieldKind === "message" &&
    !(maskField.name in query || maskField.jsonName in query)
  ) {
    autoMask = bodyObject ? presentPaths(bodyField.message, bodyObject) : [];
    if (autoMask.length === 0) {
      // Emptied below, so decode it first: an unknown or mistyped key is still an error.
      if (bodyObject) {
        try {
          fromJson(bodyField.message, bodyObject, { ignoreUnknownFields: false });
        } catch (err) {
          throw invalidArgument(requestViolation(err, bodyField.message, bodyObject, ""));
        }
      }
      root[bodyField.jsonName] = {};
    }
  }

  route.template.variables.forEach((variable, i) => {
    const path = variable.split(".");
    bound.add(fieldByName(input, path[0]!)?.name ?? path[0]!);
    setAtPath(root, input, path, decodeSegment(match[i + 1] ?? "", variable), "path variable");
  });

  applyQuery(root, input, query, bound);

  let request: MessageShape<DescMessage>;
  try {
    request = fromJson(input, root, { ignoreUnknownFields: false });
  } catch (err) {
    throw invalidArgument(requestViolation(err, input, root, route.body));
  }

  if (autoMask && autoMask.length > 0 && maskField) {
    (request as Record<string, unknown>)[maskField.localName] = create(FieldMaskSchema, { paths: autoMask });
  }
  return request;
}

/**
 * The proto path of the field whose JSON value fails to decode, found by decoding the request
 * one key at a time (only on the error path). Undefined when no single field is to blame.
 */
function failingField(desc: DescMessage, json: JsonObject, prefix = ""): string | undefined {
  for (const [key, value] of Object.entries(json)) {
    const field = fieldByName(desc, key);
    if (!field) return prefix + key;
    try {
      fromJson(desc, { [key]: value }, { ignoreUnknownFields: false });
      continue;
    } catch {
      // this key is (part of) the problem
    }
    const nested =
      field.fieldKind === "message" &&
      !field.message.typeName.startsWith("google.protobuf.") &&
      value !== null &&
      typeof value === "object" &&
      !Array.isArray(value)
        ? failingField(field.message, value, `${prefix}${field.name}.`)
        : undefined;
    return nested ?? prefix + field.name;
  }
  return undefined;
}

/**
 * A decode failure as a field violation. Paths inside a body field are given relative to it
 * (`name`, not `group.name`), as the services name their own violations.
 */
function requestViolation(err: unknown, desc: DescMessage, json: JsonObject, body: string): FieldViolation {
  // Decoder messages can quote the offending value: never repeat more than a short prefix of it.
  const message = shortenQuotedValues(err instanceof Error ? err.message : String(err));
  let located = failingField(desc, json);
  const bodyField = body && body !== "*" ? fieldByName(desc, body) : undefined;
  if (located && bodyField && located.startsWith(bodyField.name + "."))
    located = located.slice(bodyField.name.length + 1);
  if (located) {
    const reason = message.replace(/^cannot decode [^:]*: /, "");
    return {
      field: located,
      description: reason.startsWith('"') ? `invalid value ${reason}` : `cannot decode: ${reason}`,
    };
  }
  // protobuf-es: `cannot decode field pkg.Msg.field_name from JSON: ...` / `... key "x" is unknown`
  const unknownKey = /key "([^"]+)" is unknown/.exec(message);
  if (unknownKey) return { field: unknownKey[1]!, description: `unknown field ${quote(unknownKey[1]!)}` };
  const fieldMatch = /cannot decode field [\w.]*\.(\w+) from JSON: (.*)$/.exec(message);
  if (fieldMatch) return { field: fieldMatch[1]!, description: `cannot decode: ${fieldMatch[2]}` };
  return { field: "body", description: message };
}

const GRPC_CONTENT_TYPE = /^application\/grpc(-web(-text)?)?([+;]|$)/i;

export interface TranscoderOptions {
  bindings: ServiceBinding[];
  /** runs an RPC (the same pipeline every protocol uses) */
  dispatch: Dispatch;
  /** turns any thrown value into the wire error reply */
  sendError: (reply: FastifyReply, err: unknown) => FastifyReply;
  callContext: (request: FastifyRequest) => CallContext;
}

/** Registers one catch-all route that dispatches REST calls by template. */
export async function registerTranscoder(app: FastifyInstance, opts: TranscoderOptions): Promise<RestRoute[]> {
  const routes = collectRoutes(opts.bindings);
  const byVerb = new Map<string, RouteIndex>();
  for (const verb of new Set(routes.map((r) => r.verb)))
    byVerb.set(verb, indexRoutes(routes.filter((r) => r.verb === verb)));

  await app.register(async (scope) => {
    // Bodies are decoded here against the proto schema, whatever the content type says.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

    scope.route({
      method: ["GET", "POST", "PUT", "PATCH", "DELETE"],
      url: "/*",
      handler: async (request, reply) => {
        const path = request.url.split("?", 1)[0]!;
        const contentType = String(request.headers["content-type"] ?? "");
        if (GRPC_CONTENT_TYPE.test(contentType)) {
          // A gRPC / gRPC-Web call to a method nobody serves: answer in its protocol
          // (trailers-only, HTTP 200, grpc-status 12), not with a REST 404.
          const status = {
            "grpc-status": String(Code.Unimplemented),
            "grpc-message": encodeURIComponent(`unknown method ${clip(path, MAX_ECHO_LENGTH)}`),
          };
          Object.assign(outcomeOf(request), { code: Code.Unimplemented, status: 501, route: NO_ROUTE });
          reply.hijack();
          const res = reply.raw;
          // gRPC-Web reads a trailers-only status from the headers; gRPC over HTTP/2 from trailers.
          res.writeHead(200, {
            "content-type": contentType.split(";")[0]!,
            ...(request.raw.httpVersionMajor === 2 ? {} : status),
          });
          if (request.raw.httpVersionMajor === 2) res.addTrailers(status);
          res.end();
          return reply;
        }
        const candidates = byVerb.get(request.method)?.candidates(path) ?? [];
        let route: RestRoute | undefined;
        let match: RegExpExecArray | null = null;
        for (const r of candidates) {
          match = r.template.regex.exec(path);
          if (match) {
            route = r;
            break;
          }
        }
        if (!route || !match) {
          // The catch-all's "/*" would read as a route; the raw path is never logged.
          outcomeOf(request).route = NO_ROUTE;
          return opts.sendError(reply, routeNotFound(request.method, path, routes));
        }
        outcomeOf(request).route = route.template.source;
        try {
          const input = buildRequest(
            route,
            match,
            request.query as Record<string, string | string[]>,
            request.body as Buffer | undefined,
            contentType,
          );
          const output = await opts.dispatch(route.binding, route.method, input, opts.callContext(request));
          let desc: DescMessage = route.method.output;
          let message: MessageShape<DescMessage> = output;
          if (route.responseBody) {
            const f = fieldByName(desc, route.responseBody)!;
            if (f.fieldKind === "message") {
              desc = f.message;
              message =
                ((output as Record<string, unknown>)[f.localName] as MessageShape<DescMessage>) ?? create(f.message);
            }
          }
          // API answers are per caller (and some are tokens): never stored by caches (RFC 6749 §5.1).
          return reply
            .code(200)
            .header("content-type", "application/json")
            .header("cache-control", "no-store")
            .send(toRestJsonText(desc, message));
        } catch (err) {
          return opts.sendError(reply, err);
        }
      },
    });
  });
  return routes;
}

/** How many leading path segments index a verb's routes. */
const INDEXED_SEGMENTS = 3;

/**
 * A verb's routes, each path's candidates found by its first segments instead of trying every
 * template: the routes whose templates begin with those literal segments, and the few whose
 * templates begin with fewer, in the routes' order (most specific first; see collectRoutes).
 * GetGroup's `{uid=**}` is among the least specific, so a scan of them all was ~3 µs a request.
 */
export interface RouteIndex {
  candidates(path: string): readonly RestRoute[];
}

export function indexRoutes(routes: RestRoute[]): RouteIndex {
  const keyOf = (segments: readonly string[]) => segments.slice(0, INDEXED_SEGMENTS).join("/");
  const indexed = routes.filter((r) => r.template.leadingLiterals.length >= INDEXED_SEGMENTS);
  const general = routes.filter((r) => r.template.leadingLiterals.length < INDEXED_SEGMENTS);
  const byKey = new Map<string, RestRoute[]>();
  for (const key of new Set(indexed.map((r) => keyOf(r.template.leadingLiterals))))
    byKey.set(
      key,
      routes.filter((r) => !indexed.includes(r) || keyOf(r.template.leadingLiterals) === key),
    );
  return {
    candidates(path) {
      // "/a/b/c/..." → "a/b/c": the text between the first and the fourth slash
      let end = 0;
      for (let i = 0; i < INDEXED_SEGMENTS && end !== -1; i++) end = path.indexOf("/", end + 1);
      const key = path.slice(1, end === -1 ? undefined : end);
      return byKey.get(key) ?? general;
    },
  };
}

function routeNotFound(verb: string, fullPath: string, routes: RestRoute[]): ConnectError {
  const otherVerb = routes.some((r) => r.template.regex.test(fullPath));
  // URLs may be long; messages stay short.
  const path = clip(fullPath, MAX_ECHO_LENGTH);
  if (otherVerb) {
    return new ConnectError(`Method ${verb} is not allowed for ${path}`, Code.Unimplemented);
  }
  return new ConnectError(`Not found: no route for ${verb} ${path}`, Code.NotFound, undefined, [
    {
      desc: ResourceInfoSchema,
      value: { resourceType: "route", resourceName: `${verb} ${path}`, description: "no such route" },
    },
  ]);
}
