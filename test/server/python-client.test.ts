// An independent client: Python stubs generated from proto/ by clients/python/generate.sh (protoc
// + grpc_python_plugin, Debian's python3-grpcio) run clients/python/scenario.py against the real
// server over h2c: a group created, listed, read, updated and deleted, and an error's
// google.rpc.Status details decoded from grpc-status-details-bin.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { backends } from "../support/db-templates.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { REPO_ROOT } from "../support/paths.js";

const run = promisify(execFile);
const ROOT = REPO_ROOT;
const CLIENT = join(ROOT, "clients", "python");
// Debian's interpreter: python3-grpcio and python3-protobuf are installed for it.
const PYTHON = "/usr/bin/python3";
const INSTALL =
  "apt-get install protobuf-compiler libprotobuf-dev protobuf-compiler-grpc python3-grpcio python3-protobuf (.ci/run does)";

for (const backend of backends()) {
  describe(`Python gRPC client (${backend})`, () => {
    let server: TestServer;
    let out: string;

    before(async () => {
      assert.ok(existsSync(PYTHON), `no ${PYTHON}: ${INSTALL}`);
      out = mkdtempSync(join(tmpdir(), "bulwark-python-"));
      try {
        await run("bash", [join(CLIENT, "generate.sh"), out]);
        await run(PYTHON, ["-c", "import grpc, google.protobuf"]);
      } catch (err) {
        assert.fail(
          `cannot generate or load the Python client: ${(err as { stderr?: string }).stderr ?? err}; ${INSTALL}`,
        );
      }
      server = await startTestServer(backend);
    });
    after(async () => {
      await server?.close();
      if (out) rmSync(out, { recursive: true, force: true });
    });

    it("runs the scenario: CRUD on a group and an error's details decoded", async () => {
      const address = new URL(server.url).host;
      const { stdout } = await run(
        PYTHON,
        [join(CLIENT, "scenario.py"), "--address", address, "--token", server.operatorToken],
        { env: { ...process.env, PYTHONPATH: out } },
      ).catch((err: { stdout?: string; stderr?: string }) => assert.fail(`${err.stdout}\n${err.stderr}`));
      assert.match(stdout, /^python scenario: ok$/m, stdout);
      assert.match(
        stdout,
        /error: INVALID_ARGUMENT Invalid argument: name: name must match "\^\[a-z0-9 \._-\]\{1,\}\$"/,
        stdout,
      );
      assert.match(stdout, /error detail: ErrorInfo reason=INVALID_ARGUMENT domain=test\.bulwark\.dev/, stdout);
      assert.match(stdout, /error detail: BadRequest name: name must match/, stdout);
    });
  });
}
