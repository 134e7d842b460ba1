// `bulwark advisories import` as an operator runs it: the real binary against a running server
// (which holds the embedded database; and on PostgreSQL), with BULWARK_TOKEN, files and
// directories, a bad file reported with its line and skipped, the summary, idempotence, errors a
// person can act on. With ../shared/data present, the whole corpora import and the counts match
// an independent count of the files (lines, not a YAML parser).
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clonePostgres, postgresUrl } from "./support/db-templates.js";

const FIXTURES = join(import.meta.dirname, "fixtures", "advisories");
const CORPUS = join(import.meta.dirname, "..", "..", "shared", "data");
const children: ChildProcess[] = [];
const dirs: string[] = [];
after(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "bulwark-cli-advisories-"));
  dirs.push(dir);
  return dir;
}

function cli(args: string[], env: Record<string, string | undefined> = {}) {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DATABASE_URL: "", BULWARK_TOKEN: "", BULWARK_CONFIG_DIR: freshDir(), ...env },
  });
  children.push(child);
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c));
  const exit = once(child, "close").then(([code]) => code as number);
  return { child, exit, out: () => out, err: () => err };
}

async function run(args: string[], env: Record<string, string | undefined> = {}) {
  const r = cli(args, env);
  const code = await r.exit;
  return { code, out: r.out(), err: r.err() };
}

