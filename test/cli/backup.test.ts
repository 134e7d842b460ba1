// `bulwark backup` and `bulwark restore` on a real embedded server under load: groups created and
// images pushed (distinct content) while the backup runs through the server; restored into a new
// directory, a server there has every write acknowledged before the backup was asked for, every
// blob of every manifest it holds verifies, and it mints operator tokens and logs in. "Before" is
// the order of events (an acknowledgement received before the backup command was started), never
// a time. Also: the backup route is the operator's only (anonymous 401, others 403), and a server
// on PostgreSQL (or without a data directory) refuses it with FAILED_PRECONDITION. And: the archive
// holds only PostgreSQL's files of the data directory (no lock, pid, keys or URLs file, no
// registry/), a restore made while the source still serves starts a server on this same host, and
// a crafted archive (a `../` name, an entry larger than its manifest says) is refused leaving nothing.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { gunzipSync, gzipSync } from "node:zlib";
import { extract as tarExtract, pack as tarPack } from "tar-stream";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import { BACKUP_PATH, restoreArchive, type BackupManifest } from "../../src/operations/api.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createIdentity, createRoleBinding } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { startTestServer } from "../support/server.js";
import { descriptorOf, digestOf, MEDIA_TYPES, OciClient } from "../support/oci.js";
import { until } from "../support/wait.js";
import { startCli } from "../support/cli.js";
import { isBulwarkSetting } from "../support/paths.js";

const dirs: string[] = [];
const children: ChildProcess[] = [];
function freshDir(prefix = "bulwark-backup-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!isBulwarkSetting(k)) env[k] = v;
  return { ...env, DATABASE_URL: "", ...extra };
}

function cli(args: string[], env = cliEnv()) {
  return startCli(args, env, children);
}

async function run(args: string[]): Promise<string> {
  const c = cli(args);
  const code = await c.exit;
  assert.equal(code, 0, `bulwark ${args.join(" ")}: ${c.output()}`);
  return c.output();
}

