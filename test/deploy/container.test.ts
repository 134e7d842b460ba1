// deploy/Dockerfile and deploy/compose.yaml, checked as far as this machine allows: no container
// engine here can pull a base image, so nothing is built or started (README says so). What is
// checked: the compose file parses (the `yaml` package) and names files that exist and secrets
// that deploy/env.example lists; the Dockerfile copies files that exist, runs as a non-root user,
// and its HEALTHCHECK command, run as is, tells a serving Bulwark from a port where none answers.
// Backend-independent (the health check's server runs on its embedded database), so it runs once.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parse } from "yaml";
import { serveProcess, type ServeProcess } from "../support/cli.js";
import { withinHang } from "../support/wait.js";

const ROOT = process.cwd();
const DEPLOY = join(ROOT, "deploy");
const dockerfile = readFileSync(join(DEPLOY, "Dockerfile"), "utf8");

/** The Dockerfile's instructions: continuation lines joined, comments dropped. */
function instructions(text: string): { op: string; args: string }[] {
  const joined = text
    .split("\n")
    .filter((line) => !/^\s*#/.test(line))
    .join("\n")
    .replace(/\\\n/g, " ");
  return joined
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const [op, ...rest] = line.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(" ") };
    });
}

interface ComposeService {
  build?: { context: string; dockerfile: string };
  image?: string;
  read_only?: boolean;
  environment?: Record<string, string>;
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
}

describe("the container recipe and the compose file", () => {
  const dir = mkdtempSync(join(tmpdir(), "bulwark-container-"));
  let server: ServeProcess | undefined;
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("Dockerfile: two stages from node:20-bookworm-slim, copies what exists, a non-root user, the data volume", () => {
    const steps = instructions(dockerfile);
    const from = steps.filter((s) => s.op === "FROM").map((s) => s.args);
    assert.deepEqual(from, ["node:20-bookworm-slim AS build", "node:20-bookworm-slim"]);
    for (const copy of steps.filter((s) => s.op === "COPY" && !s.args.startsWith("--from"))) {
      const sources = copy.args.split(/\s+/).slice(0, -1);
      for (const source of sources) assert.ok(existsSync(join(ROOT, source)), `COPY ${source}: in the build context`);
    }
    const final = steps.slice(steps.findLastIndex((s) => s.op === "FROM"));
    const user = final.filter((s) => s.op === "USER").map((s) => s.args);
    assert.deepEqual(user, ["10001:10001"]);
    assert.deepEqual(
      final.filter((s) => ["VOLUME", "EXPOSE", "STOPSIGNAL"].includes(s.op)).map((s) => `${s.op} ${s.args}`),
      ["VOLUME /var/lib/bulwark", "EXPOSE 8080", "STOPSIGNAL SIGTERM"],
    );
    const env = final.find((s) => s.op === "ENV")!.args;
    // nothing written outside the volume and /tmp (the root filesystem may be read-only)
    assert.match(env, /HOME=\/var\/lib\/bulwark\b/);
    assert.match(env, /BULWARK_DATA_DIR=\/var\/lib\/bulwark\/data\b/);
    const entrypoint = JSON.parse(final.find((s) => s.op === "ENTRYPOINT")!.args) as string[];
    // node runs the installed package's CLI itself (not npx, which keeps SIGTERM from the server)
    assert.deepEqual(entrypoint, ["node", "/opt/bulwark/node_modules/bulwark/bin/bulwark.js"]);
    const manifest = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { bin: Record<string, string> };
    assert.equal(manifest.bin.bulwark, "bin/bulwark.js");
  });

  it("Dockerfile HEALTHCHECK: its command exits 0 against a serving Bulwark and 1 where none answers", async () => {
    const healthcheck = instructions(dockerfile).find((s) => s.op === "HEALTHCHECK")!.args;
    const command = JSON.parse(healthcheck.slice(healthcheck.indexOf("CMD ") + 4)) as string[];
    assert.equal(command[0], "node");
    const check = (port: string) =>
      withinHang(
        new Promise<number>((done) =>
          execFile(process.execPath, command.slice(1), { env: { ...process.env, BULWARK_PORT: port } }, (err) =>
            done(err ? (typeof err.code === "number" ? err.code : -1) : 0),
          ),
        ),
        "the health check's exit",
      );
    server = await serveProcess(["--port", "0", "--data-dir", join(dir, "data")]);
    assert.equal(await check(new URL(server.url).port), 0);
    // a port that was free a moment ago: nothing listens there
    const free = await new Promise<number>((done) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => done(port));
      });
    });
    assert.equal(await check(String(free)), 1);
  });

  it("compose.yaml: two replicas of the image on PostgreSQL and MinIO, behind a proxy, secrets from deploy/.env", () => {
    const text = readFileSync(join(DEPLOY, "compose.yaml"), "utf8");
    const compose = parse(text, { merge: true }) as { services: Record<string, ComposeService> };
    const services = compose.services;
    assert.deepEqual(Object.keys(services).sort(), ["bucket", "bulwark-1", "bulwark-2", "minio", "postgres", "proxy"]);
    for (const name of ["bulwark-1", "bulwark-2"]) {
      const replica = services[name]!;
      assert.ok(replica.build, `${name} is built`);
      assert.ok(existsSync(join(resolve(DEPLOY, replica.build.context), replica.build.dockerfile)));
      assert.equal(replica.read_only, true, `${name}: read-only root filesystem`);
      const env = replica.environment!;
      assert.match(env.DATABASE_URL!, /^postgres:\/\/bulwark:\$\{POSTGRES_PASSWORD:\?[^}]*\}@postgres:5432\/bulwark$/);
      assert.match(env.BULWARK_KEY_ENCRYPTION_KEY!, /^\$\{BULWARK_KEY_ENCRYPTION_KEY:\?/);
      assert.equal(env.BULWARK_S3_ENDPOINT, "http://minio:9000");
      assert.equal(env.BULWARK_TRUST_PROXY, "true", "behind the proxy");
      assert.equal(replica.depends_on?.postgres?.condition, "service_healthy");
      assert.equal(replica.depends_on?.bucket?.condition, "service_completed_successfully");
    }
    assert.deepEqual(services["bulwark-1"], services["bulwark-2"], "the replicas are configured alike");
    for (const name of ["postgres", "minio"])
      assert.ok(services[name]!.healthcheck?.test.length, `${name} healthcheck`);
    // files it mounts exist
    for (const service of Object.values(services))
      for (const volume of service.volumes ?? []) {
        const source = volume.split(":")[0]!;
        if (source.startsWith(".")) assert.ok(existsSync(resolve(DEPLOY, source)), `${source} exists`);
      }
    // every secret it requires is one env.example names
    const required = new Set([...text.matchAll(/\$\{(\w+):\?/g)].map((m) => m[1]!));
    const listed = new Set(
      readFileSync(join(DEPLOY, "env.example"), "utf8")
        .split("\n")
        .filter((line) => /^\w+=/.test(line))
        .map((line) => line.slice(0, line.indexOf("="))),
    );
    assert.deepEqual([...required].filter((name) => !listed.has(name)).sort(), []);
    assert.ok(required.has("BULWARK_KEY_ENCRYPTION_KEY"));
    // the secrets file stays out of git and out of the image's build context
    assert.match(readFileSync(join(ROOT, ".gitignore"), "utf8"), /^deploy\/\.env$/m);
    assert.match(readFileSync(join(ROOT, ".dockerignore"), "utf8"), /^deploy\/\.env$/m);
  });
});
