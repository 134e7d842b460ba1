// The committed OpenAPI documents (openapi/), one per API version, and what writes them: the
// served services with the server's own bindings (an RPC without a handler answers UNIMPLEMENTED
// and is left out) and the protos' comments, which the generated descriptors do not carry, read
// from `buf build`'s descriptor set with source info. Used by scripts/generate-openapi.ts and the
// tests that check the committed files; the running server only reads the files (docs-routes.ts).
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { fromBinary, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema, type DescriptorProto } from "@bufbuild/protobuf/wkt";
import type { ServiceBinding } from "../core/service.js";
import { PACKAGE_ROOT as ROOT } from "../core/package-files.js";
import { VERSION } from "../core/version.js";
import { API_VERSIONS, openApiDocuments, type ApiVersion, type ProtoComments } from "./openapi.js";

/** Where each version's document is committed; the first version's is /openapi.json. */
export function openApiFile(version: ApiVersion): string {
  return join(ROOT, "openapi", version === API_VERSIONS[0] ? "openapi.json" : `openapi-${version}.json`);
}

/** Each version's document as its committed file holds it. */
export function openApiTexts(bindings: readonly ServiceBinding[]): Record<ApiVersion, string> {
  const byService = new Map(bindings.map((b) => [b.service.typeName, b]));
  const documents = openApiDocuments({
    services: bindings.map((b) => b.service),
    implemented: (service: DescService, method: DescMethod) =>
      byService.get(service.typeName)?.handlers[method.localName] !== undefined,
    comments: protoComments(),
    version: VERSION,
  });
  return Object.fromEntries(API_VERSIONS.map((v) => [v, JSON.stringify(documents[v], null, 2) + "\n"])) as Record<
    ApiVersion,
    string
  >;
}

/** Source-info paths: a file's messages (4) and services (6); a message's fields (2) and nested messages (3); a service's methods (2). */
const MESSAGE = 4;
const SERVICE = 6;
const FIELD = 2;
const NESTED = 3;
const METHOD = 2;

/** The leading comments of every declaration in proto/, by full name. */
export function protoComments(): ProtoComments {
  const bytes = execFileSync(join(ROOT, "node_modules", ".bin", "buf"), ["build", "-o", "-#format=binpb"], {
    cwd: ROOT,
    maxBuffer: 256 * 1024 * 1024,
  });
  const comments = new Map<string, string>();
  for (const file of fromBinary(FileDescriptorSetSchema, bytes).file) {
    const byPath = new Map<string, string>();
    for (const location of file.sourceCodeInfo?.location ?? []) {
      const text = clean(location.leadingComments);
      if (text) byPath.set(location.path.join("."), text);
    }
    const note = (name: string, path: number[]) => {
      const text = byPath.get(path.join("."));
      if (text) comments.set(name, text);
    };
    const visitMessage = (message: DescriptorProto, scope: string, path: number[]) => {
      const name = `${scope}.${message.name}`;
      note(name, path);
      message.field.forEach((f, i) => note(`${name}.${f.name}`, [...path, FIELD, i]));
      message.nestedType.forEach((m, i) => visitMessage(m, name, [...path, NESTED, i]));
    };
    file.messageType.forEach((m, i) => visitMessage(m, file.package, [MESSAGE, i]));
    file.service.forEach((s, i) => {
      const name = `${file.package}.${s.name}`;
      note(name, [SERVICE, i]);
      s.method.forEach((m, j) => note(`${name}.${m.name}`, [SERVICE, i, METHOD, j]));
    });
  }
  return comments;
}

/** A comment's text: each line without the one space after `//`, blank edges dropped. */
function clean(comment: string | undefined): string {
  return (comment ?? "")
    .split("\n")
    .map((line) => line.replace(/^ /, "").trimEnd())
    .join("\n")
    .trim();
}