async function serve(dataDir: string, ...extra: string[]) {
  // fsync off: this file is about what a backup holds, not about power loss
  const c = cli([
    "serve",
    "--port",
    "0",
    "--data-dir",
    dataDir,
    "--unsafe-no-fsync",
    "--inventory-concurrency",
    "0",
    ...extra,
  ]);
  const [, url] = await c.waitFor(/bulwark listening on (http:\/\/[^"\s]+)/);
  return { ...c, url: url! };
}

async function adminToken(dataDir: string, audience?: string): Promise<string> {
  const out = await run(["admin", "token", "--data-dir", dataDir, ...(audience ? ["--audience", audience] : [])]);
  const token = /^ey[\w-]+\.[\w-]+\.[\w-]+$/m.exec(out)?.[0];
  assert.ok(token, out);
  return token;
}

function rest(url: string, token: string) {
  return (path: string, body?: unknown) =>
    fetch(`${url}/iam/v2beta1/${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
}

interface Pushed {
  repo: string;
  tag: string;
  manifest: string;
  blobs: string[];
}

/** An image of distinct content: its own layer bytes and config. */
async function pushImage(oci: OciClient, repo: string, n: number): Promise<Pushed> {
  const layer = randomBytes(2048 + n);
  const config = JSON.stringify({ architecture: "amd64", os: "linux", n, salt: randomBytes(8).toString("hex") });
  for (const bytes of [layer, config]) {
    const res = await oci.postBlob(repo, bytes);
    assert.equal(res.status, 201, `blob push: ${res.status}`);
  }
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.ociManifest,
    config: descriptorOf(MEDIA_TYPES.ociConfig, config),
    layers: [descriptorOf(MEDIA_TYPES.ociLayer, layer)],
  });
  const put = await oci.putManifest(repo, `v${n}`, manifest, MEDIA_TYPES.ociManifest);
  assert.equal(put.status, 201, `manifest push: ${put.status}`);
  return { repo, tag: `v${n}`, manifest: digestOf(manifest), blobs: [digestOf(config), digestOf(layer)] };
}

interface ArchiveEntry {
  name: string;
  type: string;
  body: Buffer;
}

/** Every entry of a (small) archive, in order. */
async function entriesOf(file: string): Promise<ArchiveEntry[]> {
  const extract = tarExtract();
  const entries: ArchiveEntry[] = [];
  const done = new Promise<void>((resolve, reject) => {
    extract.on("entry", (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: unknown) => chunks.push(c as Buffer));
      stream.on("end", () => {
        entries.push({ name: header.name, type: header.type ?? "file", body: Buffer.concat(chunks) });
        next();
      });
    });
    extract.on("finish", resolve);
    extract.on("error", reject);
  });
  extract.end(gunzipSync(readFileSync(file)));
  await done;
  return entries;
}

/** An archive of these entries; `size` overrides an entry's header size (its body is padded to match). */
async function archiveOf(file: string, entries: (ArchiveEntry & { size?: number })[]): Promise<void> {
  const pack = tarPack();
  const chunks: Buffer[] = [];
  pack.on("data", (c: unknown) => chunks.push(c as Buffer));
  const ended = once(pack, "end");
  for (const e of entries) {
    const body = e.size === undefined ? e.body : Buffer.concat([e.body, Buffer.alloc(e.size - e.body.length)]);
    await new Promise<void>((resolve, reject) =>
      pack.entry({ name: e.name, size: body.length, mode: 0o600 }, body, (err) => (err ? reject(err) : resolve())),
    );
  }
  pack.finalize();
  await ended;
  writeFileSync(file, gzipSync(Buffer.concat(chunks)));
}

describe("bulwark backup and restore", { concurrency: true }, () => {
  after(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("an online backup during writes and pushes restores every write acknowledged before it, every blob verified", async () => {
    const dir = freshDir();
    // the writers below go as fast as the server answers; on a quick machine that passes the
    // per-identity limit (100/s), and a 429 is not what this test is about
    const server = await serve(dir, "--no-rate-limit");
    const token = await adminToken(dir);
    const registryHost = new URL(server.url).host;
    const oci = new OciClient(server.url, { bearer: await adminToken(dir, registryHost) });
    const api = rest(server.url, token);
    const org = (await (await api("groups", { name: "backup-org" })).json()) as { uid: string };
    assert.ok(org.uid);

    const groups: { uid: string; name: string }[] = [];
    const pushes: Pushed[] = [];
    let loading = true;
    const writer = (async () => {
      for (let i = 0; loading; i++) {
        const res = await api(`groups/${org.uid}`, { name: `g-${i}` });
        assert.equal(res.status, 200, await res.clone().text());
        groups.push({ uid: ((await res.json()) as { uid: string }).uid, name: `g-${i}` });
      }
    })();
    const pusher = (async () => {
      for (let n = 0; loading; n++) pushes.push(await pushImage(oci, `backup-org/app-${n % 3}`, n));
    })();
    await until(
      () => groups.length >= 10 && pushes.length >= 3,
      () => `load under way (${groups.length} groups, ${pushes.length} pushes)`,
    );

    // Everything acknowledged up to here must be in the backup; the load goes on during it.
    const groupsBefore = [...groups];
    const pushesBefore = [...pushes];
    const file = join(freshDir(), "backup.tar.gz");
    const backup = cli(["backup", file, "--data-dir", dir]);
    const backupCode = await backup.exit;
    const duringBackup = { groups: groups.length - groupsBefore.length, pushes: pushes.length - pushesBefore.length };
    loading = false;
    await Promise.all([writer, pusher]);
    assert.equal(backupCode, 0, backup.output());
    assert.match(backup.output(), /backup started: asking the server/);
    assert.match(backup.output(), /from the running server/);
    assert.equal(statSync(file).mode & 0o777, 0o600, "the archive holds the key-encryption key: owner only");
    server.child.kill("SIGTERM");
    assert.equal(await server.exit, 0, server.output());

    // A damaged archive is refused and leaves nothing behind.
    const damaged = join(freshDir(), "damaged.tar.gz");
    const whole = readFileSync(file);
    writeFileSync(damaged, whole.subarray(0, Math.floor(whole.length / 2)));
    const refusedTarget = join(freshDir(), "refused");
    const refused = cli(["restore", damaged, "--data-dir", refusedTarget]);
    assert.notEqual(await refused.exit, 0, refused.output());
    assert.match(refused.output(), /not a whole Bulwark backup/);
    assert.throws(() => statSync(refusedTarget), "nothing made for a damaged archive");

    // A non-empty directory is refused.
    const restoredDir = join(freshDir(), "restored");
    const busy = cli(["restore", file, "--data-dir", dir]);
    assert.notEqual(await busy.exit, 0);
    assert.match(busy.output(), /not empty/);

    assert.match(await run(["restore", file, "--data-dir", restoredDir]), /all verified/);
    // every push is read back below, a few hundred requests in a row: past the limit's burst too
    const restored = await serve(restoredDir, "--no-rate-limit");
    try {
      const again = await adminToken(restoredDir);
      const restoredApi = rest(restored.url, again);
      const missing: string[] = [];
      for (const g of groupsBefore) {
        const got = await restoredApi(`groups/${g.uid}`);
        if (got.status !== 200 || ((await got.json()) as { name: string }).name !== g.name) missing.push(g.name);
      }
      assert.deepEqual(missing, [], `every group acknowledged before the backup (${groupsBefore.length}) is there`);

      // A login: the registry's token endpoint takes the API token as a password (as docker login does).
      const login = new OciClient(restored.url, { credential: { username: "_token", password: again } });
      const verified = new Set<string>();
      let restoredPushes = 0;
      for (const p of pushes) {
        const res = await login.getManifest(p.repo, p.tag);
        if (pushesBefore.includes(p)) assert.equal(res.status, 200, `${p.repo}:${p.tag} pushed before the backup`);
        if (res.status !== 200) continue;
        restoredPushes++;
        assert.equal(res.headers.get("docker-content-digest"), p.manifest);
        // every blob of every manifest the restored database holds verifies
        for (const digest of p.blobs) {
          const blob = await login.get(`/v2/${p.repo}/blobs/${digest}`);
          assert.equal(blob.status, 200, `${digest} of ${p.repo}:${p.tag}`);
          assert.equal(digestOf(blob.body), digest, `${digest} of ${p.repo}:${p.tag} has its content`);
          verified.add(digest);
        }
      }
      assert.ok(restoredPushes >= pushesBefore.length);
      assert.ok(verified.size >= pushesBefore.length * 2, `${verified.size} blobs verified`);
      // the load really ran during the backup, or "before" would prove little (reported, not required)
      console.log(`during the backup: ${duringBackup.groups} groups and ${duringBackup.pushes} pushes acknowledged`);
    } finally {
      restored.child.kill("SIGTERM");
      assert.equal(await restored.exit, 0, restored.output());
    }
  });

  it("the archive holds PostgreSQL's files only; restored while the source serves, it serves on the same host; crafted archives are refused", async () => {
    const dir = freshDir();
    // A public API URL that is not this host's: the backup calls the address the server listens on.
    const source = await serve(dir, "--api-url", "http://bulwark.invalid:9");
    try {
      const registryHost = new URL(source.url).host;
      const oci = new OciClient(source.url, { bearer: await adminToken(dir, registryHost) });
      const created = await rest(source.url, await adminToken(dir))("groups", { name: "backup-files" });
      assert.equal(created.status, 200, await created.text());
      const pushed = await pushImage(oci, "backup-files/app", 1);
      assert.ok(existsSync(join(dir, "registry")), "the blobs are under the data directory (the default)");

      // --server: plain http to another host is refused before anything is sent
      const file = join(freshDir(), "backup.tar.gz");
      const insecure = cli(["backup", file, "--server", "http://192.0.2.1:8080"], cliEnv({ BULWARK_TOKEN: "x.y.z" }));
      assert.notEqual(await insecure.exit, 0);
      assert.match(insecure.output(), /plain http to another host.*--insecure/s);
      assert.ok(!existsSync(file));

      const out = await run(["backup", file, "--data-dir", dir]);
      assert.match(out, /asking the server at http:\/\/(127\.0\.0\.1|\[::1\]|localhost):\d+ /, out);

      const entries = await entriesOf(file);
      assert.equal(entries[0]?.name, "manifest.json");
      const manifest = JSON.parse(entries[0]!.body.toString("utf8")) as BackupManifest;
      const names = entries.map((e) => e.name);
      const database = names.filter((n) => n.startsWith("database/")).map((n) => n.slice("database/".length));
      assert.deepEqual(
        database,
        manifest.database.files.map((f) => f.name),
        "the manifest lists every database file",
      );
      assert.ok(database.includes("PG_VERSION") && database.some((n) => n.startsWith("pg_wal/")), database.join(" "));
      for (const name of database)
        assert.match(
          name,
          /^(PG_VERSION|postgresql(\.auto)?\.conf|pg_hba\.conf|pg_ident\.conf|postmaster\.opts|(base|global|pg_[a-z_]+)\/.+)$/,
          name,
        );
      for (const forbidden of ["bulwark.lock", "postmaster.pid", "public-urls.json", "issuer-signing-key.json"])
        assert.ok(!names.some((n) => n.endsWith(forbidden)), `${forbidden} is not in the archive`);
      assert.ok(!names.some((n) => n.includes("registry")), "no entry of the blob directory: blobs are blob entries");
      const blobs = names.filter((n) => n.startsWith("blobs/"));
      assert.deepEqual(blobs.sort(), manifest.blobs.map((b) => `blobs/${b.digest.replace(":", "/")}`).sort());
      for (const digest of pushed.blobs) assert.ok(blobs.includes(`blobs/${digest.replace(":", "/")}`), digest);
      assert.deepEqual(
        names.filter((n) => !n.startsWith("database/") && !n.startsWith("blobs/")),
        ["manifest.json", "key-encryption-key"],
      );
      assert.ok(entries.every((e) => e.type === "file"));

      // Restored while the source still serves (its lock held by a live process on this host).
      const restoredDir = join(freshDir(), "restored");
      assert.match(await run(["restore", file, "--data-dir", restoredDir]), /all verified/);
      for (const stray of ["bulwark.lock", "postmaster.pid", "public-urls.json", "issuer-signing-key.json"])
        assert.ok(!existsSync(join(restoredDir, stray)), `no ${stray} in the restored directory`);
      const restored = await serve(restoredDir);
      try {
        const login = new OciClient(restored.url, {
          credential: { username: "_token", password: await adminToken(restoredDir) },
        });
        const res = await login.getManifest(pushed.repo, pushed.tag);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get("docker-content-digest"), pushed.manifest);
      } finally {
        restored.child.kill("SIGTERM");
        assert.equal(await restored.exit, 0, restored.output());
      }

      // Crafted archives: refused, and nothing is left beside the target (nor anywhere `../` points).
      const refuse = async (what: string, crafted: (ArchiveEntry & { size?: number })[], message: RegExp) => {
        const parent = freshDir();
        const craftedFile = join(freshDir(), `${what}.tar.gz`);
        await archiveOf(craftedFile, crafted);
        await assert.rejects(restoreArchive({ file: craftedFile, dataDir: join(parent, "target") }), message, what);
        assert.deepEqual(readdirSync(parent), [], `${what}: nothing left`);
      };
      const [first, ...others] = entries;
      const manifestWith = (database: BackupManifest["database"]) => ({
        ...first!,
        body: Buffer.from(JSON.stringify({ ...manifest, database })),
      });
      const escape = { name: "database/../../escape", type: "file", body: Buffer.from("out") };
      await refuse("dot-dot entry", [first!, escape, ...others], /unexpected entry/);
      await refuse(
        "dot-dot in the manifest",
        [
          manifestWith({
            ...manifest.database,
            files: [...manifest.database.files, { name: "../escape", size: 3, sha256: "0".repeat(64) }],
          }),
          ...others,
        ],
        /does not describe the database/,
      );
      await refuse(
        "a lock file in the manifest",
        [
          manifestWith({
            ...manifest.database,
            files: [...manifest.database.files, { name: "bulwark.lock", size: 3, sha256: "0".repeat(64) }],
          }),
          ...others,
        ],
        /does not describe the database/,
      );
      const oversized = (name: string) => [
        first!,
        ...others.map((e) => (e.name === name ? { ...e, size: e.body.length + 4096 } : e)),
      ];
      await refuse("an oversized blob", oversized(blobs[0]!), /not the size its manifest gives/);
      await refuse("an oversized database file", oversized("database/PG_VERSION"), /not the size its manifest gives/);
    } finally {
      source.child.kill("SIGTERM");
      assert.equal(await source.exit, 0, source.output());
    }
  });

  it("a backup that cannot finish (its reader gone, a blob shorter than recorded) fails alone: the server serves on and collects garbage again", async () => {
    const dir = freshDir();
    const source = await serve(dir);
    try {
      const token = await adminToken(dir);
      const oci = new OciClient(source.url, { bearer: await adminToken(dir, new URL(source.url).host) });
      const created = await rest(source.url, token)("groups", { name: "backup-broken" });
      assert.equal(created.status, 200, await created.text());
      const pushed = await pushImage(oci, "backup-broken/app", 1);
      // A collection answering proves the backup let go of the registry (they take turns).
      const collect = async () => {
        const res = await fetch(`${source.url}/bulwark/registry/v1/garbage:collect`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ dryRun: false }),
        });
        assert.equal(res.status, 200, await res.text());
      };

      // The reader goes away after the first bytes.
      const res = await fetch(`${source.url}${BACKUP_PATH}`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      assert.ok(!(await reader.read()).done);
      await reader.cancel();
      await collect();

      // A blob shorter than the database records: the archive errors instead of passing for a whole one.
      const layer = pushed.blobs[1]!.slice("sha256:".length);
      writeFileSync(join(dir, "registry", "blobs", "sha256", layer.slice(0, 2), layer), "short");
      const file = join(freshDir(), "backup.tar.gz");
      const broken = cli(["backup", file, "--data-dir", dir]);
      assert.notEqual(await broken.exit, 0, broken.output());
      assert.ok(!existsSync(file), "no partial archive is left under the name");
      assert.equal((await fetch(`${source.url}/livez`)).status, 200);
      await collect();
    } finally {
      source.child.kill("SIGTERM");
      assert.equal(await source.exit, 0, source.output());
    }
  });

  for (const backend of backends()) {
    it(`${backend}: the backup route is the operator's only, and needs an embedded data directory`, async () => {
      const server = await startTestServer(backend);
      try {
        const anonymous = await fetch(`${server.url}${BACKUP_PATH}`);
        assert.equal(anonymous.status, 401, await anonymous.text());
        // an identity with every capability on its organization is still not the platform's operator
        const api = restClient(server.url, server.operatorToken);
        const org = await createGroup(api, undefined, `backup-authz-${backend}`);
        const owner = await createIdentity(api, org.uid, "owner", "owner");
        await createRoleBinding(api, org.uid, owner.uid, builtinRoleUid("owner"));
        const someone = await fetch(`${server.url}${BACKUP_PATH}`, {
          headers: { authorization: `Bearer ${await server.tokenFor(owner.uid)}` },
        });
        assert.equal(someone.status, 403, await someone.text());
        // PostgreSQL: its own tools (the README's procedure); a test server's in-memory PGlite: nothing durable
        const operator = await fetch(`${server.url}${BACKUP_PATH}`, {
          headers: { authorization: `Bearer ${server.operatorToken}` },
        });
        assert.equal(operator.status, 400, "FAILED_PRECONDITION");
        const body = (await operator.json()) as { code: number; message: string };
        assert.equal(body.code, 9);
        assert.match(body.message, backend === "postgres" ? /PostgreSQL.*README/ : /not in a data directory/);
      } finally {
        await server.close();
      }
    });
  }
});
