// The registry with standard tools and failures a unit test cannot stage: skopeo round trips of
// a real OCI layout (built by umoci) on every backend, and a `kill -9` during a chunked push of a
// `bulwark serve` process. Needs skopeo and umoci on the PATH (CI installs them: .ci/run).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { request as httpRequest, type ClientRequest } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { backends } from "../support/db-templates.js";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import { restClient } from "../support/http.js";
import { workload } from "../support/principals.js";
import { parseChallenge } from "../support/oci.js";
import {
  LAYOUT_ANNOTATIONS,
  LAYOUT_LABELS,
  buildOciLayout,
  layoutBlobs,
  type LayoutImage,
} from "../support/oci-layout.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { HANG_MS, until, watchOutput } from "../support/wait.js";
import { skopeoIn, type Run } from "../support/skopeo.js";
import { CLI_ARGS } from "../support/paths.js";

const sha256 = (bytes: Uint8Array | string) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

const ok = (run: Run, what: string) => assert.equal(run.code, 0, `${what}: ${run.stderr}`);

for (const backend of backends()) {
  describe(`registry with skopeo [${backend}]`, () => {
    let server: TestServer;
    let work: string;
    let skopeo: ReturnType<typeof skopeoIn>;
    let image: LayoutImage;
    let host: string;
    let creds: string;
    const ref = (suffix: string) => `docker://${host}/acme/app${suffix}`;
    // --preserve-digests: fail rather than let skopeo convert the manifest to another format
    const pushAs = (suffix: string) =>
      skopeo(
        "copy",
        "--preserve-digests",
        "--dest-tls-verify=false",
        "--dest-creds",
        creds,
        `oci:${image.dir}:${image.tag}`,
        ref(suffix),
      );

    before(async () => {
      work = mkdtempSync(join(tmpdir(), "bulwark-skopeo-"));
      skopeo = skopeoIn(work);
      [server, image] = await Promise.all([startTestServer(backend), buildOciLayout(join(work, "src"))]);
      host = new URL(server.url).host;
      const org = await restClient(server.url, server.operatorToken).post("/iam/v2beta1/groups", { name: "acme" });
      assert.equal(org.status, 200, JSON.stringify(org.body));
      const password = await server.tokenFor(OPERATOR_SUBJECT, { audience: [server.tokens.urls.registryAudience] });
      creds = `_token:${password}`;
    });
    after(async () => {
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("pushes an OCI layout as is: the same manifest digest, config and layers", async () => {
      ok(await pushAs(":v1"), "copy to the registry");
      const raw = await skopeo("inspect", "--raw", "--tls-verify=false", "--creds", creds, ref(":v1"));
      ok(raw, "inspect --raw");
      assert.equal(sha256(raw.stdout), image.manifestDigest);
      assert.equal(raw.stdout, image.manifest.toString("utf8"));
      assert.deepEqual(JSON.parse(raw.stdout).annotations, LAYOUT_ANNOTATIONS);

      const config = await skopeo("inspect", "--config", "--raw", "--tls-verify=false", "--creds", creds, ref(":v1"));
      ok(config, "inspect --config --raw");
      assert.equal(config.stdout, image.config.toString("utf8"));

      const summary = await skopeo("inspect", "--tls-verify=false", "--creds", creds, ref(":v1"));
      ok(summary, "inspect");
      const info = JSON.parse(summary.stdout);
      assert.equal(info.Digest, image.manifestDigest);
      assert.deepEqual(info.Layers, image.layerDigests);
      assert.equal(info.Layers.length, 2);
      assert.deepEqual(info.Labels, LAYOUT_LABELS);
      assert.equal(info.Architecture, "amd64");
      assert.equal(info.Os, "linux");
      assert.deepEqual(info.RepoTags, ["v1"]);
    });

    it("pulls it back into a layout identical blob for blob", async () => {
      const out = join(work, "out");
      ok(
        await skopeo(
          "copy",
          "--preserve-digests",
          "--src-tls-verify=false",
          "--src-creds",
          creds,
          ref(":v1"),
          `oci:${out}:v1`,
        ),
        "copy from the registry",
      );
      const want = layoutBlobs(image.dir);
      const got = layoutBlobs(out);
      assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort());
      for (const [digest, bytes] of want) {
        assert.ok(got.get(digest)!.equals(bytes), `blob ${digest} differs`);
        assert.equal(sha256(bytes), digest);
      }
      // index.json is re-serialised by skopeo (whitespace), so compare what it says
      const index = (dir: string) => JSON.parse(readFileSync(join(dir, "index.json"), "utf8"));
      assert.deepEqual(index(out), index(image.dir));
    });

    it("lists tags, including a second one", async () => {
      ok(await pushAs(":v2"), "copy a second tag");
      const tags = await skopeo("list-tags", "--tls-verify=false", "--creds", creds, ref(""));
      ok(tags, "list-tags");
      assert.deepEqual(JSON.parse(tags.stdout).Tags.sort(), ["v1", "v2"]);
      const second = await skopeo("inspect", "--raw", "--tls-verify=false", "--creds", creds, ref(":v2"));
      ok(second, "inspect v2");
      assert.equal(sha256(second.stdout), image.manifestDigest);
    });

    it("refuses an anonymous client a private repository", async () => {
      const anonymous = await skopeo("inspect", "--raw", "--tls-verify=false", "--no-creds", ref(":v1"));
      assert.notEqual(anonymous.code, 0, anonymous.stdout);
      assert.match(anonymous.stderr, /unauthorized|authentication required|denied/i);
      const list = await skopeo("list-tags", "--tls-verify=false", "--no-creds", ref(""));
      assert.notEqual(list.code, 0, list.stdout);
      assert.match(list.stderr, /unauthorized|authentication required|denied/i);
    });

    it("logs in with an API token (`skopeo login -u _token`), then copies with the stored credentials", async () => {
      // What `bulwark auth token` prints: an API token (audience = the API), here of an identity
      // that may push to acme.
      const api = restClient(server.url, server.operatorToken);
      const org = (await api.get("/iam/v2beta1/groups")).body.groups.find((g: { name: string }) => g.name === "acme");
      const pusher = await workload(server, api, org.uid, "skopeo-pusher", [
        { at: org.uid, role: { uid: builtinRoleUid("registry.push"), capabilities: [] } },
      ]);
      const login = await skopeo("login", "--tls-verify=false", "-u", "_token", "-p", pusher.token, host);
      ok(login, "login with an API token");
      assert.match(login.stdout, /Login Succeeded/);
      ok(
        await skopeo(
          "copy",
          "--preserve-digests",
          "--dest-tls-verify=false",
          `oci:${image.dir}:${image.tag}`,
          ref(":api-token"),
        ),
        "copy with the login's credentials",
      );
      const raw = await skopeo("inspect", "--raw", "--tls-verify=false", ref(":api-token"));
      ok(raw, "inspect with the login's credentials");
      assert.equal(sha256(raw.stdout), image.manifestDigest);
      ok(await skopeo("logout", host), "logout");
      // A token for another audience: refused (DENIED, naming the audiences the registry takes; skopeo
      // 1.9 shows only the status of a refused token request).
      const elsewhere = await server.tokenFor(pusher.uid, { audience: ["https://other.example"] });
      const refused = await skopeo("login", "--tls-verify=false", "-u", "_token", "-p", elsewhere, host);
      assert.notEqual(refused.code, 0, refused.stdout);
      assert.match(refused.stderr, /denied|forbidden|403/i);
    });

    it("deletes the manifest by digest, after which neither it nor its tags resolve", async () => {
      ok(
        await skopeo("delete", "--tls-verify=false", "--creds", creds, ref(`@${image.manifestDigest}`)),
        "delete by digest",
      );
      for (const suffix of [`@${image.manifestDigest}`, ":v1", ":v2"]) {
        const gone = await skopeo("inspect", "--raw", "--tls-verify=false", "--creds", creds, ref(suffix));
        assert.notEqual(gone.code, 0, `${suffix} still resolves`);
        assert.match(gone.stderr, /manifest unknown|not found/i, suffix);
      }
    });
  });
}

// --- kill -9 during a chunked push ---

const MiB = 1 << 20;

async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, "127.0.0.1");
  await once(probe, "listening");
  const { port } = probe.address() as { port: number };
  probe.close();
  await once(probe, "close");
  return port;
}

