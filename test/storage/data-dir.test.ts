// The embedded data directory as real processes use it: one process at a time (a second `serve`
// refuses, a lock left by `kill -9` is recovered), `admin token` signs with the running server's
// key without opening the database (even while the server starts), nothing under the directory is
// readable by group or others, and the issuer's private key is nowhere in plaintext: not in the
// directory's files, not in PostgreSQL's rows (where the server needs BULWARK_KEY_ENCRYPTION_KEY).
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import {
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { pino } from "pino";
import { SecretBox } from "../../src/core/secret-box.js";
import { startServer } from "../../src/server/start.js";
import {
  DataDirLockedError,
  KEY_ENCRYPTION_KEY_FILE,
  LOCK_FILE,
  lockDataDir,
  parseKeyEncryptionKey,
} from "../../src/storage/data-dir.js";
import { INITDB_TEMPLATE_ENV, keyEncryptionKeyOf } from "../../src/storage/db.js";
import { clonePostgres, postgresUrl } from "../support/db-templates.js";
import { HANG_MS, until, withinHang } from "../support/wait.js";
import { startCli, type CliRun } from "../support/cli.js";

const dirs: string[] = [];
function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "bulwark-datadir-"));
  dirs.push(dir);
  return dir;
}

/** The CLI's environment: embedded unless a URL is given; without a key-encryption key unless given. */
function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: "", ...extra };
  if (!("BULWARK_KEY_ENCRYPTION_KEY" in extra)) delete env.BULWARK_KEY_ENCRYPTION_KEY;
  return env;
}

type Run = CliRun;

/** every CLI process started, stopped after the suites if a failed test left it running */
const children: ChildProcess[] = [];

function cli(args: string[], env = cliEnv()): Run {
  return startCli(args, env, children);
}

interface Server extends Run {
  url: string;
}

const LISTENING = /bulwark listening on (http:\/\/[^"\s]+)/;

/** `bulwark serve` on the directory (or database), resolved once it says it listens. */
async function serve(dataDir: string, env = cliEnv()): Promise<Server> {
  const run = cli(["serve", "--port", "0", "--data-dir", dataDir], env);
  const [, url] = await run.waitFor(LISTENING);
  return { ...run, url: url! };
}

/** Once the directory's lock file exists, failing if `run` ends before. */
async function lockTakenBy(run: Run, dir: string): Promise<void> {
  await until(
    () => {
      assert.equal(run.child.exitCode, null, run.output());
      return existsSync(join(dir, LOCK_FILE));
    },
    () => `lock file in ${dir}: ${run.output()}`,
  );
}

/**
 * A process that holds a pid for as long as the test needs it (killed by the test): a lock naming
 * it is a live holder's.
 */
function liveProcess(): ChildProcess {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)"], { stdio: "ignore" });
  children.push(child);
  return child;
}

async function stop(server: Run, signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> {
  server.child.kill(signal);
  return server.exit;
}

/** `bulwark admin token` for a server at `url` on the directory. */
async function adminToken(dataDir: string, url: string, env = cliEnv()): Promise<string> {
  const run = cli(["admin", "token", "--data-dir", dataDir, "--port", new URL(url).port], env);
  assert.equal(await run.exit, 0, run.output());
  const token = /^ey[\w-]+\.[\w-]+\.[\w-]+$/m.exec(run.output())?.[0];
  assert.ok(token, run.output());
  return token;
}

/** A port nobody listens on right now. */
/**
 * A port nobody listens on now, below Linux's ephemeral range (32768+) and the test PostgreSQL's
 * (20000-39999): other suites' servers take ephemeral ports, and one of them could otherwise take
 * this port while the server here is still starting.
 */
async function freePort(): Promise<string> {
  for (;;) {
    const port = 10000 + Math.floor(Math.random() * 10000);
    const server = createServer();
    const free = await new Promise<boolean>((r) => {
      server.once("error", () => r(false));
      server.listen(port, "127.0.0.1", () => r(true));
    });
    if (free) {
      await new Promise((r) => server.close(r));
      return String(port);
    }
  }
}

function api(url: string, token: string) {
  return (path: string, init: RequestInit = {}) =>
    fetch(`${url}/iam/v2beta1/${path}`, { ...init, headers: { authorization: `Bearer ${token}` } });
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return lstatSync(path).isDirectory() ? [path, ...walk(path)] : [path];
  });
}

