// `bulwark serve` as a user runs it: a real process on a persistent PGlite data dir.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";
import { decodeJwt } from "jose";
import { BIN, serveProcess, type ServeProcess } from "../support/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "bulwark-cli-"));

/**
 * `bulwark admin token` for the server on this data dir, as the README shows it: no port or URL is
 * given, the token carries the issuer and audience the server recorded when it started.
 */
async function adminToken(): Promise<string> {
  const child = spawn(process.execPath, [BIN, "admin", "token", "--data-dir", dataDir], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DATABASE_URL: "", BULWARK_API_URL: "" },
  });
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c));
  const [code] = await once(child, "close");
  assert.equal(code, 0, err);
  return out.trim();
}

/** Every server this suite started: stopped (and waited for) before their data directories go. */
const started: ServeProcess[] = [];

/** `bulwark serve <args>`, once its "listening" log line is out. */
async function serve(args: string[]): Promise<ServeProcess> {
  const server = await serveProcess(args);
  started.push(server);
  return server;
}

describe("bulwark serve", () => {
  after(async () => {
    // a test that failed half-way leaves its server running: it must be gone before its directory
    await Promise.all(started.map((server) => server.stop()));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("serves on the given port, persists to --data-dir, and stops cleanly on SIGTERM and SIGINT", async () => {
    const first = await serve(["--port", "0", "--data-dir", dataDir]);
    assert.equal(first.lines.filter((l) => l.includes("bulwark listening on")).length, 1, "one ready line");
    assert.equal((await fetch(`${first.url}/healthz`)).status, 200);
    assert.equal((await fetch(`${first.url}/iam/v2beta1/groups`)).status, 401, "the API needs a token");
    // while the server holds the embedded database, the admin command signs with its key file, for
    // the URLs it recorded (an ephemeral port here, not the default 8080)
    const token = await adminToken();
    assert.match(token, /^ey[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.equal(decodeJwt(token).iss, first.url);
    const auth = { authorization: `Bearer ${token}` };
    const created = (await (
      await fetch(`${first.url}/iam/v2beta1/groups`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ name: "persisted" }),
      })
    ).json()) as { uid: string };
    assert.match(created.uid, /^[0-9a-f]{40}$/);
    first.child.kill("SIGTERM");
    const [code] = await once(first.child, "exit");
    assert.equal(code, 0);

    const second = await serve(["--port", "0", "--data-dir", dataDir]);
    // the second run listens on another port: admin token follows it without being told
    const token2 = await adminToken();
    assert.equal(decodeJwt(token2).iss, second.url);
    const got = await fetch(`${second.url}/iam/v2beta1/groups/${created.uid}`, {
      headers: { authorization: `Bearer ${token2}` },
    });
    assert.equal(got.status, 200, "the group survived a restart");
    assert.equal(((await got.json()) as { name: string }).name, "persisted");
    // a server's refusal of a token for another issuer names the issuer it expects
    const refused = await fetch(`${second.url}/iam/v2beta1/groups`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(refused.status, 401);
    assert.match(
      ((await refused.json()) as { message: string }).message,
      new RegExp(`token issuer is not accepted: this server issues tokens as "${second.url}"`),
    );
    second.child.kill("SIGINT");
    const [code2] = await once(second.child, "exit");
    assert.equal(code2, 0);
    // with no server running, it opens the database and reads the same record
    assert.equal(decodeJwt(await adminToken()).iss, second.url);
  });

  it("rate-limit and CORS flags: --rate-limit-address, repeated --cors-origin, --no-rate-limit; a bad rate is refused", async () => {
    const flagsDir = mkdtempSync(join(tmpdir(), "bulwark-cli-flags-"));
    try {
      const limited = await serve([
        ...["--port", "0", "--data-dir", flagsDir],
        ...[
          "--rate-limit-address",
          // a token back every 1000 s: the third request is refused however slowly the first two went
          "0.001:2",
          "--cors-origin",
          "https://a.example",
          "--cors-origin",
          "https://b.example",
        ],
      ]);
      const get = () => fetch(`${limited.url}/iam/v2beta1/groups`, { headers: { origin: "https://b.example" } });
      const statuses = [(await get()).status, (await get()).status];
      const third = await get();
      assert.deepEqual(statuses, [401, 401]);
      assert.equal(third.status, 429);
      assert.ok(Number(third.headers.get("retry-after")) >= 1);
      assert.equal(third.headers.get("access-control-allow-origin"), "https://b.example");
      limited.child.kill("SIGTERM");
      await once(limited.child, "exit");

      const unlimited = await serve([
        "--port",
        "0",
        "--data-dir",
        flagsDir,
        "--no-rate-limit",
        "--rate-limit-address",
        "0.2:1",
      ]);
      for (let i = 0; i < 5; i++) assert.equal((await fetch(`${unlimited.url}/iam/v2beta1/groups`)).status, 401);
      assert.equal(
        (await fetch(`${unlimited.url}/healthz`, { headers: { origin: "https://a.example" } })).headers.get(
          "access-control-allow-origin",
        ),
        null,
        "CORS off without --cors-origin",
      );
      unlimited.child.kill("SIGTERM");
      await once(unlimited.child, "exit");

      const bad = spawn(process.execPath, [BIN, "serve", "--rate-limit-address", "fast"], {
        stdio: "pipe",
      });
      let stderr = "";
      bad.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
      const [code] = await once(bad, "close");
      assert.equal(code, 2, "a usage error");
      assert.match(stderr, /invalid rate limit "fast"/);
    } finally {
      await Promise.all(started.map((server) => server.stop()));
      rmSync(flagsDir, { recursive: true, force: true });
    }
  });

  it("--allow-insecure-sinks lets a subscription deliver over http to a loopback address; without it, refused", async () => {
    const sink = "http://127.0.0.1:9/hook";
    const subscribe = async (url: string) => {
      const auth = { authorization: `Bearer ${await adminToken()}` };
      const org = await fetch(`${url}/iam/v2beta1/groups`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ name: `sinks ${Date.now()}` }),
      });
      assert.equal(org.status, 200);
      const { uid } = (await org.json()) as { uid: string };
      return fetch(`${url}/events/v2beta1/subscriptions/${uid}`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ sink }),
      });
    };
    const insecure = await serve(["--port", "0", "--data-dir", dataDir, "--allow-insecure-sinks"]);
    const allowed = await subscribe(insecure.url);
    assert.equal(allowed.status, 200, await allowed.clone().text());
    assert.equal(((await allowed.json()) as { sink: string }).sink, sink);
    insecure.child.kill("SIGTERM");
    await once(insecure.child, "exit");

    const secure = await serve(["--port", "0", "--data-dir", dataDir]);
    const refused = await subscribe(secure.url);
    assert.equal(refused.status, 400, await refused.clone().text());
    assert.match(((await refused.json()) as { message: string }).message, /subscription\.sink: must be an https URL/);
    secure.child.kill("SIGTERM");
    await once(secure.child, "exit");
  });

  it("rejects a bad --port with a clear message", async () => {
    const bad = spawn(process.execPath, [BIN, "serve", "--port", "http"], {
      stdio: "pipe",
    });
    let stderr = "";
    bad.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    const [code] = await once(bad, "close"); // "close": all of stderr was read
    assert.equal(code, 2, "a usage error");
    assert.match(stderr, /invalid port/);
  });
});
