// Advisory documents (src/vulnerabilities/parse.ts): the fixtures in test/fixtures/advisories parse
// to what expected.json (computed by Python, independently) says; the event data and advisory
// fields map as the API has them; every broken document fails with a DocumentError at its line;
// and no input makes the parser throw anything else. With ../shared/data present, the two whole
// corpora parse too.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import fc from "fast-check";
import { DocumentError, type ParsedAdvisory, type ParsedDocument } from "../../src/vulnerabilities/documents.js";
import { isCgaId, legacyCgaId, MAX_DOCUMENT_BYTES, parseAdvisoryDocument } from "../../src/vulnerabilities/parse.js";
import { REPO_ROOT } from "../support/paths.js";

const ROOT = REPO_ROOT;
const FIXTURES = join(ROOT, "test", "fixtures", "advisories");
const DATA = resolve(ROOT, "..", "shared", "data");

interface ExpectedItem {
  id: string;
  legacyId?: string;
  line: number;
  aliases: string[];
  events: number;
  latestEventType: string;
  fixedVersion?: string;
  patchedVersions?: string[];
  falsePositiveType?: string;
  ecosystem?: string;
  artifactName?: string;
  severities?: string[];
}
interface ExpectedFile {
  format: ParsedDocument["format"];
  advisories: number;
  events: number;
  items: ExpectedItem[];
}
interface Expected {
  totals: { files: number; advisories: number; events: number };
  files: Record<string, ExpectedFile>;
  errors: Record<string, { line: number | null; message: string }>;
}

const EXPECTED = JSON.parse(readFileSync(join(FIXTURES, "expected.json"), "utf8")) as Expected;

function fixture(name: string): string {
  return readFileSync(join(FIXTURES, name), "utf8");
}

function parseFixture(name: string): ParsedDocument {
  return parseAdvisoryDocument(name.split("/").pop()!, fixture(name));
}

function advisory(doc: ParsedDocument, id: string): ParsedAdvisory {
  const found = doc.advisories.find((a) => a.advisoryId === id || a.legacyAdvisoryId === id);
  assert.ok(found, `no advisory ${id}`);
  return found;
}

