// Vulnerability advisories on every backend: real documents (test/fixtures/advisories) imported
// through the import extension, idempotently; ListAdvisories / GetAdvisory over REST and gRPC
// with every filter checked against a brute-force filter over the same advisories (a seeded
// property test); canonical JSON of the event oneof and enums; who may read and import (public
// advisory groups included); the OSV API and the secdb feed.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { equals, fromJson } from "@bufbuild/protobuf";
import {
  AdvisoriesService,
  AdvisorySchema,
} from "../../src/gen/chainguard/platform/vulnerabilities/v2beta1/advisories_pb.js";
import { AdvisoryImportService } from "../../src/gen/bulwark/vulnerabilities/v1/import_pb.js";
import {
  assertNotFound,
  assertPermissionDenied,
  assertRpcError,
  assertUnauthenticated,
  ok,
} from "../support/assertions.js";
import {
  ADVISORIES_PATH,
  ADVISORY_FIXTURES,
  fixtureDocument,
  fixtureFiles,
  IMPORT_PATH,
  listAllAdvisories,
} from "../support/advisories.js";
import { backends } from "../support/db-templates.js";
import {
  createGroup,
  createIdentity,
  createRole,
  createRoleBinding,
  VIEWER_ROLE_UID,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { query, restClient, type JsonResponse } from "../support/http.js";
import { bearer, startTestServer, type TestServer } from "../support/server.js";

/** The kind name (event YAML spelling) of an API event. */
const MEMBERS: Record<string, string> = {
  detection: "detection",
  truePositiveDetermination: "true-positive-determination",
  fixed: "fixed",
  falsePositiveDetermination: "false-positive-determination",
  analysisNotPlanned: "analysis-not-planned",
  fixNotPlanned: "fix-not-planned",
  pendingUpstreamFix: "pending-upstream-fix",
  patched: "patched",
};
const kindOf = (event: Json) => MEMBERS[Object.keys(event).find((k) => k in MEMBERS)!]!;
const FILTER_OF_KIND: Record<string, string> = Object.fromEntries(
  Object.values(MEMBERS).map((k) => [k, `EVENT_TYPE_FILTER_${k.toUpperCase().replace(/-/g, "_")}`]),
);

for (const backend of backends()) {
  describe(`vulnerability advisories [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    let org: Json;
    let all: Json[];
    const publicGroup = randomBytes(20).toString("hex");

    before(async () => {
      server = await startTestServer(backend, {
        rootGroups: [{ uid: publicGroup, name: "public advisories" }],
        advisories: { publicGroups: [publicGroup] },
      });
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "advisory publisher");
      const res = ok(
        await api.post(IMPORT_PATH, { parent: org.uid, documents: fixtureFiles().map(fixtureDocument) }),
        "import",
      );
      for (const r of res.results) assert.equal(r.problem, undefined, `${r.name}: ${JSON.stringify(r.problem)}`);
      all = (await listAllAdvisories(api, { "uidp.childrenOf": org.uid })).items;
    });
    after(() => server?.close());

    it("imports every fixture: counts as an independent count of the files says, each advisory in its group", async () => {
      const expected = JSON.parse(readFileSync(join(ADVISORY_FIXTURES, "expected.json"), "utf8")) as ExpectedFixtures;
      const files = expectedFiles(expected);
      const wantAdvisories = files.reduce((n, f) => n + f.advisories.length, 0);
      const wantEvents = files.reduce((n, f) => n + f.events, 0);
      assert.equal(all.length, wantAdvisories);
      assert.equal(
        all.reduce((n, a) => n + a.events.length, 0),
        wantEvents,
      );
      const byId = new Map(all.map((a) => [a.advisoryId as string, a]));
      for (const f of files)
        for (const want of f.advisories) {
          const got = byId.get(want.id) ?? all.find((a) => a.legacyAdvisoryId === want.id);
          assert.ok(got, `${f.file}: ${want.id} missing`);
          assert.ok(got.uid.startsWith(`${org.uid}/`));
          for (const alias of want.aliases) assert.ok(got.aliases.includes(alias), `${want.id}: alias ${alias}`);
          assert.equal(kindOf(got.events.at(-1)), want.latest, `${want.id}: latest event`);
          if (want.fixedVersion) assert.equal(got.events.at(-1).fixed.fixedVersion, want.fixedVersion);
        }
    });

    it("renders the event oneof, enums and severities in canonical JSON as the reference names them", async () => {
      const kinds = new Set(all.flatMap((a) => a.events.map(kindOf)));
      assert.deepEqual([...kinds].sort(), Object.values(MEMBERS).sort(), "every event kind is covered by the fixtures");
      const fp = all.flatMap((a) => a.events).find((e) => e.falsePositiveDetermination);
      assert.match(fp.falsePositiveDetermination.type, /^TYPE_[A-Z_]+$/);
      const event = all[0]!.events[0]!;
      assert.equal(event.reviewState, "REVIEW_STATE_APPROVED");
      assert.match(event.createTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.match(event.uid, new RegExp(`^${all[0]!.uid}/[0-9a-f]{16}$`));
      const scan = all.flatMap((a) => a.events).find((e) => e.detection?.scanv1);
      assert.ok(scan.detection.scanv1.component, "scan/v1 detection carries its component");
      const severe = all.find((a) => a.severities?.length);
      assert.ok(severe, "an OSV record with a CVSS severity");
      assert.match(severe.severities[0].type, /^TYPE_CVSS_V[234]$/);
      const legacy = all.find((a) => a.legacyAdvisoryId);
      assert.ok(legacy, "a legacy (CVE-style) advisory id is kept");
      assert.match(legacy.advisoryId, /^CGA(-[23456789cfghjmpqrvwx]{4}){3}$/);

      // GetAdvisory answers the same advisory, over REST and gRPC alike.
      const one = all.find((a) => a.events.length > 2) ?? all[0]!;
      assert.deepEqual(ok(await api.get(`${ADVISORIES_PATH}/${one.uid}`)), one);
      const grpc = createClient(
        AdvisoriesService,
        createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(server.operatorToken)] }),
      );
      const asMessage = fromJson(AdvisorySchema, one);
      assert.ok(equals(AdvisorySchema, await grpc.getAdvisory({ uid: one.uid }), asMessage), "gRPC GetAdvisory");
      const listed = await grpc.listAdvisories({ uidp: { childrenOf: org.uid }, advisoryIds: [one.advisoryId] });
      assert.equal(listed.advisories.length, 1);
      assert.ok(equals(AdvisorySchema, listed.advisories[0]!, asMessage), "gRPC ListAdvisories");
    });

    it("re-importing changes nothing; a changed document updates in place, events appended not duplicated", async () => {
      const before = ok(
        await api.post(IMPORT_PATH, { parent: org.uid, documents: fixtureFiles().map(fixtureDocument) }),
      );
      for (const r of before.results) {
        assert.equal(r.advisoriesCreated ?? 0, 0, r.name);
        assert.equal(r.advisoriesUpdated ?? 0, 0, r.name);
        assert.equal(r.eventsAdded ?? 0, 0, r.name);
      }
      const again = (await listAllAdvisories(api, { "uidp.childrenOf": org.uid })).items;
      assert.deepEqual(again, all, "nothing changed, not even update times");

      // A document of our own, then the same document with one more event and one more alias.
      const group = await createGroup(api, undefined, "changes");
      const doc = (events: string[], aliases: string[]) =>
        [
          "schema-version: 2.0.2",
          "package:",
          "  name: changing",
          "advisories:",
          "  - id: CGA-2222-3333-4444",
          "    aliases:",
          ...aliases.map((a) => `      - ${a}`),
          "    events:",
          ...events,
        ].join("\n") + "\n";
      const detection = [
        "      - timestamp: 2024-01-01T00:00:00Z",
        "        type: detection",
        "        data:",
        "          type: manual",
      ];
      const fixed = [
        "      - timestamp: 2024-02-01T00:00:00Z",
        "        type: fixed",
        "        data:",
        "          fixed-version: 1.2.3-r1",
      ];
      const first = ok(
        await api.post(IMPORT_PATH, {
          parent: group.uid,
          documents: [{ name: "c.yaml", content: doc(detection, ["CVE-2024-0001"]) }],
        }),
      );
      assert.equal(first.results[0].advisoriesCreated, 1);
      assert.equal(first.results[0].eventsAdded, 1);
      const created = (await listAllAdvisories(api, { "uidp.childrenOf": group.uid })).items[0]!;
      const second = ok(
        await api.post(IMPORT_PATH, {
          parent: group.uid,
          documents: [
            { name: "c.yaml", content: doc([...detection, ...fixed], ["CVE-2024-0001", "GHSA-aaaa-bbbb-cccc"]) },
          ],
        }),
      );
      assert.equal(second.results[0].advisoriesUpdated, 1);
      assert.equal(second.results[0].eventsAdded, 1);
      const updated: any[] = (await listAllAdvisories(api, { "uidp.childrenOf": group.uid })).items;
      assert.equal(updated.length, 1);
      assert.equal(updated[0].uid, created.uid, "updated in place");
      assert.deepEqual(updated[0].aliases, ["CVE-2024-0001", "GHSA-aaaa-bbbb-cccc"]);
      assert.equal(updated[0].events.length, 2);
      assert.equal(updated[0].events[0].uid, created.events[0].uid, "the kept event keeps its uid");
      assert.equal(updated[0].events[1].fixed.fixedVersion, "1.2.3-r1");
      assert.equal(updated[0].createTime, created.createTime);
    });

    it("a bad document is reported with its line and skipped: nothing of it written, the others imported", async () => {
      const group = await createGroup(api, undefined, "bad documents");
      const bad = readdirSync(join(ADVISORY_FIXTURES, "own", "bad")).sort();
      assert.ok(bad.length >= 3);
      const good = fixtureFiles().find((f) => f.endsWith(".yaml"))!;
      const res = ok(
        await api.post(IMPORT_PATH, {
          parent: group.uid,
          documents: [
            ...bad.map((f) => ({ name: f, content: readFileSync(join(ADVISORY_FIXTURES, "own", "bad", f), "utf8") })),
            fixtureDocument(good),
          ],
        }),
      );
      for (const r of res.results.slice(0, bad.length)) {
        assert.ok(r.problem?.message, `${r.name} is refused`);
        assert.ok(!r.advisoriesCreated, r.name);
      }
      assert.ok(
        res.results.some((r: Json) => r.problem?.line > 0),
        "problems carry lines",
      );
      assert.equal(res.results.at(-1).problem, undefined);
      const listed = (await listAllAdvisories(api, { "uidp.childrenOf": group.uid })).items;
      const goodIds = new Set(listed.map((a) => a.advisoryId));
      assert.equal(listed.length, res.results.at(-1).advisoriesCreated, "only the good document's advisories");
      assert.ok(goodIds.size > 0);
    });

    it("import: request rules, group, capabilities", async () => {
      assertRpcError(await api.post(IMPORT_PATH, { parent: org.uid, documents: [] }), 400, 3, "no documents");
      assertRpcError(
        await api.post(IMPORT_PATH, { parent: "nope", documents: [{ name: "a", content: "x" }] }),
        400,
        3,
        "bad parent",
      );
      const missing = randomBytes(20).toString("hex");
      assertNotFound(
        await api.post(IMPORT_PATH, { parent: missing, documents: [fixtureDocument(fixtureFiles()[0]!)] }),
        "no such group",
      );
      // No parent: the server's default group (the first public one), for the operator.
      const defaulted = ok(await api.post(IMPORT_PATH, { documents: [fixtureDocument(fixtureFiles()[0]!)] }));
      assert.ok(defaulted.results[0].advisoriesCreated > 0);

      // A viewer reads but cannot import; a role with advisories.create + update imports.
      const viewer = await createIdentity(api, org.uid, "advisory viewer", "adv-viewer");
      await createRoleBinding(api, org.uid, viewer.uid, VIEWER_ROLE_UID);
      const asViewer = restClient(server.url, await server.tokenFor(viewer.uid));
      assertPermissionDenied(
        await asViewer.post(IMPORT_PATH, { parent: org.uid, documents: [fixtureDocument(fixtureFiles()[0]!)] }),
        "viewer import",
      );
      assert.equal((await listAllAdvisories(asViewer, { "uidp.childrenOf": org.uid })).items.length, all.length);
      const role = await createRole(api, org.uid, "advisory importer", [
        "CAP_ADVISORIES_CREATE",
        "CAP_ADVISORIES_UPDATE",
      ]);
      const importer = await createIdentity(api, org.uid, "importer", "adv-importer");
      await createRoleBinding(api, org.uid, importer.uid, role.uid);
      const asImporter = restClient(server.url, await server.tokenFor(importer.uid));
      const team = await createGroup(api, org.uid, "importers team");
      const imported = ok(
        await asImporter.post(IMPORT_PATH, { parent: team.uid, documents: [fixtureDocument(fixtureFiles()[0]!)] }),
      );
      assert.ok(imported.results[0].advisoriesCreated > 0);
      const mine = (await listAllAdvisories(api, { "uidp.childrenOf": team.uid })).items;
      assert.ok(mine.every((a) => a.author === importer.uid && a.events.every((e: Json) => e.author === importer.uid)));
      assertUnauthenticated(
        await restClient(server.url).post(IMPORT_PATH, { parent: org.uid, documents: [] }),
        "no token",
      );

      // Over gRPC too.
      const grpc = createClient(
        AdvisoryImportService,
        createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(server.operatorToken)] }),
      );
      const viaGrpc = await grpc.importAdvisories({
        parent: org.uid,
        documents: [fixtureDocument(fixtureFiles()[0]!)],
      });
      assert.equal(viaGrpc.results[0]!.advisoriesCreated, 0);
    });

    it("visibility: other organizations see nothing; a public advisory group is read by every authenticated caller", async () => {
      const other = await createGroup(api, undefined, "other org");
      const stranger = await createIdentity(api, other.uid, "stranger", "adv-stranger");
      await createRoleBinding(api, other.uid, stranger.uid, VIEWER_ROLE_UID);
      const asStranger = restClient(server.url, await server.tokenFor(stranger.uid));
      const seen = await listAllAdvisories(asStranger);
      assert.ok(
        seen.items.every((a) => a.uid.startsWith(`${publicGroup}/`)),
        "only public advisories",
      );
      assert.ok(seen.items.length > 0, "the public group's advisories (imported by the default-group test or here)");
      assertNotFound(await asStranger.get(`${ADVISORIES_PATH}/${all[0]!.uid}`), "another org's advisory");
      ok(await asStranger.get(`${ADVISORIES_PATH}/${seen.items[0]!.uid}`), "a public advisory");
      assertUnauthenticated(await restClient(server.url).get(ADVISORIES_PATH), "anonymous");
      // A group with advisories cannot be deleted.
      const del = await api.delete(`/iam/v2beta1/groups/${org.uid}`);
      assert.equal(del.status, 400, JSON.stringify(del.body));
      assert.match(del.body.message, /advisories/);
    });

    it("every filter agrees with a brute-force filter over the same advisories (property test), with paging", async () => {
      const pick = <T>(xs: T[]) => {
        const distinct = [...new Set(xs)];
        return fc.subarray(distinct, { maxLength: Math.min(3, distinct.length) });
      };
      const values = {
        advisoryIds: all.map((a) => a.advisoryId as string),
        legacy: all.flatMap((a) => (a.legacyAdvisoryId ? [a.legacyAdvisoryId as string] : [])),
        artifactNames: all.map((a) => a.artifactName as string),
        artifactTypes: all.map((a) => a.artifactType as string),
        componentNames: all.map((a) => a.componentName as string),
        componentTypes: all.map((a) => a.componentType as string),
        componentLocations: all.map((a) => a.componentLocation as string),
        aliases: all.flatMap((a) => a.aliases as string[]),
        kinds: Object.keys(FILTER_OF_KIND),
      };
      const words = [...values.advisoryIds, ...values.aliases, ...values.artifactNames, ...values.componentNames];
      // Each case combines up to three filters (more rarely match anything), with a random page size.
      const everyFilter = fc.record({
        advisory_ids: pick(values.advisoryIds),
        legacy_advisory_ids: pick(values.legacy),
        artifact_names: pick(values.artifactNames),
        artifact_types: pick(values.artifactTypes),
        component_names: pick(values.componentNames),
        component_types: pick(values.componentTypes),
        component_locations: pick(values.componentLocations),
        aliases: pick(values.aliases),
        event_types: pick(values.kinds),
        latest_event_type: fc.constantFrom(...values.kinds),
        query: fc.tuple(fc.constantFrom(...words), fc.nat(), fc.nat(), fc.boolean()).map(([w, a, b, upper]) => {
          const start = a % w.length;
          const piece = w.slice(start, start + 1 + (b % Math.max(1, w.length - start)));
          return upper ? piece.toUpperCase() : piece;
        }),
      });
      const filterArb = fc
        .tuple(
          everyFilter,
          fc.subarray(
            [
              "advisory_ids",
              "legacy_advisory_ids",
              "artifact_names",
              "artifact_types",
              "component_names",
              "component_types",
              "component_locations",
              "aliases",
              "event_types",
              "latest_event_type",
              "query",
            ],
            { minLength: 0, maxLength: 3 },
          ),
          fc.integer({ min: 1, max: 40 }),
        )
        .map(([f, keep, page_size]) => ({
          ...Object.fromEntries(Object.entries(f).filter(([k]) => keep.includes(k))),
          page_size,
        })) as fc.Arbitrary<Json>;
      const matches = (a: Json, f: Json) => {
        const inList = (list: string[] | undefined, v: string | undefined) =>
          !list?.length || (v !== undefined && list.includes(v));
        if (!inList(f.advisory_ids, a.advisoryId)) return false;
        if (!inList(f.legacy_advisory_ids, a.legacyAdvisoryId)) return false;
        if (!inList(f.artifact_names, a.artifactName)) return false;
        if (!inList(f.artifact_types, a.artifactType)) return false;
        if (!inList(f.component_names, a.componentName)) return false;
        if (!inList(f.component_types, a.componentType)) return false;
        if (!inList(f.component_locations, a.componentLocation)) return false;
        if (f.aliases?.length && !a.aliases.some((x: string) => f.aliases.includes(x))) return false;
        if (f.event_types?.length && !a.events.some((e: Json) => f.event_types.includes(kindOf(e)))) return false;
        if (f.latest_event_type && kindOf(a.events.at(-1)) !== f.latest_event_type) return false;
        if (f.query) {
          const q = f.query.trim().toLowerCase();
          const hay = [a.advisoryId, a.legacyAdvisoryId ?? "", ...a.aliases, a.artifactName, a.componentName].map(
            (s: string) => s.toLowerCase(),
          );
          if (q && !hay.some((s) => s.includes(q))) return false;
        }
        return true;
      };
      await fc.assert(
        fc.asyncProperty(filterArb, async (f) => {
          const params = {
            "uidp.childrenOf": org.uid,
            ...f,
            event_types: f.event_types?.map((k: string) => FILTER_OF_KIND[k]!),
            latest_event_type: f.latest_event_type && FILTER_OF_KIND[f.latest_event_type],
          };
          const want = all.filter((a) => matches(a, f)).map((a) => a.uid as string);
          const got: string[] = [];
          let token: string | undefined;
          let pages = 0;
          do {
            const page = ok(
              await api.get(ADVISORIES_PATH + query({ ...params, page_token: token })),
              JSON.stringify(params),
            );
            got.push(...(page.advisories ?? []).map((a: Json) => a.uid as string));
            assert.equal(Number(page.totalCount ?? 0), want.length, `totalCount for ${JSON.stringify(params)}`);
            token = page.nextPageToken || undefined;
            assert.ok(++pages <= want.length + 1, "paging ends");
          } while (token);
          // Default order: advisory_id, then uid.
          const byId = new Map(all.map((a) => [a.uid as string, a.advisoryId as string]));
          const ordered = [...want].sort((x, y) =>
            byId.get(x)! < byId.get(y)! ? -1 : byId.get(x)! > byId.get(y)! ? 1 : x < y ? -1 : 1,
          );
          assert.deepEqual(got, ordered, JSON.stringify(params));
        }),
        { seed: Number(process.env.FUZZ_SEED ?? 20261123), numRuns: Number(process.env.FUZZ_CASES ?? 150) },
      );
    });

    it("ordering, skip and unknown enum values", async () => {
      const byArtifact = ok(
        await api.get(
          ADVISORIES_PATH + query({ "uidp.childrenOf": org.uid, order_by: "artifact_name desc", page_size: 500 }),
        ),
      );
      const names = byArtifact.advisories.map((a: Json) => a.artifactName as string);
      assert.deepEqual(names, [...names].sort().reverse());
      const skipped = ok(await api.get(ADVISORIES_PATH + query({ "uidp.childrenOf": org.uid, skip: 5, page_size: 3 })));
      assert.equal(skipped.skipped, 5);
      assert.deepEqual(
        skipped.advisories.map((a: Json) => a.uid),
        [...all]
          .sort((x, y) => (x.advisoryId < y.advisoryId ? -1 : x.advisoryId > y.advisoryId ? 1 : x.uid < y.uid ? -1 : 1))
          .slice(5, 8)
          .map((a) => a.uid),
      );
      assertRpcError(
        await api.get(ADVISORIES_PATH + query({ event_types: "EVENT_TYPE_FILTER_UNSPECIFIED" })),
        400,
        3,
        "unspecified event type",
      );
      assertRpcError(
        await api.get(ADVISORIES_PATH + query({ event_review_states: "REVIEW_STATE_UNSPECIFIED" })),
        400,
        3,
        "unspecified review state",
      );
      assertRpcError(await api.get(ADVISORIES_PATH + query({ order_by: "nope" })), 400, 3, "unknown order");
      const approved = ok(
        await api.get(
          ADVISORIES_PATH +
            query({ "uidp.childrenOf": org.uid, event_review_states: "REVIEW_STATE_APPROVED", page_size: 1 }),
        ),
      );
      assert.equal(Number(approved.totalCount), all.length);
      const pending = ok(
        await api.get(
          ADVISORIES_PATH + query({ "uidp.childrenOf": org.uid, event_review_states: "REVIEW_STATE_PENDING" }),
        ),
      );
      assert.equal(Number(pending.totalCount ?? 0), 0);
      const author = all[0]!.events[0]!.author as string;
      const byAuthor = ok(
        await api.get(ADVISORIES_PATH + query({ "uidp.childrenOf": org.uid, event_authors: author, page_size: 1 })),
      );
      assert.equal(Number(byAuthor.totalCount), all.length);
      const excluded = ok(
        await api.get(ADVISORIES_PATH + query({ "uidp.childrenOf": org.uid, exclude_event_authors: author })),
      );
      assert.equal(Number(excluded.totalCount ?? 0), 0);
      const origin = ok(
        await api.get(ADVISORIES_PATH + query({ "uidp.childrenOf": org.uid, origin: "osv", page_size: 500 })),
      );
      assert.ok(origin.advisories.length > 0 && origin.advisories.every((a: Json) => /^RUSTSEC-/.test(a.advisoryId)));
    });

    it("OSV API: /v1/vulns by id and alias, /v1/query by package and version, /v1/querybatch in order", async () => {
      const fixed = all.find((a) => kindOf(a.events.at(-1)) === "fixed" && a.artifactType === "apk")!;
      const record = ok(await api.get(`/v1/vulns/${fixed.advisoryId}`));
      assert.equal(record.id, fixed.advisoryId);
      assert.deepEqual(record.related, fixed.aliases);
      assert.deepEqual(record.affected[0].package, {
        ecosystem: "Wolfi",
        name: fixed.artifactName,
        purl: `pkg:apk/wolfi/${fixed.artifactName}`,
      });
      const version = fixed.events.at(-1).fixed.fixedVersion as string;
      assert.deepEqual(record.affected[0].ranges, [
        { type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed: version }] },
      ]);
      assertNotFound(await api.get("/v1/vulns/CGA-0000-0000-0000"), "unknown id");
      const legacy = all.find((a) => a.legacyAdvisoryId)!;
      const byLegacy = ok(await api.get(`/v1/vulns/${legacy.legacyAdvisoryId}`));
      assert.equal(byLegacy.id, legacy.advisoryId);
      assert.equal(byLegacy.database_specific.legacy_advisory_id, legacy.legacyAdvisoryId);

      const rust = all.find((a) => /^RUSTSEC-/.test(a.advisoryId) && a.aliases.length > 0)!;
      const byAlias = ok(await api.get(`/v1/vulns/${rust.aliases[0]}`));
      assert.ok(byAlias.id === rust.advisoryId || byAlias.related?.includes(rust.advisoryId), JSON.stringify(byAlias));
      const original = ok(await api.get(`/v1/vulns/${rust.advisoryId}`));
      assert.ok(original.summary, "OSV fields kept as imported");

      const q = (body: Json) => api.post("/v1/query", body);
      const affected = ok(
        await q({ package: { name: fixed.artifactName, ecosystem: "Chainguard" }, version: "0.0.1-r0" }),
      );
      assert.ok(
        affected.vulns.some((v: Json) => v.id === fixed.advisoryId),
        "an old version is affected",
      );
      const patched = ok(await q({ package: { purl: `pkg:apk/chainguard/${fixed.artifactName}@${version}` } }));
      assert.ok(!(patched.vulns ?? []).some((v: Json) => v.id === fixed.advisoryId), "the fixed version is not");
      assertRpcError(await q({ package: {} }), 400, 3, "no package");
      // osv.dev's documented clients post with `curl -d`: JSON sent as a form is JSON.
      const asForm = await fetch(`${server.url}/v1/query`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${server.operatorToken}`,
          "content-type": "application/x-www-form-urlencoded",
        },
        body: JSON.stringify({ package: { name: fixed.artifactName, ecosystem: "Chainguard" }, version: "0.0.1-r0" }),
      });
      assert.equal(asForm.status, 200);
      assert.ok(((await asForm.json()) as Json).vulns.some((v: Json) => v.id === fixed.advisoryId));
      assertRpcError(await api.call("POST", "/v1/query", "not json"), 400, 3, "not JSON");
      assertRpcError(await api.call("POST", "/v1/query"), 400, 3, "no body");
      assertRpcError(await q({ package: { purl: "nope" } }), 400, 3, "bad purl");

      const queries = [
        { package: { name: fixed.artifactName, ecosystem: "Chainguard" }, version: "0.0.1-r0" },
        { package: { name: "no-such-package", ecosystem: "Chainguard" } },
        { package: { purl: rust.affected?.[0]?.package?.purl ?? `pkg:cargo/${rust.artifactName}` } },
      ];
      const batch = ok(await api.post("/v1/querybatch", { queries }));
      assert.equal(batch.results.length, 3);
      assert.ok(batch.results[0].vulns.some((v: Json) => v.id === fixed.advisoryId && v.modified));
      assert.deepEqual(batch.results[1], {});
      assert.ok(batch.results[2].vulns.some((v: Json) => v.id === rust.advisoryId));
      const tooMany = Array.from({ length: 1001 }, () => queries[1]);
      assertRpcError(await api.post("/v1/querybatch", { queries: tooMany }), 400, 3, "1,001 queries");
      // Anonymously, the public advisory group's advisories only (the import test put one document there).
      const anonymous = ok(await restClient(server.url).post("/v1/querybatch", { queries }), "anonymous");
      const publicIds = new Set(
        (await listAllAdvisories(api, { "uidp.childrenOf": publicGroup })).items.map((a) => a.advisoryId),
      );
      const anonymousIds = anonymous.results.flatMap((r: Json) => (r.vulns ?? []).map((v: Json) => v.id));
      assert.ok(
        anonymousIds.every((id: string) => publicIds.has(id)),
        JSON.stringify(anonymous),
      );
      assert.ok(!anonymousIds.includes(rust.advisoryId), "the organization's OSV record");
    });

    it('secdb feed: fixed versions and false positives (under "0") per package, streamed from the database', async () => {
      const res = await fetch(`${server.url}/vulnerabilities/secdb.json`, {
        headers: { authorization: `Bearer ${server.operatorToken}` },
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /application\/json/);
      const secdb = (await res.json()) as Json;
      const byName = new Map<string, Json>(secdb.packages.map((p: Json) => [p.pkg.name, p.pkg.secfixes]));
      const apk = all.filter((a) => a.artifactType === "apk");
      for (const a of apk) {
        const latest = kindOf(a.events.at(-1));
        const secfixes = byName.get(a.artifactName);
        if (latest === "fixed")
          assert.ok(secfixes?.[a.events.at(-1).fixed.fixedVersion]?.includes(a.advisoryId), a.advisoryId);
        else if (latest === "false-positive-determination")
          assert.ok(secfixes?.["0"]?.includes(a.advisoryId), a.advisoryId);
        else
          assert.ok(
            !Object.values(secfixes ?? {}).some((ids) => (ids as string[]).includes(a.advisoryId)),
            a.advisoryId,
          );
      }
      assert.ok(
        !secdb.packages.some((p: Json) => all.some((a) => a.artifactName === p.pkg.name && a.artifactType !== "apk")),
      );
    });
  });
}

interface ExpectedAdvisory {
  id: string;
  aliases: string[];
  latest: string;
  fixedVersion?: string;
}

/** expected.json (computed from the fixtures with Python's yaml and json modules, not our parser). */
interface ExpectedFixtures {
  files: Record<
    string,
    {
      advisories: number;
      events: number;
      items: { id: string; aliases: string[]; latestEventType: string; fixedVersion?: string }[];
    }
  >;
}

function expectedFiles(expected: ExpectedFixtures): { file: string; events: number; advisories: ExpectedAdvisory[] }[] {
  return Object.entries(expected.files).map(([file, f]) => ({
    file,
    events: f.events,
    advisories: f.items.map((i) => ({
      id: i.id,
      aliases: i.aliases,
      latest: i.latestEventType,
      fixedVersion: i.fixedVersion,
    })),
  }));
}
