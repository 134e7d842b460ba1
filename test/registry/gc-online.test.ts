// Garbage collection while the registry serves, on demand: the admin RPC
// (bulwark.registry.v1.RegistryMaintenanceService.CollectGarbage) on every backend, one collection
// at a time (across replicas on PostgreSQL), and `bulwark registry gc` against a running `serve`.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { RegistryMaintenanceService } from "../../src/gen/bulwark/registry/v1/maintenance_pb.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import { registryModule } from "../../src/registry/module.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createIdentity, createRoleBinding, type Json } from "../support/fixtures.js";
import { restClient, type JsonResponse } from "../support/http.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";
import { CliHome, runCli, serveProcess, type ServeProcess } from "../support/cli.js";
import { signal, withinHang } from "../support/wait.js";

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const COLLECT = "/bulwark/registry/v1/garbage:collect";

/** A report with int64 counts, for assertion messages. */
const shown = (value: unknown) => JSON.stringify(value, (_, v: unknown) => (typeof v === "bigint" ? String(v) : v));

function digestOf(bytes: Uint8Array): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** A small registry client over fetch (an operator's registry token as Bearer). */
function registry(base: string, authorization: string) {
  const call = async (method: string, path: string, body?: Uint8Array | string, type?: string) => {
    const headers: Record<string, string> = { authorization };
    if (type) headers["content-type"] = type;
    const res = await fetch(base + path, { method, headers, body });
    return { status: res.status, headers: res.headers, text: method === "HEAD" ? "" : await res.text() };
  };
  const pushBlob = async (name: string, bytes: Uint8Array) => {
    const digest = digestOf(bytes);
    const res = await call("POST", `/v2/${name}/blobs/uploads/?digest=${digest}`, bytes, "application/octet-stream");
    assert.equal(res.status, 201, res.text);
    return digest;
  };
  return {
    call,
    pushBlob,
    /** a config, one layer and a manifest tagged `tag` */
    async pushImage(name: string, tag: string) {
      const config = Buffer.from(
        JSON.stringify({ architecture: "amd64", os: "linux", n: randomBytes(8).toString("hex") }),
      );
      const layer = randomBytes(256);
      const configDigest = await pushBlob(name, config);
      const layerDigest = await pushBlob(name, layer);
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: configDigest, size: config.length },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: layerDigest, size: layer.length }],
      });
      const res = await call("PUT", `/v2/${name}/manifests/${tag}`, manifest, OCI_MANIFEST);
      assert.equal(res.status, 201, res.text);
      return { digest: res.headers.get("docker-content-digest")!, layerDigest, configDigest };
    },
  };
}

/**
 * Garbage in repo `name`: an image whose tag was deleted (an untagged manifest, its config and
 * layer) and a blob no manifest names; a tagged image beside them stays.
 */
async function makeGarbage(reg: ReturnType<typeof registry>, name: string) {
  const kept = await reg.pushImage(name, "kept");
  const dropped = await reg.pushImage(name, "dropped");
  assert.equal((await reg.call("DELETE", `/v2/${name}/manifests/dropped`)).status, 202);
  const stray = await reg.pushBlob(name, randomBytes(100));
  return { kept, dropped, stray };
}

