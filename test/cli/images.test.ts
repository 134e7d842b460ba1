// `bulwark images ...`, `bulwark auth pull-token ...`, `bulwark auth configure-docker` and the
// docker-credential-bulwark helper as a user runs them against a real server (the commands
// in-process, test/support/cli.ts; the helper as its real binary, over docker's protocol), with an
// image pushed over the registry protocol so tags, images and history have content.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { decodeJwt } from "jose";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { CliHome, collapse, normalize, runCli, type CliOptions } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { descriptorOf, digestOf, MEDIA_TYPES, OciClient } from "../support/oci.js";
import { startTestServer, type TestServer } from "../support/server.js";

const HELPER = "docker-credential-bulwark.js";

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Pushes a one-layer image as `name:tag`; its manifest's digest. */
async function pushImage(oci: OciClient, name: string, tag: string, note: string): Promise<string> {
  const config = JSON.stringify({ architecture: "amd64", os: "linux", config: { Labels: { note } } });
  const layer = `layer of ${note}`;
  for (const blob of [config, layer]) {
    const res = await oci.postBlob(name, blob);
    assert.equal(res.status, 201, res.body.toString());
  }
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.ociManifest,
    config: descriptorOf(MEDIA_TYPES.ociConfig, config),
    layers: [descriptorOf(MEDIA_TYPES.ociLayer, layer)],
  });
  const put = await oci.putManifest(name, tag, manifest, MEDIA_TYPES.ociManifest);
  assert.equal(put.status, 201, put.body.toString());
  return digestOf(manifest);
}

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