/** The CLI (test/support/paths.ts CLI_ARGS), on the embedded database only. */
function cli(args: string[]): ChildProcess {
  return spawn(process.execPath, [...CLI_ARGS, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DATABASE_URL: "" },
  });
}

/** `bulwark serve`, resolved once it says it listens (rejected if it exits first). */
async function serve(
  dataDir: string,
  port: number,
): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = cli(["serve", "--host", "127.0.0.1", "--port", String(port), "--data-dir", dataDir]);
  const output = watchOutput(child);
  const [, url] = await output.waitFor(/bulwark listening on (http:\/\/[^"\s]+)/);
  return { child, url: url!, output: output.text };
}

async function adminToken(dataDir: string, port: number, audience?: string): Promise<string> {
  const child = cli([
    ...["admin", "token", "--data-dir", dataDir, "--host", "127.0.0.1", "--port", String(port)],
    ...(audience ? ["--audience", audience] : []),
  ]);
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c));
  const [code] = await once(child, "close");
  assert.equal(code, 0, err);
  return out.trim();
}

/** A registry token for push and pull on `name`, by the challenge flow clients use. */
async function registryToken(base: string, password: string, name: string): Promise<string> {
  const challenge = parseChallenge((await fetch(`${base}/v2/`)).headers.get("www-authenticate"));
  assert.equal(challenge?.scheme, "bearer");
  const url = new URL(challenge.params.realm!);
  url.searchParams.set("service", challenge.params.service!);
  url.searchParams.set("scope", `repository:${name}:pull,push`);
  const basic = Buffer.from(`_token:${password}`).toString("base64");
  const res = await fetch(url, { headers: { authorization: `Basic ${basic}` } });
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { token: string }).token;
}

