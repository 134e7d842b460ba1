// The OpenAPI 3.1 descriptions of the REST surface, one document per API version (v2beta1, the
// default; v2; v1), derived from the same descriptors and `google.api.http` rules the transcoder
// serves: one operation per implemented RPC with an HTTP rule (an RPC the server answers
// UNIMPLEMENTED is left out and named in the document's description), its path variables, query
// parameters (GET and DELETE) or body, the answer, and google.rpc.Status for errors. Operation ids
// are the RPC's name (`ListGroups`), qualified by its service only where a document would repeat
// one; tags are the services. Summaries and descriptions come from the protos' comments (read with
// their source info at generate time), else from the method's name and its iam rule. The plain
// routes (`/v2/`, `/token`, the OSV API, the secdb, `/healthz`) are described by hand below. JSON
// shapes follow the proto3 JSON mapping the server speaks. Written to openapi/ by
// scripts/generate-openapi.ts (checked in tests) and served at /openapi.json and /openapi/<version>.json.
import {
  getOption,
  hasOption,
  ScalarType,
  type DescEnum,
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescService,
} from "@bufbuild/protobuf";
import { http } from "../gen/google/api/annotations_pb.js";
import { iam } from "../gen/annotations/auth_pb.js";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { StatusSchema } from "../gen/google/rpc/status_pb.js";

type Json = Record<string, unknown>;

const STATUS = StatusSchema.typeName;
const ref = (typeName: string) => ({ $ref: `#/components/schemas/${typeName}` });

/** Well-known types in their JSON form (proto3 JSON mapping). */
const WELL_KNOWN: Record<string, Json> = {
  "google.protobuf.Timestamp": { type: "string", format: "date-time", description: "RFC 3339" },
  "google.protobuf.Duration": { type: "string", description: 'seconds with an "s" suffix, e.g. "3600s"' },
  "google.protobuf.FieldMask": { type: "string", description: "comma-separated field paths" },
  "google.protobuf.Empty": { type: "object" },
  "google.protobuf.Struct": { type: "object", additionalProperties: true },
  "google.protobuf.Value": {},
  "google.protobuf.ListValue": { type: "array", items: {} },
  "google.protobuf.Any": {
    type: "object",
    properties: { "@type": { type: "string" } },
    required: ["@type"],
    additionalProperties: true,
  },
  "google.protobuf.StringValue": { type: "string" },
  "google.protobuf.BytesValue": { type: "string", format: "byte" },
  "google.protobuf.BoolValue": { type: "boolean" },
  "google.protobuf.Int32Value": { type: "integer", format: "int32" },
  "google.protobuf.UInt32Value": { type: "integer", format: "int32" },
  "google.protobuf.Int64Value": { type: "string", format: "int64" },
  "google.protobuf.UInt64Value": { type: "string", format: "int64" },
  "google.protobuf.FloatValue": { type: "number" },
  "google.protobuf.DoubleValue": { type: "number" },
};