for (const backend of backends()) {
  describe(`bulwark images, pull tokens and docker credentials [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let org: string;
    let registryHost: string;
    /** the digests `acme/app:v1` pointed to, oldest first */
    const v1Digests: string[] = [];
    let latestDigest: string;

    const cli = (args: string[], options: CliOptions = {}) =>
      runCli(home, args, {
        ...options,
        env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken, ...options.env },
      });
    /** Runs and expects success; stdout. */
    const ok = async (args: string[], options: CliOptions = {}) => {
      const res = await cli(args, options);
      assert.equal(res.code, 0, `${args.join(" ")}: ${res.stderr}`);
      return res.stdout;
    };
    const table = (text: string) => collapse(normalize(text));
    const manifestStatus = async (authorization: string, reference = "v1") =>
      (
        await fetch(`${server.url}/v2/acme/app/manifests/${reference}`, {
          headers: { authorization, accept: MEDIA_TYPES.ociManifest },
        })
      ).status;

    before(async () => {
      server = await startTestServer(backend);
      home = new CliHome();
      registryHost = server.tokens.urls.registryAudience;
      org = (await restClient(server.url, server.operatorToken).post("/iam/v2beta1/groups", { name: "acme" })).body.uid;
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, { audience: [registryHost] });
      const oci = new OciClient(server.url, { credential: { username: "_token", password: registryToken } });
      latestDigest = await pushImage(oci, "acme/app", "latest", "first");
      v1Digests.push(await pushImage(oci, "acme/app", "v1", "first"));
      // Distinct update times (kept to the millisecond): the first push was stamped by now, so the
      // second starts once the clock has left this millisecond.
      const firstPushed = Date.now();
      while (Date.now() <= firstPushed) await new Promise((resolve) => setImmediate(resolve));
      v1Digests.push(await pushImage(oci, "acme/app", "v1", "second"));
    });
    after(async () => {
      home?.close();
      await server?.close();
    });

    it("images repos: create, list, update and delete, in every output format", async () => {
      const created = await ok(["images", "repos", "create", "web", "--parent", org, "--description", "the site"]);
      assert.equal(table(created), "ID  NAME  DESCRIPTION\n<uid>  acme/web  the site\n");
      const web = JSON.parse(
        await ok([
          "images",
          "repos",
          "create",
          "tools/builder",
          "--parent",
          org,
          "--catalog-tier",
          "devtools",
          "--alias",
          "b",
          "-o",
          "json",
        ]),
      );
      assert.match(web.uid, new RegExp(`^${org}/[0-9a-f]{16}$`));
      assert.deepEqual(
        { name: web.name, catalogTier: web.catalogTier, aliases: web.aliases },
        { name: "tools/builder", catalogTier: "CATALOG_TIER_DEVTOOLS", aliases: ["b"] },
      );

      assert.equal(
        table(await ok(["images", "repos", "list", "--parent", org])),
        "ID  NAME  DESCRIPTION\n<uid>  acme/app\n<uid>  acme/tools/builder\n<uid>  acme/web  the site\n",
      );
      assert.equal(
        table(await ok(["images", "repos", "list", "--parent", org, "-o", "wide"])),
        "ID  NAME  DESCRIPTION  TIER  BUNDLES  ALIASES  ACTIVE TAGS  CREATED  UPDATED\n" +
          "<uid>  acme/app  <time>  <time>\n" +
          "<uid>  acme/tools/builder  devtools  b  <time>  <time>\n" +
          "<uid>  acme/web  the site  <time>  <time>\n",
      );
      const listed = JSON.parse(await ok(["images", "repos", "list", "--parent", org, "--name", "web", "-o", "json"]));
      assert.deepEqual(
        listed.map((r: { name: string; description: string }) => [r.name, r.description]),
        [["web", "the site"]],
      );
      const ids = (await ok(["images", "repos", "list", "--parent", org, "-o", "id", "--limit", "2"]))
        .trim()
        .split("\n");
      assert.equal(ids.length, 2);
      assert.equal(
        normalize(await ok(["images", "repos", "list", "--parent", org, "--name", "web", "-o", "terse"])),
        "<uid>\tacme/web\tthe site\n",
      );

      const updated = await ok([
        "images",
        "repos",
        "update",
        "acme/web",
        "--description",
        "the storefront",
        "-o",
        "json",
      ]);
      assert.equal(JSON.parse(updated).description, "the storefront");
      assert.equal(JSON.parse(updated).name, "web");
      const renamed = await ok(["images", "repos", "update", web.uid, "--name", "builder"]);
      assert.equal(table(renamed), "ID  NAME  DESCRIPTION\n<uid>  acme/builder\n");
      const noChange = await cli(["images", "repos", "update", web.uid]);
      assert.equal(noChange.code, 2);
      assert.match(noChange.stderr, /nothing to change/);

      const refused = await cli(["images", "repos", "delete", "acme/web"]);
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /Pass --yes/);
      assert.equal(
        table(await ok(["images", "repos", "delete", "acme/web", "--yes"])),
        "deleted repo acme/web (<uid>)\n",
      );
      assert.equal(await ok(["images", "repos", "delete", web.uid, "--yes", "-o", "id"]), `${web.uid}\n`);
      assert.equal(
        table(await ok(["images", "repos", "list", "--parent", org])),
        "ID  NAME  DESCRIPTION\n<uid>  acme/app\n",
      );
    });

    it("images tags list: a repo's tags by <org>/<image> or uid", async () => {
      const expected =
        "ID  NAME  DIGEST  VULNS  UPDATED  DEPRECATED\n" +
        `<uid>  latest  ${latestDigest.slice(0, 18)}…  -  <time>  no\n` +
        `<uid>  v1  ${v1Digests[1]!.slice(0, 18)}…  -  <time>  no\n`;
      assert.equal(table(await ok(["images", "tags", "list", "acme/app"])), expected);
      assert.equal(table(await ok(["images", "tags", "list", `${org}/app`])), expected);
      const tags = JSON.parse(await ok(["images", "tags", "list", "acme/app", "-o", "json"]));
      assert.deepEqual(
        tags.map((t: { name: string; digest: string }) => [t.name, t.digest]),
        [
          ["latest", latestDigest],
          ["v1", v1Digests[1]],
        ],
      );
      const repoUid = tags[0].uid.slice(0, tags[0].uid.lastIndexOf("/"));
      assert.equal(
        table(await ok(["images", "tags", "list", repoUid, "-o", "wide"]))
          .split("\n")[1]!
          .split("  ")[2],
        latestDigest,
      );
      assert.equal(await ok(["images", "tags", "list", repoUid, "-o", "id", "--limit", "1"]), `${tags[0].uid}\n`);
    });

    it("images list: each repo with its tags", async () => {
      assert.equal(
        table(await ok(["images", "list", "--parent", org])),
        "REPO  TAGS  VULNS  UPDATED\nacme/app  latest, v1  -  <time>\n",
      );
      assert.equal(
        table(await ok(["images", "list", "--parent", org, "-o", "wide"])),
        `ID  REPO  TAGS  DIGESTS  VULNS  UPDATED\n<uid>  acme/app  latest, v1  ${latestDigest}, ${v1Digests[1]}  -  <time>\n`,
      );
      const [image] = JSON.parse(await ok(["images", "list", "-o", "json"]));
      assert.equal(image.name, "app");
      assert.deepEqual(
        image.tags.map((t: { name: string }) => t.name),
        ["latest", "v1"],
      );
      assert.equal(normalize(await ok(["images", "list", "-o", "terse"])), "acme/app\tlatest, v1\t-\t<time>\n");
    });

    it("images history: the digests a tag pointed to, oldest first", async () => {
      const out = await ok(["images", "history", "acme/app:v1"]);
      assert.equal(collapse(normalize(out)), `UPDATED  DIGEST\n<time>  ${v1Digests[0]}\n<time>  ${v1Digests[1]}\n`);
      assert.equal(
        await ok(["images", "history", `${registryHost}/acme/app:v1`, "-o", "id"]),
        v1Digests.join("\n") + "\n",
      );
      const json = JSON.parse(await ok(["images", "history", "acme/app:v1", "-o", "json"]));
      assert.deepEqual(
        json.map((h: { digest: string }) => h.digest),
        v1Digests,
      );
      const later = await ok(["images", "history", "acme/app:v1", "--start", json[1].updateTimestamp, "-o", "id"]);
      assert.equal(later, `${v1Digests[1]}\n`);
      assert.equal(await ok(["images", "history", "acme/app", "-o", "id"]), `${latestDigest}\n`); // tag default: latest
      const badTime = await cli(["images", "history", "acme/app:v1", "--end", "yesterday"]);
      assert.equal(badTime.code, 2);
      assert.match(badTime.stderr, /--end must be an RFC 3339 time/);
      const unknown = await cli(["images", "history", "acme/nope:v1"]);
      assert.equal(unknown.code, 1);
      assert.match(unknown.stderr, /acme\/nope:v1/);
    });

    it("auth pull-token create: a docker login that pulls until its identity is deleted", async () => {
      const created = await cli(["auth", "pull-token", "create", "--parent", org, "--ttl", "24h"]);
      assert.equal(created.code, 0, created.stderr);
      const m = /^docker login (\S+) --username (\S+) --password (\S+)\n$/.exec(created.stdout);
      assert.ok(m, created.stdout);
      const [, registry, username, password] = m;
      assert.equal(registry, registryHost);
      assert.match(username!, new RegExp(`^${org}/[0-9a-f]{16}$`));
      assert.match(created.stderr, /revoke it with `bulwark iam identities delete /);
      const claims = decodeJwt(password!);
      assert.equal(claims.aud, registryHost);
      assert.match(claims.sub!, /^pull-token-[0-9a-f]{16}$/);
      assert.equal(claims.exp! - claims.iat!, 24 * 3600);

      // Basic credentials straight on the registry, and through its token endpoint.
      assert.equal(await manifestStatus(basic(username!, password!)), 200);
      const token = await fetch(`${server.url}/token?scope=repository:acme/app:pull`, {
        headers: { authorization: basic(username!, password!) },
      });
      assert.equal(token.status, 200);
      assert.equal(await manifestStatus(`Bearer ${((await token.json()) as { token: string }).token}`), 200);

      const identity = await restClient(server.url, server.operatorToken).get(`/iam/v2beta1/identities/${username}`);
      assert.equal(identity.body.staticKeys.subject, claims.sub);

      const json = JSON.parse(
        await ok(["auth", "pull-token", "create", "--parent", org, "--name", "ci", "-o", "json"]),
      );
      assert.deepEqual(Object.keys(json).sort(), [
        "command",
        "expiration",
        "identity",
        "name",
        "password",
        "registry",
        "username",
      ]);
      assert.equal(json.name, "ci");
      const days = (Date.parse(json.expiration) - Date.now()) / 86_400_000;
      assert.ok(days > 29.9 && days <= 30, `default ttl: ${days} days`);
      const id = (await ok(["auth", "pull-token", "create", "--parent", org, "--name", "short", "-o", "id"])).trim();
      assert.match(id, new RegExp(`^${org}/[0-9a-f]{16}$`));

      // Identities list in uid order: compare the rows sorted.
      const [header, ...rows] = table(await ok(["auth", "pull-token", "list", "--parent", org]))
        .trimEnd()
        .split("\n");
      assert.equal(header, "ID  NAME  EXPIRES  GROUP");
      assert.deepEqual(
        rows.sort(),
        [`<uid>  ${claims.sub}  <time>  acme`, "<uid>  ci  <time>  acme", "<uid>  short  <time>  acme"].sort(),
      );
      const listed = JSON.parse(await ok(["auth", "pull-token", "list", "-o", "json"]));
      assert.deepEqual(listed.map((i: { uid: string }) => i.uid).sort(), [username, json.identity, id].sort());

      // Revoked by deleting the identity: with `iam identities delete`, or `auth pull-token delete`.
      assert.equal(await manifestStatus(basic(json.username, json.password)), 200);
      await ok(["iam", "identities", "delete", json.identity, "--yes"]);
      assert.equal(await manifestStatus(basic(json.username, json.password)), 401);
      const notPullToken = await cli(["auth", "pull-token", "delete", `${org}/0123456789abcdef`, "--yes"]);
      assert.equal(notPullToken.code, 1);
      const revoked = await ok(["auth", "pull-token", "delete", username!, "--yes"]);
      assert.equal(revoked, `revoked pull token ${claims.sub} (${username})\n`);
      assert.equal(
        (await restClient(server.url, server.operatorToken).get(`/iam/v2beta1/identities/${username}`)).status,
        404,
      );
      assert.equal(await manifestStatus(basic(username!, password!)), 401);
      assert.equal(await ok(["auth", "pull-token", "list", "--parent", org, "-o", "id"]), `${id}\n`);
    });

    it("auth pull-token create: --ttl is checked, --parent is required", async () => {
      const tooLong = await cli(["auth", "pull-token", "create", "--parent", org, "--ttl", "8761h"]);
      assert.equal(tooLong.code, 2);
      assert.match(tooLong.stderr, /--ttl must be at most 8760h/);
      const garbled = await cli(["auth", "pull-token", "create", "--parent", org, "--ttl", "a week"]);
      assert.equal(garbled.code, 2);
      assert.match(garbled.stderr, /--ttl must be a duration/);
      const noParent = await cli(["auth", "pull-token", "create"]);
      assert.equal(noParent.code, 2);
      assert.match(noParent.stderr, /needs a group: pass --parent/);
    });

    it("auth configure-docker: sets the credential helper, keeping the rest of docker's config", async () => {
      const dockerDir = join(home.dir, "docker-config");
      mkdirSync(dockerDir, { recursive: true });
      const existing = {
        auths: { "other.example": { auth: "dXNlcjpwYXNz" } },
        credHelpers: { "gcr.io": "gcloud" },
        psFormat: "x",
      };
      writeFileSync(join(dockerDir, "config.json"), JSON.stringify(existing), { mode: 0o644 });
      const out = await ok(["auth", "configure-docker"], { env: { DOCKER_CONFIG: dockerDir } });
      assert.match(out, new RegExp(`docker-credential-bulwark for ${registryHost}`));
      const written = JSON.parse(readFileSync(join(dockerDir, "config.json"), "utf8"));
      assert.deepEqual(written, { ...existing, credHelpers: { "gcr.io": "gcloud", [registryHost]: "bulwark" } });
      assert.equal(statSync(join(dockerDir, "config.json")).mode & 0o777, 0o644);

      // No DOCKER_CONFIG: ~/.docker/config.json, created private.
      const json = JSON.parse(
        await ok(["auth", "configure-docker", "--registry", "registry.example.com", "-o", "json"]),
      );
      const path = join(home.dir, ".docker", "config.json");
      assert.deepEqual(json, {
        registry: "registry.example.com",
        configFile: path,
        credHelper: "bulwark",
        helper: null,
      });
      assert.deepEqual(JSON.parse(readFileSync(path, "utf8")), { credHelpers: { "registry.example.com": "bulwark" } });
      assert.equal(statSync(path).mode & 0o777, 0o600);
      const bad = await cli(["auth", "configure-docker", "--registry", "not a host"]);
      assert.equal(bad.code, 2);
    });

    it("docker-credential-bulwark: get gives a registry token the registry accepts; store/erase/list", async () => {
      for (const input of [`${registryHost}\n`, `https://${registryHost}`]) {
        const got = await cli(["get"], { bin: HELPER, input });
        assert.equal(got.code, 0, got.stderr);
        const creds = JSON.parse(got.stdout);
        assert.deepEqual(Object.keys(creds), ["ServerURL", "Username", "Secret"]);
        assert.equal(creds.ServerURL, input.trim());
        assert.equal(creds.Username, "_token");
        assert.deepEqual(decodeJwt(creds.Secret).aud, [registryHost]);
        assert.equal(await manifestStatus(basic(creds.Username, creds.Secret)), 200);
      }
      for (const action of ["store", "erase"]) {
        const res = await cli([action], { bin: HELPER, input: '{"ServerURL":"x","Username":"u","Secret":"s"}' });
        assert.deepEqual(res, { code: 0, stdout: "", stderr: "" });
      }
      assert.deepEqual(JSON.parse((await cli(["list"], { bin: HELPER })).stdout), { [registryHost]: "_token" });

      const noToken = await cli(["get"], { bin: HELPER, input: registryHost, env: { BULWARK_TOKEN: undefined } });
      assert.equal(noToken.code, 1);
      assert.match(noToken.stdout, /^docker-credential-bulwark: not logged in/, "docker shows the helper's stdout");
      const wrongHost = await cli(["get"], { bin: HELPER, input: "elsewhere.example.com" });
      assert.equal(wrongHost.code, 1);
      assert.match(wrongHost.stdout, /not an audience of this server/);
      const unknownAction = await cli(["fetch"], { bin: HELPER });
      assert.equal(unknownAction.code, 1);
      assert.match(unknownAction.stdout, /Usage: docker-credential-bulwark <get\|store\|erase\|list\|version>/);
    });

    it("errors: unknown repos, a missing --parent, an unreachable server", async () => {
      const unknownRepo = await cli(["images", "tags", "list", "acme/nope"]);
      assert.equal(unknownRepo.code, 1);
      assert.match(unknownRepo.stderr, new RegExp(`no repo "nope" in acme \\(${org}\\) is visible to you`));
      const unknownOrg = await cli(["images", "tags", "list", "globex/app"]);
      assert.equal(unknownOrg.code, 1);
      assert.match(unknownOrg.stderr, /no organization named "globex" is visible to you/);
      const notARef = await cli(["images", "repos", "delete", "app", "--yes"]);
      assert.equal(notARef.code, 2);
      assert.match(notARef.stderr, /neither a repo uid nor <organization>\/\[<folder>\/…\]<image>/);

      const noParent = await cli(["images", "repos", "create", "orphan"]);
      assert.equal(noParent.code, 2);
      assert.match(noParent.stderr, /images repos create needs a group: pass --parent/);

      const down = `http://127.0.0.1:${await closedPort()}`;
      for (const args of [
        ["images", "repos", "list"],
        ["images", "history", "acme/app:v1"],
        ["auth", "pull-token", "list"],
      ]) {
        const res = await cli(args, { env: { BULWARK_API_URL: down } });
        assert.equal(res.code, 1, `${args.join(" ")}: ${res.stderr}`);
        assert.ok(res.stderr.includes(`cannot reach ${down}: connection refused`), `${args.join(" ")}: ${res.stderr}`);
      }
    });

    it("every command shows an example in --help", async () => {
      const commands = [
        ["images", "list"],
        ["images", "repos", "list"],
        ["images", "repos", "create"],
        ["images", "repos", "update"],
        ["images", "repos", "delete"],
        ["images", "tags", "list"],
        ["images", "history"],
        ["auth", "pull-token", "create"],
        ["auth", "pull-token", "list"],
        ["auth", "pull-token", "delete"],
        ["auth", "configure-docker"],
      ];
      for (const command of commands) {
        const help = await ok([...command, "--help"]);
        assert.match(help, /\nExamples:\n {2}bulwark /, command.join(" "));
        assert.match(help, /-o, --output <format>/, command.join(" "));
      }
      for (const command of [
        ["auth", "pull-token"],
        ["auth", "pull-token", "create"],
      ])
        assert.match(await ok([...command, "--help"]), /bulwark iam\s+identities delete/);
    });
  });
}