describe("registry: kill -9 during a chunked push [pglite data dir]", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "bulwark-kill-"));
  const children: ChildProcess[] = [];
  after(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("keeps acknowledged chunks, drops the cut-short one, and resumes after a restart", async () => {
    const port = await freePort();
    const blob = randomBytes(4 * MiB);
    const digest = sha256(blob);
    const name = "acme/big";

    const first = await serve(dataDir, port);
    children.push(first.child);
    const base = first.url;
    const host = new URL(base).host;
    const [apiToken, password] = await Promise.all([adminToken(dataDir, port), adminToken(dataDir, port, host)]);
    const org = await restClient(base, apiToken).post("/iam/v2beta1/groups", { name: "acme" });
    assert.equal(org.status, 200, JSON.stringify(org.body));
    let auth = { authorization: `Bearer ${await registryToken(base, password, name)}` };

    const started = await fetch(`${base}/v2/${name}/blobs/uploads/`, { method: "POST", headers: auth });
    assert.equal(started.status, 202, await started.text());
    const location = new URL(started.headers.get("location")!, base).toString();

    const chunk = (from: number, to: number) =>
      fetch(location, {
        method: "PATCH",
        headers: {
          ...auth,
          "content-type": "application/octet-stream",
          "content-range": `${from}-${to - 1}`,
          "content-length": String(to - from),
        },
        body: blob.subarray(from, to),
      });
    const firstChunk = await chunk(0, MiB);
    assert.equal(firstChunk.status, 202, await firstChunk.text());
    assert.equal(firstChunk.headers.get("range"), `0-${MiB - 1}`);

    // The second chunk announces 3 MiB but sends only 2 before the server dies (the store writes a
    // chunk's bytes in batches of up to 1 MiB: at least one reaches the disk).
    const target = new URL(location);
    const cut: ClientRequest = httpRequest({
      host: target.hostname,
      port: target.port,
      path: target.pathname + target.search,
      method: "PATCH",
      headers: {
        ...auth,
        "content-type": "application/octet-stream",
        "content-range": `${MiB}-${4 * MiB - 1}`,
        "content-length": String(3 * MiB),
      },
    });
    const cutOutcome = new Promise<string>((resolve) => {
      cut.on("error", (err) => resolve(`error: ${(err as NodeJS.ErrnoException).code ?? err.message}`));
      cut.on("response", (res) => resolve(`status ${res.statusCode}`));
    });
    cut.write(blob.subarray(MiB, 2 * MiB));
    cut.write(blob.subarray(2 * MiB, 3 * MiB));
    // killed once the server has written part of the cut-short chunk to disk (its staged bytes
    // past the acknowledged MiB): those must not survive
    const staged = join(dataDir, "registry", "uploads");
    await until(
      () => readdirSync(staged).some((name) => statSync(join(staged, name)).size > MiB),
      () => `part of the cut-short chunk staged in ${staged}`,
    );
    first.child.kill("SIGKILL");
    await once(first.child, "exit");
    assert.match(await cutOutcome, /^error: /, "the cut-short chunk got no answer");

    const second = await serve(dataDir, port);
    children.push(second.child);
    auth = { authorization: `Bearer ${await registryToken(base, password, name)}` };

    const head = await fetch(`${base}/v2/${name}/blobs/${digest}`, { method: "HEAD", headers: auth });
    assert.equal(head.status, 404, "no partial blob is visible");

    const status = await fetch(location, { headers: auth });
    assert.equal(status.status, 204, await status.text());
    assert.equal(status.headers.get("range"), `0-${MiB - 1}`, "the acknowledged chunk survived, the cut one did not");

    const resumed = await chunk(MiB, 4 * MiB);
    assert.equal(resumed.status, 202, await resumed.text());
    assert.equal(resumed.headers.get("range"), `0-${4 * MiB - 1}`);
    const done = await fetch(`${location}${location.includes("?") ? "&" : "?"}digest=${digest}`, {
      method: "PUT",
      headers: auth,
    });
    assert.equal(done.status, 201, await done.text());
    assert.equal(done.headers.get("docker-content-digest"), digest);

    const got = await fetch(`${base}/v2/${name}/blobs/${digest}`, { headers: auth });
    assert.equal(got.status, 200);
    assert.ok(Buffer.from(await got.arrayBuffer()).equals(blob), "the blob is exactly the bytes pushed");

    second.child.kill("SIGTERM");
    const [code] = await once(second.child, "exit");
    assert.equal(code, 0);
  });
});