async function serve(args: string[], env: Record<string, string | undefined>) {
  const r = cli(["serve", "--port", "0", "--no-rate-limit", ...args], env);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const m = /bulwark listening on (http:\/\/[^"\s]+)/.exec(r.out());
    if (m) return { ...r, url: m[1]! };
    if (r.child.exitCode !== null) throw new Error(`serve exited: ${r.out()} ${r.err()}`);
    if (Date.now() > deadline) throw new Error(`serve not listening after 60 s: ${r.out()} ${r.err()}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** The `N files: ...` summary line's numbers. */
function summary(out: string) {
  const m =
    /(\d+) files: (\d+) advisories \((\d+) created, (\d+) updated, (\d+) unchanged\), (\d+) events added, (\d+) removed; (\d+) skipped/.exec(
      out,
    );
  assert.ok(m, `no summary in: ${out}`);
  const [files, advisories, created, updated, unchanged, eventsAdded, eventsRemoved, skipped] = m
    .slice(1)
    .map(Number) as [number, number, number, number, number, number, number, number];
  return { files, advisories, created, updated, unchanged, eventsAdded, eventsRemoved, skipped };
}

/** Advisories and events of the wolfi corpus counted from its lines: `  - id:` and `type:` at event depth. */
function countWolfi(dir: string) {
  let advisories = 0;
  let events = 0;
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".yaml"))) {
    const text = readFileSync(join(dir, f), "utf8");
    advisories += text.match(/^ {2}- id: /gm)?.length ?? 0;
    events += text.match(/^ {6}- timestamp: /gm)?.length ?? 0;
  }
  return { files: readdirSync(dir).filter((n) => n.endsWith(".yaml")).length, advisories, events };
}

interface Backend {
  name: string;
  args: string[];
  env: Record<string, string | undefined>;
  drop?: () => Promise<void>;
}

async function backendsToTry(): Promise<(() => Promise<Backend>)[]> {
  const list: (() => Promise<Backend>)[] = [
    async () => ({ name: "pglite", args: ["--data-dir", freshDir()], env: {} }),
  ];
  if (postgresUrl())
    list.push(async () => {
      const { url, drop } = await clonePostgres();
      return {
        name: "postgres",
        args: ["--data-dir", freshDir()],
        env: { DATABASE_URL: url, BULWARK_KEY_ENCRYPTION_KEY: randomBytes(32).toString("hex") },
        drop,
      };
    });
  return list;
}

for (const make of await backendsToTry()) {
  describe("bulwark advisories import", () => {
    it("imports through the running server: files and directories, a bad file skipped with its line, idempotent", async (t) => {
      const backend = await make();
      t.diagnostic(backend.name);
      const server = await serve(backend.args, backend.env);
      try {
        const dataDir = backend.args[1]!;
        const token = await run(
          ["admin", "token", "--data-dir", dataDir, "--port", new URL(server.url).port],
          backend.env,
        );
        assert.equal(token.code, 0, token.err);
        const env = { ...backend.env, BULWARK_TOKEN: token.out.trim(), BULWARK_API_URL: server.url };
        const org = (await (
          await fetch(`${server.url}/iam/v2beta1/groups`, {
            method: "POST",
            headers: { authorization: `Bearer ${token.out.trim()}`, "content-type": "application/json" },
            body: JSON.stringify({ name: "publisher" }),
          })
        ).json()) as { uid: string };

        const first = await run(
          ["advisories", "import", join(FIXTURES, "wolfi"), join(FIXTURES, "rustsec"), "--group", org.uid],
          env,
        );
        assert.equal(first.code, 0, first.err);
        const s1 = summary(first.out);
        assert.equal(s1.skipped, 0);
        assert.equal(s1.created, s1.advisories);
        assert.ok(s1.files >= 30 && s1.advisories > 30, first.out);
        assert.doesNotMatch(first.err, /\[#/, "no progress bar when stderr is not a terminal");

        const again = await run(
          ["advisories", "import", join(FIXTURES, "wolfi"), join(FIXTURES, "rustsec"), "--group", org.uid],
          env,
        );
        const s2 = summary(again.out);
        assert.deepEqual([s2.created, s2.updated, s2.unchanged, s2.eventsAdded], [0, 0, s1.advisories, 0], again.out);

        // One bad file among good ones: reported with file and line, skipped, exit 1, the good one imported.
        const bad = join(FIXTURES, "own", "bad");
        const badFiles = readdirSync(bad).map((f) => join(bad, f));
        const mixed = await run(["advisories", "import", ...badFiles, join(FIXTURES, "own"), "--group", org.uid], env);
        assert.equal(mixed.code, 1, mixed.out + mixed.err);
        const s3 = summary(mixed.out);
        assert.ok(s3.skipped >= badFiles.length, mixed.out);
        assert.match(mixed.err, /:\d+: .+ \(skipped\)/, "file:line: problem");
        assert.doesNotMatch(mixed.err, /\n\s+at /, "no stack trace");

        // Errors a person can act on.
        const noGroup = await run(
          ["advisories", "import", join(FIXTURES, "wolfi"), "--group", randomBytes(20).toString("hex")],
          env,
        );
        assert.equal(noGroup.code, 1);
        assert.match(noGroup.err, /not found/i);
        const noServer = await run(["advisories", "import", join(FIXTURES, "wolfi"), "--group", org.uid], {
          ...env,
          BULWARK_API_URL: "http://127.0.0.1:9",
        });
        assert.equal(noServer.code, 1);
        assert.match(noServer.err, /cannot reach the server at http:\/\/127\.0\.0\.1:9/);
        const noToken = await run(["advisories", "import", join(FIXTURES, "wolfi"), "--group", org.uid], {
          ...env,
          BULWARK_TOKEN: "",
        });
        assert.equal(noToken.code, 1);
        assert.match(noToken.err, /bulwark auth login/);
        const missing = await run(["advisories", "import", join(FIXTURES, "nope"), "--group", org.uid], env);
        assert.equal(missing.code, 1);
        assert.match(missing.err, /no such file or directory/);

        // The whole shared corpora, when present: counts from the files' lines, not from a parser.
        if (existsSync(join(CORPUS, "wolfi-advisories", "advisories"))) {
          const corpus = (await (
            await fetch(`${server.url}/iam/v2beta1/groups`, {
              method: "POST",
              headers: { authorization: `Bearer ${token.out.trim()}`, "content-type": "application/json" },
              body: JSON.stringify({ name: "corpus" }),
            })
          ).json()) as { uid: string };
          const wolfiDir = join(CORPUS, "wolfi-advisories", "advisories");
          const rustDir = join(CORPUS, "rustsec-osv", "crates");
          const started = Date.now();
          const whole = await run(["advisories", "import", wolfiDir, rustDir, "--group", corpus.uid], env);
          const seconds = (Date.now() - started) / 1000;
          assert.equal(whole.code, 0, whole.err.slice(0, 2000));
          const s = summary(whole.out);
          const wolfi = countWolfi(wolfiDir);
          const rust = readdirSync(rustDir).filter((f) => f.endsWith(".json")).length;
          assert.equal(s.files, wolfi.files + rust);
          assert.equal(s.advisories, wolfi.advisories + rust);
          assert.equal(s.eventsAdded, wolfi.events + events(rustDir));
          t.diagnostic(
            `${backend.name}: whole corpus (${s.files} files, ${s.advisories} advisories) in ${seconds.toFixed(1)} s`,
          );
          const listed = (await (
            await fetch(`${server.url}/vulnerabilities/v2beta1/advisories?uidp.childrenOf=${corpus.uid}&page_size=1`, {
              headers: { authorization: `Bearer ${token.out.trim()}` },
            })
          ).json()) as { totalCount: string };
          assert.equal(Number(listed.totalCount), wolfi.advisories + rust);
        }
      } finally {
        server.child.kill("SIGTERM");
        await server.exit;
        await backend.drop?.();
      }
    });
  });
}

/** Events the OSV records become: a detection, a fix (one or several versions) when any, a withdrawal. */
function events(dir: string): number {
  let n = 0;
  for (const f of readdirSync(dir).filter((x) => x.endsWith(".json"))) {
    const record = JSON.parse(readFileSync(join(dir, f), "utf8"));
    const fixed = (record.affected ?? []).flatMap((a: any) =>
      (a.ranges ?? []).flatMap((r: any) => r.events.filter((e: any) => e.fixed)),
    );
    n += 1 + (fixed.length > 0 ? 1 : 0) + (record.withdrawn ? 1 : 0);
  }
  return n;
}
