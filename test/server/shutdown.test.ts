// Graceful shutdown of a real `bulwark serve`, on an embedded data directory and on PostgreSQL.
// Under load (32 HTTP/1.1 keep-alive clients, gRPC clients on HTTP/2, registry pushes, a long
// chunk still streaming) SIGTERM flips /readyz to 503 for the drain delay, then the listener
// closes: every request fully sent before the signal gets its whole answer, later ones get an
// answer or a refused/closed connection (never a cut answer), and the process exits 0. A chunk
// stalled past --shutdown-timeout is cut (exit 1, as documented) and its upload resumes after a
// restart from the range the server committed. Events are ordered by what happened (a request's
// last byte written, an answer, the exit); time limits only bound hangs.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { BIN, exited, serveProcess, type ServeProcess } from "../support/cli.js";
import { backends, clonePostgres } from "../support/db-templates.js";
import { MEDIA_TYPES, OciClient, digestOf, withQuery } from "../support/oci.js";
import { bearer } from "../support/server.js";
import { until, withinHang } from "../support/wait.js";

/** How a backend's server is started and restarted on the same data. */
interface Place {
  args: string[];
  env: Record<string, string>;
  blobDir: string;
  cleanup(): Promise<void>;
}

async function placeFor(backend: string): Promise<Place> {
  const dir = mkdtempSync(join(tmpdir(), `bulwark-shutdown-${backend}-`));
  const blobDir = join(dir, "blobs");
  if (backend === "pglite") {
    return {
      args: ["--data-dir", join(dir, "data"), "--blob-dir", blobDir],
      env: {},
      blobDir,
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const { url, drop } = await clonePostgres();
  return {
    args: ["--blob-dir", blobDir],
    env: { DATABASE_URL: url },
    blobDir,
    cleanup: async () => {
      await drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `bulwark admin token` for the server on `place` (for `audience`, or the API's). */
async function adminToken(place: Place, audience?: string): Promise<string> {
  const dataDir = place.args[place.args.indexOf("--data-dir") + 1];
  const args = ["admin", "token", ...(place.env.DATABASE_URL ? [] : ["--data-dir", dataDir!])];
  if (audience) args.push("--audience", audience);
  const child = spawn(process.execPath, [BIN, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DATABASE_URL: "", BULWARK_API_URL: "", ...place.env },
  });
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c));
  const [code] = await once(child, "close");
  assert.equal(code, 0, err);
  return out.trim();
}

/** What happened to one request of the load. */
interface Attempt {
  what: string;
  /** its last byte was written before the signal was sent */
  sentBeforeSignal: boolean;
  status?: number;
  error?: string;
}

/** Whether the test has sent SIGTERM: requests record it as their last byte goes out. */
let signalled = false;

/** One JSON request over `agent` (HTTP/1.1 keep-alive), recording when its last byte was written. */
function jsonRequest(
  agent: http.Agent,
  url: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<Attempt & { json?: any }> {
  return new Promise((resolve) => {
    const attempt: Attempt & { json?: any } = { what: `${method} ${path}`, sentBeforeSignal: false };
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(`${url}${path}`, {
      agent,
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(payload ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}),
      },
    });
    req.on("finish", () => (attempt.sentBeforeSignal = !signalled));
    req.on("error", (err: NodeJS.ErrnoException) => resolve({ ...attempt, error: err.code ?? err.message }));
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => (text += c));
      res.on("error", (err: NodeJS.ErrnoException) => resolve({ ...attempt, error: `answer cut: ${err.code}` }));
      res.on("end", () => {
        if (!res.complete) return resolve({ ...attempt, error: "answer cut" });
        try {
          resolve({ ...attempt, status: res.statusCode, json: JSON.parse(text) });
        } catch {
          resolve({ ...attempt, status: res.statusCode, error: `not JSON: ${text.slice(0, 200)}` });
        }
      });
    });
    req.end(payload);
  });
}

/** Connection-level failures a request sent after the signal may meet (the listener closed). */
const CONNECTION_ERRORS = /^(ECONNREFUSED|ECONNRESET|EPIPE|socket hang up)$/;