/** The DocumentError `fn` throws (failing when it throws anything else or nothing). */
function documentError(fn: () => unknown): DocumentError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof DocumentError, `expected a DocumentError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected a DocumentError, but the document parsed");
}

const BASE_YAML = (advisories: string) =>
  `schema-version: "2.0.2"\npackage:\n  name: pkg\nadvisories:\n${advisories.replace(/^\n/, "")}`;

describe("advisory documents: the fixtures", () => {
  it("lists every fixture document in expected.json", () => {
    const onDisk = ["wolfi", "rustsec", "own"].flatMap((dir) =>
      readdirSync(join(FIXTURES, dir))
        .filter((f) => f.endsWith(".yaml") || f.endsWith(".json"))
        .map((f) => `${dir}/${f}`),
    );
    assert.deepEqual(onDisk.sort(), Object.keys(EXPECTED.files).sort());
    assert.equal(Object.keys(EXPECTED.files).length, EXPECTED.totals.files);
  });

  for (const [name, expected] of Object.entries(EXPECTED.files)) {
    it(`parses ${name} as expected.json says`, () => {
      const doc = parseFixture(name);
      assert.equal(doc.format, expected.format);
      assert.equal(doc.advisories.length, expected.advisories);
      assert.equal(
        doc.advisories.reduce((n, a) => n + a.events.length, 0),
        expected.events,
      );
      doc.advisories.forEach((a, i) => {
        const want = expected.items[i]!;
        const label = `${name} advisory ${i} (${want.id})`;
        assert.equal(a.advisoryId, want.id, label);
        assert.equal(a.legacyAdvisoryId, want.legacyId, label);
        assert.equal(a.line, want.line, label);
        assert.deepEqual(a.aliases, want.aliases, label);
        assert.equal(a.events.length, want.events, label);
        const latest = a.events.at(-1)!;
        assert.equal(latest.kind, want.latestEventType, label);
        if (want.fixedVersion !== undefined) assert.equal(latest.data.fixedVersion, want.fixedVersion, label);
        if (want.patchedVersions !== undefined) assert.deepEqual(latest.data.patchedVersions, want.patchedVersions);
        if (want.falsePositiveType !== undefined) assert.equal(latest.data.type, want.falsePositiveType, label);
        if (want.ecosystem !== undefined) assert.equal(a.ecosystem, want.ecosystem, label);
        if (want.artifactName !== undefined) assert.equal(a.artifactName, want.artifactName, label);
        if (want.severities !== undefined)
          assert.deepEqual(
            a.severities.map((s) => s.type),
            want.severities.map((t) => `TYPE_${t}`),
            label,
          );
        // oldest first, always
        for (let j = 1; j < a.events.length; j++)
          assert.ok(a.events[j - 1]!.time.getTime() <= a.events[j]!.time.getTime(), `${label}: event order`);
      });
    });
  }
});

describe("advisory documents: advisory YAML mapping", () => {
  const own = parseFixture("own/legacy-and-analysis.advisories.yaml");

  it("maps the package onto the artifact, ecosystem and purl", () => {
    const a = advisory(own, "CVE-2099-0001");
    assert.equal(a.artifactName, "bulwark-fixture");
    assert.equal(a.artifactType, "apk");
    assert.equal(a.artifactArchitecture, "");
    assert.equal(a.ecosystem, "Wolfi");
    assert.equal(a.purl, "pkg:apk/wolfi/bulwark-fixture");
    assert.deepEqual(a.severities, []);
    assert.equal(a.osv, undefined);
    // no scan: the package itself is the component
    assert.equal(a.componentName, "bulwark-fixture");
    assert.equal(a.componentType, "apk");
    assert.equal(a.componentLocation, "");
  });

  it("keeps a legacy id, stores the advisory under a derived CGA id, and adds vulnerability ids to the aliases", () => {
    const cve = advisory(own, "CVE-2099-0001");
    assert.equal(cve.legacyAdvisoryId, "CVE-2099-0001");
    assert.equal(cve.advisoryId, legacyCgaId("bulwark-fixture", "CVE-2099-0001"));
    assert.ok(isCgaId(cve.advisoryId));
    assert.deepEqual(cve.aliases, ["GHSA-2222-3333-4444", "CVE-2099-0001"]);
    // already an alias: not twice
    assert.deepEqual(advisory(own, "GHSA-5555-6666-7777").aliases, ["GHSA-5555-6666-7777", "CVE-2099-0002"]);
    // not a vulnerability id: kept as the legacy id only
    const other = advisory(own, "BULWARK-FIXTURE-1");
    assert.equal(other.legacyAdvisoryId, "BULWARK-FIXTURE-1");
    assert.deepEqual(other.aliases, ["CVE-2099-0003"]);
    // a CGA id is its own id
    const cga = advisory(own, "CGA-2pv6-4gjh-fqfr");
    assert.equal(cga.legacyAdvisoryId, undefined);
    assert.ok(!("legacyAdvisoryId" in cga));
    assert.deepEqual(cga.aliases, []);
  });

  it("maps analysis-not-planned, true-positive and fix-not-planned to their notes", () => {
    assert.deepEqual(
      advisory(own, "CVE-2099-0001").events.map((e) => [e.kind, e.data]),
      [
        ["detection", { manual: {} }],
        ["analysis-not-planned", { note: "The package is scheduled for removal." }],
      ],
    );
    const tp = advisory(own, "GHSA-5555-6666-7777").events;
    // a detection without data is a manual one; the +02:00 offset is honoured
    assert.deepEqual(tp[0]!.data, { manual: {} });
    assert.deepEqual(tp[1], {
      time: new Date("2023-03-01T22:00:00Z"),
      kind: "true-positive-determination",
      data: { note: "Reachable from the CLI." },
    });
    assert.deepEqual(advisory(own, "BULWARK-FIXTURE-1").events, [
      {
        time: new Date("2024-07-01T00:00:00.500Z"),
        kind: "fix-not-planned",
        data: { note: "Upstream is unmaintained." },
      },
    ]);
  });

  it("sorts events oldest first, maps scan/v1 and patched data, and takes the component from the scan", () => {
    const a = advisory(own, "CGA-2pv6-4gjh-fqfr");
    assert.deepEqual(a.events, [
      {
        time: new Date("2024-05-01T12:00:00Z"),
        kind: "detection",
        data: {
          scanv1: {
            scanner: "grype",
            subpackage: "bulwark-fixture",
            componentId: "0123456789abcdef",
            component: "github.com/example/lib",
            componentVersion: "v1.0.0",
            componentType: "go-module",
            componentLocation: "/usr/bin/bulwark-fixture",
          },
        },
      },
      {
        time: new Date("2024-06-01T12:00:00Z"),
        kind: "patched",
        data: { patchedVersions: ["1.2.3-r4", "1.3.0-r1"], note: "Backported to both streams." },
      },
    ]);
    assert.equal(a.componentName, "github.com/example/lib");
    assert.equal(a.componentType, "go-module");
    assert.equal(a.componentLocation, "/usr/bin/bulwark-fixture");
    assert.equal(a.line, 38);
  });

  it("maps nvdapi detections, fixed events and data-less true positives (corpus documents)", () => {
    const sysstat = parseFixture("wolfi/sysstat.advisories.yaml");
    const kinds = sysstat.advisories.flatMap((a) => a.events);
    const nvd = kinds.find((e) => e.kind === "detection" && "nvdapi" in e.data)!;
    assert.deepEqual(Object.keys(nvd.data.nvdapi as object).sort(), ["cpeFound", "cpeSearched"]);
    assert.match((nvd.data.nvdapi as { cpeSearched: string }).cpeSearched, /^cpe:2\.3:/);
    assert.ok(kinds.some((e) => e.kind === "true-positive-determination" && Object.keys(e.data).length === 0));
    const fixed = kinds.find((e) => e.kind === "fixed")!;
    assert.deepEqual(Object.keys(fixed.data), ["fixedVersion"]);
    assert.match(fixed.data.fixedVersion as string, /-r\d+$/);
  });

  it("maps every false-positive type of the corpus onto the API enum", () => {
    const types = new Set<string>();
    for (const name of Object.keys(EXPECTED.files).filter((n) => n.startsWith("wolfi/")))
      for (const a of parseFixture(name).advisories)
        for (const e of a.events) if (e.kind === "false-positive-determination") types.add(e.data.type as string);
    assert.deepEqual([...types].sort(), [
      "TYPE_COMPONENT_VULNERABILITY_MISMATCH",
      "TYPE_INLINE_MITIGATIONS_EXIST",
      "TYPE_VULNERABILITY_RECORD_ANALYSIS_CONTESTED",
      "TYPE_VULNERABLE_CODE_CANNOT_BE_CONTROLLED_BY_ADVERSARY",
      "TYPE_VULNERABLE_CODE_NOT_INCLUDED_IN_PACKAGE",
      "TYPE_VULNERABLE_CODE_NOT_IN_EXECUTION_PATH",
      "TYPE_VULNERABLE_CODE_VERSION_NOT_USED",
    ]);
  });

  it("takes the component of the latest scan when scans saw several", () => {
    for (const a of parseFixture("wolfi/minio-operator.advisories.yaml").advisories) {
      const scans = a.events.filter((e) => "scanv1" in e.data).map((e) => e.data.scanv1 as Record<string, string>);
      const last = scans.at(-1);
      if (!last) continue;
      assert.equal(a.componentName, last.component);
      assert.equal(a.componentType, last.componentType);
      assert.equal(a.componentLocation, last.componentLocation);
    }
  });

  it("accepts schema-version 2, 2.x and 2.x.y written as text or as a number", () => {
    for (const v of ['"2"', "2", "2.0", "2.0.1", '"2.0.2"', "2.10.3"]) {
      const doc = parseAdvisoryDocument("x.yaml", `schema-version: ${v}\npackage:\n  name: pkg\nadvisories: []\n`);
      assert.deepEqual(doc, { format: "advisory-yaml", advisories: [] }, v);
    }
  });

  it("reads versions as written (no YAML number conversion)", () => {
    const doc = parseAdvisoryDocument(
      "x.yaml",
      BASE_YAML(`
  - id: CGA-2pv6-4gjh-fqfr
    aliases: [CVE-2099-0001]
    events:
      - timestamp: 2024-01-01T00:00:00Z
        type: fixed
        data:
          fixed-version: 1.10
