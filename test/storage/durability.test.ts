// The embedded database's durability, shown on a real `serve`: traced with strace, every create
// over HTTP is answered only after the WAL was flushed with fsync (the order of the process's own
// system calls, not timing); with --unsafe-no-fsync nothing under pg_wal is ever synced, which
// shows the trace check can fail. A first start syncs the database initdb made before moving it
// into place, PG_VERSION last. And kill -9 during a stream of creates loses none that was
// acknowledged. (Most suites run on in-memory PGlite clones, where nothing is durable and nothing
// syncs: this file is where durability is tested.)
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LOCK_FILE } from "../../src/storage/data-dir.js";
import { until, watchOutput } from "../support/wait.js";
import { CLI_ARGS, isBulwarkSetting } from "../support/paths.js";

const STRACE = spawnSync("strace", ["-V"]).status === 0;

const dirs: string[] = [];
const children: ChildProcess[] = [];
function freshDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

/** The CLI's environment: embedded, no key-encryption key, none of the developer's BULWARK_* settings. */
function cliEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { DATABASE_URL: "" };
  for (const [k, v] of Object.entries(process.env)) if (!isBulwarkSetting(k)) env[k] = v;
  env.DATABASE_URL = "";
  return env;
}

interface Run {
  child: ChildProcess;
  output(): string;
  waitFor(re: RegExp): Promise<RegExpMatchArray>;
  exit: Promise<number | null>;
}

/** `bulwark <args>` (paths.ts CLI_ARGS), optionally under `wrapper` (strace and its options). */
function cli(args: string[], wrapper: string[] = []): Run {
  const command = [...wrapper, process.execPath, ...CLI_ARGS, ...args];
  const child = spawn(command[0]!, command.slice(1), { stdio: ["ignore", "pipe", "pipe"], env: cliEnv() });
  children.push(child);
  const output = watchOutput(child);
  const exit = once(child, "close").then(([code]) => code as number | null);
  return { child, output: output.text, waitFor: output.waitFor, exit };
}

async function serve(dataDir: string, flags: string[] = [], wrapper: string[] = []) {
  const run = cli(["serve", "--port", "0", "--data-dir", dataDir, ...flags], wrapper);
  const [, url] = await run.waitFor(/bulwark listening on (http:\/\/[^"\s]+)/);
  return { ...run, url: url! };
}

async function adminToken(dataDir: string, url: string): Promise<string> {
  const run = cli(["admin", "token", "--data-dir", dataDir, "--port", new URL(url).port]);
  assert.equal(await run.exit, 0, run.output());
  const token = /^ey[\w-]+\.[\w-]+\.[\w-]+$/m.exec(run.output())?.[0];
  assert.ok(token, run.output());
  return token;
}

function createGroup(url: string, token: string, name: string): Promise<Response> {
  return fetch(`${url}/iam/v2beta1/groups`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name }),
  });
}

/**
 * One traced system call: the thread that made it, the call as strace printed it, and the trace
 * lines it began and returned on (calls are listed in the order they returned).
 */
interface Call {
  tid: string;
  text: string;
  began: number;
  ended: number;
}

/**
 * strace -f's output as one call per line: a call another thread interrupted ("<unfinished ...>")
 * is joined with its "<... resumed>" rest.
 */
function parseTrace(trace: string): Call[] {
  const pending = new Map<string, { text: string; began: number }>();
  const calls: Call[] = [];
  for (const [began, line] of trace.split("\n").entries()) {
    const m = /^(\d+) +(.*)$/.exec(line);
    if (!m) continue;
    const [, tid, text] = m as unknown as [string, string, string];
    if (text.endsWith("<unfinished ...>")) {
      pending.set(tid, { text: text.slice(0, -"<unfinished ...>".length), began });
      continue;
    }
    const resumed = /^<\.\.\. \w+ resumed>(.*)$/.exec(text);
    if (resumed) {
      const start = pending.get(tid);
      calls.push({ tid, text: (start?.text ?? "") + resumed[1], began: start?.began ?? began, ended: began });
      pending.delete(tid);
    } else calls.push({ tid, text, began, ended: began });
  }
  return calls;
}