function assertPrivate(dir: string): void {
  const exposed = [dir, ...walk(dir)]
    .map((p) => ({ p, mode: lstatSync(p).mode & 0o777 }))
    .filter(({ mode }) => (mode & 0o077) !== 0)
    .map(({ p, mode }) => `${mode.toString(8)} ${p}`);
  assert.deepEqual(exposed, [], "group/other may access these");
  assert.equal(lstatSync(dir).mode & 0o777, 0o700);
}

/** The current signing key's private `d`, unsealed with the directory's key-encryption key. */
async function privateD(dir: string): Promise<string> {
  const kek = parseKeyEncryptionKey(readFileSync(join(dir, KEY_ENCRYPTION_KEY_FILE), "utf8"), "kek file");
  const file = JSON.parse(readFileSync(join(dir, "issuer-signing-key.json"), "utf8")) as Record<string, string>;
  assert.equal(file.privateJwk, undefined, "no plaintext JWK in the key file");
  const jwk = JSON.parse(await new SecretBox(kek).decrypt(file.privateKeyJwe!, file.kid!)) as { d: string };
  assert.match(jwk.d, /^[\w-]{43}$/);
  return jwk.d;
}

function assertNowhereInFiles(dir: string, d: string): void {
  const needles = [Buffer.from(d), Buffer.from(d, "base64url")];
  let files = 0;
  for (const path of walk(dir)) {
    if (lstatSync(path).isDirectory()) continue;
    const bytes = readFileSync(path);
    files++;
    for (const needle of needles) assert.equal(bytes.indexOf(needle), -1, `${path} holds the private key`);
  }
  assert.ok(files > 100, `only ${files} files read`);
}

