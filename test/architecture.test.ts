// The architecture (docs/ARCHITECTURE.md), checked on every file in src/:
//   core ← storage ← platform ← features (iam, auth, ...) ← server ← cli
// Layers:
// - core imports no other layer; storage imports only core; platform only core and storage;
// - a feature's storage/ imports no service code (nothing of its feature outside storage/), and
//   no storage code imports the API errors (it answers results; services map them);
// - features import neither server nor cli, and iam nothing of auth (auth is built on iam);
// - in server/, only modules.ts names a feature.
// Features, for every pair of them:
// - (a) code outside a feature (another feature, server/, cli/) imports only the feature's api.ts;
// - (b) no SQL of a feature names another feature's tables (each feature's tables are the ones its
//   migrations create), and a feature's table types name only its own tables;
// - (c) the CLI's client code imports no server code: nothing of server/, platform/, storage/ or a
//   feature (core and gen are fine). The server side is commands/server.ts and what only it loads.
// Each rule is a function over an input (the imports, the files' texts), run once on src/ and once
// on a synthetic input with a planted violation it must report.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, posix, relative, resolve, sep } from "node:path";
import ts from "typescript";
import { REPO_ROOT } from "./support/paths.js";

const SRC = join(REPO_ROOT, "src");
const LAYERS = new Set(["core", "storage", "platform", "server", "cli", "gen"]);

interface Import {
  /** importing file, relative to src/ */
  from: string;
  /** imported file, relative to src/ */
  to: string;
}

/** What the rules read: the features, every relative import, and each file's text (paths relative to src/). */
interface Source {
  features: readonly string[];
  imports: readonly Import[];
  files: ReadonlyMap<string, string>;
}

// ---------------------------------------------------------------------------------------------
// Reading src/

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "gen" ? [] : sourceFiles(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

/** The relative imports of a file's text (static, dynamic and re-exports), resolved against its path. */
function importsOf(path: string, text: string): Import[] {
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => m[1]!);
  return specs.map((spec) => ({ from: path, to: posix.normalize(posix.join(posix.dirname(path), spec)) }));
}

function readSource(): Source {
  const files = new Map(
    sourceFiles(SRC).map((file) => [relative(SRC, file).split(sep).join("/"), readFileSync(file, "utf8")]),
  );
  const features = readdirSync(SRC).filter((d) => statSync(join(SRC, d)).isDirectory() && !LAYERS.has(d));
  return { features, files, imports: [...files].flatMap(([path, text]) => importsOf(path, text)) };
}

// ---------------------------------------------------------------------------------------------
// The layers

const top = (path: string) => path.split("/")[0]!;
const arrow = (i: Import) => `${i.from} → ${i.to}`;

function importViolations(source: Source, rule: (i: Import) => boolean): string[] {
  return source.imports.filter(rule).map(arrow);
}

const isFeatureStorage = (source: Source, path: string) =>
  source.features.includes(top(path)) && path.split("/")[1] === "storage";

const LAYER_RULES: Record<string, (source: Source) => string[]> = {
  "core imports nothing outside core (and the generated code)": (s) =>
    importViolations(s, (i) => top(i.from) === "core" && !["core", "gen"].includes(top(i.to))),

  "storage imports only core": (s) =>
    importViolations(s, (i) => top(i.from) === "storage" && !["core", "gen", "storage"].includes(top(i.to))),

  "platform imports only core and storage": (s) =>
    importViolations(
      s,
      (i) => top(i.from) === "platform" && !["core", "gen", "storage", "platform"].includes(top(i.to)),
    ),

  "a feature's storage imports no service code": (s) =>
    importViolations(
      s,
      (i) =>
        isFeatureStorage(s, i.from) && !(["core", "gen", "storage"].includes(top(i.to)) || isFeatureStorage(s, i.to)),
    ),

  "storage throws no API errors: neither storage/ nor a feature's storage imports core/errors": (s) =>
    importViolations(s, (i) => (top(i.from) === "storage" || isFeatureStorage(s, i.from)) && i.to === "core/errors.js"),

  "features import neither the server nor the CLI": (s) =>
    importViolations(s, (i) => s.features.includes(top(i.from)) && ["server", "cli"].includes(top(i.to))),

  "iam does not depend on auth": (s) => importViolations(s, (i) => top(i.from) === "iam" && top(i.to) === "auth"),

  "in server/, only modules.ts names a feature": (s) =>
    importViolations(
      s,
      (i) => top(i.from) === "server" && i.from !== "server/modules.ts" && s.features.includes(top(i.to)),
    ),
};