const SOCKET_FD = /^(?:read|recvfrom)\((\d+)<(?:socket|TCP)/;
const walWrite = (c: Call) => /^(?:write|writev|pwrite64)\(\d+<[^>]*\/pg_wal\//.test(c.text);
const walSync = (c: Call) => /^(?:fsync|fdatasync)\(\d+<[^>]*\/pg_wal\//.test(c.text);

/**
 * For the create named `name`: the calls made between reading the request's last bytes from the
 * socket (the read holding the name) and writing its 200 answer to that socket — by the thread
 * that answered (`thread`), or by any (WAL syncs run on the thread pool).
 */
function callsWhileAnswering(calls: Call[], name: string, threads: "thread" | "any" = "thread"): Call[] {
  const readAt = calls.findIndex((c) => SOCKET_FD.test(c.text) && c.text.includes(name));
  assert.ok(readAt >= 0, `the request creating ${name} is in the trace`);
  const { tid, text } = calls[readAt]!;
  const fd = SOCKET_FD.exec(text)![1];
  const answer = new RegExp(`^(?:write|writev|sendto|sendmsg)\\(${fd}<(?:socket|TCP).*HTTP/1\\.1 200`);
  const answerAt = calls.findIndex((c, i) => i > readAt && c.tid === tid && answer.test(c.text));
  assert.ok(answerAt > readAt, `the 200 answer to ${name} is in the trace, on the thread that read it`);
  return calls.slice(readAt + 1, answerAt).filter((c) => threads === "any" || c.tid === tid);
}

const TRACED = "read,write,writev,pwrite64,sendto,recvfrom,fsync,fdatasync";

async function tracedCreates(flags: string[], names: string[]): Promise<Call[]> {
  const dir = freshDir("bulwark-durable-");
  const traceFile = join(freshDir("bulwark-trace-"), "trace");
  const wrapper = ["strace", "-f", "-qq", "-y", "-s", "4096", "-e", `trace=${TRACED}`, "-o", traceFile];
  const server = await serve(dir, flags, wrapper);
  const token = await adminToken(dir, server.url);
  for (const name of names) {
    const created = await createGroup(server.url, token, name);
    assert.equal(created.status, 200, await created.clone().text());
  }
  // The server itself is stopped (strace, signalled, would wait for it): its pid is in its lock.
  const { pid } = JSON.parse(readFileSync(join(dir, LOCK_FILE), "utf8")) as { pid: number };
  process.kill(pid, "SIGTERM");
  assert.equal(await server.exit, 0, server.output());
  return parseTrace(readFileSync(traceFile, "utf8"));
}

describe("a durable embedded database", { concurrency: true }, () => {
  after(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it(
    "answers a create only after the commit's WAL is fsynced; --unsafe-no-fsync never syncs the WAL",
    { skip: !STRACE && "strace is not installed (Debian package strace)" },
    async () => {
      const names = [1, 2, 3].map((i) => `fsync-probe-${i}-end`);
      const [durable, unsafe] = await Promise.all([
        tracedCreates([], names),
        tracedCreates(["--unsafe-no-fsync"], names),
      ]);
      for (const name of names) {
        const between = callsWhileAnswering(durable, name, "any");
        const lastWalWrite = between.findLastIndex(walWrite);
        assert.ok(lastWalWrite >= 0, `creating ${name} wrote its commit to the WAL before answering`);
        // an fsync that began after that write returned, and returned before the answer
        const written = between[lastWalWrite]!.ended;
        assert.ok(
          between.slice(lastWalWrite + 1).some((c) => walSync(c) && c.text.startsWith("fsync(") && c.began > written),
          `after its last WAL write and before its answer, creating ${name} fsynced the WAL:\n` +
            between.map((c) => `${c.tid} ${c.text.slice(0, 160)}`).join("\n"),
        );
      }
      for (const name of names) {
        const between = callsWhileAnswering(unsafe, name);
        assert.ok(between.some(walWrite), `unsafe: creating ${name} wrote the WAL`);
        assert.ok(!between.some(walSync), `unsafe: creating ${name} did not sync it`);
      }
      assert.ok(!unsafe.some(walSync), "with --unsafe-no-fsync nothing under pg_wal is ever synced");
    },
  );

  it(
    "syncs a new data directory's database before moving it into place, PG_VERSION last",
    { skip: !STRACE && "strace is not installed (Debian package strace)" },
    async () => {
      const dir = freshDir("bulwark-first-start-");
      const traceFile = join(freshDir("bulwark-trace-"), "trace");
      const traced = "fsync,fdatasync,rename,renameat,renameat2";
      const wrapper = ["strace", "-f", "-qq", "-y", "-s", "4096", "-e", `trace=${traced}`, "-o", traceFile];
      const server = await serve(dir, [], wrapper);
      const { pid } = JSON.parse(readFileSync(join(dir, LOCK_FILE), "utf8")) as { pid: number };
      process.kill(pid, "SIGTERM");
      assert.equal(await server.exit, 0, server.output());
      const calls = parseTrace(readFileSync(traceFile, "utf8"));
      const synced = (path: string) => (c: Call) => c.text.startsWith(`fsync(`) && c.text.includes(`<${path}>)`);
      // the moves out of initdb's staging directory (rename("<dir>/.initdb-…/<name>", "<dir>/<name>"))
      const move = /^rename(?:at2?)?\(.*"([^"]*\/\.initdb-[^/"]+)\/([^/"]+)"/;
      const moves = calls.flatMap((c, at) => {
        const m = move.exec(c.text);
        return m ? [{ at, staging: m[1]!, name: m[2]! }] : [];
      });
      const trace = () => calls.map((c) => c.text.slice(0, 200)).join("\n");
      assert.ok(moves.length > 1, `the database was moved into place:\n${trace()}`);
      const { staging } = moves[0]!;
      const first = moves[0]!.at;
      const last = moves.at(-1)!;
      assert.equal(last.name, "PG_VERSION", "PG_VERSION moves last");
      const before = (at: number, what: (c: Call) => boolean) => calls.slice(0, at).some(what);
      // initdb writes without syncing: its files, then the staging directory and the data directory
      // (the staging directory's name) are synced before anything moves
      assert.ok(before(first, synced(`${staging}/PG_VERSION`)), `staged files synced first:\n${trace()}`);
      assert.ok(before(first, synced(staging)), "the staging directory synced before the moves");
      assert.ok(before(first, synced(dir)), "the data directory synced before the moves");
      // the data directory is synced after the other moves and before PG_VERSION's, and after it
      const previous = moves.at(-2)!.at;
      assert.ok(
        calls.slice(previous + 1, last.at).some(synced(dir)),
        `the data directory synced between the other moves and PG_VERSION's:\n${trace()}`,
      );
      assert.ok(calls.slice(last.at + 1).some(synced(dir)), "the data directory synced after PG_VERSION's move");
    },
  );

  it("loses no acknowledged create to kill -9 during a stream of creates", async () => {
    const dir = freshDir("bulwark-durable-");
    const first = await serve(dir);
    const token = await adminToken(dir, first.url);
    const acknowledged: { uid: string; name: string }[] = [];
    let stopped = false;
    // Four writers until the process dies under them; each records what was answered 200.
    const writers = [0, 1, 2, 3].map(async (w) => {
      for (let i = 0; !stopped; i++) {
        try {
          const res = await createGroup(first.url, token, `kill-${w}-${i}`);
          if (res.status === 200)
            acknowledged.push({ ...((await res.json()) as { uid: string }), name: `kill-${w}-${i}` });
        } catch {
          return; // the connection died with the process
        }
      }
    });
    // Killed once a good number are in, while the writers keep going.
    await until(
      () => acknowledged.length >= 40,
      () => `40 acknowledged creates (${acknowledged.length}): ${first.output()}`,
    );
    first.child.kill("SIGKILL");
    await first.exit;
    stopped = true;
    await Promise.all(writers);
    const restarted = await serve(dir);
    const again = await adminToken(dir, restarted.url);
    const missing: string[] = [];
    for (const { uid, name } of acknowledged) {
      const got = await fetch(`${restarted.url}/iam/v2beta1/groups/${uid}`, {
        headers: { authorization: `Bearer ${again}` },
      });
      if (got.status !== 200 || ((await got.json()) as { name: string }).name !== name) missing.push(name);
    }
    assert.deepEqual(missing, [], `all ${acknowledged.length} acknowledged creates survived kill -9`);
    restarted.child.kill("SIGTERM");
    assert.equal(await restarted.exit, 0, restarted.output());
  });
});
