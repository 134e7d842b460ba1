// gRPC server reflection (grpc.reflection.v1 and v1alpha), so grpcurl-style tools and IDEs work
// without .proto files: the served services, and any file (with its imports) by name or by a
// symbol it declares. Unauthenticated, as in grpc-go and grpc-java: it tells only the schema,
// which is public (proto/, /openapi.json), never data.
import { createRegistry, toBinary, type DescFile, type DescService, type Registry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import * as v1 from "../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../gen/grpc/reflection/v1alpha/reflection_pb.js";

/** The reflection services themselves, served beside the API. */
export const REFLECTION_SERVICES: readonly DescService[] = [v1.ServerReflection, v1alpha.ServerReflection];

type Request = v1.ServerReflectionRequest | v1alpha.ServerReflectionRequest;
type Answer = v1.ServerReflectionResponse["messageResponse"];

class Schema {
  private readonly registry: Registry;
  private readonly filesByName = new Map<string, DescFile>();
  private readonly serviceNames: string[];

  constructor(services: readonly DescService[]) {
    const all = [...services, ...REFLECTION_SERVICES];
    this.serviceNames = [...new Set(all.map((s) => s.typeName))].sort();
    const visit = (f: DescFile): void => {
      if (this.filesByName.has(f.name)) return;
      this.filesByName.set(f.name, f);
      f.dependencies.forEach(visit);
    };
    all.forEach((s) => visit(s.file));
    this.registry = createRegistry(...this.filesByName.values());
  }

  answer(request: Request): Answer {
    const r = request.messageRequest;
    switch (r.case) {
      case "listServices":
        return {
          case: "listServicesResponse",
          value: { service: this.serviceNames.map((name) => ({ name })) },
        } as Answer;
      case "fileByFilename": {
        // DescFile names carry no ".proto"; requests do
        const file = this.filesByName.get(r.value.replace(/\.proto$/, ""));
        return file ? this.files(file) : notFound(`file ${r.value}`);
      }
      case "fileContainingSymbol": {
        const file = this.fileOfSymbol(r.value);
        return file ? this.files(file) : notFound(`symbol ${r.value}`);
      }
      case "fileContainingExtension": {
        const ext = this.registry.getExtensionFor(
          this.registry.getMessage(r.value.containingType)!,
          r.value.extensionNumber,
        );
        return ext
          ? this.files(ext.file)
          : notFound(`extension ${r.value.extensionNumber} of ${r.value.containingType}`);
      }
      case "allExtensionNumbersOfType": {
        const message = this.registry.getMessage(r.value);
        if (!message) return notFound(`type ${r.value}`);
        const numbers: number[] = [];
        for (const desc of this.registry)
          if (desc.kind === "extension" && desc.extendee.typeName === message.typeName) numbers.push(desc.number);
        return {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: message.typeName, extensionNumber: numbers.sort((a, b) => a - b) },
        } as Answer;
      }
      default:
        return {
          case: "errorResponse",
          value: { errorCode: Code.InvalidArgument, errorMessage: "the request names no known message_request" },
        } as Answer;
    }
  }

  /** The file declaring a fully-qualified symbol: a type, a service, a method, a field or an enum value. */
  private fileOfSymbol(symbol: string): DescFile | undefined {
    const found = this.registry.get(symbol);
    if (found) return found.file;
    // members (a method, a field, an enum value) are named after their parent
    const dot = symbol.lastIndexOf(".");
    if (dot < 0) return undefined;
    const parent = this.registry.get(symbol.slice(0, dot));
    const member = symbol.slice(dot + 1);
    if (parent?.kind === "service" && parent.methods.some((m) => m.name === member)) return parent.file;
    if (parent?.kind === "message" && parent.fields.some((f) => f.name === member)) return parent.file;
    if (parent?.kind === "enum" && parent.values.some((v) => v.name === member)) return parent.file;
    return undefined;
  }

  /** The file and everything it imports, each once, dependencies first. */
  private files(file: DescFile): Answer {
    const ordered: DescFile[] = [];
    const seen = new Set<string>();
    const visit = (f: DescFile) => {
      if (seen.has(f.name)) return;
      seen.add(f.name);
      f.dependencies.forEach(visit);
      ordered.push(f);
    };
    visit(file);
    // The asked-for file first, as grpc-go sends it; then its imports.
    ordered.unshift(ordered.pop()!);
    return {
      case: "fileDescriptorResponse",
      value: { fileDescriptorProto: ordered.map((f) => toBinary(FileDescriptorProtoSchema, f.proto)) },
    } as Answer;
  }
}

function notFound(what: string): Answer {
  return { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: `${what} not found` } } as Answer;
}

/** Registers both reflection services on the router, describing `services`. */
export function registerReflection(router: ConnectRouter, services: readonly DescService[]): void {
  const schema = new Schema(services);
  for (const service of [v1.ServerReflection, v1alpha.ServerReflection]) {
    router.service(service as typeof v1.ServerReflection, {
      async *serverReflectionInfo(requests) {
        for await (const request of requests) {
          yield {
            validHost: request.host,
            originalRequest: request,
            messageResponse: schema.answer(request),
          };
        }
      },
    });
  }
}
