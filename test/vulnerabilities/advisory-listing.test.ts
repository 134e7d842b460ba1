// ListAdvisories' faster paths give the answers the slow ones gave: totalCount from the maintained
// per-group counts (migration 016) for every caller and after imports that move an advisory's
// latest event, and `query` through the trigram index matching exactly the substrings it
// matched before, special characters and queries too short for trigrams included.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { ok } from "../support/assertions.js";
import {
  ADVISORIES_PATH,
  fixtureDocument,
  fixtureFiles,
  IMPORT_PATH,
  listAllAdvisories,
} from "../support/advisories.js";
import { backends } from "../support/db-templates.js";
import {
  createGroup,
  createIdentity,
  createRoleBinding,
  VIEWER_ROLE_UID,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { query, restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const LATEST_TYPES = [
  "EVENT_TYPE_FILTER_DETECTION",
  "EVENT_TYPE_FILTER_TRUE_POSITIVE_DETERMINATION",
  "EVENT_TYPE_FILTER_FIXED",
  "EVENT_TYPE_FILTER_FALSE_POSITIVE_DETERMINATION",
  "EVENT_TYPE_FILTER_ANALYSIS_NOT_PLANNED",
  "EVENT_TYPE_FILTER_FIX_NOT_PLANNED",
  "EVENT_TYPE_FILTER_PENDING_UPSTREAM_FIX",
  "EVENT_TYPE_FILTER_PATCHED",
];

/** An advisory YAML document of package `name` with one advisory, detected and (optionally) fixed. */
function document(name: string, id: string, aliases: string[], fixed: boolean): string {
  return (
    [
      "schema-version: 2.0.2",
      "package:",
      `  name: ${JSON.stringify(name)}`,
      "advisories:",
      `  - id: ${id}`,
      ...(aliases.length ? ["    aliases:", ...aliases.map((a) => `      - ${JSON.stringify(a)}`)] : []),
      "    events:",
      "      - timestamp: 2024-01-01T00:00:00Z",
      "        type: detection",
      "        data:",
      "          type: manual",
      ...(fixed
        ? [
            "      - timestamp: 2024-02-01T00:00:00Z",
            "        type: fixed",
            "        data:",
            "          fixed-version: 1.0.0-r1",
          ]
        : []),
    ].join("\n") + "\n"
  );
}

for (const backend of backends()) {
  describe(`ListAdvisories counts and query [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    let org: Json;
    let member: Api;
    let stranger: Api;
    const publicGroup = randomBytes(20).toString("hex");

    const importInto = async (parent: string, documents: { name: string; content: string }[]) => {
      const res = ok(await api.post(IMPORT_PATH, { parent, documents }), "import");
      for (const r of res.results) assert.equal(r.problem, undefined, `${r.name}: ${JSON.stringify(r.problem)}`);
      return res.results as Json[];
    };

    before(async () => {
      server = await startTestServer(backend, {
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
      });
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "publisher");
      await importInto(org.uid, fixtureFiles().map(fixtureDocument));
      await importInto(publicGroup, [
        { name: "p.yaml", content: document("public-pkg", "CGA-2345-6789-cfgh", ["CVE-2024-1111"], true) },
      ]);
      const orgMember = await createIdentity(api, org.uid, "member", "adv-member");
      await createRoleBinding(api, org.uid, orgMember.uid, VIEWER_ROLE_UID);
      member = restClient(server.url, await server.tokenFor(orgMember.uid));
      const other = await createGroup(api, undefined, "other");
      const outsider = await createIdentity(api, other.uid, "outsider", "adv-outsider");
      await createRoleBinding(api, other.uid, outsider.uid, VIEWER_ROLE_UID);
      stranger = restClient(server.url, await server.tokenFor(outsider.uid));
    });
    after(() => server?.close());

    /** For each caller and each filter the counts answer: totalCount = the advisories the pages hold. */
    const assertCountsExact = async (label: string) => {
      const callers: [string, Api][] = [
        ["operator", api],
        ["member", member],
        ["stranger", stranger],
      ];
      const filters = [
        {},
        ...LATEST_TYPES.map((t) => ({ latest_event_type: t })),
        { "uidp.childrenOf": org.uid },
        { "uidp.childrenOf": publicGroup, latest_event_type: "EVENT_TYPE_FILTER_FIXED" },
        { "uidp.childrenOf": org.uid, latest_event_type: "EVENT_TYPE_FILTER_DETECTION" },
      ];
      for (const [who, caller] of callers)
        for (const f of filters) {
          const { items, total } = await listAllAdvisories(caller, f);
          assert.equal(total, items.length, `${label}: ${who} ${JSON.stringify(f)}`);
          const first = ok(await caller.get(ADVISORIES_PATH + query({ ...f, page_size: 1 })));
          assert.equal(Number(first.totalCount ?? 0), items.length, `${label}: ${who} first page ${JSON.stringify(f)}`);
        }
    };

    it("totalCount of plain and latest-event-type listings is exact for every caller, also after imports move the latest event", async () => {
      await assertCountsExact("imported");
      const fixedBefore = (await listAllAdvisories(api, { latest_event_type: "EVENT_TYPE_FILTER_FIXED" })).total;
      // A new advisory (detection), then the same document fixed: it moves from one count to the other.
      const group = await createGroup(api, org.uid, "moving");
      await importInto(group.uid, [
        { name: "m.yaml", content: document("moving-pkg", "CGA-3456-789c-fghj", ["CVE-2024-2222"], false) },
      ]);
      await assertCountsExact("created");
      const moved = await importInto(group.uid, [
        { name: "m.yaml", content: document("moving-pkg", "CGA-3456-789c-fghj", ["CVE-2024-2222"], true) },
      ]);
      assert.equal(moved[0]!.advisoriesUpdated, 1);
      await assertCountsExact("moved");
      const fixedAfter = (await listAllAdvisories(api, { latest_event_type: "EVENT_TYPE_FILTER_FIXED" })).total;
      assert.equal(fixedAfter, fixedBefore! + 1);
      // An unchanged re-import changes no count.
      await importInto(group.uid, [
        { name: "m.yaml", content: document("moving-pkg", "CGA-3456-789c-fghj", ["CVE-2024-2222"], true) },
      ]);
      await assertCountsExact("unchanged");
    });

    it("query matches exactly the advisories whose ids, aliases or names contain it (LIKE metacharacters literal, short queries too)", async () => {
      const group = await createGroup(api, org.uid, "odd names");
      await importInto(group.uid, [
        { name: "u.yaml", content: document("py3_under_score", "CGA-4567-89cf-ghjm", ["CVE-2023-4444"], true) },
        { name: "v.yaml", content: document("pyXunderXscore", "CGA-5678-9cfg-hjmp", ["GHSA-abcd-efgh-ijkl"], false) },
      ]);
      const all = (await listAllAdvisories(api)).items;
      const hay = (a: Json) =>
        [a.advisoryId, a.legacyAdvisoryId ?? "", ...a.aliases, a.artifactName, a.componentName].map((s: string) =>
          s.toLowerCase(),
        );
      const queries = [
        "cve-2024",
        "CVE-2024",
        "cve_2024",
        "cve%2024",
        "%",
        "_",
        "\\",
        "\\%",
        "py3_",
        "r_u",
        "x",
        "cv",
        "-2",
        "2",
        "ghsa-abcd",
        "nothing-has-this-text",
        " cve-2023-4444 ",
      ];
      for (const q of queries) {
        const want = all.filter((a) => hay(a).some((s) => s.includes(q.trim().toLowerCase()))).map((a) => a.uid);
        const { items, total } = await listAllAdvisories(api, { query: q });
        assert.deepEqual(
          items.map((a) => a.uid),
          want,
          `query=${JSON.stringify(q)}`,
        );
        assert.equal(total, want.length, `totalCount of query=${JSON.stringify(q)}`);
      }
      // the underscore is no wildcard: py3_ matches the one name, not pyX…
      assert.deepEqual(
        (await listAllAdvisories(api, { query: "py3_u" })).items.map((a) => a.artifactName),
        ["py3_under_score"],
      );
    });
  });
}