function scalarSchema(t: ScalarType): Json {
  switch (t) {
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BYTES:
      return { type: "string", format: "byte" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      // 64-bit integers are JSON strings
      return { type: "string", format: "int64" };
    default:
      return { type: "integer", format: "int32" };
  }
}

class Builder {
  readonly schemas = new Map<string, Json>();

  constructor(private readonly comments: ProtoComments) {}

  message(desc: DescMessage): Json {
    const known = WELL_KNOWN[desc.typeName];
    if (known) return known;
    if (!this.schemas.has(desc.typeName)) {
      this.schemas.set(desc.typeName, {}); // placeholder: recursive types
      const properties: Json = {};
      for (const field of desc.fields) {
        const comment = this.comments.get(`${desc.typeName}.${field.name}`);
        const schema = this.field(field);
        // A well-known type's own note (a timestamp's "RFC 3339") stays after the field's comment.
        const own = typeof schema.description === "string" ? schema.description : undefined;
        properties[field.jsonName] = comment
          ? { ...schema, description: [comment, own].filter(Boolean).join("\n\n") }
          : schema;
      }
      const oneofs = desc.oneofs.map((o) => `${o.name}: one of ${o.fields.map((f) => f.jsonName).join(", ")}`);
      const description = [
        this.comments.get(desc.typeName),
        oneofs.length ? `At most one of each group is set — ${oneofs.join("; ")}.` : undefined,
      ].filter(Boolean);
      this.schemas.set(desc.typeName, {
        type: "object",
        properties,
        additionalProperties: false,
        ...(description.length ? { description: description.join("\n\n") } : {}),
      });
    }
    return ref(desc.typeName);
  }

  enumeration(desc: DescEnum): Json {
    if (!this.schemas.has(desc.typeName))
      this.schemas.set(desc.typeName, { type: "string", enum: desc.values.map((v) => v.name) });
    return ref(desc.typeName);
  }

  private single(field: DescField): Json {
    if (field.message) return this.message(field.message);
    if (field.enum) return this.enumeration(field.enum);
    return scalarSchema(field.scalar ?? ScalarType.STRING);
  }

  field(field: DescField): Json {
    switch (field.fieldKind) {
      case "list":
        return { type: "array", items: this.single(field) };
      case "map":
        return {
          type: "object",
          additionalProperties:
            field.mapKind === "message"
              ? this.message(field.message)
              : field.mapKind === "enum"
                ? this.enumeration(field.enum)
                : scalarSchema(field.scalar),
        };
      default:
        return this.single(field);
    }
  }

  /** GET/DELETE: the request's fields outside the path, as query parameters (nested: dotted). */
  queryParameters(desc: DescMessage, skip: Set<string>, prefix = "", depth = 0): Json[] {
    const out: Json[] = [];
    for (const field of desc.fields) {
      const name = prefix + field.jsonName;
      if (skip.has(prefix + field.name) || skip.has(name)) continue;
      if (field.fieldKind === "message" && !WELL_KNOWN[field.message.typeName]) {
        if (depth < 3) out.push(...this.queryParameters(field.message, skip, `${name}.`, depth + 1));
        continue;
      }
      if (field.fieldKind === "map") continue;
      // The field's comment, and its proto name where the JSON name differs (both are accepted).
      const description = [
        this.comments.get(`${desc.typeName}.${field.name}`),
        name === prefix + field.name ? undefined : `Also accepted as \`${prefix}${field.name}\`.`,
      ]
        .filter(Boolean)
        .join("\n\n");
      out.push({
        name,
        in: "query",
        required: false,
        ...(description ? { description } : {}),
        schema: this.field(field),
        ...(field.fieldKind === "list" ? { style: "form", explode: true } : {}),
      });
    }
    return out;
  }
}

interface Rule {
  verb: string;
  template: string;
  body: string;
}

/** A method's REST bindings: its rule, then its additional bindings (`GET /sts/exchange`). */
function rulesOf(method: DescMethod): Rule[] {
  if (method.methodKind !== "unary" || !hasOption(method, http)) return [];
  const rule = getOption(method, http);
  return [rule, ...rule.additionalBindings].flatMap(({ pattern: { case: verb, value }, body }) =>
    !verb || verb === "custom" || typeof value !== "string" ? [] : [{ verb, template: value, body }],
  );
}

/** The API versions, each its own document; the first is the default (/openapi.json). */
export const API_VERSIONS = ["v2beta1", "v2", "v1"] as const;
export type ApiVersion = (typeof API_VERSIONS)[number];

/**
 * The document a service belongs in: its package's version; an unversioned package with
 * versioned siblings (`chainguard.platform.iam` beside `….iam.v2beta1`) is v1; the rest (auth,
 * the token exchange, Bulwark's extensions) serve every version and appear in each document.
 */
export function versionsOf(service: DescService, all: readonly DescService[]): readonly ApiVersion[] {
  const pkg = service.file.proto.package;
  const own = /\.(v2beta1|v2)$/.exec(pkg)?.[1] as ApiVersion | undefined;
  if (own) return [own];
  if (pkg.startsWith("bulwark.")) return API_VERSIONS;
  const versioned = all.some((s) => s.file.proto.package.startsWith(pkg + ".v2"));
  return versioned ? ["v1"] : API_VERSIONS;
}

/** Comments of proto declarations, by full name (`pkg.Service.Method`, `pkg.Message`). */
export type ProtoComments = ReadonlyMap<string, string>;

/** What the documents are made from. */
export interface OpenApiSources {
  services: readonly DescService[];
  /** whether the server implements a method (it answers UNIMPLEMENTED otherwise) */
  implemented(service: DescService, method: DescMethod): boolean;
  comments: ProtoComments;
  /** the package's version */
  version: string;
}

/** "ListRoleBindings" → "List role bindings". */
function words(name: string): string {
  const spaced = name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
  return spaced.charAt(0).toUpperCase() + spaced.slice(1);
}

/** The first sentence of a comment, for a summary. */
function firstSentence(text: string): string {
  const line = text
    .split(/\n\s*\n/)[0]!
    .replace(/\s+/g, " ")
    .trim();
  const end = line.search(/\.(\s|$)/);
  return end > 0 ? line.slice(0, end) : line;
}

/** What the method's iam rule asks of the caller, in words. */
function accessOf(method: DescMethod): string {
  if (!hasOption(method, iam)) return "Takes its own credentials (no iam rule).";
  const rule = getOption(method, iam).mode;
  if (rule.case !== "enabled") return "Needs no capability.";
  const caps = rule.value.capabilities.map((c) => `\`${Capability[c] ?? c}\``);
  if (caps.length === 0) return "Needs an authenticated caller.";
  return rule.value.unscoped
    ? `Answers what the caller holds ${caps.join(", ")} on.`
    : `Needs ${caps.join(", ")} on the group or resource the request names.`;
}

/** The OpenAPI 3.1 document of each API version. */
export function openApiDocuments(sources: OpenApiSources): Record<ApiVersion, Json> {
  return Object.fromEntries(API_VERSIONS.map((v) => [v, openApiDocument(sources, v)])) as Record<ApiVersion, Json>;
}

function openApiDocument(sources: OpenApiSources, apiVersion: ApiVersion): Json {
  const { services, comments } = sources;
  const inDocument = services.filter((s) => versionsOf(s, services).includes(apiVersion));
  const methods = inDocument.flatMap((service) =>
    // A method's additional bindings follow its rule, each an operation of its own.
    service.methods.flatMap((method) => rulesOf(method).map((rule, binding) => ({ service, method, rule, binding }))),
  );
  const served = methods.filter(({ service, method }) => sources.implemented(service, method));
  const left = methods
    .filter((m) => m.binding === 0 && !served.includes(m))
    .map(({ service, method }) => `${service.name}.${method.name}`);
  // A name two services of this document share is qualified by its service; the rest stay short.
  const nameCount = new Map<string, number>();
  for (const { method, binding } of served)
    if (binding === 0) nameCount.set(method.name, (nameCount.get(method.name) ?? 0) + 1);
  const serviceNameCount = new Map<string, number>();
  for (const s of inDocument) serviceNameCount.set(s.name, (serviceNameCount.get(s.name) ?? 0) + 1);
  const tagOf = (s: DescService) => (serviceNameCount.get(s.name)! > 1 ? s.typeName : s.name);

  const b = new Builder(comments);
  const paths: Record<string, Record<string, Json>> = {};
  const tagged = new Set<DescService>();
  for (const { service, method, rule, binding } of served) {
    tagged.add(service);
    const variables = [...rule.template.matchAll(/\{([^}=]+)(?:=[^}]*)?\}/g)].map((m) => m[1]!);
    const path = rule.template.replace(/\{([^}=]+)(?:=[^}]*)?\}/g, "{$1}");
    const parameters: Json[] = variables.map((name) => ({
      name,
      in: "path",
      required: true,
      description: "A uid; it may contain slashes (`org/group/...`), sent as they are.",
      schema: { type: "string" },
    }));
    const comment = comments.get(`${service.typeName}.${method.name}`);
    const rpc = `\`${service.typeName}/${method.name}\` (also over gRPC, gRPC-Web and Connect)`;
    const operation: Json = {
      operationId:
        (nameCount.get(method.name)! > 1 ? `${service.name}_${method.name}` : method.name) +
        (binding === 0 ? "" : `_${rule.verb}`),
      tags: [tagOf(service)],
      summary: comment
        ? firstSentence(comment)
        : words(method.name) + (/[A-Z].*[A-Z]/.test(method.name) ? "" : ` (${service.name})`),
      description: [comment, accessOf(method), `RPC: ${rpc}.`].filter(Boolean).join("\n\n"),
      parameters,
      responses: {
        "200": { description: "OK", content: { "application/json": { schema: b.message(method.output) } } },
        default: {
          description: "An error (AIP-193): google.rpc.Status with ErrorInfo first among its details.",
          content: { "application/json": { schema: ref(STATUS) } },
        },
      },
    };
    if (rule.body === "") {
      parameters.push(...b.queryParameters(method.input, new Set(variables)));
    } else {
      const field = rule.body === "*" ? undefined : method.input.fields.find((f) => f.name === rule.body);
      operation.requestBody = {
        required: true,
        description:
          rule.body === "*"
            ? "The request; path variables come from the path."
            : `The request's \`${rule.body}\`; the other fields are query parameters.`,
        content: { "application/json": { schema: field ? b.field(field) : b.message(method.input) } },
      };
      if (field) parameters.push(...b.queryParameters(method.input, new Set([...variables, field.name])));
    }
    (paths[path] ??= {})[rule.verb] = operation;
  }
  b.message(StatusSchema);
  const tags = [...tagged].map((s) => ({
    name: tagOf(s),
    description: [comments.get(s.typeName), `\`${s.typeName}\``].filter(Boolean).join("\n\n"),
  }));
  if (apiVersion === API_VERSIONS[0]) {
    Object.assign(paths, PLAIN_ROUTES);
    tags.push(...PLAIN_TAGS);
  }
  const others = API_VERSIONS.filter((v) => v !== apiVersion).map((v) => `\`/openapi/${v}.json\``);
  return sorted({
    openapi: "3.1.0",
    info: {
      title: `Bulwark API (${apiVersion})`,
      version: sources.version,
      description: [
        `Identity, registry and vulnerability management, API version ${apiVersion}: REST/JSON transcoded from ` +
          "the gRPC services (the same services answer gRPC, gRPC-Web and Connect on the same port). " +
          `Generated from the protos. The other versions: ${others.join(", ")}.`,
        apiVersion === API_VERSIONS[0]
          ? "The plain routes (the OCI registry, its token endpoint, the OSV API, the secdb feed, health) are described here only."
          : "The plain routes (the OCI registry, the OSV API, health) are described in `/openapi.json`.",
        left.length
          ? `Not implemented by this server (they answer UNIMPLEMENTED), so left out: ${left.join(", ")}.`
          : "",
      ]
        .filter(Boolean)
        .join("\n\n"),
    },
    servers: [{ url: "/" }],
    security: [{ bearer: [] }],
    tags: tags.sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0)),
    paths,
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
        ...(apiVersion === API_VERSIONS[0]
          ? {
              basic: {
                type: "http",
                scheme: "basic",
                description: "The registry's token endpoint: `_token` and a token",
              },
            }
          : {}),
      },
      schemas: Object.fromEntries(b.schemas),
    },
  }) as Json;
}

