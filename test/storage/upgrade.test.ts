// A database made before feature modules existed (test/fixtures/pre-modules-database.sql: a
// pg_dump of a PostgreSQL database migrated and filled by commit c096711, whose migrations lived
// in src/store/migrations) opens under today's modules on every backend: no migration is applied
// twice or renamed, and what it held is served as before.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { pino } from "pino";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { MODULES } from "../../src/server/modules.js";
import { startServer, type RunningServer } from "../../src/server/start.js";
import { SecretBox } from "../../src/core/secret-box.js";
import { iamModule } from "../../src/iam/module.js";
import { collectMigrations } from "../../src/storage/db.js";
import { loadSharedSecret } from "../../src/storage/server-secrets.js";
import { backends, postgresUrl, withDatabase } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { ERROR_DOMAIN, issuerOf } from "../support/server.js";

const DUMP = readFileSync(new URL("../fixtures/pre-modules-database.sql", import.meta.url), "utf8");
/** What the dump holds (printed when it was made). */
const LEGACY = {
  org: "c58a8d01ea55225910e47f2800ea910623ac70ea",
  team: "c58a8d01ea55225910e47f2800ea910623ac70ea/052cbd20170b3064",
  role: "c58a8d01ea55225910e47f2800ea910623ac70ea/d62ebc08a9f9c43c",
  identity: "c58a8d01ea55225910e47f2800ea910623ac70ea/052cbd20170b3064/d3702f18d5fd1dd0",
  binding: "c58a8d01ea55225910e47f2800ea910623ac70ea/052cbd20170b3064/2836c55e35e40504",
  idp: "c58a8d01ea55225910e47f2800ea910623ac70ea/ca43288e1953ca85",
  invite: "c58a8d01ea55225910e47f2800ea910623ac70ea/97e2d700ca83a37e",
};
const OLD_MIGRATIONS = ["001_groups", "002_iam", "003_signing_keys", "004_login_sessions"];
/** The shared secrets the dump holds in plaintext (hex), as earlier versions stored them. */
const LEGACY_SECRETS = {
  page_tokens: "75108679421d161d5f4cf9b5e159e224d2cab51a5fa2d746b62a9e31d7acc374",
  idp_client_secrets: "e870c768e8cb89ecbe509add7e302e5f7fbcce378a9759e33994b43d70d8b6db",
};

/** A server over a fresh database loaded from the dump. */
async function serverOverDump(
  backend: string,
): Promise<{ server: RunningServer; applied: () => Promise<string[]>; drop: () => Promise<void> }> {
  const common = {
    port: 0,
    host: "127.0.0.1",
    dataDir: "",
    errorDomain: ERROR_DOMAIN,
    logger: pino({ level: "silent" }),
  };
  const migrationNames = async (query: (sql: string) => Promise<{ rows: { name: string }[] }>) =>
    (await query("select name from public.kysely_migration order by name")).rows.map((r) => r.name);
  if (backend === "pglite") {
    const pglite = await PGlite.create();
    await pglite.exec(DUMP);
    // pg_dump empties search_path for its own session; the server's queries expect the default.
    await pglite.exec("reset search_path");
    const server = await startServer({ ...common, pglite });
    return { server, applied: () => migrationNames((q) => pglite.query<{ name: string }>(q)), drop: async () => {} };
  }
  const admin = postgresUrl()!;
  const name = `bulwark_upgrade_${randomBytes(4).toString("hex")}`;
  const run = async (url: string, sql: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return await client.query<{ name: string }>(sql);
    } finally {
      await client.end();
    }
  };
  await run(admin, `create database ${name}`);
  await run(withDatabase(admin, name), DUMP);
  const server = await startServer({ ...common, databaseUrl: withDatabase(admin, name) });
  return {
    server,
    applied: () => migrationNames((q) => run(withDatabase(admin, name), q)),
    drop: () => run(admin, `drop database if exists ${name} with (force)`).then(() => undefined),
  };
}

