// gRPC server reflection (v1 and v1alpha), asked by an independent client (@grpc/grpc-js): every
// served service listed, files by symbol and by name with their imports — enough to call an RPC
// without .proto files, as grpcurl does — and NOT_FOUND for what does not exist, on a stream that
// stays usable. And an unknown method or service answers UNIMPLEMENTED at once, even while the
// client keeps its request stream open. The real `buf curl` finds and calls an RPC by reflection
// over gRPC-Web, HTTP/1.1 and HTTP/2 alike; an unknown Connect method gets Connect's error shape.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { create } from "@bufbuild/protobuf";
import { backends } from "../support/db-templates.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { watchOutput, withinHang } from "../support/wait.js";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { REPO_ROOT } from "../support/paths.js";

const ROOT = REPO_ROOT;

function reflectionClient(address: string, version: "v1" | "v1alpha") {
  const definition = protoLoader.loadSync(`grpc/reflection/${version}/reflection.proto`, {
    includeDirs: [join(ROOT, "third_party")],
    keepCase: true,
    defaults: false,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition) as any;
  const Service = pkg.grpc.reflection[version].ServerReflection;
  return new Service(address, grpc.credentials.createInsecure()) as grpc.Client & {
    ServerReflectionInfo(): grpc.ClientDuplexStream<any, any>;
  };
}

/** One bidi stream; `ask` sends a request and resolves with its answer. */
function session(client: ReturnType<typeof reflectionClient>) {
  const stream = client.ServerReflectionInfo();
  const waiting: ((answer: any) => void)[] = [];
  stream.on("data", (answer) => waiting.shift()?.(answer));
  return {
    ask: (request: object) =>
      new Promise<any>((resolve) => {
        waiting.push(resolve);
        stream.write(request);
      }),
    end: () => stream.end(),
  };
}

for (const backend of backends()) {
  describe(`gRPC reflection (${backend})`, () => {
    let server: TestServer;
    let address: string;

    before(async () => {
      server = await startTestServer(backend);
      address = new URL(server.url).host;
    });
    after(() => server?.close());

    for (const version of ["v1", "v1alpha"] as const) {
      it(`${version}: lists every served service and describes them well enough to call one`, async () => {
        const client = reflectionClient(address, version);
        const s = session(client);
        try {
          const listed = await s.ask({ list_services: "" });
          const names = listed.list_services_response.service.map((x: { name: string }) => x.name);
          for (const expected of [
            "chainguard.platform.iam.v2beta1.GroupsService",
            "chainguard.platform.iam.v2.GroupsService",
            "chainguard.platform.iam.Groups",
            "chainguard.platform.registry.Registry",
            "chainguard.platform.oidc.SecurityTokenService",
            `grpc.reflection.${version}.ServerReflection`,
          ])
            assert.ok(names.includes(expected), `${expected} not in ${names.join(", ")}`);
          const served = server.bindings.map((b) => b.service.typeName);
          for (const name of served) assert.ok(names.includes(name), `${name} is served but not listed`);

          const byMethod = await s.ask({
            file_containing_symbol: "chainguard.platform.iam.v2beta1.GroupsService.ListGroups",
          });
          const protos = byMethod.file_descriptor_response.file_descriptor_proto.map((b: Buffer) =>
            fromBinary(FileDescriptorProtoSchema, b),
          );
          assert.equal(protos[0].name, "chainguard/platform/iam/v2beta1/groups.proto");
          // With its imports, the files make a registry that resolves the RPC and its messages.
          // the asked-for file comes first, its imports after: a set lists dependencies first
          const registry = createFileRegistry(
            create(FileDescriptorSetSchema, { file: [...protos.slice(1), protos[0]] }),
          );
          const service = registry.getService("chainguard.platform.iam.v2beta1.GroupsService");
          const list = service?.methods.find((m) => m.name === "ListGroups");
          assert.equal(list?.input.typeName, "chainguard.platform.iam.v2beta1.ListGroupsRequest");
          assert.ok(
            list?.input.fields.some(
              (f) => f.name === "uidp" && f.message?.typeName === "chainguard.platform.common.UIDPFilter",
            ),
          );

          const missing = await s.ask({ file_containing_symbol: "no.such.Thing" });
          assert.equal(missing.error_response.error_code, 5);
          // the stream still answers
          const byName = await s.ask({ file_by_filename: "platform/common/v1/uidp.platform.proto" });
          assert.equal(
            fromBinary(FileDescriptorProtoSchema, byName.file_descriptor_response.file_descriptor_proto[0]).name,
            "platform/common/v1/uidp.platform.proto",
          );
          const message = await s.ask({ file_containing_symbol: "chainguard.platform.registry.v2.Repo" });
          assert.equal(
            fromBinary(FileDescriptorProtoSchema, message.file_descriptor_response.file_descriptor_proto[0]).name,
            "chainguard/platform/registry/v2/repos.proto",
          );
        } finally {
          s.end();
          client.close();
        }
      });
    }

    for (const [what, path] of [
      ["an unknown method", "/chainguard.platform.iam.v2beta1.GroupsService/NoSuchMethod"],
      ["an unknown service", "/no.such.Service/Call"],
    ] as const) {
      it(`${what} answers UNIMPLEMENTED at once while the client keeps its stream open`, async () => {
        const client = new grpc.Client(address, grpc.credentials.createInsecure());
        // No deadline, and the request stream is never ended: an answer that waited for the
        // client's end would never come (and fail the test as a hang).
        const call = client.makeBidiStreamRequest(
          path,
          (x: Buffer) => x,
          (x: Buffer) => x,
          new grpc.Metadata(),
        );
        try {
          const code = await withinHang(
            new Promise<number>((resolve) => {
              call.on("error", (err: grpc.ServiceError) => {
                if (err.code !== grpc.status.UNIMPLEMENTED) console.log(err.message);
                resolve(err.code);
              });
              call.on("data", () => undefined);
              call.write(Buffer.from([]));
            }),
            `answer to ${path} on an open stream`,
          );
          assert.equal(code, grpc.status.UNIMPLEMENTED);
        } finally {
          call.cancel();
          client.close();
        }
      });
    }

    /** Runs the real `buf curl` (no timeout of its own: a hang is the test's to report) and answers its exit and output. */
    async function bufCurl(args: string[]): Promise<{ code: number | null; out: string }> {
      const child = spawn(join(ROOT, "node_modules", ".bin", "buf"), ["curl", ...args], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      const output = watchOutput(child);
      const [code] = (await withinHang(once(child, "close"), () => `exit of buf curl:\n${output.text()}`)) as [number];
      return { code, out: output.text() };
    }

    for (const http2 of [false, true]) {
      it(`buf curl --protocol grpcweb --reflect${http2 ? " --http2-prior-knowledge" : ""} finds and calls an RPC`, async () => {
        const created = await fetch(`${server.url}/iam/v2beta1/groups`, {
          method: "POST",
          headers: { authorization: `Bearer ${server.operatorToken}`, "content-type": "application/json" },
          body: JSON.stringify({ name: `reflected-${http2 ? "h2" : "h1"}` }),
        });
        assert.equal(created.status, 200);
        const { uid } = (await created.json()) as { uid: string };
        const { code, out } = await bufCurl([
          "--protocol",
          "grpcweb",
          "--reflect",
          ...(http2 ? ["--http2-prior-knowledge"] : []),
          "-H",
          `authorization: Bearer ${server.operatorToken}`,
          "--data",
          JSON.stringify({ uid }),
          `${server.url}/chainguard.platform.iam.v2beta1.GroupsService/GetGroup`,
        ]);
        assert.equal(code, 0, out);
        assert.equal((JSON.parse(out) as { uid: string }).uid, uid, out);
      });
    }

    it("an unknown Connect method answers Connect's error shape with HTTP 404, not the REST error", async () => {
      const res = await fetch(`${server.url}/chainguard.platform.iam.v2beta1.GroupsService/Nope`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      assert.equal(res.status, 404);
      const body = (await res.json()) as { code?: unknown; message?: unknown };
      assert.equal(body.code, "unimplemented", JSON.stringify(body));
      assert.match(String(body.message), /GroupsService\/Nope/);
      assert.ok(
        !("status" in body) && typeof body.code === "string",
        "Connect's shape, not google.rpc.Status's numeric code",
      );
      // Connect's GET too; but a request that is no Connect call keeps the REST error.
      const get = await fetch(
        `${server.url}/chainguard.platform.iam.v2beta1.GroupsService/Nope?connect=v1&encoding=json&message=%7B%7D`,
      );
      assert.equal(get.status, 404);
      assert.equal(((await get.json()) as { code?: unknown }).code, "unimplemented");
      const plain = await fetch(`${server.url}/jwks.json/A`);
      assert.equal(plain.status, 404);
      assert.equal(((await plain.json()) as { code?: unknown }).code, 5, "google.rpc.Status: NOT_FOUND");
    });
  });
}