for (const backend of backends()) {
  describe(`registry garbage collection through the admin RPC [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let reg: ReturnType<typeof registry>;
    let org: Json;
    const blobDir = mkdtempSync(join(tmpdir(), "bulwark-gc-online-"));

    before(async () => {
      // A blob directory of the test's: a PostgreSQL replica below shares it, as replicas must.
      server = await startTestServer(backend, { registry: { blobDirectory: blobDir } });
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "acme");
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, {
        audience: [server.tokens.urls.registryAudience],
      });
      reg = registry(server.url, `Bearer ${registryToken}`);
    });
    after(async () => {
      await server.close();
      rmSync(blobDir, { recursive: true, force: true });
    });

    it("refuses anonymous callers, anyone but the operator, and a negative grace window, changing nothing", async () => {
      const { dropped } = await makeGarbage(reg, "acme/refusals");
      const anonymous = await restClient(server.url).post(COLLECT, { grace: "0s" });
      assert.equal(anonymous.status, 401, JSON.stringify(anonymous.body));
      assert.equal(anonymous.body.code, Code.Unauthenticated);
      // An owner of the organization is no operator.
      const owner = await createIdentity(api, org.uid, "owner", "owner-subject");
      await createRoleBinding(api, org.uid, owner.uid, builtinRoleUid("owner"));
      const denied = await restClient(server.url, await server.tokenFor(owner.uid)).post(COLLECT, { grace: "0s" });
      assert.equal(denied.status, 403, JSON.stringify(denied.body));
      assert.equal(denied.body.code, Code.PermissionDenied);
      assert.match(denied.body.message, /platform operator/);
      for (const grace of ["-1s", "-0.5s"]) {
        const bad = await api.post(COLLECT, { grace });
        assert.equal(bad.status, 400, JSON.stringify(bad.body));
        assert.equal(bad.body.code, Code.InvalidArgument);
        assert.match(bad.body.message, /grace: must be at least 0s/);
      }
      assert.equal((await reg.call("GET", `/v2/acme/refusals/manifests/${dropped.digest}`)).status, 200);
      assert.equal((await reg.call("GET", `/v2/acme/refusals/blobs/${dropped.layerDigest}`)).status, 200);
    });

    it("reports what it would free on a dry run, then frees it while the registry serves", async () => {
      const { kept, dropped, stray } = await makeGarbage(reg, "acme/gc");
      // Within the server's grace window (1h) nothing goes.
      const early = await api.post(COLLECT, {});
      assert.equal(early.status, 200, JSON.stringify(early.body));
      assert.equal(early.body.grace, "3600s");
      assert.equal(Number(early.body.blobs ?? 0), 0);

      const preview = await api.post(COLLECT, { dryRun: true, grace: "0s" });
      assert.equal(preview.status, 200, JSON.stringify(preview.body));
      assert.equal(preview.body.dryRun, true);
      assert.ok(Number(preview.body.manifests) >= 1, JSON.stringify(preview.body));
      assert.ok(Number(preview.body.blobLinks) >= 1, JSON.stringify(preview.body));
      for (const path of [
        `/v2/acme/gc/manifests/${dropped.digest}`,
        `/v2/acme/gc/blobs/${dropped.layerDigest}`,
        `/v2/acme/gc/blobs/${stray}`,
      ])
        assert.equal((await reg.call("GET", path)).status, 200, `${path} is still served after a dry run`);

      // The real run over gRPC, with pulls of what stays going on meanwhile.
      const grpc = operatorGrpc(server, RegistryMaintenanceService);
      try {
        const pulls = Promise.all(
          Array.from({ length: 8 }, () => reg.call("GET", `/v2/acme/gc/blobs/${kept.layerDigest}`)),
        );
        const report = await grpc.client.collectGarbage({ grace: { seconds: 0n, nanos: 0 } });
        for (const pulled of await pulls) assert.equal(pulled.status, 200);
        assert.equal(report.dryRun, false);
        assert.ok(report.manifests >= 1n, shown(report));
        // dropped's config and layer, and the stray blob (garbage other tests left may add to it)
        assert.ok(report.blobs >= 3n, shown(report));
        assert.ok(report.bytes >= 356n, shown(report));
      } finally {
        grpc.close();
      }
      assert.equal((await reg.call("GET", `/v2/acme/gc/manifests/${dropped.digest}`)).status, 404);
      assert.equal((await reg.call("GET", `/v2/acme/gc/blobs/${dropped.layerDigest}`)).status, 404);
      assert.equal((await reg.call("GET", `/v2/acme/gc/blobs/${stray}`)).status, 404);
      assert.equal(await server.exportsOf(registryModule).store.has(stray), false, "its bytes are gone");
      assert.equal((await reg.call("GET", "/v2/acme/gc/manifests/kept")).status, 200);
      assert.equal((await reg.call("GET", `/v2/acme/gc/blobs/${kept.layerDigest}`)).status, 200);
      // Nothing is left to collect.
      const again = await api.post(COLLECT, { dryRun: true, grace: "0s" });
      assert.equal(Number(again.body.manifests ?? 0) + Number(again.body.blobs ?? 0), 0, JSON.stringify(again.body));
    });

    it("runs one collection at a time: another asked for meanwhile is ABORTED", async () => {
      // On PostgreSQL the second request goes to another replica of the same database.
      const other =
        backend === "postgres"
          ? await startTestServer(backend, { replicaOf: server, registry: { blobDirectory: blobDir } })
          : server;
      try {
        const { stray } = await makeGarbage(reg, "acme/serial");
        // The first collection waits at its last step (the staged uploads' sweep, outside any
        // transaction: PGlite's would hold the whole database) until the second was refused.
        const store = server.exportsOf(registryModule).store;
        const listUploads = store.listUploads;
        const sweeping = signal();
        const refused = signal();
        store.listUploads = async function* () {
          sweeping.resolve();
          await refused.promise;
          yield* listUploads.call(store);
        };
        let first: Promise<JsonResponse>;
        try {
          first = api.post(COLLECT, { grace: "0s" });
          await withinHang(sweeping.promise, "the first collection reaching its sweep of staged uploads");
          const second = operatorGrpc(other, RegistryMaintenanceService);
          try {
            await assert.rejects(second.client.collectGarbage({ grace: { seconds: 0n, nanos: 0 } }), (err) => {
              const e = ConnectError.from(err);
              assert.equal(e.code, Code.Aborted, e.message);
              assert.match(e.rawMessage, /a registry garbage collection is running already/);
              return true;
            });
            // A dry run takes no lock: it still answers.
            const preview = await second.client.collectGarbage({ dryRun: true, grace: { seconds: 0n, nanos: 0 } });
            assert.equal(preview.dryRun, true);
          } finally {
            second.close();
          }
        } finally {
          refused.resolve();
          store.listUploads = listUploads;
        }
        const done = await first;
        assert.equal(done.status, 200, JSON.stringify(done.body));
        assert.ok(Number(done.body.blobs) >= 1, JSON.stringify(done.body));
        assert.equal((await reg.call("GET", `/v2/acme/serial/blobs/${stray}`)).status, 404);
        // Once it ended, the next one runs (on the other replica too).
        const next = operatorGrpc(other, RegistryMaintenanceService);
        try {
          const report = await next.client.collectGarbage({ grace: { seconds: 0n, nanos: 0 } });
          assert.equal(report.dryRun, false);
        } finally {
          next.close();
        }
      } finally {
        if (other !== server) await other.close();
      }
    });
  });
}

describe("bulwark registry gc against a running embedded server", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "bulwark-gc-serve-"));
  const home = new CliHome();
  let served: ServeProcess | undefined;
  after(async () => {
    await served?.stop();
    home.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("collects through the server holding the data directory, which keeps serving", async () => {
    served = await serveProcess(["--port", "0", "--data-dir", dataDir]);
    const { url } = served;
    const port = new URL(url).port;
    const token = async (audience?: string) => {
      const args = ["admin", "token", "--data-dir", dataDir, "--port", port];
      const minted = await runCli(home, audience ? [...args, "--audience", audience] : args);
      assert.equal(minted.code, 0, minted.stderr);
      return minted.stdout.trim();
    };
    await createGroup(restClient(url, await token()), undefined, "acme");
    const reg = registry(url, `Bearer ${await token(new URL(url).host)}`);
    const { kept, dropped, stray } = await makeGarbage(reg, "acme/app");

    const preview = await runCli(home, ["registry", "gc", "--data-dir", dataDir, "--grace", "0s", "--dry-run"]);
    assert.equal(preview.code, 0, preview.stderr);
    assert.match(
      preview.stdout,
      /^would remove: 1 manifests, \d+ blob links, \d+ blobs \(\d+ bytes\), 0 abandoned uploads\n$/,
    );
    assert.match(preview.stderr, /the server holding .* collects: calling http:\/\/127\.0\.0\.1:/);
    assert.equal((await reg.call("GET", `/v2/acme/app/blobs/${stray}`)).status, 200, "a dry run removes nothing");

    const kept1h = await runCli(home, ["registry", "gc", "--data-dir", dataDir]);
    assert.equal(kept1h.code, 0, kept1h.stderr);
    assert.match(
      kept1h.stdout,
      /^removed: 0 manifests, 0 blob links, 0 blobs \(0 bytes\)/,
      "within the server's 1h grace",
    );

    const collected = await runCli(home, ["registry", "gc", "--data-dir", dataDir, "--grace", "0s"]);
    assert.equal(collected.code, 0, collected.stderr);
    assert.match(
      collected.stdout,
      /^removed: 1 manifests, 3 blob links, 3 blobs \(\d+ bytes\), 0 abandoned uploads\n$/,
    );
    assert.equal((await reg.call("GET", `/v2/acme/app/manifests/${dropped.digest}`)).status, 404);
    assert.equal((await reg.call("GET", `/v2/acme/app/blobs/${stray}`)).status, 404);
    assert.equal((await reg.call("GET", `/v2/acme/app/blobs/${kept.layerDigest}`)).status, 200);

    // --server: the CLI's own token, which must be the operator's.
    const remote = await runCli(home, ["registry", "gc", "--server", url, "--dry-run"], {
      env: { BULWARK_TOKEN: await token() },
    });
    assert.equal(remote.code, 0, remote.stderr);
    assert.match(remote.stdout, /^would remove: 0 manifests, 0 blob links, 0 blobs \(0 bytes\)/);
    const refused = await runCli(home, ["registry", "gc", "--server", url, "--dry-run"]);
    assert.notEqual(refused.code, 0);
  });
});