const error = (description: string) => ({
  description,
  content: { "application/json": { schema: ref(STATUS) } },
});
const anyJson = (description: string) => ({
  description,
  content: { "application/json": { schema: { type: "object", additionalProperties: true } } },
});
const OSV_QUERY = {
  type: "object",
  description: "osv.dev's query: a package by name and ecosystem, or by purl; optionally a version",
  properties: {
    package: {
      type: "object",
      properties: { name: { type: "string" }, ecosystem: { type: "string" }, purl: { type: "string" } },
    },
    version: { type: "string" },
    commit: { type: "string" },
    page_token: { type: "string" },
  },
};

const PROBE_ANSWER = {
  type: "object",
  properties: {
    status: { type: "string", enum: ["SERVING", "NOT_SERVING"] },
    checks: {
      type: "array",
      description: "each check: the database, each module's (the registry's blob store), the shutdown",
      items: {
        type: "object",
        properties: {
          name: { type: "string" },
          status: { type: "string", enum: ["SERVING", "NOT_SERVING"] },
          reason: {
            type: "string",
            description: "why not, in words (unreachable, not migrated, failed, timed out, shutting down)",
          },
        },
      },
    },
  },
};
/** Credentials where a route takes them but also answers without (public content). */
const OPTIONAL_BEARER = [{ bearer: [] }, {}];

