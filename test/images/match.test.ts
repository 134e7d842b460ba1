// Matching installed packages to advisories (src/images/matching/match.ts) against real advisory
// documents imported into a real server: the wolfi fixtures, the corpus's openssl document, a
// made-up document for the event kinds the fixtures lack, and RustSec OSV records. The advisories
// come back through the vulnerabilities module's exports (advisoriesForPackages, as the report
// worker reads them), and the findings must be exactly those test/fixtures/images/
// expected-findings.py computed from the same documents on its own (its apk and SemVer
// comparisons, its reading of the YAML). Then each rule on its own: a subpackage matched by origin
// (libcrypto3 / libssl3 from openssl), versions above every fix, false positives and withdrawn
// records never reported, an OSV record by purl and range with its CVSS severity; and the
// exports' change hook (onAdvisoriesChanged), lastChange and public groups.
import { before, after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ok } from "../support/assertions.js";
import { ADVISORY_FIXTURES, fixtureDocument, IMPORT_PATH } from "../support/advisories.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { clockPast } from "../support/wait.js";
import type { InstalledPackage } from "../../src/images/inventory/types.js";
import { lookupKeysOf, matchPackages, type Finding } from "../../src/images/matching/match.js";
import { vulnerabilitiesModule, type MatchableAdvisory } from "../../src/vulnerabilities/api.js";

const IMAGES_FIXTURES = join(import.meta.dirname, "..", "fixtures", "images");
const OWN_ADVISORIES = join(IMAGES_FIXTURES, "advisories");
const PACKAGES = JSON.parse(readFileSync(join(IMAGES_FIXTURES, "packages.json"), "utf8")) as InstalledPackage[];
type Expected = { id: string; aliases: string[]; purls: string[]; fix: { versions: string[]; state: string } };
const EXPECTED = JSON.parse(readFileSync(join(IMAGES_FIXTURES, "expected-findings.json"), "utf8")) as Expected[];

/** The documents expected-findings.py reads, as an import sends them. */
function documents() {
  const wolfi = join(ADVISORY_FIXTURES, "wolfi");
  const yaml = readdirSync(wolfi)
    .filter((f) => f.endsWith(".advisories.yaml"))
    .map((f) => fixtureDocument(join(wolfi, f)));
  const own = readdirSync(OWN_ADVISORIES)
    .filter((f) => f.endsWith(".advisories.yaml"))
    .map((f) => ({ name: `images/${f}`, content: readFileSync(join(OWN_ADVISORIES, f), "utf8") }));
  const osv = [
    "RUSTSEC-2019-0004.json",
    "RUSTSEC-2021-0135.json",
    "RUSTSEC-2022-0031.json",
    "RUSTSEC-2026-0024.json",
  ].map((f) => fixtureDocument(join(ADVISORY_FIXTURES, "rustsec", f)));
  return [...yaml, ...own, ...osv];
}

const purlOf = (name: string, version: string) => PACKAGES.find((p) => p.name === name && p.version === version)!.purl;
const findingsFor = (findings: Finding[], purl: string) => findings.filter((f) => f.vulnerability.purls.includes(purl));

