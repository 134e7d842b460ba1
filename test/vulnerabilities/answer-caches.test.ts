// ListAdvisories answers and querybatch's package index are kept in each server's memory and
// trusted only while the advisories change counter (migration 017) is unchanged: an import changes
// the very next answer, on the server that imported and on another replica of the same database;
// callers who see different groups never get each other's kept answers; totalCount stays exact;
// page tokens of kept answers continue the walk; concurrent imports of overlapping documents all
// commit (none deadlocks on the counter, none fails for another having created an advisory first)
// and lose no count.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { ok } from "../support/assertions.js";
import {
  ADVISORIES_PATH,
  cgaId,
  fixedAdvisoriesDocument,
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

const PUBLIC_URLS = { issuerUrl: "https://issuer.answers.test", apiUrl: "https://api.answers.test" };

for (const backend of backends()) {
  // PGlite is one process's database: the second "replica" is the same server there.
  const replicated = backend === "postgres";
  describe(`advisory answers kept in memory [${backend}]${replicated ? " on two replicas of one database" : ""}`, () => {
    let a: TestServer;
    let b: TestServer;
    let opA: Api;
    let opB: Api;
    let org: Json;
    let member: Api;
    let stranger: Api;
    let memberToken: string;
    let other: Json;
    const publicGroup = randomBytes(20).toString("hex");
    let next = 1000;

    const importInto = async (api: Api, parent: string, pkg: string, fixedIn = "1.0.0-r1") => {
      const id = cgaId(next++);
      const res = ok(
        await api.post(IMPORT_PATH, {
          parent,
          documents: [
            {
              name: `${pkg}-${id}.advisories.yaml`,
              content: fixedAdvisoriesDocument(pkg, [{ id, fixedIn, aliases: [`CVE-2024-${next}`] }]),
            },
          ],
        }),
        "import",
      );
      assert.equal(res.results[0].problem, undefined, JSON.stringify(res.results[0]));
      return id;
    };
    const page = async (api: Api, params: Record<string, string | number> = {}) =>
      ok(await api.get(ADVISORIES_PATH + query({ page_size: 2, ...params })), "list");
    const ids = (p: Json) => (p.advisories ?? []).map((x: Json) => x.advisoryId as string);
    const batch = async (server: TestServer, token: string | undefined, queries: Json[]) => {
      const res = await fetch(`${server.url}/v1/querybatch`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ queries }),
      });
      assert.equal(res.status, 200);
      return ((await res.json()) as Json).results.map((r: Json) => (r.vulns ?? []).map((v: Json) => v.id as string));
    };

    before(async () => {
      a = await startTestServer(backend, {
        publicUrls: PUBLIC_URLS,
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
      });
      b = replicated
        ? await startTestServer(backend, {
            publicUrls: PUBLIC_URLS,
            replicaOf: a,
            advisories: { publicGroups: [publicGroup] },
          })
        : a;
      opA = restClient(a.url, a.operatorToken);
      opB = restClient(b.url, b.operatorToken);
      org = await createGroup(opA, undefined, "answers-org");
      const orgMember = await createIdentity(opA, org.uid, "member", "answers-member");
      await createRoleBinding(opA, org.uid, orgMember.uid, VIEWER_ROLE_UID);
      memberToken = await b.tokenFor(orgMember.uid);
      member = restClient(b.url, memberToken);
      other = await createGroup(opA, undefined, "answers-other");
      const outsider = await createIdentity(opA, other.uid, "outsider", "answers-outsider");
      await createRoleBinding(opA, other.uid, outsider.uid, VIEWER_ROLE_UID);
      stranger = restClient(b.url, await b.tokenFor(outsider.uid));
      await importInto(opA, publicGroup, "pub-pkg");
      await importInto(opA, org.uid, "org-pkg");
      await importInto(opA, other.uid, "other-pkg");
    });
    after(async () => {
      if (b !== a) await b?.close();
      await a?.close();
    });

    it("an import changes the next ListAdvisories answer on either server (plain, query, latest event type)", async () => {
      const requests: Record<string, string>[] = [
        {},
        { query: "cve-2024" },
        { latest_event_type: "EVENT_TYPE_FILTER_FIXED" },
        { "uidp.childrenOf": org.uid },
      ];
      for (const r of requests) {
        // kept on both servers (asked twice)
        const before = [await page(opA, r), await page(opA, r), await page(opB, r), await page(opB, r)];
        for (const p of before) assert.equal(p.totalCount, before[0]!.totalCount, JSON.stringify(r));
        const added = await importInto(opA, org.uid, `aaa-${next}`);
        for (const [label, api] of [
          ["importing server", opA],
          ["other server", opB],
        ] as const) {
          const now = await page(api, r);
          assert.equal(Number(now.totalCount), Number(before[0]!.totalCount) + 1, `${label} ${JSON.stringify(r)}`);
          // advisory ids sort first-to-last by their number: the new one is on no first page, but
          // the whole listing has it
          const all = await listAllAdvisories(api, r);
          assert.ok(
            all.items.some((x) => x.advisoryId === added),
            `${label} ${JSON.stringify(r)} lists ${added}`,
          );
          assert.equal(all.total, all.items.length, `${label} ${JSON.stringify(r)}: totalCount exact`);
        }
      }
    });

    it("an import moving an advisory's status changes the status listing at once, on either server", async () => {
      const group = await createGroup(opA, org.uid, "moving");
      const id = cgaId(next++);
      const doc = (fixed: boolean) => ({
        name: "m.yaml",
        content: [
          "schema-version: 2.0.2",
          "package:",
          "  name: moving-pkg",
          "advisories:",
          `  - id: ${id}`,
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
        ].join("\n"),
      });
      ok(await opA.post(IMPORT_PATH, { parent: group.uid, documents: [doc(false)] }), "import detected");
      const filter = { latest_event_type: "EVENT_TYPE_FILTER_FIXED", "uidp.childrenOf": group.uid };
      for (const api of [opA, opB, opA, opB]) assert.deepEqual(ids(await page(api, filter)), []);
      ok(await opA.post(IMPORT_PATH, { parent: group.uid, documents: [doc(true)] }), "import fixed");
      for (const api of [opB, opA]) {
        const p = await page(api, filter);
        assert.deepEqual(ids(p), [id]);
        assert.equal(Number(p.totalCount), 1);
      }
    });

    it("callers who see different groups never get each other's kept answers", async () => {
      const all = await listAllAdvisories(opB);
      const mine = all.items.filter((x) => x.uid.startsWith(`${org.uid}/`) || x.uid.startsWith(`${publicGroup}/`));
      const theirs = all.items.filter((x) => x.uid.startsWith(`${other.uid}/`) || x.uid.startsWith(`${publicGroup}/`));
      assert.ok(mine.length < all.items.length && theirs.length < all.items.length);
      assert.ok(mine.some((x) => !theirs.includes(x)) && theirs.some((x) => !mine.includes(x)));
      // the same request, alternating callers, each answer kept after the first
      for (let round = 0; round < 3; round++)
        for (const [who, api, want] of [
          ["operator", opB, all.items],
          ["member", member, mine],
          ["stranger", stranger, theirs],
        ] as const) {
          const p = await page(api, { page_size: 200 });
          assert.deepEqual(
            ids(p),
            want.map((x) => x.advisoryId),
            `${who} round ${round}`,
          );
          assert.equal(Number(p.totalCount), want.length, `${who} round ${round}`);
        }
    });

    it("a kept answer's page token continues the walk, on either server", async () => {
      for (let i = 0; i < 2; i++) {
        const first = await page(opA, { page_size: 1 });
        assert.ok(first.nextPageToken);
        const second = await page(opB, { page_size: 1, page_token: first.nextPageToken });
        assert.notDeepEqual(ids(second), ids(first));
        const again = await page(opA, { page_size: 1, page_token: first.nextPageToken });
        assert.deepEqual(ids(again), ids(second));
      }
    });

    it("querybatch: an import changes the next answer on either server; each caller matches only what it sees", async () => {
      const queries = [
        { package: { name: "batch-pkg", ecosystem: "Wolfi" }, version: "1.0.0-r0" },
        { package: { purl: "pkg:apk/wolfi/batch-pkg@1.0.0-r0" } },
        { package: { name: "batch-pkg", ecosystem: "Wolfi" }, version: "2.0.0-r0" },
      ];
      const anonymousB = () => batch(b, undefined, queries);
      assert.deepEqual(await anonymousB(), [[], [], []]);
      assert.deepEqual(await batch(a, a.operatorToken, queries), [[], [], []]);
      const orgId = await importInto(opA, org.uid, "batch-pkg");
      // the org's advisory: the operator sees it on either server, anonymous callers (public only) do not
      for (const server of [b, a])
        assert.deepEqual(await batch(server, server.operatorToken, queries), [[orgId], [orgId], []]);
      assert.deepEqual(await anonymousB(), [[], [], []]);
      const publicId = await importInto(opA, publicGroup, "batch-pkg", "3.0.0-r0");
      assert.deepEqual(await anonymousB(), [[publicId], [publicId], [publicId]]);
      const both = [orgId, publicId].sort();
      for (const server of [a, b])
        assert.deepEqual(await batch(server, server.operatorToken, queries), [both, both, [publicId]]);
      assert.deepEqual(await batch(b, memberToken, queries), [both, both, [publicId]]);
      // the index answers as reading the candidates did: /v1/query (which reads them) agrees
      for (const [i, q] of queries.entries()) {
        const res = await fetch(`${b.url}/v1/query`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${b.operatorToken}` },
          body: JSON.stringify(q),
        });
        const got = (((await res.json()) as Json).vulns ?? []).map((v: Json) => v.id as string).sort();
        assert.deepEqual(got, [both, both, [publicId]][i], JSON.stringify(q));
      }
    });

    it("concurrent imports into one group and into others all commit, with exact counts", async () => {
      const groups = [await createGroup(opA, org.uid, "c1"), await createGroup(opA, org.uid, "c2")];
      const base = next;
      next += 100;
      // overlapping documents: the same advisories from several imports at once, on both servers
      // (in different orders), created by the first round, updated by the second
      const doc = (k: number, round: number) => ({
        name: `c${k}.yaml`,
        content: fixedAdvisoriesDocument(
          "concurrent-pkg",
          (k % 2 ? [3, 2, 1, 0] : [0, 1, 2, 3]).map((j) => ({
            id: cgaId(base + ((k + j) % 6)),
            fixedIn: `${round}.0.${k}-r1`,
          })),
        ),
      });
      for (const round of [1, 2]) {
        const imports = [];
        for (let k = 0; k < 6; k++)
          for (const g of groups)
            imports.push((k % 2 ? opB : opA).post(IMPORT_PATH, { parent: g.uid, documents: [doc(k, round)] }));
        for (const res of await Promise.all(imports)) {
          const body = ok(res, `import, round ${round}`);
          assert.equal(body.results[0].problem, undefined, JSON.stringify(body.results[0]));
        }
        for (const g of groups)
          for (const api of [opA, opB]) {
            const { items, total } = await listAllAdvisories(api, { "uidp.childrenOf": g.uid });
            assert.equal(items.length, 6);
            assert.equal(total, 6);
            const fixed = await listAllAdvisories(api, {
              "uidp.childrenOf": g.uid,
              latest_event_type: "EVENT_TYPE_FILTER_FIXED",
            });
            assert.equal(fixed.total, 6);
          }
      }
    });

    it("16 imports at once naming the same new advisories in opposite orders all commit, round after round", async () => {
      // Two imports could each write a row the other was about to and deadlock on PostgreSQL (a
      // 500): one creating an advisory the other was updating, or both creating them in opposite
      // orders. Seen at ~1% of such imports; these rounds make 320.
      const group = await createGroup(opA, org.uid, "deadlock");
      const rounds = 20;
      for (let round = 0; round < rounds; round++) {
        const ids = Array.from({ length: 6 }, () => cgaId(next++));
        const imports = Array.from({ length: 16 }, (_, k) =>
          (k % 2 ? opB : opA).post(IMPORT_PATH, {
            parent: group.uid,
            documents: [
              {
                name: `d${k}.yaml`,
                content: fixedAdvisoriesDocument(
                  "deadlock-pkg",
                  (k % 2 ? [3, 2, 1, 0] : [0, 1, 2, 3]).map((j) => ({ id: ids[(k + j) % 6]!, fixedIn: `1.0.${k}-r1` })),
                ),
              },
            ],
          }),
        );
        for (const res of await Promise.all(imports)) {
          const body = ok(res, `import, round ${round}`);
          assert.equal(body.results[0].problem, undefined, JSON.stringify(body.results[0]));
        }
      }
      const { items, total } = await listAllAdvisories(opB, { "uidp.childrenOf": group.uid });
      assert.equal(items.length, 6 * rounds);
      assert.equal(total, 6 * rounds);
    });

    it("two requests of the same new documents in opposite orders, at once, both commit", async () => {
      // A request's documents share one transaction: the first request's first document and the
      // second's first document each created what the other's second document then waited for.
      const group = await createGroup(opA, org.uid, "two-documents");
      const rounds = 10;
      for (let round = 0; round < rounds; round++) {
        const documents = ["x", "y"].map((name) => ({
          name: `${name}.yaml`,
          content: fixedAdvisoriesDocument(`${name}-pkg`, [
            { id: cgaId(next++), fixedIn: "1.0.0-r1" },
            { id: cgaId(next++), fixedIn: "1.0.0-r1" },
          ]),
        }));
        const [first, second] = await Promise.all([
          opA.post(IMPORT_PATH, { parent: group.uid, documents }),
          opB.post(IMPORT_PATH, { parent: group.uid, documents: [...documents].reverse() }),
        ]);
        for (const [label, res] of [
          ["in order", first],
          ["reversed", second],
        ] as const) {
          const body = ok(res, `import ${label}, round ${round}`);
          for (const result of body.results) assert.equal(result.problem, undefined, JSON.stringify(result));
        }
      }
      const { total } = await listAllAdvisories(opB, { "uidp.childrenOf": group.uid });
      assert.equal(total, 4 * rounds);
    });
  });
}