for (const backend of backends()) {
  describe(`a database made before feature modules [${backend}]`, () => {
    let server: RunningServer;
    let applied: () => Promise<string[]>;
    let drop: () => Promise<void>;
    let api: ReturnType<typeof restClient>;

    before(async () => {
      ({ server, applied, drop } = await serverOverDump(backend));
      const issuer = issuerOf(server);
      const token = (await issuer.mint({ subject: OPERATOR_SUBJECT, audience: [issuer.urls.apiAudience] })).token;
      api = restClient(server.url, token);
    });
    after(async () => {
      await server?.close();
      await drop?.();
    });

    it("keeps every migration it had, under the same name, and applies only what is new", async () => {
      const known = Object.keys(collectMigrations(MODULES)).sort();
      for (const name of OLD_MIGRATIONS) assert.ok(known.includes(name), `${name} is no longer defined by any module`);
      assert.deepEqual(await applied(), known, "applied migrations = the modules' migrations");
    });

    it("serves what the old layout stored", async () => {
      const org = await api.get(`/iam/v2beta1/groups/${LEGACY.org}`);
      assert.equal(org.status, 200, JSON.stringify(org.body));
      assert.equal(org.body.name, "legacy-org");
      const children = await api.get(`/iam/v2beta1/groups?uidp.children_of=${LEGACY.org}`);
      assert.deepEqual(
        children.body.groups.map((g: { uid: string }) => g.uid),
        [LEGACY.team],
      );
      const binding = await api.get(`/iam/v2beta1/roleBindings/${LEGACY.binding}`);
      assert.equal(binding.status, 200, JSON.stringify(binding.body));
      assert.equal(binding.body.identity.uid, LEGACY.identity);
      assert.equal(binding.body.role.uid, LEGACY.role);
      for (const path of [
        `identities/${LEGACY.identity}`,
        `roles/${LEGACY.role}`,
        `identityProviders/${LEGACY.idp}`,
        `groupInvites/${LEGACY.invite}`,
      ]) {
        const res = await api.get(`/iam/v2beta1/${path}`);
        assert.equal(res.status, 200, `${path}: ${JSON.stringify(res.body)}`);
      }
    });

    it("seals the shared secrets it kept in plaintext, and its IdP's client secret still opens", async () => {
      const rows = await server.db.selectFrom("server_secrets").select(["name", "secret", "secret_jwe"]).execute();
      assert.deepEqual(rows.map((r) => r.name).sort(), Object.keys(LEGACY_SECRETS).sort());
      for (const row of rows) {
        assert.equal(row.secret, null, `${row.name} is still stored in plaintext`);
        assert.match(row.secret_jwe, /^eyJ[\w-]*\.[\w-]*\.[\w-]+\.[\w-]+\.[\w-]+$/, `${row.name} is a compact JWE`);
      }
      // The same secrets, sealed: what they protect stays readable.
      for (const [name, hex] of Object.entries(LEGACY_SECRETS))
        assert.equal(Buffer.from(await loadSharedSecret(server.db, name)).toString("hex"), hex, name);
      const idps = server.exportsOf(iamModule).identityProviders;
      const idp = await idps.get(LEGACY.idp);
      assert.ok(idp?.client_secret_encrypted, "the dump's IdP has a client secret");
      const legacyBox = new SecretBox(Buffer.from(LEGACY_SECRETS.idp_client_secrets, "hex"));
      const original = await legacyBox.decrypt(idp.client_secret_encrypted, LEGACY.idp);
      assert.equal(await idps.clientSecretOf(idp), original);
    });

    it("keeps the old layout's rules: a group with children is not deleted, a new child is", async () => {
      const refused = await api.delete(`/iam/v2beta1/groups/${LEGACY.org}`);
      assert.equal(refused.status, 400, JSON.stringify(refused.body));
      const created = await api.post(`/iam/v2beta1/groups/${LEGACY.org}`, { name: "after-upgrade" });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.equal((await api.delete(`/iam/v2beta1/groups/${created.body.uid}`)).status, 200);
    });
  });
}