// ---------------------------------------------------------------------------------------------
// (a) One public face per feature

/** An import from outside a feature into it that does not target the feature's api.ts. */
function publicFaceViolations(source: Source): string[] {
  return importViolations(
    source,
    (i) => source.features.includes(top(i.to)) && top(i.from) !== top(i.to) && i.to !== `${top(i.to)}/api.js`,
  );
}

// ---------------------------------------------------------------------------------------------
// (b) A feature's SQL names only its own tables

/** Comments removed (block comments opening a line or after a space, `//` comments after a space). */
function withoutComments(text: string): string {
  return text.replace(/(^|[\s(,])\/\*[\s\S]*?\*\//g, "$1").replace(/(^|\s)\/\/.*$/gm, "$1");
}

/** The template literal opening at `open` (a backtick): its text, each `${…}` a blank. */
function templateAt(text: string, open: number): { body: string; end: number } {
  let body = "";
  let i = open + 1;
  while (i < text.length) {
    const c = text[i]!;
    if (c === "\\") {
      body += text.slice(i, i + 2);
      i += 2;
    } else if (c === "`") {
      return { body, end: i + 1 };
    } else if (c === "$" && text[i + 1] === "{") {
      i = expressionEnd(text, i + 2);
      body += " ";
    } else {
      body += c;
      i++;
    }
  }
  return { body, end: i };
}

/** Where the `${…}` expression starting at `start` ends (after its closing brace). */
function expressionEnd(text: string, start: number): number {
  let depth = 1;
  let i = start;
  while (i < text.length && depth > 0) {
    const c = text[i]!;
    if (c === "`") {
      i = templateAt(text, i).end;
      continue;
    }
    if (c === '"' || c === "'") {
      i++;
      while (i < text.length && text[i] !== c) i += text[i] === "\\" ? 2 : 1;
    } else if (c === "{") depth++;
    else if (c === "}") depth--;
    i++;
  }
  return i;
}

/** The text of every `sql` tagged template (`sql\`…\``, `sql<T>\`…\``), SQL comments removed. */
function sqlTexts(code: string): string[] {
  const texts: string[] = [];
  for (const m of code.matchAll(/\bsql\s*(?:<(?:[^<>`]|<[^<>`]*>)*>)?\s*`/g)) {
    texts.push(templateAt(code, m.index + m[0].length - 1).body.replace(/--[^\n]*/g, ""));
  }
  return texts;
}

const KYSELY_TABLE =
  /\b(?:selectFrom|insertInto|replaceInto|updateTable|deleteFrom|mergeInto|innerJoin|leftJoin|rightJoin|fullJoin)\(\s*["'`]([a-z_][a-z0-9_]*)/g;
const BY_UID_TABLE = /\b(?:getByUid|updateByUid|deleteByUid)\(\s*[\w.]+\s*,\s*["'`]([a-z_][a-z0-9_]*)/g;
const SQL_TABLE = /\b(from|join|into|update|table)\s+(?:only\s+)?"?([a-z_][a-z0-9_]*)/gi;

/** Every table a file's code names: in Kysely's builders and storage/table.ts's helpers, and in raw SQL. */
function tablesNamed(text: string): { table: string; how: string }[] {
  const code = withoutComments(text);
  return [
    ...[...code.matchAll(KYSELY_TABLE), ...code.matchAll(BY_UID_TABLE)].map((m) => ({
      table: m[1]!,
      how: m[0].slice(0, m[0].indexOf("(")),
    })),
    ...sqlTexts(code).flatMap((sql) =>
      [...sql.matchAll(SQL_TABLE)].map((m) => ({ table: m[2]!.toLowerCase(), how: `sql ${m[1]!.toLowerCase()}` })),
    ),
  ];
}

/** The platform's tables: the keys of StorageTables (storage/schema.ts). */
function platformTables(source: Source): Set<string> {
  const schema = source.files.get("storage/schema.ts") ?? "";
  const body = /interface StorageTables\s*\{([^}]*)\}/.exec(schema)?.[1] ?? "";
  return new Set([...body.matchAll(/^\s*(\w+)\s*:/gm)].map((m) => m[1]!));
}

/** Each table's feature: the tables a feature's migrations create (the platform's tables are nobody's). */
function tableOwners(source: Source): Map<string, string> {
  const platform = platformTables(source);
  const owners = new Map<string, string>();
  for (const [path, text] of source.files) {
    const feature = top(path);
    if (!source.features.includes(feature) || path.split("/")[1] !== "migrations") continue;
    const code = withoutComments(text);
    const made = [
      ...code.matchAll(/\bcreate\s+table\s+(?:if\s+not\s+exists\s+)?"?([a-z_][a-z0-9_]*)/gi),
      ...code.matchAll(/\.createTable\(\s*["'`]([a-z_][a-z0-9_]*)/g),
    ].map((m) => m[1]!.toLowerCase());
    for (const table of made) if (!platform.has(table)) owners.set(table, feature);
  }
  return owners;
}

/** Where a feature's code names another feature's table: "file: table (owner's), how". */
function foreignTableViolations(source: Source): string[] {
  const owners = tableOwners(source);
  return [...source.files].flatMap(([path, text]) => {
    const feature = top(path);
    if (!source.features.includes(feature)) return [];
    return tablesNamed(text).flatMap(({ table, how }) => {
      const owner = owners.get(table);
      return owner && owner !== feature ? [`${path}: ${table} (${owner}'s), ${how}`] : [];
    });
  });
}

/** A feature's table types (interfaces named …Tables in its storage/) naming a table that is not its own. */
function tableTypeViolations(source: Source): string[] {
  const owners = tableOwners(source);
  return [...source.files].flatMap(([path, text]) => {
    const feature = top(path);
    if (!isFeatureStorage(source, path)) return [];
    return [...text.matchAll(/interface\s+(\w+Tables)\s*\{([^}]*)\}/g)].flatMap((m) =>
      [...m[2]!.matchAll(/^\s*(\w+)\s*:/gm)]
        .map((k) => k[1]!)
        .filter((table) => owners.get(table) !== feature)
        .map((table) => `${path}: ${m[1]} types ${table} (${owners.get(table) ?? "no feature"}'s)`),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// (c) The CLI's client code loads no server code

/** commands/server.ts and the CLI files only it (and files only it loads) imports. */
function cliServerSide(source: Source): Set<string> {
  const side = new Set(["cli/commands/server.ts"]);
  const cliFiles = [...source.files.keys()].filter((p) => top(p) === "cli");
  const importersOf = (path: string) =>
    source.imports.filter((i) => top(i.from) === "cli" && i.to === path.replace(/\.ts$/, ".js")).map((i) => i.from);
  for (let grew = true; grew;) {
    grew = false;
    for (const path of cliFiles) {
      if (side.has(path)) continue;
      const importers = importersOf(path);
      if (importers.length > 0 && importers.every((from) => side.has(from))) {
        side.add(path);
        grew = true;
      }
    }
  }
  return side;
}

function cliClientViolations(source: Source): string[] {
  const serverSide = cliServerSide(source);
  const serverCode = (path: string) =>
    ["server", "platform", "storage"].includes(top(path)) || source.features.includes(top(path));
  return importViolations(source, (i) => top(i.from) === "cli" && !serverSide.has(i.from) && serverCode(i.to));
}

// ---------------------------------------------------------------------------------------------
// Function size: the registry's handlers and repositories stay small (no one closure holding a
// router and a switch again). Released migrations are never edited, so they are not counted.

const MAX_FUNCTION_LINES = 80;

function longFunctions(source: Source, folder: string): string[] {
  const found: string[] = [];
  for (const [path, text] of source.files) {
    if (!path.startsWith(`${folder}/`) || path.includes("/migrations/")) continue;
    const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && "body" in node && node.body) {
        const first = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
        const last = file.getLineAndCharacterOfPosition(node.getEnd()).line;
        if (last - first + 1 > MAX_FUNCTION_LINES) found.push(`${path}:${first + 1}: ${last - first + 1} lines`);
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// On src/

const SOURCE = readSource();

describe("architecture: layers point one way", () => {
  it("finds the feature folders, their imports and their tables", () => {
    assert.ok(SOURCE.features.includes("iam") && SOURCE.features.includes("auth"), SOURCE.features.join(", "));
    assert.ok(SOURCE.imports.length > 100, `only ${SOURCE.imports.length} imports read`);
    const owners = tableOwners(SOURCE);
    const expected: [string, string][] = [
      ["groups", "iam"],
      ["group_counts", "iam"],
      ["signing_keys", "auth"],
      ["repos", "registry"],
      ["blobs", "registry"],
      ["advisories", "vulnerabilities"],
    ];
    for (const [table, feature] of expected) assert.equal(owners.get(table), feature, table);
    assert.equal(owners.get("server_secrets"), undefined, "the platform's table (made by iam's 001) is nobody's");
    assert.ok(cliServerSide(SOURCE).has("cli/admin.ts"), "admin token is server side");
  });

  for (const [title, rule] of Object.entries(LAYER_RULES)) it(title, () => assert.deepEqual(rule(SOURCE), []));
});

describe("architecture: features", () => {
  it("(a) code outside a feature imports only the feature's api.ts", () => {
    assert.deepEqual(publicFaceViolations(SOURCE), []);
  });

  it("(b) a feature's SQL names no other feature's tables", () => {
    assert.deepEqual(foreignTableViolations(SOURCE), []);
  });

  it("(b) a feature's table types name only its own tables", () => {
    assert.deepEqual(tableTypeViolations(SOURCE), []);
  });

  it(`no function in src/registry is over ${MAX_FUNCTION_LINES} lines (migrations aside)`, () => {
    assert.deepEqual(longFunctions(SOURCE, "registry"), []);
  });

  it("(c) the CLI's client code imports no server code", () => {
    assert.deepEqual(cliClientViolations(SOURCE), []);
  });
});

// ---------------------------------------------------------------------------------------------
// Planted violations: each rule reports one

const FEATURES = ["iam", "auth", "registry", "vulnerabilities"];

function planted(input: { imports?: [string, string][]; files?: Record<string, string> }): Source {
  const files = new Map(Object.entries(input.files ?? {}));
  return {
    features: FEATURES,
    imports: [
      ...(input.imports ?? []).map(([from, to]) => ({ from, to })),
      ...[...files].flatMap(([path, text]) => importsOf(path, text)),
    ],
    files,
  };
}

/** Migrations making each feature's tables, as the rules derive ownership from them. */
const MIGRATIONS = {
  "storage/schema.ts": "export interface StorageTables {\n  server_secrets: ServerSecretsTable;\n}\n",
  "iam/migrations/001_groups.ts":
    "await sql`create table groups (uid text primary key)`.execute(db);\n" +
    "await sql`create table server_secrets (name text primary key)`.execute(db);\n",
  "auth/migrations/003_signing_keys.ts": "await db.schema.createTable('signing_keys').execute();\n",
  "registry/migrations/006_registry.ts":
    "await sql`\n    create table repos (\n      parent_uid text not null references groups (uid)\n    )`.execute(db);\n",
};

describe("architecture: each rule reports a planted violation", () => {
  it("a registry function over the limit is reported; one in a migration is not", () => {
    const body = (n: number) => `export function f() {\n${"  work();\n".repeat(n - 2)}}\n`;
    const source = planted({
      files: {
        "registry/oci/big.ts": body(MAX_FUNCTION_LINES + 1),
        "registry/oci/fine.ts": body(MAX_FUNCTION_LINES),
        "registry/migrations/099_big.ts": body(MAX_FUNCTION_LINES + 40),
      },
    });
    assert.deepEqual(longFunctions(source, "registry"), [`registry/oci/big.ts:1: ${MAX_FUNCTION_LINES + 1} lines`]);
  });

  const layerCases: Record<string, [string, string]> = {
    "core imports nothing outside core (and the generated code)": ["core/list.ts", "storage/db.js"],
    "storage imports only core": ["storage/table.ts", "platform/list.js"],
    "platform imports only core and storage": ["platform/list.ts", "iam/api.js"],
    "a feature's storage imports no service code": ["iam/storage/groups.ts", "iam/groups.js"],
    "storage throws no API errors: neither storage/ nor a feature's storage imports core/errors": [
      "registry/storage/tags.ts",
      "core/errors.js",
    ],
    "features import neither the server nor the CLI": ["vulnerabilities/feeds.ts", "server/app.js"],
    "iam does not depend on auth": ["iam/module.ts", "auth/api.js"],
    "in server/, only modules.ts names a feature": ["server/app.ts", "auth/api.js"],
  };
  it("every layer rule has a planted case", () => {
    assert.deepEqual(Object.keys(layerCases).sort(), Object.keys(LAYER_RULES).sort());
  });
  for (const [title, [from, to]] of Object.entries(layerCases))
    it(title, () => {
      const allowed: [string, string] = ["iam/groups.ts", "iam/storage/groups.js"];
      assert.deepEqual(LAYER_RULES[title]!(planted({ imports: [allowed, [from, to]] })), [`${from} → ${to}`]);
    });

  it("(a) an import into a feature from outside it, past its api.ts", () => {
    const source = planted({
      imports: [
        ["auth/module.ts", "iam/api.js"],
        ["auth/module.ts", "auth/keys.js"],
        ["server/modules.ts", "registry/api.js"],
        ["auth/sign-in/service.ts", "iam/storage/identities.js"],
        ["cli/admin.ts", "auth/keys.js"],
        ["registry/module.ts", "vulnerabilities/module.js"],
      ],
    });
    assert.deepEqual(publicFaceViolations(source), [
      "auth/sign-in/service.ts → iam/storage/identities.js",
      "cli/admin.ts → auth/keys.js",
      "registry/module.ts → vulnerabilities/module.js",
    ]);
  });

  it("(b) another feature's table in Kysely's builders, storage's helpers and raw SQL; foreign keys and comments are no reads", () => {
    const source = planted({
      files: {
        ...MIGRATIONS,
        "registry/storage/repos.ts": [
          "// reads from groups only through iam's exports",
          "const own = db.selectFrom('repos').selectAll();",
          "const a = db.selectFrom('groups as g').selectAll();",
          "const b = db.selectFrom('repos').innerJoin(\"groups\", 'groups.uid', 'repos.parent_uid');",
          "const c = await getByUid(this.db, 'signing_keys', uid);",
          "const d = sql<{ uid: string }>`select uid from repos r join groups g on g.uid = r.parent_uid`;",
          "const e = sql`update groups set name = ${sql`x`} where uid = ${uid}`; /* from groups */",
          "const f = sql`select 1 from server_secrets -- from groups\n where true`;",
        ].join("\n"),
      },
    });
    assert.deepEqual(foreignTableViolations(source), [
      "registry/storage/repos.ts: groups (iam's), selectFrom",
      "registry/storage/repos.ts: groups (iam's), innerJoin",
      "registry/storage/repos.ts: signing_keys (auth's), getByUid",
      "registry/storage/repos.ts: groups (iam's), sql join",
      "registry/storage/repos.ts: groups (iam's), sql update",
    ]);
  });

  it("(b) a migration's read of another feature's table (a trigger), not its foreign key", () => {
    const source = planted({
      files: {
        ...MIGRATIONS,
        "vulnerabilities/migrations/007_advisories.ts":
          "await sql`create table advisories (parent_uid text references groups (uid))`.execute(db);\n" +
          "await sql`create function f() returns trigger as $$ begin perform 1 from repos; end $$`.execute(db);\n",
      },
    });
    assert.deepEqual(foreignTableViolations(source), [
      "vulnerabilities/migrations/007_advisories.ts: repos (registry's), sql from",
    ]);
  });

  it("(b) a raw read of another feature's table in a storage file (the registry's old reads of iam's groups)", () => {
    const source = planted({
      files: {
        ...MIGRATIONS,
        "registry/storage/content.ts":
          "const g = await sql<GroupRef>`select uid, name from groups where uid in (${sql.join(uids)})`.execute(db);\n",
      },
    });
    assert.deepEqual(foreignTableViolations(source), ["registry/storage/content.ts: groups (iam's), sql from"]);
  });

  it("(b) table types naming another feature's table, or none", () => {
    const source = planted({
      files: {
        ...MIGRATIONS,
        "registry/storage/tables.ts":
          "export interface RegistryTables {\n  repos: ReposTable;\n  groups: GroupsTable;\n}\n",
        "auth/storage/schema.ts":
          "export interface AuthTables {\n  signing_keys: SigningKeysTable;\n  server_secrets: X;\n}\n",
      },
    });
    assert.deepEqual(tableTypeViolations(source), [
      "registry/storage/tables.ts: RegistryTables types groups (iam's)",
      "auth/storage/schema.ts: AuthTables types server_secrets (no feature's)",
    ]);
  });

  it("(c) CLI client code importing server code; the server side (what only commands/server.ts loads) may", () => {
    const source = planted({
      files: {
        "cli/program.ts":
          'import { registerServerCommands } from "./commands/server.js";\nimport "./commands/groups.js";\n',
        "cli/commands/server.ts":
          'import type { RegistrySettings } from "../../registry/api.js";\nawait import("../admin.js");\nawait import("../shared.js");\n',
        "cli/admin.ts": 'import { migrateAll } from "../server/start.js";\n',
        "cli/shared.ts": 'import { openDatabase } from "../storage/db.js";\n',
        "cli/commands/groups.ts":
          'import { isValidUidp } from "../../core/uidp.js";\nimport { GroupsService } from "../../gen/x_pb.js";\n' +
          'import { VERSION } from "../../server/version.js";\nimport "../shared.js";\n',
      },
    });
    assert.deepEqual(cliClientViolations(source), [
      "cli/shared.ts → storage/db.js",
      "cli/commands/groups.ts → server/version.js",
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// The console (console/src/) is a client in the browser: of the server's tree it may import only the
// generated protos (src/gen/) and the issuer's client ids (src/core/cli-client.ts), like any other
// client of the API; never server, feature or storage code.

const CONSOLE_SRC = resolve(SRC, "..", "console", "src");
const CONSOLE_MAY_IMPORT = (target: string) => target.startsWith("gen/") || target === "core/cli-client.js";

/**
 * Imports of console files (path → text, relative to console/src/) that reach into src/ past what a
 * client may use, or from one area of pages (pages/<area>/) into another: areas link by URL.
 */
function consoleViolations(files: ReadonlyMap<string, string>): string[] {
  const areaOf = (path: string) => /^pages\/([^/]+)\//.exec(path)?.[1];
  return [...files].flatMap(([path, text]) =>
    importsOf(path, text).flatMap((i) => {
      if (i.to.startsWith("../../src/")) {
        const target = i.to.slice("../../src/".length);
        return CONSOLE_MAY_IMPORT(target) ? [] : [`console/src/${path} → src/${target}`];
      }
      const [from, to] = [areaOf(path), areaOf(i.to)];
      return from && to && from !== to ? [`console/src/${path} → console/src/${i.to}`] : [];
    }),
  );
}

describe("architecture: the console", () => {
  it("imports of the server's tree only the generated protos and the client ids; no area imports another", () => {
    const files = new Map(
      readdirSync(CONSOLE_SRC, { recursive: true })
        .map(String)
        .filter((f) => /\.tsx?$/.test(f))
        .map((f) => [f.split(sep).join("/"), readFileSync(join(CONSOLE_SRC, f), "utf8")]),
    );
    assert.ok(files.size > 5, "the console's files are read");
    assert.deepEqual(consoleViolations(files), []);
  });

  it("a planted import of server code, and of another area's file, is reported", () => {
    const files = new Map([
      [
        "pages/x.tsx",
        'import { GroupsService } from "../../../src/gen/x_pb.js";\nimport "../../../src/core/cli-client.js";\n',
      ],
      ["pages/y.tsx", 'import { startServer } from "../../../src/server/start.js";\n'],
      ["pages/events/a.tsx", 'import { Pager } from "../../ui/list";\nimport { b } from "./b";\n'],
      ["pages/events/c.tsx", 'import { QueryText } from "../security/filters";\n'],
    ]);
    assert.deepEqual(consoleViolations(files), [
      "console/src/pages/y.tsx → src/server/start.js",
      "console/src/pages/events/c.tsx → console/src/pages/security/filters",
    ]);
  });
});