for (const backend of backends()) {
  describe(`matching packages to advisories [${backend}]`, () => {
    let server: TestServer;
    const publicGroup = randomBytes(20).toString("hex");
    let candidates: MatchableAdvisory[];
    let findings: Finding[];
    const exports = () => server.exportsOf(vulnerabilitiesModule);

    before(async () => {
      server = await startTestServer(backend, {
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
      });
      const operator = restClient(server.url, server.operatorToken);
      const imported = ok(await operator.post(IMPORT_PATH, { parent: publicGroup, documents: documents() }));
      for (const r of imported.results) assert.equal(r.problem, undefined, `${r.name}: ${JSON.stringify(r.problem)}`);
      const keys = lookupKeysOf(PACKAGES);
      candidates = await exports().advisoriesForPackages(keys.names, keys.purls);
      findings = matchPackages(PACKAGES, candidates);
    });
    after(() => server?.close());

    it("finds exactly what the independent script computed from the documents", () => {
      const got = findings.map((f) => ({
        id: f.vulnerability.id,
        aliases: f.vulnerability.aliases,
        purls: f.vulnerability.purls,
        fix: f.vulnerability.fix,
      }));
      assert.deepEqual(got, EXPECTED);
      assert.ok(EXPECTED.length >= 20, "the expectation is not trivial");
      for (const f of findings) assert.equal(f.advisoryParentUid, publicGroup);
    });

    it("matches subpackages by their origin, and only Wolfi apks by advisory YAML", () => {
      const libcrypto3 = purlOf("libcrypto3", "3.3.0-r6");
      const libssl3 = purlOf("libssl3", "3.3.0-r6");
      const openssl = candidates.filter((a) => a.artifactName === "openssl" && a.osv === null);
      assert.ok(openssl.length >= 30, "the openssl advisories are candidates for libcrypto3 (origin openssl)");
      const cve = findings.find((f) => f.vulnerability.aliases.includes("CVE-2024-5535"))!;
      assert.deepEqual(cve.vulnerability.purls, [libcrypto3, libssl3]);
      assert.deepEqual(cve.vulnerability.fix, { versions: ["3.3.1-r3"], state: "FIXED" });
      // the Alpine build and the Debian package of openssl are not Wolfi's: no Wolfi advisory applies
      assert.deepEqual(findingsFor(findings, purlOf("libcrypto3", "3.0.0-r0")), []);
      assert.deepEqual(findingsFor(findings, purlOf("libssl3", "3.0.11-1~deb12u2")), []);
    });

    it("reports none of the fixed advisories of a package above every fix", () => {
      const heimdal = candidates.filter((a) => a.artifactName === "heimdal");
      assert.ok(heimdal.some((a) => a.latestEventType === "fixed"));
      assert.deepEqual(findingsFor(findings, purlOf("heimdal-libs", "7.8.0-r2")), []);
      // at a fix's own version, that fix's advisory is gone; a later fix's still there
      const haproxy = findingsFor(findings, purlOf("haproxy-3.0", "3.0.4-r0"));
      assert.deepEqual(
        haproxy.map((f) => f.vulnerability.fix.versions),
        [["3.0.5-r0"]],
      );
      assert.ok(candidates.some((a) => a.artifactName === "haproxy-3.0" && a.fixedVersions.includes("3.0.4-r0")));
    });

    it("never reports a false positive, nor a withdrawn OSV record", () => {
      const falsePositives = candidates.filter((a) => a.latestEventType === "false-positive-determination");
      assert.ok(falsePositives.some((a) => a.artifactName === "brotli"));
      assert.ok(falsePositives.some((a) => a.artifactName === "openssl"));
      assert.ok(
        falsePositives.some((a) => a.advisoryId === "RUSTSEC-2021-0135"),
        "tower-http's record is withdrawn",
      );
      const reported = new Set(findings.map((f) => f.advisoryUid));
      for (const a of falsePositives) assert.ok(!reported.has(a.uid), `${a.advisoryId} (${a.artifactName}) reported`);
      assert.deepEqual(findingsFor(findings, purlOf("libbrotlicommon1", "1.1.0-r0")), []);
    });

    it("states fixes by the latest event: WONT_FIX, NOT_FIXED for analysis-not-planned and pending fixes", () => {
      const state = (id: string) => findings.find((f) => f.vulnerability.id === id)?.vulnerability.fix.state;
      assert.equal(state("CGA-jf7m-8wx7-62m5"), "WONT_FIX"); // lua5.3: fix-not-planned
      assert.equal(state("CGA-gfvq-j3vc-vxvm"), "NOT_FIXED"); // libgcrypt: pending-upstream-fix
      assert.equal(state("CGA-m2x9-c4f7-q8w3"), "NOT_FIXED"); // analysis-not-planned
    });

    it("matches an OSV record by purl and range, with the severity its CVSS vector scores", () => {
      const libp2p = findings.find((f) => f.vulnerability.id === "RUSTSEC-2019-0004")!;
      assert.deepEqual(libp2p.vulnerability.purls, ["pkg:cargo/libp2p-core@0.7.0"]);
      // CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:H/A:N is 7.5 (NVD's score for CVE-2019-15545)
      assert.deepEqual(libp2p.vulnerability.cvss, [{ score: "7.5", version: "3.0" }]);
      assert.equal(libp2p.vulnerability.severity, "HIGH");
      const record = JSON.parse(readFileSync(join(ADVISORY_FIXTURES, "rustsec", "RUSTSEC-2019-0004.json"), "utf8"));
      assert.equal(libp2p.vulnerability.description, record.summary);
      assert.equal(libp2p.vulnerability.details, record.details);
      assert.deepEqual(
        libp2p.vulnerability.relatedUrls,
        record.references.map((r: { url: string }) => r.url),
      );
      // a CVSS 4.0 vector with no impact scores 0.0
      const psq = findings.find((f) => f.vulnerability.id === "RUSTSEC-2026-0024")!;
      assert.deepEqual(psq.vulnerability.cvss, [{ score: "0.0", version: "4.0" }]);
      assert.equal(psq.vulnerability.severity, "NEGLIGIBLE");
      // at the fixed version, out of range
      assert.deepEqual(findingsFor(findings, purlOf("rulex", "0.4.3")), []);
      // advisory YAML carries no CVSS: unknown, not guessed
      assert.equal(
        findings.find((f) => f.vulnerability.id === "CGA-3mrr-589r-46qj")!.vulnerability.severity,
        "UNKNOWN",
      );
    });

    it("reads only candidate rows, and the findings come out in one order whatever the input order", () => {
      const keys = lookupKeysOf(PACKAGES);
      for (const a of candidates)
        assert.ok(
          keys.names.includes(a.artifactName) || keys.purls.includes(a.purl),
          `${a.advisoryId} is no candidate`,
        );
      assert.ok(!candidates.some((a) => a.artifactName === "gatekeeper-3.18"));
      assert.deepEqual(matchPackages([...PACKAGES].reverse(), [...candidates].reverse()), findings);
    });

    it("tells each import's changes to a listener, when the advisories last changed, and the public groups", async () => {
      const vulns = exports();
      assert.deepEqual(vulns.publicGroups, [publicGroup]);
      const last = await vulns.lastChange();
      assert.ok(last instanceof Date);
      const told: { names: string[]; purls: string[] }[] = [];
      vulns.onAdvisoriesChanged(async (changes) => void told.push(changes));

      // the made-up package's analysis-not-planned advisory gets fixed
      await clockPast(last);
      const path = join(OWN_ADVISORIES, "bulwark-match-fixture.advisories.yaml");
      const content = readFileSync(path, "utf8").replace(
        "      - timestamp: 2024-02-01T09:30:00Z\n        type: analysis-not-planned\n        data:\n          note: The package is scheduled for removal.\n",
        "      - timestamp: 2024-03-01T00:00:00Z\n        type: fixed\n        data:\n          fixed-version: 2024.01.16-r0\n",
      );
      assert.notEqual(content, readFileSync(path, "utf8"));
      const operator = restClient(server.url, server.operatorToken);
      const imported = ok(
        await operator.post(IMPORT_PATH, {
          parent: publicGroup,
          documents: [{ name: "images/bulwark-match-fixture.advisories.yaml", content }],
        }),
      );
      assert.equal(imported.results[0].problem, undefined, JSON.stringify(imported.results[0]));
      // only the changed advisory's package: the document's unchanged advisories are not told
      assert.deepEqual(told, [{ names: ["bulwark-match-fixture"], purls: ["pkg:apk/wolfi/bulwark-match-fixture"] }]);
      const changed = told[0]!;
      assert.ok(((await vulns.lastChange())?.getTime() ?? 0) > last.getTime());

      const again = await vulns.advisoriesForPackages(changed.names, changed.purls);
      const fixed = matchPackages(PACKAGES, again).find((f) => f.vulnerability.id === "CGA-m2x9-c4f7-q8w3");
      assert.deepEqual(fixed?.vulnerability.fix, { versions: ["2024.01.16-r0"], state: "FIXED" });
      assert.deepEqual(await vulns.advisoriesForPackages([], []), []);
    });
  });
}