/** A PATCH whose body is written by the test as it chooses (a chunk streaming, or stalling). */
function streamingPatch(url: string, location: string, token: string) {
  const req = http.request(new URL(location, url), {
    method: "PATCH",
    agent: false,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream" },
  });
  const answer = new Promise<{ status?: number; range?: string; error?: string }>((resolve) => {
    req.on("error", (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode, range: String(res.headers.range) }));
      res.on("error", () => resolve({ error: "answer cut" }));
    });
  });
  return { req, answer };
}

/** The staged size of an upload in the filesystem blob store. */
function stagedBytes(blobDir: string, uploadId: string): number {
  try {
    return statSync(join(blobDir, "uploads", uploadId)).size;
  } catch {
    return 0;
  }
}

/** Pushes one small image (a layer, its config, a tagged manifest); the manifest's digest and layer bytes. */
async function pushImage(oci: OciClient, name: string, tag: string, record: (a: Attempt) => void) {
  const layer = randomBytes(64 * 1024);
  const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", tag }));
  const step = async (what: string, send: () => Promise<{ status: number }>, expect: number) => {
    const sentBeforeSignal = !signalled;
    try {
      const res = await send();
      record({ what, sentBeforeSignal, status: res.status, error: res.status === expect ? undefined : "unexpected" });
      return res.status === expect;
    } catch (err) {
      const cause = (err as { cause?: NodeJS.ErrnoException }).cause;
      record({ what, sentBeforeSignal, error: cause?.code ?? (err as Error).message });
      return false;
    }
  };
  if (!(await step("push layer", () => oci.postBlob(name, layer), 201))) return undefined;
  if (!(await step("push config", () => oci.postBlob(name, config), 201))) return undefined;
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.ociManifest,
    config: { mediaType: MEDIA_TYPES.ociConfig, digest: digestOf(config), size: config.length },
    layers: [{ mediaType: MEDIA_TYPES.ociLayer, digest: digestOf(layer), size: layer.length }],
  });
  if (!(await step("push manifest", () => oci.putManifest(name, tag, manifest, MEDIA_TYPES.ociManifest), 201)))
    return undefined;
  return { tag, layerDigest: digestOf(layer) };
}

