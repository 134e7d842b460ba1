// Maintained group counts (migration 010): a List of one group's children or subtree takes its
// totalCount from counts the database keeps, so they must equal a real count after any mix of
// creates and deletes — through the API, in bulk SQL statements, concurrently — and a caller who
// sees only part of the subtree must still get the count of what it sees.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import { backends } from "../support/db-templates.js";
import { createGroup, createRoleBinding } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { workload } from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seededRandom as random } from "../support/seeded.js";

const G = "/iam/v2beta1/groups";

for (const backend of backends()) {
  describe(`maintained group counts [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
    });
    after(() => server.close());

    /** totalCount as the API answers it, and the real count by SQL. */
    async function totals(filter: "children_of" | "descendants_of", uid: string) {
      const res = await api.get(`${G}?uidp.${filter}=${uid}&page_size=1`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const where =
        filter === "children_of"
          ? sql`parent_uid = ${uid}`
          : sql`(uid = ${uid} or (uid > ${uid + "/"} and uid < ${uid + "0"}))`;
      const { rows } = await sql<{ n: string }>`select count(*)::text as n from groups where ${where}`.execute(
        server.db,
      );
      return { api: res.body.totalCount as string, real: rows[0]!.n };
    }

    async function assertCounts(uids: string[], where: string) {
      for (const uid of uids)
        for (const filter of ["children_of", "descendants_of"] as const) {
          const t = await totals(filter, uid);
          assert.equal(t.api, t.real, `${where}: ${filter} ${uid}`);
        }
    }

    it("equal real counts after random creates and deletes through the API", async () => {
      const next = random(20261125);
      const org = await createGroup(api, undefined, "counted");
      const live: string[] = [org.uid];
      for (let step = 0; step < 60; step++) {
        const leaves = [];
        for (const uid of live.slice(1)) {
          const kids = await api.get(`${G}?uidp.children_of=${uid}&page_size=1`);
          if (kids.body.totalCount === "0") leaves.push(uid);
        }
        if (leaves.length > 0 && next() < 0.3) {
          const victim = leaves[Math.floor(next() * leaves.length)]!;
          assert.equal((await api.delete(`${G}/${victim}`)).status, 200);
          live.splice(live.indexOf(victim), 1);
        } else {
          const parent = live[Math.floor(next() * live.length)]!;
          live.push((await createGroup(api, parent, `g${step}`)).uid);
        }
      }
      await assertCounts(live, "after 60 random steps");
    });

    it("equal real counts after multi-row SQL inserts and deletes", async () => {
      const org = await createGroup(api, undefined, "bulk");
      const a = await createGroup(api, org.uid, "a");
      // 30 children of a, each with 3 children, in two statements
      await sql`
        insert into groups (uid, parent_uid, name, create_time, update_time)
        select ${a.uid} || '/' || lpad(to_hex(i), 16, '0'), ${a.uid}, 'c' || i,
               date_trunc('milliseconds', now()), date_trunc('milliseconds', now())
        from generate_series(1, 30) i`.execute(server.db);
      await sql`
        insert into groups (uid, parent_uid, name, create_time, update_time)
        select p.uid || '/' || lpad(to_hex(j), 16, '0'), p.uid, 'd' || j,
               date_trunc('milliseconds', now()), date_trunc('milliseconds', now())
        from groups p, generate_series(1, 3) j where p.parent_uid = ${a.uid}`.execute(server.db);
      await assertCounts([org.uid, a.uid, `${a.uid}/${"1".padStart(16, "0")}`], "after bulk inserts");
      // grandchildren of the first ten children, in one statement
      await sql`delete from groups where parent_uid in (
        select uid from groups where parent_uid = ${a.uid} order by uid limit 10)`.execute(server.db);
      await assertCounts([org.uid, a.uid, `${a.uid}/${"1".padStart(16, "0")}`], "after a bulk delete");
    });

    it("stay right under concurrent creates in one organization", async () => {
      const org = await createGroup(api, undefined, "busy");
      const mids = await Promise.all([1, 2, 3].map((i) => createGroup(api, org.uid, `m${i}`)));
      await Promise.all(Array.from({ length: 60 }, (_, i) => createGroup(api, mids[i % 3]!.uid, `leaf${i}`)));
      await assertCounts([org.uid, ...mids.map((m) => m.uid)], "after 60 concurrent creates");
      const t = await totals("descendants_of", org.uid);
      assert.equal(t.api, "64");
    });

    it("a caller who sees part of a subtree gets the count of what it sees", async () => {
      const org = await createGroup(api, undefined, "partial");
      const seen = await createGroup(api, org.uid, "seen");
      await createGroup(api, org.uid, "unseen");
      await createGroup(api, seen.uid, "seen-child");
      const w = await workload(server, api, org.uid, `partial-${Date.now()}`);
      await createRoleBinding(api, seen.uid, w.uid);
      const mine = restClient(server.url, w.token);
      const descendants = await mine.get(`${G}?uidp.descendants_of=${org.uid}`);
      assert.equal(descendants.status, 200);
      assert.equal(descendants.body.totalCount, "2", "seen and its child, not the org or unseen");
      assert.equal(descendants.body.groups.length, 2);
      const children = await mine.get(`${G}?uidp.children_of=${org.uid}`);
      assert.equal(children.body.totalCount, "1");
      const inside = await mine.get(`${G}?uidp.descendants_of=${seen.uid}`);
      assert.equal(inside.body.totalCount, "2", "the maintained count, all of it visible");
    });

    it("a name filter or a missing group still counts exactly", async () => {
      const org = await createGroup(api, undefined, "filtered");
      await createGroup(api, org.uid, "x");
      await createGroup(api, org.uid, "y");
      const byName = await api.get(`${G}?uidp.children_of=${org.uid}&name=x`);
      assert.equal(byName.body.totalCount, "1");
      const missing = await api.get(`${G}?uidp.descendants_of=${"f".repeat(40)}`);
      assert.equal(missing.status, 200);
      assert.equal(missing.body.totalCount, "0");
      assert.deepEqual(missing.body.groups, []);
    });
  });
}
