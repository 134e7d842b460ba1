// `bulwark advisories import | list | describe` as a person runs them: the CLI's commands
// (in-process, test/support/cli.ts) against a running server on each backend, with the
// operator's token in BULWARK_TOKEN. A few real documents (fixtures copied from the shared corpus,
// plus the project's own for the statuses the corpus lacks) make the listing: its table, JSON,
// ids, every filter, --limit; describe's block and JSON; errors a person can act on. The import's
// cases: files and directories, a bad file reported with its line and skipped, the summary (a
// line, or JSON with -o json), idempotence, the public group as the default destination. With
// ../shared/data present, the whole corpora import and the counts match an independent count of
// the files (lines, not a YAML parser).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { backends } from "../support/db-templates.js";
import { createGroup, type Api } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { CliHome, collapse, normalize, runCli, runCliProcess, type CliResult } from "../support/cli.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { REPO_ROOT } from "../support/paths.js";

const FIXTURES = join(import.meta.dirname, "..", "fixtures", "advisories");
const CORPUS = join(REPO_ROOT, "..", "shared", "data");

/**
 * The listing's documents: every status but one from the corpus (fixed, not affected, pending
 * upstream fix, fixed after a detection, an NVD detection; OSV records under investigation and
 * fixed) and the project's own for legacy ids, affected, patched and the plans.
 */
const SUBSET = [
  "wolfi/cedar.advisories.yaml",
  "wolfi/brotli.advisories.yaml",
  "wolfi/libgcrypt.advisories.yaml",
  "wolfi/heimdal.advisories.yaml",
  "wolfi/supervisor.advisories.yaml",
  "own/legacy-and-analysis.advisories.yaml",
  "rustsec/RUSTSEC-2019-0039.json",
  "rustsec/RUSTSEC-2022-0031.json",
].map((f) => join(FIXTURES, f));

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