for (const backend of backends()) {
  describe(`graceful shutdown of bulwark serve (${backend})`, () => {
    let place: Place;
    let server: ServeProcess | undefined;
    before(async () => (place = await placeFor(backend)));
    after(async () => {
      await server?.stop();
      await place?.cleanup();
    });

    it("SIGTERM under load: /readyz 503 while draining, every request sent before it answered whole, exit 0; a stalled chunk cut at the bound resumes after a restart", async (t) => {
      signalled = false;
      const flags = ["--port", "0", "--no-rate-limit", ...place.args];
      server = await serveProcess([...flags, "--drain-delay", "5s", "--shutdown-timeout", "120s"], place.env);
      const url = server.url;
      const token = await adminToken(place);
      const registryHost = new URL(url).host;
      const registryToken = await adminToken(place, registryHost);
      const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
      const org = await jsonRequest(agent, url, token, "POST", "/iam/v2beta1/groups", { name: `drain-${backend}` });
      assert.equal(org.status, 200, JSON.stringify(org.json));
      const orgUid: string = org.json.uid;

      // A long chunk (8 MiB, written 256 KiB at a time as the server takes it) streaming when the signal comes.
      const oci = new OciClient(url, { bearer: registryToken });
      const repo = `drain-${backend}/app`;
      const started = await oci.startUpload(repo);
      assert.equal(started.status, 202);
      const longLocation = started.headers.get("location")!;
      const longBytes = randomBytes(8 * 1024 * 1024);
      const longPatch = streamingPatch(url, longLocation, registryToken);
      const longWritten = (async () => {
        for (let i = 0; i < longBytes.length; i += 256 * 1024)
          if (!longPatch.req.write(longBytes.subarray(i, i + 256 * 1024))) await once(longPatch.req, "drain");
        longPatch.req.end();
      })();
      const longUploadId = longLocation.split("/").pop()!.split("?")[0]!;

      // The load: 32 HTTP/1.1 keep-alive clients, 4 gRPC clients on HTTP/2, 3 pushers.
      const attempts: Attempt[] = [];
      const created: { uid: string; name: string }[] = [];
      let stop = false;
      let serial = 0;
      const rest = Array.from({ length: 32 }, async () => {
        while (!stop) {
          const name = `g-${serial++}`;
          const made = await jsonRequest(agent, url, token, "POST", `/iam/v2beta1/groups/${orgUid}`, { name });
          attempts.push(made);
          if (made.status === 200) created.push({ uid: made.json.uid, name });
          if (made.error) break;
          const got = await jsonRequest(agent, url, token, "GET", `/iam/v2beta1/groups/${orgUid}`);
          attempts.push(got);
          if (got.error) break;
        }
      });
      const sessions = Array.from({ length: 4 }, () => new Http2SessionManager(url));
      const grpc = sessions.map(async (sessionManager) => {
        const client = createClient(
          GroupsService,
          createGrpcTransport({ baseUrl: url, interceptors: [bearer(token)], sessionManager }),
        );
        while (!stop) {
          const sentBeforeSignal = !signalled;
          try {
            const group = await client.getGroup({ uid: orgUid });
            assert.equal(group.uid, orgUid);
            attempts.push({ what: "gRPC GetGroup", sentBeforeSignal, status: 200 });
          } catch (err) {
            const e = ConnectError.from(err);
            attempts.push({ what: "gRPC GetGroup", sentBeforeSignal, error: `${Code[e.code]}: ${e.rawMessage}` });
            break;
          }
        }
      });
      const pushed: { tag: string; layerDigest: string }[] = [];
      const pushers = Array.from({ length: 3 }, async (_, p) => {
        for (let i = 0; !stop; i++) {
          const image = await pushImage(oci, repo, `p${p}-${i}`, (a) => attempts.push(a));
          if (!image) break;
          pushed.push(image);
        }
      });

      // A poller of /readyz on its own HTTP/2 session (open before the signal, so it needs no new connection).
      const probe = http2.connect(url);
      probe.on("error", () => {});
      const readyz: (number | string)[] = [];
      const askReadyz = () =>
        new Promise<number | string>((resolve) => {
          const stream = probe.request({ ":path": "/readyz" });
          stream.on("response", (h) => {
            stream.resume();
            stream.on("end", () => resolve(Number(h[":status"])));
          });
          stream.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
          stream.end();
        });
      assert.equal(await askReadyz(), 200);

      // Load under way everywhere, and the long chunk partly received: then the signal.
      await until(
        () => created.length >= 32 && pushed.length >= 3 && stagedBytes(place.blobDir, longUploadId) > 0,
        () => `load under way (groups ${created.length}, pushes ${pushed.length})`,
      );
      signalled = true;
      server.child.kill("SIGTERM");
      const exit = exited(server.child);
      // /readyz fails before the listener closes: polled until the session is refused or goes away.
      const polling = (async () => {
        for (;;) {
          const answer = await askReadyz();
          readyz.push(answer);
          if (typeof answer === "string" || probe.closed || probe.destroyed) return;
        }
      })();
      await withinHang(polling, () => `the /readyz poll to end: ${readyz.join(" ")}`);
      const code = await withinHang(exit, "the server's exit");
      stop = true;
      await withinHang(Promise.all([...rest, ...grpc, ...pushers, longWritten]), "the load's end");
      const long = await withinHang(longPatch.answer, "the long chunk's answer");
      for (const s of sessions) s.abort();
      probe.destroy();
      agent.destroy();

      const after = attempts.filter((a) => !a.sentBeforeSignal);
      t.diagnostic(
        `before the signal: ${attempts.length - after.length} requests; after: ${after.length} ` +
          `(${after.filter((a) => !a.error).length} answered; failures: ${[...new Set(after.flatMap((a) => (a.error ? [a.error] : [])))].join(", ")}); ` +
          `/readyz after the signal: ${readyz.filter((r) => r === 503).length} × 503, then ${readyz.at(-1)}`,
      );
      assert.equal(code, 0, server.lines.join("\n"));
      const firstRefusal = readyz.indexOf(503);
      assert.ok(firstRefusal >= 0, `/readyz answered 503 after the signal: ${readyz.join(" ")}`);
      assert.ok(!readyz.slice(firstRefusal).includes(200), `no 200 after the first 503: ${readyz.join(" ")}`);
      // the long chunk was accepted before the signal and went on streaming after it: answered whole
      assert.deepEqual(long, { status: 202, range: `0-${longBytes.length - 1}` });
      const before = attempts.filter((a) => a.sentBeforeSignal);
      assert.ok(before.length > 100, `a real load: ${before.length} requests before the signal`);
      const failedBefore = before.filter((a) => a.error);
      assert.deepEqual(failedBefore, [], "every request sent before the signal got its whole, valid answer");
      // after the signal: an answer (whole and valid) or a connection refused or closed, never a cut answer
      const badAfter = attempts.filter(
        (a) =>
          !a.sentBeforeSignal &&
          a.error &&
          !CONNECTION_ERRORS.test(a.error) &&
          !/^(Unavailable|Internal|Canceled|Unknown):/.test(a.error) &&
          a.error !== "unexpected",
      );
      assert.deepEqual(badAfter, []);
      assert.deepEqual(
        attempts.filter((a) => a.status !== undefined && a.error === "unexpected"),
        [],
        "no request got an answer other than its success",
      );

      // Restarted: every acknowledged write is there, every pushed image pulls and its layer verifies.
      server = await serveProcess([...flags, "--drain-delay", "0s", "--shutdown-timeout", "3s"], place.env);
      const token2 = await adminToken(place);
      const registryToken2 = await adminToken(place, new URL(server.url).host);
      const agent2 = new http.Agent({ keepAlive: true, maxSockets: 8 });
      for (const group of created) {
        const got = await jsonRequest(agent2, server.url, token2, "GET", `/iam/v2beta1/groups/${group.uid}`);
        assert.equal(got.status, 200, `${group.name}: ${JSON.stringify(got)}`);
        assert.equal(got.json.name, group.name);
      }
      const oci2 = new OciClient(server.url, { bearer: registryToken2 });
      for (const image of pushed) {
        const manifest = await oci2.getManifest(repo, image.tag);
        assert.equal(manifest.status, 200, image.tag);
        const blob = await oci2.get(`/v2/${repo}/blobs/${image.layerDigest}`);
        assert.equal(blob.status, 200);
        assert.equal(digestOf(blob.body), image.layerDigest);
      }

      // A chunk that stalls past --shutdown-timeout is cut at the bound (exit 1) and resumes after a restart.
      const first = randomBytes(1024 * 1024);
      const rest2 = randomBytes(3 * 1024 * 1024);
      const session = await oci2.startUpload(repo);
      const location = session.headers.get("location")!;
      const uploadId = location.split("/").pop()!.split("?")[0]!;
      const firstChunk = await oci2.request("PATCH", location, {
        body: first,
        headers: { "content-type": "application/octet-stream" },
      });
      assert.equal(firstChunk.status, 202);
      const stalled = streamingPatch(server.url, location, registryToken2);
      // 2 of its 3 MiB: the store writes a chunk in batches of up to 1 MiB, so at least one is on disk
      stalled.req.write(rest2.subarray(0, 2 * 1024 * 1024));
      await until(() => stagedBytes(place.blobDir, uploadId) > first.length, "part of the stalled chunk staged");
      server.child.kill("SIGTERM");
      assert.equal(await withinHang(exited(server.child), "the exit after the bound"), 1, "connections were cut");
      assert.ok((await stalled.answer).error, "the stalled chunk got no answer");
      stalled.req.destroy();
      const cutServer = server;
      await until(
        () => cutServer.lines.some((l) => l.includes("shutdown timeout: connections still open are cut")),
        "the log line saying connections were cut",
      );

      server = await serveProcess([...flags], place.env);
      const oci3 = new OciClient(server.url, { bearer: await adminToken(place, new URL(server.url).host) });
      const progress = await oci3.get(location);
      assert.equal(progress.status, 204);
      assert.equal(progress.headers.get("range"), `0-${first.length - 1}`, "the committed range: the first chunk");
      const resumed = await oci3.request("PATCH", location, {
        body: rest2,
        headers: {
          "content-type": "application/octet-stream",
          "content-range": `${first.length}-${first.length + rest2.length - 1}`,
        },
      });
      assert.equal(resumed.status, 202, resumed.body.toString());
      const whole = Buffer.concat([first, rest2]);
      const done = await oci3.request("PUT", withQuery(location, { digest: digestOf(whole) }));
      assert.equal(done.status, 201, done.body.toString());
      const blob = await oci3.get(`/v2/${repo}/blobs/${digestOf(whole)}`);
      assert.equal(digestOf(blob.body), digestOf(whole), "the resumed blob verifies");
      assert.equal(await server.stop(), 0);
    });
  });
}