/**
 * The plain routes, declared by their modules (the registry's `oci/routes.ts` and `token.ts`, the
 * advisories' `feeds.ts`), by `app.ts` (/healthz) and `health.ts` (/livez, /readyz); test/server/openapi.test.ts checks each
 * described path is served.
 */
const PLAIN_ROUTES: Record<string, Record<string, Json>> = {
  "/healthz": {
    get: {
      operationId: "Healthz",
      tags: ["Health"],
      summary: "Whether the server is serving, and its version",
      security: [],
      responses: {
        "200": {
          description: "Serving",
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: { status: { type: "string", enum: ["SERVING"] }, version: { type: "string" } },
              },
            },
          },
        },
      },
    },
  },
  "/livez": {
    get: {
      operationId: "Livez",
      tags: ["Health"],
      summary: "Liveness: the process serves (asks nothing of the database)",
      security: [],
      responses: {
        "200": {
          description: "Serving",
          content: {
            "application/json": {
              schema: { type: "object", properties: { status: { type: "string", enum: ["SERVING"] } } },
            },
          },
        },
      },
    },
  },
  "/readyz": {
    get: {
      operationId: "Readyz",
      tags: ["Health"],
      summary: "Readiness: the database reachable and migrated, the blob store writable, no shutdown begun",
      description:
        "503 names each failed check. A shutdown (SIGTERM) turns it to 503 for the drain delay before the " +
        "listener closes, so a load balancer stops sending first. Not rate limited.",
      security: [],
      responses: {
        "200": { description: "Ready", content: { "application/json": { schema: PROBE_ANSWER } } },
        "503": { description: "Not ready", content: { "application/json": { schema: PROBE_ANSWER } } },
      },
    },
  },
  "/v2/": {
    get: {
      operationId: "OciVersionCheck",
      tags: ["OCI registry"],
      summary: "The OCI distribution API's base (a registry client's first request)",
      description:
        "The registry speaks the OCI distribution specification v1.1 under `/v2/<name>/…` (manifests, " +
        "blobs, uploads, tags, referrers): see https://github.com/opencontainers/distribution-spec. " +
        'It answers 401 with a `WWW-Authenticate: Bearer realm="…/token"` challenge until a registry ' +
        'token (from `/token`) or Basic credentials are presented. Errors are OCI\'s `{"errors":[…]}`.',
      security: OPTIONAL_BEARER,
      responses: {
        "200": anyJson("Authenticated: the registry speaks distribution v2"),
        "401": anyJson("A challenge naming the token endpoint"),
      },
    },
  },
  "/token": {
    get: {
      operationId: "RegistryToken",
      tags: ["OCI registry"],
      summary: "A registry token (the distribution token specification)",
      description:
        "A short-lived token for the registry audience, with the repository scopes asked for and allowed. " +
        "Credentials are optional (anonymous pulls of public repos): Basic `_token:<token>` or a Bearer token.",
      security: [{ basic: [] }, { bearer: [] }, {}],
      parameters: [
        {
          name: "service",
          in: "query",
          required: false,
          schema: { type: "string" },
          description: "this registry's host",
        },
        {
          name: "scope",
          in: "query",
          required: false,
          schema: { type: "array", items: { type: "string" } },
          style: "form",
          explode: true,
          description: "`repository:<name>:pull,push,delete`, repeated",
        },
      ],
      responses: {
        "200": {
          description: "The token",
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: {
                  token: { type: "string" },
                  access_token: { type: "string" },
                  expires_in: { type: "integer" },
                  issued_at: { type: "string", format: "date-time" },
                },
              },
            },
          },
        },
        default: error("An error (google.rpc.Status)"),
      },
    },
  },
  "/v1/vulns/{id}": {
    get: {
      operationId: "OsvGetVuln",
      tags: ["OSV API"],
      summary: "One advisory as an OSV record (osv.dev's GET /v1/vulns/{id})",
      security: OPTIONAL_BEARER,
      parameters: [
        { name: "id", in: "path", required: true, schema: { type: "string" }, description: "the advisory id" },
      ],
      responses: { "200": anyJson("The OSV record (OSV schema 1.6)"), default: error("An error (google.rpc.Status)") },
    },
  },
  "/v1/query": {
    post: {
      operationId: "OsvQuery",
      tags: ["OSV API"],
      summary: "The advisories affecting a package (osv.dev's POST /v1/query)",
      security: OPTIONAL_BEARER,
      requestBody: { required: true, content: { "application/json": { schema: OSV_QUERY } } },
      responses: {
        "200": anyJson("`{vulns: [OSV record], next_page_token?}`, or `{}` when nothing matches"),
        default: error("An error (google.rpc.Status)"),
      },
    },
  },
  "/v1/querybatch": {
    post: {
      operationId: "OsvQueryBatch",
      tags: ["OSV API"],
      summary: "Many queries at once (osv.dev's POST /v1/querybatch): ids and modification times",
      security: OPTIONAL_BEARER,
      requestBody: {
        required: true,
        content: {
          "application/json": {
            schema: { type: "object", properties: { queries: { type: "array", items: OSV_QUERY } } },
          },
        },
      },
      responses: {
        "200": anyJson("`{results: [{vulns: [{id, modified}]}]}`, one result per query"),
        default: error("An error (google.rpc.Status)"),
      },
    },
  },
  "/vulnerabilities/secdb.json": {
    get: {
      operationId: "Secdb",
      tags: ["Security feeds"],
      summary: "The fixed and not-affected advisories as an Alpine-style secdb (what apk scanners read)",
      security: OPTIONAL_BEARER,
      responses: {
        "200": anyJson("`{apkurl, archs, reponame, urlprefix, packages: [{pkg: {name, secfixes}}]}`"),
        default: error("An error (google.rpc.Status)"),
      },
    },
  },
};

const PLAIN_TAGS = [
  { name: "Health", description: "Liveness and version" },
  { name: "OCI registry", description: "The OCI distribution API and its token endpoint (plain routes)" },
  { name: "OSV API", description: "osv.dev-compatible advisory queries (plain routes)" },
  { name: "Security feeds", description: "Advisory feeds for scanners (plain routes)" },
];

/** Keys sorted at every level, so the committed file changes only when the API does. */
function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, sorted((value as Json)[k])]),
  );
}