/** Events the OSV records become: a detection, a fix (one or several versions) when any, a withdrawal. */
function osvEvents(dir: string): number {
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

/** Succeeded, and said nothing on stderr. */
function ok(r: CliResult): string {
  assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr}${r.stdout}`);
  assert.equal(r.stderr, "");
  return r.stdout;
}

/** Failed with `code` and one `bulwark: <sentence>` on stderr, no stack trace; the message. */
function failed(r: CliResult, code: number): string {
  assert.equal(r.code, code, `exit ${r.code}: ${r.stderr}${r.stdout}`);
  assert.match(r.stderr, /^bulwark: \S/);
  assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
  return r.stderr;
}

const table = (out: string, known: Record<string, string> = {}) => collapse(normalize(out, known));

for (const backend of backends()) {
  describe(`bulwark advisories [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    let home: CliHome;
    let publisher: string;
    const publicGroup = randomBytes(20).toString("hex");
    const bulwark = (...args: string[]) =>
      runCli(home, args, { env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken } });
    /** `list` in the subset's group. */
    const list = (...args: string[]) => bulwark("advisories", "list", "--parent", publisher, ...args);
    const listedIds = async (...args: string[]) =>
      ok(await list(...args, "-o", "terse"))
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split("\t")[0]);

    before(async () => {
      server = await startTestServer(backend, {
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
      });
      api = restClient(server.url, server.operatorToken);
      publisher = (await createGroup(api, undefined, "publisher")).uid;
      home = new CliHome();
    });
    after(async () => {
      await server?.close();
      home?.close();
    });

    it("imports documents: the summary line on stdout, JSON with -o json, idempotent", async () => {
      const first = summary(ok(await bulwark("advisories", "import", ...SUBSET, "--group", publisher)));
      assert.deepEqual(first, {
        files: 8,
        advisories: 11,
        created: 11,
        updated: 0,
        unchanged: 0,
        eventsAdded: 17,
        eventsRemoved: 0,
        skipped: 0,
      });
      const again = JSON.parse(
        ok(await bulwark("advisories", "import", ...SUBSET, "--group", publisher, "-o", "json")),
      );
      assert.deepEqual(again, { ...first, created: 0, unchanged: 11, eventsAdded: 0 });
      assert.equal(ok(await bulwark("advisories", "import", ...SUBSET, "--group", publisher, "-o", "id")), "");
    });

    it("lists them as a table: id, package, aliases (cut), status from the latest event, update time", async () => {
      assert.equal(
        table(ok(await list()), { [publisher]: "publisher" }),
        [
          "ID  PACKAGE  VULNERABILITY  STATUS  UPDATED",
          // no aliases: an empty cell (collapsed with the spaces around it)
          "CGA-2pv6-4gjh-fqfr  bulwark-fixture  patched (1.2.3-r4, 1.3.0-r1)  <time>",
          "CGA-5rr5-vhjf-mr96  bulwark-fixture  GHSA-5555-6666-7777, CVE-2099-0002  affected  <time>",
          "CGA-62jf-hmmj-87q8  supervisor  CVE-2023-27482  not-affected  <time>",
          "CGA-9mxg-j38p-8p8r  brotli  CVE-2020-8927, GHSA-5v8v-66v8-mwm7  not-affected  <time>",
          "CGA-gfvq-j3vc-vxvm  libgcrypt  CVE-2024-2236, GHSA-w2gx-4fh8-wm9f  pending-upstream-fix  <time>",
          "CGA-h7j3-g9pf-qcfh  heimdal  CVE-2022-45142, GHSA-5gp7-pf54-xc33  fixed (7.8.0-r1)  <time>",
          "CGA-rw85-mff2-3rfh  cedar  GHSA-wwq9-3cpr-mm53  fixed (4.2.2-r0)  <time>",
          "CGA-wfcj-p532-6qwf  bulwark-fixture  CVE-2099-0003  fix-not-planned  <time>",
          "CGA-x2jj-9jvh-w7c2  bulwark-fixture  GHSA-2222-3333-4444, CVE-2099-0001  analysis-not-planned  <time>",
          "RUSTSEC-2019-0039  typemap  GHSA-vfv3-9w6v-23jp  under-investigation  <time>",
          "RUSTSEC-2022-0031  rulex  CVE-2022-31100, GHSA-8v9w-p43c-r885  fixed (0.4.3)  <time>",
          "",
        ].join("\n"),
      );
    });

    it("lists them in every format: JSON (the API's), ids, wide (every alias, events, group), terse", async () => {
      const json = JSON.parse(ok(await list("-o", "json")));
      assert.ok(Array.isArray(json));
      assert.equal(json.length, 11);
      const heimdal = json.find((a: any) => a.advisoryId === "CGA-h7j3-g9pf-qcfh");
      assert.equal(heimdal.artifactName, "heimdal");
      assert.deepEqual(heimdal.aliases, ["CVE-2022-45142", "GHSA-5gp7-pf54-xc33"]);
      assert.deepEqual(
        heimdal.events.map((e: any) => [e.createTime, Object.keys(e).find((k) => k === "detection" || k === "fixed")]),
        [
          ["2023-03-15T15:31:20Z", "detection"],
          ["2023-03-15T16:06:34Z", "fixed"],
        ],
      );
      assert.equal(heimdal.events[1].fixed.fixedVersion, "7.8.0-r1");

      const ids = ok(await list("-o", "id"))
        .trim()
        .split("\n");
      assert.deepEqual(
        ids,
        json.map((a: any) => a.uid),
      );
      for (const id of ids) assert.match(id, new RegExp(`^${publisher}/[0-9a-f]{16}$`));

      const wide = table(ok(await list("-o", "wide", "--package", "bulwark-fixture")), { [publisher]: "publisher" });
      assert.match(wide, /^ID  PACKAGE  VULNERABILITY  STATUS  UPDATED  EVENTS  GROUP\n/);
      assert.match(
        wide,
        /\nCGA-2pv6-4gjh-fqfr  bulwark-fixture  patched \(1\.2\.3-r4, 1\.3\.0-r1\)  <time>  2  <publisher>\n/,
      );

      const terse = ok(await list("-o", "terse", "--package", "heimdal"));
      assert.equal(
        normalize(terse),
        "CGA-h7j3-g9pf-qcfh\theimdal\tCVE-2022-45142, GHSA-5gp7-pf54-xc33\tfixed (7.8.0-r1)\t<time>\n",
      );
    });

    it("filters by package, component, vulnerability (id or alias), status (in words), search text, group; --limit", async () => {
      assert.deepEqual(await listedIds("--package", "brotli"), ["CGA-9mxg-j38p-8p8r"]);
      assert.deepEqual(await listedIds("--package", "brotli", "--package", "cedar"), [
        "CGA-9mxg-j38p-8p8r",
        "CGA-rw85-mff2-3rfh",
      ]);
      assert.deepEqual(await listedIds("--package", "no-such-package"), []);
      assert.equal(
        table(ok(await list("--package", "no-such-package"))),
        "ID  PACKAGE  VULNERABILITY  STATUS  UPDATED\n",
      );
      assert.deepEqual(await listedIds("--component", "github.com/example/lib"), ["CGA-2pv6-4gjh-fqfr"]);

      assert.deepEqual(await listedIds("--vulnerability", "CVE-2024-2236"), ["CGA-gfvq-j3vc-vxvm"]);
      assert.deepEqual(await listedIds("--vulnerability", "cve-2024-2236"), ["CGA-gfvq-j3vc-vxvm"]);
      assert.deepEqual(await listedIds("--vulnerability", "GHSA-5gp7-pf54-xc33"), ["CGA-h7j3-g9pf-qcfh"]);
      assert.deepEqual(await listedIds("--vulnerability", "CGA-rw85-mff2-3rfh"), ["CGA-rw85-mff2-3rfh"]);
      assert.deepEqual(await listedIds("--vulnerability", "RUSTSEC-2022-0031"), ["RUSTSEC-2022-0031"]);
      // a legacy document's CVE id is one of its advisory's aliases
      assert.deepEqual(await listedIds("--vulnerability", "CVE-2099-0001"), ["CGA-x2jj-9jvh-w7c2"]);

      const byStatus: Record<string, string[]> = {
        affected: ["CGA-5rr5-vhjf-mr96"],
        fixed: ["CGA-h7j3-g9pf-qcfh", "CGA-rw85-mff2-3rfh", "RUSTSEC-2022-0031"],
        "not-affected": ["CGA-62jf-hmmj-87q8", "CGA-9mxg-j38p-8p8r"],
        "under-investigation": ["RUSTSEC-2019-0039"],
        "pending-upstream-fix": ["CGA-gfvq-j3vc-vxvm"],
        "fix-not-planned": ["CGA-wfcj-p532-6qwf"],
        patched: ["CGA-2pv6-4gjh-fqfr"],
        "analysis-not-planned": ["CGA-x2jj-9jvh-w7c2"],
      };
      // one CLI run per status, side by side
      const got = await Promise.all(Object.keys(byStatus).map((status) => listedIds("--status", status)));
      assert.deepEqual(Object.fromEntries(Object.keys(byStatus).map((status, i) => [status, got[i]])), byStatus);
      assert.deepEqual(await listedIds("--status", "Not Affected", "--package", "brotli"), ["CGA-9mxg-j38p-8p8r"]);
      assert.deepEqual(await listedIds("--status", "fixed", "--vulnerability", "CVE-2022-31100"), [
        "RUSTSEC-2022-0031",
      ]);

      assert.deepEqual(await listedIds("--search", "typemap"), ["RUSTSEC-2019-0039"]);
      assert.deepEqual(await listedIds("--limit", "3"), [
        "CGA-2pv6-4gjh-fqfr",
        "CGA-5rr5-vhjf-mr96",
        "CGA-62jf-hmmj-87q8",
      ]);
      assert.equal(JSON.parse(ok(await list("--limit", "2", "-o", "json"))).length, 2);
      // another group: none of these
      assert.deepEqual(ok(await bulwark("advisories", "list", "--parent", publicGroup, "-o", "id")), "");
    });

    it("refuses an unknown status or a bad --limit as usage errors (exit 2), naming the valid statuses", async () => {
      const message = failed(await list("--status", "bogus"), 2);
      assert.equal(
        message,
        'bulwark: unknown status "bogus": use one of under-investigation, affected, not-affected, ' +
          "pending-upstream-fix, fixed, fix-not-planned, patched, analysis-not-planned\n",
      );
      assert.equal((await list("--limit", "many")).code, 2);
    });

    it("describes an advisory by id or uid: its fields, then its events oldest first; -o json the API's", async () => {
      const out = ok(await bulwark("advisories", "describe", "CGA-2pv6-4gjh-fqfr"));
      const uid = ok(await bulwark("advisories", "describe", "CGA-2pv6-4gjh-fqfr", "-o", "id")).trim();
      assert.match(uid, new RegExp(`^${publisher}/[0-9a-f]{16}$`));
      assert.equal(
        collapse(normalize(out, { [uid]: "advisory", [publisher]: "publisher" })),
        [
          "Advisory:  CGA-2pv6-4gjh-fqfr",
          "UID:  <advisory>",
          "Group:  <publisher>",
          "Package:  bulwark-fixture (apk)",
          "Component:  github.com/example/lib",
          "Aliases:  none",
          "Status:  patched (1.2.3-r4, 1.3.0-r1)",
          "Created:  <time>",
          "Updated:  <time>",
          "",
          "Events (oldest first):",
          "TIME  TYPE  DETAILS",
          "<time>  detection  scan/v1: github.com/example/lib v1.0.0 (go-module)",
          "<time>  patched  patched versions 1.2.3-r4, 1.3.0-r1; Backported to both streams.",
          "",
        ].join("\n"),
      );
      // the events' own times, oldest first though the document lists them the other way round
      assert.deepEqual(out.match(/^20\d\d-\S+/gm), ["2024-05-01T12:00:00Z", "2024-06-01T12:00:00Z"]);

      const heimdal = ok(await bulwark("advisories", "describe", "CGA-h7j3-g9pf-qcfh", "-o", "wide"));
      assert.match(heimdal, /Aliases: +CVE-2022-45142, GHSA-5gp7-pf54-xc33\n/);
      assert.match(heimdal, /Status: +fixed \(7\.8\.0-r1\)\n/);
      assert.match(heimdal, /TIME +TYPE +DETAILS +AUTHOR\n/);
      assert.match(
        heimdal,
        /2023-03-15T15:31:20Z +detection +manual +\S+\n2023-03-15T16:06:34Z +fixed +fixed version 7\.8\.0-r1 +\S+\n$/,
      );
      const legacy = ok(await bulwark("advisories", "describe", "CGA-x2jj-9jvh-w7c2"));
      assert.match(legacy, /Legacy ID: +CVE-2099-0001\n/);
      assert.match(legacy, /analysis-not-planned +The package is scheduled for removal\.\n$/);
      const fp = ok(await bulwark("advisories", "describe", "CGA-62jf-hmmj-87q8"));
      assert.match(fp, /detection +nvdapi: cpe:2\.3:a:home-assistant:supervisor/);
      assert.match(
        fp,
        /false-positive-determination +component-vulnerability-mismatch; CVE refers to component in Home Assistant\.\n$/,
      );

      const json = JSON.parse(ok(await bulwark("advisories", "describe", "CGA-2pv6-4gjh-fqfr", "-o", "json")));
      const listed = JSON.parse(ok(await list("--vulnerability", "CGA-2pv6-4gjh-fqfr", "-o", "json")));
      assert.deepEqual(json, listed[0]);
      assert.equal(json.uid, uid);
      assert.deepEqual(json.events[1].patched.patchedVersions, ["1.2.3-r4", "1.3.0-r1"]);
      assert.deepEqual(JSON.parse(ok(await bulwark("advisories", "describe", uid, "-o", "json"))), json);
      assert.equal(
        normalize(ok(await bulwark("advisories", "describe", uid, "-o", "terse"))),
        "CGA-2pv6-4gjh-fqfr\tbulwark-fixture\t\tpatched (1.2.3-r4, 1.3.0-r1)\t<time>\n",
      );
    });

    it("says which advisory it cannot find (exit 1), and where to look for a vulnerability id", async () => {
      assert.equal(
        failed(await bulwark("advisories", "describe", "CGA-2222-2222-2222"), 1),
        "bulwark: no advisory with the id CGA-2222-2222-2222 is visible to you\n",
      );
      assert.match(failed(await bulwark("advisories", "describe", `${publisher}/0123456789abcdef`), 1), /not found/i);
      assert.equal(
        failed(await bulwark("advisories", "describe", "CVE-2024-2236"), 1),
        "bulwark: no advisory has the id CVE-2024-2236: it is a vulnerability id; " +
          "find its advisories with `bulwark advisories list --vulnerability CVE-2024-2236`\n",
      );
      assert.equal((await bulwark("advisories", "describe")).code, 2);
    });

    it("imports into the server's public advisory group without --group; an id in two groups needs --parent", async () => {
      const imported = summary(ok(await bulwark("advisories", "import", SUBSET[0]!)));
      assert.equal(imported.created, 1);
      assert.deepEqual(
        ok(await bulwark("advisories", "list", "--parent", publicGroup, "-o", "terse")).split("\t")[0],
        "CGA-rw85-mff2-3rfh",
      );
      const both = ok(await bulwark("advisories", "list", "--vulnerability", "CGA-rw85-mff2-3rfh", "-o", "id"))
        .trim()
        .split("\n");
      assert.equal(both.length, 2);
      const message = failed(await bulwark("advisories", "describe", "CGA-rw85-mff2-3rfh"), 1);
      assert.match(message, /2 advisories have the id CGA-rw85-mff2-3rfh .*pass --parent <group> or a uid/);
      for (const uid of both) assert.ok(message.includes(uid), message);
      const inPublic = ok(
        await bulwark("advisories", "describe", "CGA-rw85-mff2-3rfh", "--parent", publicGroup, "-o", "id"),
      );
      assert.ok(inPublic.startsWith(`${publicGroup}/`), inPublic);
    });

    it("imports through the running server: files and directories, a bad file skipped with its line, idempotent", async (t) => {
      const group = (await createGroup(api, undefined, "all fixtures")).uid;
      const dirs = [join(FIXTURES, "wolfi"), join(FIXTURES, "rustsec")];
      const first = await bulwark("advisories", "import", ...dirs, "--group", group);
      const s1 = summary(ok(first));
      assert.equal(s1.skipped, 0);
      assert.equal(s1.created, s1.advisories);
      assert.ok(s1.files >= 30 && s1.advisories > 30, first.stdout);
      assert.doesNotMatch(first.stderr, /\[#/, "no progress bar when stderr is not a terminal");

      const s2 = summary(ok(await bulwark("advisories", "import", ...dirs, "--group", group)));
      assert.deepEqual([s2.created, s2.updated, s2.unchanged, s2.eventsAdded], [0, 0, s1.advisories, 0]);

      // One bad file among good ones: reported with file and line, skipped, exit 1, the good one imported.
      const bad = join(FIXTURES, "own", "bad");
      const badFiles = readdirSync(bad).map((f) => join(bad, f));
      const mixed = await bulwark("advisories", "import", ...badFiles, join(FIXTURES, "own"), "--group", group);
      assert.equal(mixed.code, 1, mixed.stdout + mixed.stderr);
      const s3 = summary(mixed.stdout);
      assert.ok(s3.skipped >= badFiles.length, mixed.stdout);
      assert.equal(s3.created, 4, "the good document's advisories");
      assert.match(mixed.stderr, /syntax-error\.advisories\.yaml:\d+: .+ \(skipped\)/, "file:line: problem");
      assert.match(mixed.stderr, /invalid-json\.osv\.json:\d+: .+ \(skipped\)/);
      assert.doesNotMatch(mixed.stderr, /\n\s+at /, "no stack trace");
      // -o json: the summary as JSON on stdout, the problems still on stderr
      const mixedJson = await bulwark("advisories", "import", ...badFiles, "--group", group, "-o", "json");
      assert.equal(mixedJson.code, 1);
      assert.equal(JSON.parse(mixedJson.stdout).skipped, badFiles.length);
      assert.match(mixedJson.stderr, /:\d+: .+ \(skipped\)/);

      // The whole shared corpora, when present: counts from the files' lines, not from a parser.
      if (!existsSync(join(CORPUS, "wolfi-advisories", "advisories"))) return;
      const corpus = (await createGroup(api, undefined, "corpus")).uid;
      const wolfiDir = join(CORPUS, "wolfi-advisories", "advisories");
      const rustDir = join(CORPUS, "rustsec-osv", "crates");
      const started = Date.now();
      // The real binary: its own process reads and sends the next batch while this one's server
      // parses the last (in-process the two take turns: ~1.6 times as long).
      const whole = await runCliProcess(home, ["advisories", "import", wolfiDir, rustDir, "--group", corpus], {
        env: { BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken },
      });
      const seconds = (Date.now() - started) / 1000;
      assert.equal(whole.code, 0, whole.stderr.slice(0, 2000));
      const s = summary(whole.stdout);
      const wolfi = countWolfi(wolfiDir);
      const rust = readdirSync(rustDir).filter((f) => f.endsWith(".json")).length;
      assert.equal(s.files, wolfi.files + rust);
      assert.equal(s.advisories, wolfi.advisories + rust);
      assert.equal(s.eventsAdded, wolfi.events + osvEvents(rustDir));
      t.diagnostic(
        `${backend}: whole corpus (${s.files} files, ${s.advisories} advisories) in ${seconds.toFixed(1)} s`,
      );
      const listed = await api.get(`/vulnerabilities/v2beta1/advisories?uidp.childrenOf=${corpus}&page_size=1`);
      assert.equal(Number(listed.body.totalCount), wolfi.advisories + rust);
    });

    it("puts import failures in words: an unknown group, no server, no token, a missing path", async () => {
      const wolfi = join(FIXTURES, "wolfi");
      assert.match(
        failed(await bulwark("advisories", "import", wolfi, "--group", randomBytes(20).toString("hex")), 1),
        /not found/i,
      );
      const noServer = await runCli(home, ["advisories", "import", wolfi, "--group", publisher], {
        env: { BULWARK_API_URL: "http://127.0.0.1:9", BULWARK_TOKEN: server.operatorToken },
      });
      assert.match(failed(noServer, 1), /cannot reach http:\/\/127\.0\.0\.1:9/);
      const noToken = await runCli(home, ["advisories", "import", wolfi, "--group", publisher], {
        env: { BULWARK_API_URL: server.url },
      });
      assert.match(failed(noToken, 1), /bulwark auth login/);
      assert.match(
        failed(await bulwark("advisories", "import", join(FIXTURES, "nope"), "--group", publisher), 1),
        /no such file or directory/,
      );
      // the same for list and describe
      const listNoServer = await runCli(home, ["advisories", "list"], {
        env: { BULWARK_API_URL: "http://127.0.0.1:9", BULWARK_TOKEN: server.operatorToken },
      });
      assert.match(failed(listNoServer, 1), /cannot reach http:\/\/127\.0\.0\.1:9/);
    });

    it("shows an example in every command's help", async () => {
      for (const command of ["list", "describe", "import"]) {
        const help = ok(await bulwark("advisories", command, "--help"));
        assert.match(help, new RegExp(`\\nExamples:\\n {2}.*bulwark advisories ${command} `), command);
        assert.match(help, /-o, --output <format>/);
      }
      assert.match(ok(await bulwark("advisories", "list", "--help")), /--status <status>.*under-investigation/s);
    });
  });
}
