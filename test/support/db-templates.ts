// Migrated database templates, made once per test run (test/support/prepare.ts) and cloned per
// test file: PGlite from a data-dir dump (~0.5 s instead of ~3 s for initdb), opened with the
// options a server's in-memory PGlite has (storage/db.ts pgliteOptions: 16 MB of shared buffers
// where PGlite's default is 128 MB, zeroed at each open; the process's one compiled WebAssembly);
// PostgreSQL with CREATE DATABASE ... TEMPLATE.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import pg from "pg";
import { PGlite } from "@electric-sql/pglite";
import { INITDB_TEMPLATE_ENV, initializeDataDir, openDatabase, pgliteOptions } from "../../src/storage/db.js";
import { migrateAll } from "../../src/server/start.js";
import { readOutsideMalloc } from "../../src/core/outside-malloc.js";
import { REPO_ROOT } from "./paths.js";

export const PGLITE_TEMPLATE = join(REPO_ROOT, ".cache", "pglite-template.tar");
/**
 * What a new data directory's initdb makes, made once and copied by every first start of a
 * server or CLI child the suites run (storage/db.ts INITDB_TEMPLATE_ENV; `npm test` sets it): an
 * initdb costs ~5 s of CPU, and the suites' children made ~46 of them a run. Suites about
 * initdb itself unset it.
 */
export const INITDB_TEMPLATE = join(REPO_ROOT, ".cache", "initdb-template");
/** In the template: the PGlite version that made it (not one of PostgreSQL's files: never copied). */
const INITDB_TEMPLATE_STAMP = "made-by-pglite";
const PG_TEMPLATE_DB = "bulwark_template";

export type Backend = "pglite" | "postgres";

export function postgresUrl(): string | undefined {
  return process.env.BULWARK_TEST_DATABASE_URL || undefined;
}

// Servers on PostgreSQL need a key-encryption key; suites that start them here get one per test process.
if (postgresUrl()) process.env.BULWARK_KEY_ENCRYPTION_KEY ||= randomBytes(32).toString("hex");

/** Backends every storage/service suite runs on: PGlite always, PostgreSQL when configured. */
export function backends(): Backend[] {
  return postgresUrl() ? ["pglite", "postgres"] : ["pglite"];
}

/** The same server URL, naming another database. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = "/" + database;
  return u.toString();
}

export async function preparePgliteTemplate(): Promise<void> {
  const pglite = await PGlite.create("memory://", await pgliteOptions());
  const { db, close } = await openDatabase({ pglite });
  await migrateAll(db);
  const dump = await pglite.dumpDataDir("none");
  mkdirSync(dirname(PGLITE_TEMPLATE), { recursive: true });
  writeFileSync(PGLITE_TEMPLATE, Buffer.from(await dump.arrayBuffer()));
  await close();
}

export async function prepareInitdbTemplate(): Promise<void> {
  const version = (
    JSON.parse(readFileSync(join(REPO_ROOT, "node_modules", "@electric-sql", "pglite", "package.json"), "utf8")) as {
      version: string;
    }
  ).version;
  const stamp = join(INITDB_TEMPLATE, INITDB_TEMPLATE_STAMP);
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === version) return;
  const making = `${INITDB_TEMPLATE}.making`;
  rmSync(making, { recursive: true, force: true });
  mkdirSync(making, { recursive: true });
  const template = process.env[INITDB_TEMPLATE_ENV];
  delete process.env[INITDB_TEMPLATE_ENV]; // made by initdb itself, not copied from an older one
  try {
    await initializeDataDir(making, false);
  } finally {
    if (template !== undefined) process.env[INITDB_TEMPLATE_ENV] = template;
  }
  writeFileSync(join(making, INITDB_TEMPLATE_STAMP), version);
  rmSync(INITDB_TEMPLATE, { recursive: true, force: true });
  renameSync(making, INITDB_TEMPLATE);
}

export async function preparePostgresTemplate(url: string): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${PG_TEMPLATE_DB} with (force)`);
    await admin.query(`create database ${PG_TEMPLATE_DB}`);
  } finally {
    await admin.end();
  }
  const { db, close } = await openDatabase({ databaseUrl: withDatabase(url, PG_TEMPLATE_DB), poolSize: 1 });
  await migrateAll(db);
  await close();
}

/** The template's bytes, read once per process (PGlite only reads them: its untar copies each file). */
let templateBytes: ArrayBuffer | undefined;

export async function clonePglite(): Promise<PGlite> {
  if (!templateBytes) {
    if (!existsSync(PGLITE_TEMPLATE)) await preparePgliteTemplate();
    templateBytes = readOutsideMalloc(PGLITE_TEMPLATE);
  }
  const bytes = templateBytes;
  // PGlite calls only the Blob's arrayBuffer(): a new Blob would copy 40 MB at every clone.
  const loadDataDir = { arrayBuffer: async () => bytes } as Blob;
  return PGlite.create({ ...(await pgliteOptions()), loadDataDir });
}

/** A fresh database cloned from the template; returns its URL and a function that drops it. */
export async function clonePostgres(): Promise<{ url: string; drop: () => Promise<void> }> {
  const url = postgresUrl();
  if (!url) throw new Error("BULWARK_TEST_DATABASE_URL is not set");
  const name = `bulwark_t_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`create database ${name} template ${PG_TEMPLATE_DB}`);
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(url, name),
    drop: async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}