`),
    );
    assert.deepEqual(doc.advisories[0]!.events[0]!.data, { fixedVersion: "1.10" });
  });
});

describe("advisory documents: OSV mapping", () => {
  it("maps a record's package, severity, events and OSV fields", () => {
    const doc = parseFixture("rustsec/RUSTSEC-2026-0024.json");
    const record = JSON.parse(fixture("rustsec/RUSTSEC-2026-0024.json")) as Record<string, any>;
    assert.equal(doc.format, "osv");
    const [a] = doc.advisories;
    assert.ok(a);
    assert.equal(a.advisoryId, "RUSTSEC-2026-0024");
    assert.equal(a.artifactName, record.affected[0].package.name);
    assert.equal(a.artifactType, "crates.io");
    assert.equal(a.componentName, a.artifactName);
    assert.equal(a.componentType, "crates.io");
    assert.equal(a.componentLocation, "");
    assert.equal(a.artifactArchitecture, "");
    assert.equal(a.ecosystem, "crates.io");
    assert.equal(a.purl, record.affected[0].package.purl);
    assert.equal(a.line, 1);
    assert.deepEqual(a.severities, [{ type: "TYPE_CVSS_V4", score: record.severity[0].score }]);
    const fixed = record.affected[0].ranges[0].events.find((e: { fixed?: string }) => e.fixed).fixed;
    assert.deepEqual(a.events, [
      { time: new Date(record.published), kind: "detection", data: { manual: {} } },
      { time: new Date(record.modified), kind: "fixed", data: { fixedVersion: fixed } },
    ]);
    assert.deepEqual(a.osv, {
      summary: record.summary,
      details: record.details,
      published: record.published,
      modified: record.modified,
      references: record.references,
      affected: record.affected,
      database_specific: record.database_specific,
      related: record.related,
    });
  });

  it("turns several fixed versions into patched, and a withdrawal into a contested false positive", () => {
    const [a] = parseFixture("rustsec/RUSTSEC-2021-0135.json").advisories;
    assert.deepEqual(
      a!.events.map((e) => [e.kind, e.time.toISOString(), e.data]),
      [
        ["detection", "2021-01-21T12:00:00.000Z", { manual: {} }],
        // modified (2023) after the withdrawal (2022): the fix is dated at the withdrawal, before it
        ["patched", "2022-08-14T12:00:00.000Z", { patchedVersions: ["0.1.3", "0.2.1"] }],
        [
          "false-positive-determination",
          "2022-08-14T12:00:00.000Z",
          {
            type: "TYPE_VULNERABILITY_RECORD_ANALYSIS_CONTESTED",
            note: "withdrawn",
          },
        ],
      ],
    );
    assert.equal(a!.osv?.withdrawn, "2022-08-14T12:00:00Z");
  });

  it("gives one advisory per affected package, and a purl when the record has none", () => {
    const record = {
      id: "GHSA-2222-3333-4444",
      modified: "2024-01-02T00:00:00Z",
      severity: [
        { type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" },
        { type: "Ubuntu", score: "high" },
      ],
      affected: [
        { package: { ecosystem: "npm", name: "left" }, ranges: [{ type: "SEMVER", events: [{ introduced: "0" }] }] },
        { package: { ecosystem: "Foo", name: "right" } },
      ],
    };
    const doc = parseAdvisoryDocument("r.json", `  ${JSON.stringify(record)}`);
    assert.deepEqual(
      doc.advisories.map((a) => [a.advisoryId, a.artifactName, a.artifactType, a.purl, a.events.length]),
      [
        ["GHSA-2222-3333-4444", "left", "npm", "pkg:npm/left", 1],
        ["GHSA-2222-3333-4444", "right", "foo", "pkg:foo/right", 1],
      ],
    );
    // an unknown severity type is left out; no published: detected when modified
    assert.deepEqual(doc.advisories[0]!.severities, [{ type: "TYPE_CVSS_V3", score: record.severity[0]!.score }]);
    assert.deepEqual(doc.advisories[0]!.events[0]!.time, new Date("2024-01-02T00:00:00Z"));
    assert.deepEqual(doc.advisories[1]!.osv?.affected, [record.affected[1]]);
  });
});

describe("advisory documents: errors", () => {
  for (const [name, expected] of Object.entries(EXPECTED.errors)) {
    it(`${name} fails at line ${expected.line ?? "(none)"}`, () => {
      const err = documentError(() => parseFixture(name));
      assert.equal(err.line, expected.line ?? undefined, err.message);
      assert.ok(err.message.includes(expected.message), err.message);
    });
  }

  const cases: [string, string, number | undefined, RegExp][] = [
    ["empty document", "", undefined, /empty/],
    ["not a mapping", "- a\n- b\n", 1, /^document: must be a mapping/],
    ["no schema-version", "package:\n  name: x\n", 1, /^schema-version: is required/],
    ["schema-version 3", 'schema-version: "3.0.0"\npackage: {name: x}\n', 1, /unsupported version "3\.0\.0"/],
    ["no package", 'schema-version: "2"\nadvisories: []\n', 1, /^package: is required/],
    ["no package name", 'schema-version: "2"\npackage:\n  name: ""\n', 3, /^package\.name: is required/],
    ["advisories not a list", 'schema-version: "2"\npackage: {name: x}\nadvisories: {a: b}\n', 3, /must be a list/],
    [
      "YAML aliases",
      BASE_YAML(
        `  - &a {id: CGA-2pv6-4gjh-fqfr, events: [{timestamp: 2024-01-01T00:00:00Z, type: detection}]}\n  - *a\n`,
      ),
      6,
      /aliases are not supported/,
    ],
    ["duplicate keys", 'schema-version: "2"\nschema-version: "2"\n', 2, /invalid YAML/],
    ["several YAML documents", 'schema-version: "2"\n---\na: b\n', 2, /invalid YAML/],
    [
      "no id",
      BASE_YAML(`  - aliases: []\n    events: [{timestamp: 2024-01-01T00:00:00Z, type: detection}]\n`),
      5,
      /^advisories\[0\]\.id: is required/,
    ],
    [
      "no events",
      BASE_YAML(`  - id: CGA-2pv6-4gjh-fqfr\n    events: []\n`),
      6,
      /^advisories\[0\]\.events: at least one/,
    ],
    [
      "alias not a string",
      BASE_YAML(`  - id: CGA-2pv6-4gjh-fqfr\n    aliases:\n      - {a: b}\n`),
      7,
      /^advisories\[0\]\.aliases\[0\]: must be a string/,
    ],
    [
      "missing timestamp",
      BASE_YAML(`  - id: CGA-2pv6-4gjh-fqfr\n    events:\n      - type: detection\n`),
      7,
      /events\[0\]\.timestamp: is required/,
    ],
    [
      "not a timestamp",
      BASE_YAML(`  - id: CGA-2pv6-4gjh-fqfr\n    events:\n      - type: detection\n        timestamp: yesterday\n`),
      8,
      /invalid timestamp "yesterday"/,
    ],
    [
      "unknown detection type",
      BASE_YAML(
        `  - id: CGA-2pv6-4gjh-fqfr\n    events:\n      - timestamp: 2024-01-01T00:00:00Z\n        type: detection\n        data:\n          type: psychic\n`,
      ),
      10,
      /events\[0\]\.data\.type: unknown detection type "psychic"/,
    ],
    [
      "unknown false-positive type",
      BASE_YAML(
        `  - id: CGA-2pv6-4gjh-fqfr\n    events:\n      - timestamp: 2024-01-01T00:00:00Z\n        type: false-positive-determination\n        data:\n          type: unspecified\n`,
      ),
      10,
      /unknown false-positive type "unspecified"/,
    ],
    [
      "false positive without a type",
      BASE_YAML(
        `  - id: CGA-2pv6-4gjh-fqfr\n    events:\n      - timestamp: 2024-01-01T00:00:00Z\n        type: false-positive-determination\n`,
      ),
      7,
      /events\[0\]\.data\.type: is required/,
    ],
    [
      "patched without versions",
      BASE_YAML(
        `  - id: CGA-2pv6-4gjh-fqfr\n    events:\n      - timestamp: 2024-01-01T00:00:00Z\n        type: patched\n        data:\n          patched-versions: []\n`,
      ),
      10,
      /patched-versions: at least one version is required/,
    ],
    [
      "data not a mapping",
      BASE_YAML(
        `  - id: CGA-2pv6-4gjh-fqfr\n    events:\n      - timestamp: 2024-01-01T00:00:00Z\n        type: fixed\n        data: 1.2-r3\n`,
      ),
      9,
      /events\[0\]\.data: must be a mapping/,
    ],
    // only `{` means JSON: a top-level list is YAML, and not an advisory document
    ["top-level list", "[]", 1, /^document: must be a mapping/],
    ["OSV without id", '{"modified": "2024-01-01T00:00:00Z", "affected": [{}]}', undefined, /^id: is required/],
    ["OSV without modified", '{"id": "X-1", "affected": [{}]}', undefined, /^modified: is required/],
    ["OSV bad modified", '{"id": "X-1", "modified": "soon"}', undefined, /^modified: invalid timestamp/],
    [
      "OSV without package",
      '{"id": "X-1", "modified": "2024-01-01T00:00:00Z", "affected": [{}]}',
      undefined,
      /^affected\[0\]\.package: is required/,
    ],
    [
      "OSV range events not objects",
      '{"id": "X-1", "modified": "2024-01-01T00:00:00Z", "affected": [{"package": {"ecosystem": "npm", "name": "a"}, "ranges": [{"type": "SEMVER", "events": [1]}]}]}',
      undefined,
      /^affected\[0\]\.ranges\[0\]\.events\[0\]: must be an object/,
    ],
    ["OSV truncated", '{\n  "id": "X-1",\n  "modified": ', 3, /^invalid JSON/],
  ];
  for (const [label, content, line, message] of cases) {
    it(`rejects: ${label}`, () => {
      const err = documentError(() => parseAdvisoryDocument("doc", content));
      assert.match(err.message, message);
      assert.equal(err.line, line, err.message);
    });
  }

  it("rejects a document over MAX_DOCUMENT_BYTES, counted in UTF-8 bytes", () => {
    const head = 'schema-version: "2"\npackage: {name: x}\n# ';
    const fits = head + "x".repeat(MAX_DOCUMENT_BYTES - head.length);
    assert.deepEqual(parseAdvisoryDocument("big", fits).advisories, []);
    assert.match(documentError(() => parseAdvisoryDocument("big", fits + "x")).message, /larger than/);
    // half as many characters, each two bytes
    const wide = head + "é".repeat(MAX_DOCUMENT_BYTES / 2);
    assert.match(documentError(() => parseAdvisoryDocument("big", wide)).message, /larger than/);
  });
});

describe("advisory documents: legacy CGA ids", () => {
  it("derives the same valid CGA id from the same package and id, and others from others", () => {
    const id = legacyCgaId("bulwark-fixture", "CVE-2099-0001");
    assert.equal(id, legacyCgaId("bulwark-fixture", "CVE-2099-0001"));
    // the value expected.py computes on its own
    assert.equal(id, EXPECTED.files["own/legacy-and-analysis.advisories.yaml"]!.items[0]!.id);
    assert.ok(isCgaId(id));
    assert.notEqual(id, legacyCgaId("other-package", "CVE-2099-0001"));
    assert.notEqual(id, legacyCgaId("bulwark-fixture", "CVE-2099-0002"));
    // the separator keeps "a\nb" + "c" apart from "a" + "b\nc"
    assert.notEqual(legacyCgaId("a", "bc"), legacyCgaId("ab", "c"));
  });

  it("always gives a valid CGA id", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (pkg, legacy) => isCgaId(legacyCgaId(pkg, legacy))),
      { seed: 4242, numRuns: 200 },
    );
  });

  it("recognises CGA ids exactly", () => {
    assert.ok(isCgaId("CGA-2pv6-4gjh-fqfr"));
    for (const id of [
      "CGA-2pv6-4gjh-fqf",
      "CGA-2pv6-4gjh-fqfra",
      "cga-2pv6-4gjh-fqfr",
      "CGA-2PV6-4gjh-fqfr",
      "CGA-1pv6-4gjh-fqfr",
      "CGA-2pv6-4gjh-fqfr\n",
      "CVE-2024-1234",
    ])
      assert.ok(!isCgaId(id), id);
  });
});

describe("advisory documents: hostile input", () => {
  const samples = [
    "wolfi/rabbitmq-c.advisories.yaml",
    "own/legacy-and-analysis.advisories.yaml",
    "rustsec/RUSTSEC-2021-0135.json",
  ].map(fixture);

  const mutation = fc.oneof(
    // delete a slice
    fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 40 }) }),
    // insert text, YAML and JSON punctuation favoured
    fc.record({
      kind: fc.constant("insert" as const),
      at: fc.nat(),
      text: fc.oneof(
        fc.string({ maxLength: 8 }),
        fc.constantFrom(
          ":",
          "- ",
          "\n",
          "\t",
          "{",
          "}",
          "[",
          "]",
          '"',
          "'",
          "&a ",
          "*a",
          "!!binary ",
          "~",
          "---\n",
          "\0",
        ),
      ),
    }),
    // duplicate a slice elsewhere
    fc.record({
      kind: fc.constant("copy" as const),
      at: fc.nat(),
      from: fc.nat(),
      length: fc.integer({ min: 1, max: 200 }),
    }),
  );

  it("throws nothing but DocumentError on mutated fixtures", () => {
    fc.assert(
      fc.property(
        fc.nat({ max: samples.length - 1 }),
        fc.array(mutation, { minLength: 1, maxLength: 4 }),
        (which, edits) => {
          let text = samples[which]!;
          for (const e of edits) {
            const at = e.at % (text.length + 1);
            if (e.kind === "delete") text = text.slice(0, at) + text.slice(at + e.length);
            else if (e.kind === "insert") text = text.slice(0, at) + e.text + text.slice(at);
            else {
              const from = e.from % (text.length + 1);
              text = text.slice(0, at) + text.slice(from, from + e.length) + text.slice(at);
            }
          }
          try {
            parseAdvisoryDocument("mutated", text);
          } catch (err) {
            if (!(err instanceof DocumentError)) throw err;
            assert.ok(err.line === undefined || (Number.isInteger(err.line) && err.line >= 1), `line ${err.line}`);
          }
        },
      ),
      { seed: 20250507, numRuns: 200 },
    );
  });

  it("throws nothing but DocumentError on deep nesting and arbitrary text", () => {
    for (const text of ["[".repeat(100_000), "{".repeat(100_000), "a:\n" + " - ".repeat(5000), "\uFEFF{}", "\0\0\0"])
      try {
        parseAdvisoryDocument("deep", text);
      } catch (err) {
        assert.ok(err instanceof DocumentError, String(err));
      }
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 300 }), (text) => {
        try {
          parseAdvisoryDocument("random", text);
        } catch (err) {
          if (!(err instanceof DocumentError)) throw err;
        }
      }),
      { seed: 7, numRuns: 200 },
    );
  });
});

describe(
  "advisory documents: the whole corpora (../shared/data)",
  { skip: !existsSync(DATA) && "no ../shared/data" },
  () => {
    it("parses every wolfi advisories document: 20,770 advisories, 32,282 events", () => {
      const dir = join(DATA, "wolfi-advisories", "advisories");
      let advisories = 0;
      let events = 0;
      const files = readdirSync(dir).filter((f) => f.endsWith(".yaml"));
      assert.equal(files.length, 1278);
      for (const f of files) {
        const doc = parseAdvisoryDocument(f, readFileSync(join(dir, f), "utf8"));
        assert.equal(doc.format, "advisory-yaml");
        advisories += doc.advisories.length;
        for (const a of doc.advisories) {
          events += a.events.length;
          assert.ok(isCgaId(a.advisoryId), `${f}: ${a.advisoryId}`);
        }
      }
      assert.equal(advisories, 20770);
      assert.equal(events, 32282);
    });

    it("parses every rustsec OSV record: 1,185 advisories", () => {
      const dir = join(DATA, "rustsec-osv", "crates");
      let advisories = 0;
      for (const f of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
        const doc = parseAdvisoryDocument(f, readFileSync(join(dir, f), "utf8"));
        assert.equal(doc.format, "osv");
        advisories += doc.advisories.length;
      }
      assert.equal(advisories, 1185);
    });
  },
);
