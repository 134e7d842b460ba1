// An independent gRPC client for parity tests: @grpc/grpc-js + @grpc/proto-loader, built from the
// .proto sources (not from src/gen), plus decoding of the `grpc-status-details-bin` trailer into
// google.rpc.Status with typed error details.
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { createRegistry, fromBinary, fromJson, toJson, type JsonObject, type Message } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { StatusSchema, type Status } from "../../src/gen/google/rpc/status_pb.js";
import {
  BadRequestSchema,
  DebugInfoSchema,
  ErrorInfoSchema,
  HelpSchema,
  LocalizedMessageSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
  RequestInfoSchema,
  ResourceInfoSchema,
  RetryInfoSchema,
} from "../../src/gen/google/rpc/error_details_pb.js";
import { HANG_MS } from "./wait.js";

/** Every google.rpc error detail type, for unpacking Any and for JSON with "@type". */
export const errorDetailsRegistry = createRegistry(
  ErrorInfoSchema,
  BadRequestSchema,
  PreconditionFailureSchema,
  ResourceInfoSchema,
  RetryInfoSchema,
  DebugInfoSchema,
  QuotaFailureSchema,
  RequestInfoSchema,
  HelpSchema,
  LocalizedMessageSchema,
);

export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  includeDirs: ["proto", "third_party"],
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

let packageCache: grpc.GrpcObject | undefined;

/** The gRPC package object loaded by proto-loader from proto/ + third_party/ (cwd = repo root). */
export function loadGrpcPackage(): grpc.GrpcObject {
  packageCache ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(["chainguard/platform/iam/v2beta1/groups.proto"], PROTO_LOADER_OPTIONS),
  );
  return packageCache;
}

function lookup(pkg: grpc.GrpcObject, dotted: string): grpc.ServiceClientConstructor {
  let node: unknown = pkg;
  for (const part of dotted.split(".")) node = (node as Record<string, unknown>)[part];
  assert.equal(typeof node, "function", `${dotted} is not a service in the loaded package`);
  return node as grpc.ServiceClientConstructor;
}

/** A plain-object view of a message as proto-loader decodes it (camelCase, longs/enums as strings). */
export type Plain = Record<string, any>;

export interface UnaryClient {
  /** Calls a unary RPC by its proto name ("GetGroup"); rejects with a grpc.ServiceError. */
  call<T = Plain>(method: string, request: Plain, metadata?: grpc.Metadata): Promise<T>;
  close(): void;
}

/** A grpc-js client for a service (full proto name) over insecure HTTP/2 to 127.0.0.1:<port>. */
export function grpcClient(
  port: number,
  service = "chainguard.platform.iam.v2beta1.GroupsService",
  token?: string,
): UnaryClient {
  const Ctor = lookup(loadGrpcPackage(), service);
  const client = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const methods = client as unknown as Record<
    string,
    (
      req: Plain,
      md: grpc.Metadata,
      opts: grpc.CallOptions,
      cb: (err: grpc.ServiceError | null, res?: Plain) => void,
    ) => void
  >;
  return {
    call<T>(method: string, request: Plain, metadata = new grpc.Metadata()): Promise<T> {
      if (token && metadata.get("authorization").length === 0) metadata.set("authorization", `Bearer ${token}`);
      const fn = methods[method];
      assert.equal(typeof fn, "function", `${service} has no method ${method}`);
      return new Promise<T>((resolve, reject) => {
        fn!.call(client, request, metadata, { deadline: Date.now() + HANG_MS }, (err, res) =>
          err ? reject(err) : resolve(res as T),
        );
      });
    },
    close: () => client.close(),
  };
}

/** Awaits a call that must fail and returns its grpc.ServiceError. */
export async function grpcError(promise: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    const res = await promise;
    assert.fail(`expected the gRPC call to fail, got ${JSON.stringify(res)}`);
  } catch (err) {
    if (err instanceof assert.AssertionError) throw err;
    assert.ok(
      err && typeof err === "object" && "code" in err && "metadata" in err,
      `not a grpc ServiceError: ${String(err)}`,
    );
    return err as grpc.ServiceError;
  }
}

/** The google.rpc.Status carried in the error's `grpc-status-details-bin` trailer. */
export function statusFromTrailer(err: grpc.ServiceError): Status {
  const values = err.metadata.get("grpc-status-details-bin");
  assert.equal(values.length, 1, `expected exactly one grpc-status-details-bin trailer, got ${values.length}`);
  const raw = values[0];
  assert.ok(Buffer.isBuffer(raw), "grpc-status-details-bin must be binary metadata");
  return fromBinary(StatusSchema, new Uint8Array(raw));
}

/** Unpacks every Any in a Status; fails on a detail type outside google.rpc error_details. */
export function unpackDetails(status: Status): Message[] {
  return status.details.map((any) => {
    const msg = anyUnpack(any, errorDetailsRegistry);
    assert.ok(msg, `cannot unpack detail ${any.typeUrl}`);
    return msg;
  });
}

/** Canonical JSON of a Status ({code, message, details: [{"@type", ...}]}), as REST bodies carry. */
export function statusJson(status: Status): JsonObject {
  return toJson(StatusSchema, status, { registry: errorDetailsRegistry }) as JsonObject;
}

/** Parses a REST error body into google.rpc.Status (strict: unknown keys fail). */
export function statusFromRestBody(body: unknown): Status {
  return fromJson(StatusSchema, body as JsonObject, { registry: errorDetailsRegistry });
}

/** Millisecond instant of a proto-loader Timestamp ({seconds: "…", nanos}), truncated like REST. */
export function timestampMillis(ts: Plain | null | undefined): number {
  assert.ok(ts, "timestamp is missing");
  return Number(ts.seconds) * 1000 + Math.floor(Number(ts.nanos) / 1e6);
}