// The suites run side by side (mostly waiting on child processes), to keep the file short.
describe("data directories and keys at rest", { concurrency: true }, () => {
  after(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  describe("the lock, in one process", () => {
    const writeLock = (dir: string, holder: object | string) =>
      writeFileSync(join(dir, LOCK_FILE), typeof holder === "string" ? holder : JSON.stringify(holder));
    const holder = (pid: number, purpose: string) => ({
      pid,
      hostname: hostname(),
      purpose,
      since: new Date().toISOString(),
    });

    it("a live server's lock is refused at once, naming the directory and its pid", async () => {
      const dir = freshDir();
      const other = liveProcess();
      const notices: string[] = [];
      try {
        writeLock(dir, holder(other.pid!, "serve"));
        const lockText = readFileSync(join(dir, LOCK_FILE), "utf8");
        // "At once": while the holder still runs and holds the lock, without waiting for it. The
        // window for waiting on a brief holder is made longer than the hang limit, so a refusal
        // that waited out a window would fail here as a hang instead of passing late.
        await assert.rejects(
          withinHang(
            lockDataDir(dir, {
              purpose: "serve",
              waitForBriefHolderMs: 100 * HANG_MS,
              notice: (m) => notices.push(m),
            }),
            "refusal of the live server's lock",
          ),
          (err: unknown) =>
            err instanceof DataDirLockedError &&
            err.message.includes(dir) &&
            err.message.includes(`pid ${other.pid}`) &&
            err.holder.pid === other.pid,
        );
        assert.deepEqual(notices, [], "nothing waited for, nothing removed");
        assert.equal(other.exitCode, null, "refused while the holder runs");
        assert.equal(readFileSync(join(dir, LOCK_FILE), "utf8"), lockText, "its lock untouched");
      } finally {
        other.kill();
      }
    });

    it("a live `admin token` is waited for; a dead holder's lock and a garbled old one are removed", async () => {
      const dir = freshDir();
      const other = liveProcess();
      const notices: string[] = [];
      const notice = (m: string) => notices.push(m);
      try {
        writeLock(dir, holder(other.pid!, "admin token"));
        // The brief holder lets go once the server says it waits for it (not after some time, which
        // could pass before the server even looked); the window outlasts any slowness.
        const lock = await withinHang(
          lockDataDir(dir, {
            purpose: "serve",
            waitForBriefHolderMs: 100 * HANG_MS,
            notice: (m) => {
              notice(m);
              if (/^waiting for/.test(m)) rmSync(join(dir, LOCK_FILE));
            },
          }),
          "lock after the brief holder let go",
        );
        assert.match(notices.join("\n"), new RegExp(`waiting for .*admin token.* \\(pid ${other.pid}\\)`));
        assert.equal(JSON.parse(readFileSync(join(dir, LOCK_FILE), "utf8")).pid, process.pid);
        // a short wait for a brief holder, then refused
        await lock.release();
        writeLock(dir, holder(other.pid!, "admin token"));
        await assert.rejects(lockDataDir(dir, { purpose: "serve", waitForBriefHolderMs: 300 }), DataDirLockedError);
      } finally {
        other.kill();
      }
      await once(other, "exit");
      // `other` no longer runs: its lock is stale
      const stale = await lockDataDir(dir, { purpose: "serve", notice });
      assert.match(notices.at(-1)!, new RegExp(`stale lock of .*pid ${other.pid}`));
      // release removes only our own lock
      writeLock(dir, holder(other.pid!, "serve"));
      await stale.release();
      assert.ok(existsSync(join(dir, LOCK_FILE)));
      // garbled and old (a holder killed while writing it): removed
      writeLock(dir, "{");
      utimesSync(join(dir, LOCK_FILE), new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
      const again = await lockDataDir(dir, { purpose: "admin token", notice });
      assert.match(notices.at(-1)!, /unreadable lock/);
      await again.release();
      assert.equal(existsSync(join(dir, LOCK_FILE)), false);
    });
  });

  describe("the embedded data directory", { concurrency: true }, () => {
    it("is held by one server: a second refuses, and after kill -9 the lock is recovered and the writes are there", async () => {
      const dir = freshDir();
      const first = await serve(dir);
      const lock = JSON.parse(readFileSync(join(dir, LOCK_FILE), "utf8")) as { pid: number; purpose: string };
      assert.equal(lock.pid, first.child.pid);
      assert.equal(lock.purpose, "serve");

      const second = cli(["serve", "--port", "0", "--data-dir", dir]);
      assert.notEqual(await second.exit, 0, `a second server on the directory refuses: ${second.output()}`);
      assert.ok(second.output().includes(dir), second.output());
      assert.ok(second.output().includes(`pid ${first.child.pid}`), second.output());
      assert.doesNotMatch(second.output(), /listening/);

      // admin token signs with the running server's key; the server accepts it
      const created = await api(first.url, await adminToken(dir, first.url))("groups", {
        method: "POST",
        body: JSON.stringify({ name: "survives" }),
      });
      assert.equal(created.status, 200, await created.clone().text());
      const { uid } = (await created.json()) as { uid: string };
      await stop(first, "SIGKILL");
      assert.ok(existsSync(join(dir, LOCK_FILE)), "kill -9 leaves the lock");

      const restarted = await serve(dir);
      assert.match(restarted.output(), /removed a stale lock/);
      const got = await api(restarted.url, await adminToken(dir, restarted.url))(`groups/${uid}`);
      assert.equal(got.status, 200, "what the first server acknowledged is still there");
      assert.equal(((await got.json()) as { name: string }).name, "survives");
      assert.equal(await stop(restarted), 0, restarted.output());
      assert.equal(existsSync(join(dir, LOCK_FILE)), false, "released on close");

      assertPrivate(dir);
      assertNowhereInFiles(dir, await privateD(dir));
    });

    it("SIGTERM while the server starts: it finishes starting, then closes cleanly (exit 0, lock released, no temporary files)", async () => {
      const dir = freshDir();
      const starting = cli(["serve", "--port", "0", "--data-dir", dir]);
      // The lock is taken first; the new database is made after it (seconds): stop in between.
      await lockTakenBy(starting, dir);
      assert.doesNotMatch(starting.output(), /bulwark listening on/);
      assert.equal(await stop(starting), 0, starting.output());
      assert.match(starting.output(), /shutting down/);
      assert.equal(existsSync(join(dir, LOCK_FILE)), false, `released: ${starting.output()}`);
      assert.deepEqual(
        readdirSync(dir).filter((name) => name.endsWith(".tmp")),
        [],
      );
      const again = await serve(dir);
      assert.doesNotMatch(again.output(), /stale lock/);
      assert.equal(await stop(again), 0, again.output());
    });

    it("admin token during a server's start waits for its key instead of opening the database", async () => {
      const dir = freshDir();
      const port = await freePort();
      // Its first start runs initdb itself (seconds of CPU), not a copy of the run's template: the
      // window in which the directory is held and no key is made yet.
      const initdbEnv = cliEnv();
      delete initdbEnv[INITDB_TEMPLATE_ENV];
      const starting = cli(["serve", "--port", port, "--data-dir", dir], initdbEnv);
      // once the server holds the directory (it has not made its database or key yet)
      await lockTakenBy(starting, dir);
      assert.equal(existsSync(join(dir, "issuer-signing-key.json")), false);
      // however long the server takes to start on a busy machine
      const admin = cli(["admin", "token", "--data-dir", dir, "--port", port, "--wait", `${HANG_MS / 1000}s`]);
      assert.equal(await admin.exit, 0, admin.output());
      assert.match(admin.output(), /waiting for the server \(pid \d+\)/);
      const token = /^ey[\w-]+\.[\w-]+\.[\w-]+$/m.exec(admin.output())![0];
      await starting.waitFor(LISTENING);
      const res = await api(`http://127.0.0.1:${port}`, token)("groups");
      assert.equal(res.status, 200, await res.text());
      assert.equal(await stop(starting), 0, starting.output());
      assertPrivate(dir);
      assertNowhereInFiles(dir, await privateD(dir));
    });
  });

  describe("signing keys at rest", () => {
    it("an earlier version's plaintext keys are sealed at start and their plaintext cleared", async () => {
      // test/fixtures/pre-modules-database.sql: a database whose signing_keys row holds a plaintext JWK
      const dump = readFileSync(new URL("../fixtures/pre-modules-database.sql", import.meta.url), "utf8");
      const legacy = /INSERT INTO public\.signing_keys VALUES \('([^']+)', 'ES256', '(\{[^']+\})'/.exec(dump);
      assert.ok(legacy, "the fixture has a plaintext key");
      const [, kid, plaintext] = legacy;
      const pglite = await PGlite.create();
      await pglite.exec(dump);
      await pglite.exec("reset search_path");
      const server = await startServer({
        port: 0,
        host: "127.0.0.1",
        dataDir: "",
        errorDomain: "test.bulwark.dev",
        logger: pino({ level: "silent" }),
        pglite,
      });
      try {
        const rows = await server.db
          .selectFrom("signing_keys")
          .select(["kid", "private_jwk", "private_key_jwe"])
          .execute();
        assert.ok(rows.length >= 1);
        for (const row of rows) {
          assert.equal(row.private_jwk, null, `${row.kid}: plaintext cleared`);
          assert.match(row.private_key_jwe, /^ey[\w-]+\.\.[\w-]+\.[\w-]+\.[\w-]+$/, "a compact JWE (dir)");
        }
        const sealed = rows.find((r) => r.kid === kid)!;
        const box = new SecretBox(keyEncryptionKeyOf(server.db));
        assert.deepEqual(JSON.parse(await box.decrypt(sealed.private_key_jwe, kid!)), JSON.parse(plaintext!));
      } finally {
        await server.close();
      }
    });

    it(
      "PostgreSQL: the server refuses to start without BULWARK_KEY_ENCRYPTION_KEY; rows hold no plaintext key",
      {
        skip: !postgresUrl() && "BULWARK_TEST_DATABASE_URL is not set",
      },
      async () => {
        const { url, drop } = await clonePostgres();
        const dir = freshDir();
        const kek = randomBytes(32).toString("hex");
        try {
          const [missing, malformed] = [
            cliEnv({ DATABASE_URL: url }),
            cliEnv({ DATABASE_URL: url, BULWARK_KEY_ENCRYPTION_KEY: "short" }),
          ].map((env) => cli(["serve", "--port", "0", "--data-dir", dir], env));
          assert.notEqual(await missing!.exit, 0, missing!.output());
          assert.match(missing!.output(), /BULWARK_KEY_ENCRYPTION_KEY is not set/);
          assert.doesNotMatch(missing!.output(), /listening/);
          assert.notEqual(await malformed!.exit, 0, malformed!.output());
          assert.match(malformed!.output(), /BULWARK_KEY_ENCRYPTION_KEY must be 32 bytes/);

          const env = cliEnv({ DATABASE_URL: url, BULWARK_KEY_ENCRYPTION_KEY: kek });
          const server = await serve(dir, env);
          try {
            const res = await api(server.url, await adminToken(dir, server.url, env))("groups");
            assert.equal(res.status, 200, await res.text());
          } finally {
            assert.equal(await stop(server), 0, server.output());
          }
          assert.deepEqual(readdirSync(dir), [], "nothing written to the data directory");

          const client = new pg.Client({ connectionString: url });
          await client.connect();
          try {
            const { rows } = await client.query<{ kid: string; jwe: string | null; row: string }>(
              "select kid, private_key_jwe as jwe, row_to_json(k)::text as row from signing_keys k",
            );
            assert.equal(rows.length, 1, JSON.stringify(rows));
            for (const { kid, jwe, row } of rows) {
              assert.doesNotMatch(row, /"d"/, "no private JWK member in the row");
              const { d } = JSON.parse(await new SecretBox(parseKeyEncryptionKey(kek, "kek")).decrypt(jwe!, kid)) as {
                d: string;
              };
              assert.ok(!row.includes(d), "the private key is not in the row");
            }
          } finally {
            await client.end();
          }
        } finally {
          await drop();
        }
      },
    );
  });
});
