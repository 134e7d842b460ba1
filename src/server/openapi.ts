// The OpenAPI 3.1 description of the REST surface, derived from the same descriptors and
// `google.api.http` rules the transcoder serves: one operation per RPC with an HTTP rule, its path
// variables, query parameters (GET and DELETE) or body, the answer, and google.rpc.Status for
// errors. JSON shapes follow the proto3 JSON mapping the server speaks. Written to
// openapi/openapi.json by scripts/generate-openapi.ts (checked in tests) and served at
// /openapi.json.
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

  message(desc: DescMessage): Json {
    const known = WELL_KNOWN[desc.typeName];
    if (known) return known;
    if (!this.schemas.has(desc.typeName)) {
      this.schemas.set(desc.typeName, {}); // placeholder: recursive types
      const properties: Json = {};
      for (const field of desc.fields) properties[field.jsonName] = this.field(field);
      const oneofs = desc.oneofs.map((o) => `${o.name}: one of ${o.fields.map((f) => f.jsonName).join(", ")}`);
      this.schemas.set(desc.typeName, {
        type: "object",
        properties,
        additionalProperties: false,
        ...(oneofs.length ? { description: `At most one of each group is set — ${oneofs.join("; ")}.` } : {}),
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
      out.push({
        name,
        in: "query",
        required: false,
        description: `Also accepted as \`${prefix}${field.name}\`.`,
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

function ruleOf(method: DescMethod): Rule | undefined {
  if (method.methodKind !== "unary" || !hasOption(method, http)) return undefined;
  const rule = getOption(method, http);
  const { case: verb, value } = rule.pattern;
  if (!verb || verb === "custom" || typeof value !== "string") return undefined;
  return { verb, template: value, body: rule.body };
}

/** The OpenAPI 3.1 document of every RPC of `services` that has an HTTP rule. */
export function openApiDocument(services: readonly DescService[], version = "0.1.0"): Json {
  const b = new Builder();
  const paths: Record<string, Record<string, Json>> = {};
  const tags = new Set<string>();
  for (const service of services) {
    for (const method of service.methods) {
      const rule = ruleOf(method);
      if (!rule) continue;
      tags.add(service.typeName);
      const variables = [...rule.template.matchAll(/\{([^}=]+)(?:=[^}]*)?\}/g)].map((m) => m[1]!);
      const path = rule.template.replace(/\{([^}=]+)(?:=[^}]*)?\}/g, "{$1}");
      const parameters: Json[] = variables.map((name) => ({
        name,
        in: "path",
        required: true,
        description: "A uid; it may contain slashes (`org/group/...`), sent as they are.",
        schema: { type: "string" },
      }));
      const operation: Json = {
        operationId: `${service.typeName}.${method.name}`,
        tags: [service.typeName],
        summary: `${service.name}.${method.name}`,
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
  }
  b.message(StatusSchema);
  return sorted({
    openapi: "3.1.0",
    info: {
      title: "Bulwark API",
      version,
      description:
        "Identity, registry and vulnerability management: REST/JSON transcoded from the gRPC services " +
        "(the same services answer gRPC, gRPC-Web and Connect on the same port). Generated from the protos.",
    },
    servers: [{ url: "/" }],
    security: [{ bearer: [] }],
    tags: [...tags].sort().map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" } },
      schemas: Object.fromEntries(b.schemas),
    },
  }) as Json;
}

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
