// The list engine, black box over REST (GET /iam/v2beta1/groups), on every backend:
// page_size, cursor page tokens (opaque, tamper-proof, order-preserving, 3-day expiry that
// restarts the walk, bound to their filter and order), order_by, skip / skipped, totalCount,
// the uidp and name filters, and full walks over a 500-group tree in every order.
//
// Expected results are always computed here, in JS, from the groups this file created (as the
// server returned them): strings compare bytewise (the "C" collation; plain `<` on ASCII),
// timestamps as their ISO strings, and ties are broken by uid in the direction of the first key.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { backends } from "../support/db-templates.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { query, restClient, type QueryParams as Params } from "../support/http.js";
import { skipWalkModel } from "../support/lists.js";
import { assertInvalidArgument } from "../support/assertions.js";
import { PageTokenCodec, type PageCursor } from "../../src/core/page-tokens.js";
import { loadSharedSecret } from "../../src/storage/server-secrets.js";

const GROUPS = "/iam/v2beta1/groups";
const DAY_MS = 24 * 3600 * 1000;

interface Group {
  uid: string;
  name: string;
  description: string;
  createTime: string;
  updateTime: string;
}

interface ListBody {
  groups: Group[];
  nextPageToken?: string;
  totalCount: string;
  skipped: number;
}

type SortKey = "uid" | "name" | "createTime" | "updateTime";

interface OrderSpec {
  /** the order_by sent (undefined: none, the default order) */
  orderBy: string | undefined;
  key: SortKey;
  desc: boolean;
}

/** Every order the full walks use. */
const WALK_ORDERS: OrderSpec[] = [
  { orderBy: undefined, key: "uid", desc: false },
  { orderBy: "uid desc", key: "uid", desc: true },
  { orderBy: "name", key: "name", desc: false },
  { orderBy: "name desc", key: "name", desc: true },
  { orderBy: "create_time", key: "createTime", desc: false },
  { orderBy: "create_time desc", key: "createTime", desc: true },
  { orderBy: "update_time", key: "updateTime", desc: false },
  { orderBy: "update_time desc", key: "updateTime", desc: true },
];

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The order the server must return: first key, then uid, both in the same direction. */
function sorted(groups: Iterable<Group>, order: Pick<OrderSpec, "key" | "desc">): Group[] {
  return [...groups].sort((a, b) => {
    const c = cmp(a[order.key], b[order.key]) || cmp(a.uid, b.uid);
    return order.desc ? -c : c;
  });
}

function uids(groups: Group[]): string[] {
  return groups.map((g) => g.uid);
}

/** Sequence equality with a short message (the first difference), not a dump of 500 uids. */
function assertSequence(got: string[], expected: string[], where: string): void {
  if (got.length === expected.length && got.every((u, i) => u === expected[i])) return;
  const diff = got.findIndex((u, i) => u !== expected[i]);
  const at = diff < 0 ? Math.min(got.length, expected.length) : diff;
  assert.fail(
    `${where}: got ${got.length} groups, expected ${expected.length}; first difference at #${at}: ` +
      `got ${got[at] ?? "(end)"}, expected ${expected[at] ?? "(end)"}`,
  );
}

/** Runs `fn` over `items` with at most `limit` calls in flight. */
async function pool<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Deterministic pseudo-random numbers, so a failure reproduces with the same tree shape. */
function lcg(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

// Repeated names on purpose (ties), and the punctuation the name pattern allows, whose bytewise
// order (" " < "-" < "." < digits < "_" < letters) differs from a natural-language collation.
const NAME_POOL = ["alpha", "beta", "beta", "a b", "a-b", "a.b", "a_b", "ab", "zed", "0day", "team", "team", "alpha"];

for (const backend of backends()) {
  describe(`list engine [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    /** every group this file created, as last returned by the server */
    const all = new Map<string, Group>();
    let org1: Group;
    let org2: Group;

    const track = (g: Group): Group => {
      all.set(g.uid, g);
      return g;
    };

    async function createGroup(name: string, parent?: Group | string, description = ""): Promise<Group> {
      const parentUid = typeof parent === "string" ? parent : parent?.uid;
      const res = await api.post<Group>(parentUid ? `${GROUPS}/${parentUid}` : GROUPS, { name, description });
      assert.equal(res.status, 200, `create ${name}: ${JSON.stringify(res.body)}`);
      return track(res.body);
    }

    async function touch(g: Group): Promise<Group> {
      const res = await api.patch<Group>(`${GROUPS}/${g.uid}`, { description: `touched ${g.description}` });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return track(res.body);
    }

    async function list(params: Params = {}) {
      return api.get<ListBody>(GROUPS + query(params));
    }

    async function listOk(params: Params = {}): Promise<ListBody> {
      const res = await list(params);
      assert.equal(res.status, 200, `${query(params)}: ${JSON.stringify(res.body)}`);
      assert.ok(Array.isArray(res.body.groups), JSON.stringify(res.body));
      assert.equal(typeof res.body.totalCount, "string");
      assert.equal(typeof res.body.skipped, "number");
      assert.notEqual(res.body.nextPageToken, "", "an empty nextPageToken must be omitted");
      return res.body;
    }

    /** Follows nextPageToken to the end; `perPage` params (e.g. skip) are sent with every page. */
    async function walk(params: Params, perPage: Params = {}, maxPages = 100): Promise<ListBody[]> {
      const pages: ListBody[] = [];
      let token: string | undefined;
      do {
        const body = await listOk({ ...params, ...perPage, page_token: token });
        pages.push(body);
        token = body.nextPageToken;
        assert.ok(pages.length <= maxPages, `walk did not end after ${maxPages} pages`);
      } while (token !== undefined);
      return pages;
    }

    async function tokenCodec(now: () => number): Promise<PageTokenCodec> {
      const env = process.env.BULWARK_PAGE_TOKEN_SECRET;
      if (env) return PageTokenCodec.fromSecret(new TextEncoder().encode(env), now);
      return PageTokenCodec.fromSecret(await loadSharedSecret(server.db, "page_tokens"), now);
    }

    const descendants = (root: Group) =>
      [...all.values()].filter((g) => g.uid === root.uid || g.uid.startsWith(root.uid + "/"));

    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);

      // The big tree: 2 orgs × (1 + 249) = 500 groups, 4 levels below each org, created level by
      // level with 8 creates in flight; then ~1 in 6 is updated so update_time differs from
      // create_time order.
      const started = Date.now();
      const rnd = lcg(0xb01a);
      const pick = () => NAME_POOL[Math.floor(rnd() * NAME_POOL.length)]!;
      org1 = await createGroup("org", undefined, "org1");
      org2 = await createGroup("org", undefined, "org2");
      for (const org of [org1, org2]) {
        const level1 = await pool(Array.from({ length: 6 }, pick), 8, (n) => createGroup(n, org));
        const level2 = await pool(
          level1.flatMap((p) => Array.from({ length: 5 }, () => [pick(), p] as const)),
          8,
          ([n, p]) => createGroup(n, p),
        );
        const level3 = await pool(
          level2.flatMap((p) => Array.from({ length: 4 }, () => [pick(), p] as const)),
          8,
          ([n, p]) => createGroup(n, p),
        );
        await pool(
          level3.slice(0, 249 - 6 - 30 - 120).map((p) => [pick(), p] as const),
          8,
          ([n, p]) => createGroup(n, p),
        );
      }
      assert.equal(all.size, 500);
      assert.equal(descendants(org1).length, 250);
      const toTouch = [...all.values()].filter((_, i) => i % 6 === 3);
      await pool(toTouch, 8, touch);
      const ties = (key: SortKey) => all.size - new Set([...all.values()].map((g) => g[key])).size;
      console.log(
        `[${backend}] built 500 groups + ${toTouch.length} updates in ${Date.now() - started} ms ` +
          `(groups sharing a name: ${ties("name")}, a create_time: ${ties("createTime")}, an update_time: ${ties("updateTime")})`,
      );
    });

    after(async () => {
      await server?.close();
    });

    // ---------------------------------------------------------------------------------------
    // 18. Full walks over the 500-group tree.

    describe("full walks over 500 groups", () => {
      for (const order of WALK_ORDERS) {
        const label = order.orderBy ?? "(default: uid asc)";
        it(`walks every page in order ${label}, filtered and unfiltered, page sizes 37 and 200`, async () => {
          const scopes: [string, Params, Group[]][] = [
            ["descendants_of org1", { "uidp.descendants_of": org1.uid }, descendants(org1)],
            ["unfiltered", {}, [...all.values()]],
          ];
          for (const [scope, filter, members] of scopes) {
            const expected = uids(sorted(members, order));
            for (const pageSize of [37, 200]) {
              const where = `${scope}, ${label}, page_size ${pageSize}`;
              const pages = await walk({ ...filter, order_by: order.orderBy, page_size: pageSize });
              const got = pages.flatMap((p) => uids(p.groups));
              assert.equal(new Set(got).size, got.length, `${where}: a group came twice`);
              assertSequence(got, expected, where);
              assert.equal(pages.length, Math.ceil(expected.length / pageSize), where);
              pages.forEach((p, i) => {
                assert.equal(p.totalCount, String(expected.length), `${where}: totalCount on page ${i + 1}`);
                assert.equal(p.skipped, 0, `${where}: skipped on page ${i + 1}`);
                if (i < pages.length - 1) assert.equal(p.groups.length, pageSize, where);
                for (const g of p.groups) {
                  const mine = all.get(g.uid)!;
                  assert.deepEqual(
                    [g.name, g.createTime, g.updateTime],
                    [mine.name, mine.createTime, mine.updateTime],
                    where,
                  );
                }
              });
              assert.ok(!("nextPageToken" in pages.at(-1)!), `${where}: last page has a nextPageToken`);
            }
          }
        });

        it(`walks with skip=3 on every page in order ${label}`, async () => {
          const scopes: [string, Params, Group[], number][] = [
            ["descendants_of org1", { "uidp.descendants_of": org1.uid }, descendants(org1), 37],
            ["unfiltered", {}, [...all.values()], 37],
            // 250 = 4 × (3 + 59) + 2: the last page's skip runs past the end (skips only 2)
            ["descendants_of org1 (skip runs out)", { "uidp.descendants_of": org1.uid }, descendants(org1), 59],
          ];
          for (const [scope, filter, members, pageSize] of scopes) {
            const where = `${scope}, ${label}, page_size ${pageSize}, skip 3`;
            const expected = uids(sorted(members, order));
            const model = skipWalkModel(expected, pageSize, 3);
            const pages = await walk({ ...filter, order_by: order.orderBy, page_size: pageSize }, { skip: 3 });
            assertSequence(
              pages.flatMap((p) => uids(p.groups)),
              model.flatMap((m) => m.uids),
              where,
            );
            assert.deepEqual(
              pages.map((p) => p.groups.length),
              model.map((m) => m.uids.length),
              `${where}: page lengths`,
            );
            assert.deepEqual(
              pages.map((p) => p.skipped),
              model.map((m) => m.skipped),
              `${where}: skipped per page`,
            );
            for (const p of pages) assert.equal(p.totalCount, String(expected.length), where);
            assert.ok(!("nextPageToken" in pages.at(-1)!), where);
            // the total skipped: 3 per page while the skip fit, then what was really left. Every
            // page before the last was full, so (pages - 1) × (page_size + 3) were consumed.
            const consumedBeforeLast = (pages.length - 1) * (pageSize + 3);
            const left = expected.length - consumedBeforeLast;
            assert.ok(left > 0, where);
            assert.equal(
              pages.at(-1)!.skipped,
              3 * (pages.length - 1) + Math.min(3, left),
              `${where}: skipped on the last page`,
            );
          }
        });
      }

      it("the skip-runs-out walk really ends with a partial skip", async () => {
        // guards the scenario above: 4 full pages, then a page that could skip only 2
        const expected = uids(sorted(descendants(org1), { key: "uid", desc: false }));
        const pages = await walk({ "uidp.descendants_of": org1.uid, page_size: 59 }, { skip: 3 });
        assert.equal(pages.length, 5);
        assert.deepEqual(
          pages.map((p) => p.groups.length),
          [59, 59, 59, 59, 0],
        );
        assert.deepEqual(
          pages.map((p) => p.skipped),
          [3, 6, 9, 12, 14],
        );
        assert.equal(expected.length, 250);
      });
    });

    // ---------------------------------------------------------------------------------------
    // 12. page_size

    describe("page_size", () => {
      it("defaults to 50", async () => {
        const body = await listOk({ "uidp.descendants_of": org1.uid });
        assert.equal(body.groups.length, 50);
        assert.deepEqual(uids(body.groups), uids(sorted(descendants(org1), { key: "uid", desc: false })).slice(0, 50));
        assert.ok(body.nextPageToken);
        assert.equal(body.totalCount, "250");
        const zero = await listOk({ "uidp.descendants_of": org1.uid, page_size: 0 });
        assert.equal(zero.groups.length, 50);
      });

      it("is capped at 200: a larger page_size is coerced", async () => {
        const expected = uids(sorted(descendants(org1), { key: "uid", desc: false }));
        for (const size of [201, 1000, 2147483647]) {
          const body = await listOk({ "uidp.descendants_of": org1.uid, page_size: size });
          assert.equal(body.groups.length, 200, `page_size ${size}`);
          assert.deepEqual(uids(body.groups), expected.slice(0, 200));
          assert.ok(body.nextPageToken);
          const rest = await listOk({
            "uidp.descendants_of": org1.uid,
            page_size: size,
            page_token: body.nextPageToken,
          });
          assert.deepEqual(uids(rest.groups), expected.slice(200));
          assert.ok(!("nextPageToken" in rest));
        }
        const exact = await listOk({ "uidp.descendants_of": org1.uid, page_size: 200 });
        assert.equal(exact.groups.length, 200);
        const one = await listOk({ "uidp.descendants_of": org1.uid, pageSize: 1 });
        assert.deepEqual(uids(one.groups), expected.slice(0, 1));
      });

      it("rejects a negative page_size", async () => {
        assertInvalidArgument(await list({ page_size: -1 }), "page_size");
        assertInvalidArgument(await list({ pageSize: -200 }), "page_size");
      });

      it("an exact multiple ends without a token: no empty trailing page", async () => {
        const org = await createGroup("pagesize org");
        for (let i = 0; i < 5; i++) await createGroup(`c${i}`, org);
        const pages = await walk({ "uidp.children_of": org.uid, page_size: 5 });
        assert.equal(pages.length, 1);
        assert.equal(pages[0]!.groups.length, 5);
        assert.ok(!("nextPageToken" in pages[0]!));
      });
    });

    // ---------------------------------------------------------------------------------------
    // 13. Page tokens

    describe("page tokens", () => {
      let org: Group;
      let children: Group[];
      before(async () => {
        org = await createGroup("tokens org");
        children = [];
        for (let i = 0; i < 7; i++) children.push(await createGroup(i % 2 ? "odd" : "even", org));
      });
      const byUid = () => uids(sorted(children, { key: "uid", desc: false }));

      it("are opaque: no uid, name or sort key readable in them", async () => {
        const body = await listOk({ "uidp.children_of": org.uid, page_size: 2, order_by: "name" });
        const token = body.nextPageToken!;
        assert.ok(token);
        const decoded = token
          .split(".")
          .map((part) => Buffer.from(part, "base64url").toString("latin1"))
          .join(" ");
        for (const g of body.groups) {
          assert.ok(!token.includes(g.uid) && !decoded.includes(g.uid), "uid readable in the token");
          assert.ok(!decoded.includes(g.uid.slice(-16)), "uid readable in the token");
        }
        assert.ok(!decoded.includes(org.uid), "filter readable in the token");
        assert.ok(!/"(?:after|a|o|f)"\s*:/.test(decoded), "cursor fields readable in the token");
      });

      it("keep the order across pages, in every page", async () => {
        const pages = await walk({ "uidp.children_of": org.uid, page_size: 2, order_by: "name desc" });
        assert.deepEqual(
          pages.map((p) => p.groups.length),
          [2, 2, 2, 1],
        );
        assert.deepEqual(
          pages.flatMap((p) => uids(p.groups)),
          uids(sorted(children, { key: "name", desc: true })),
        );
        for (const p of pages) assert.equal(p.totalCount, "7");
      });

      it("are tamper-proof: one changed character is INVALID_ARGUMENT (page_token)", async () => {
        const body = await listOk({ "uidp.children_of": org.uid, page_size: 2 });
        const token = body.nextPageToken!;
        const mid = Math.floor(token.length / 2);
        assert.notEqual(token[mid], ".");
        const flipped = token.slice(0, mid) + (token[mid] === "A" ? "B" : "A") + token.slice(mid + 1);
        assertInvalidArgument(
          await list({ "uidp.children_of": org.uid, page_size: 2, page_token: flipped }),
          "page_token",
          "flipped",
        );
        // and every segment of the compact JWE is protected, not just the ciphertext
        const parts = token.split(".");
        for (let i = 0; i < parts.length; i++) {
          const part = parts[i]!;
          if (part.length < 2) continue; // the empty encrypted-key segment of "dir"
          const at = Math.floor(part.length / 2);
          const changed = [...parts];
          changed[i] = part.slice(0, at) + (part[at] === "x" ? "y" : "x") + part.slice(at + 1);
          assertInvalidArgument(
            await list({ "uidp.children_of": org.uid, page_size: 2, page_token: changed.join(".") }),
            "page_token",
            `segment ${i}`,
          );
        }
        for (const junk of ["garbage", "a.b.c.d.e", token + "x", token.split(".").reverse().join(".")]) {
          assertInvalidArgument(
            await list({ "uidp.children_of": org.uid, page_size: 2, page_token: junk }),
            "page_token",
            junk,
          );
        }
      });

      it("are bound to the filter: another uidp or name is INVALID_ARGUMENT (page_token)", async () => {
        const other = await createGroup("tokens other org");
        const first = await listOk({ "uidp.children_of": org.uid, page_size: 2 });
        const token = first.nextPageToken!;
        const bad: Params[] = [
          { "uidp.children_of": other.uid },
          { "uidp.descendants_of": org.uid },
          { "uidp.children_of": org.uid, name: "odd" },
          {},
          { "uidp.children_of": org.uid, "uidp.ids": children[0]!.uid },
        ];
        for (const filter of bad) {
          assertInvalidArgument(
            await list({ ...filter, page_size: 2, page_token: token }),
            "page_token",
            JSON.stringify(filter),
          );
        }
        const named = await listOk({ "uidp.children_of": org.uid, name: "odd", page_size: 1 });
        assert.ok(named.nextPageToken);
        assertInvalidArgument(
          await list({ "uidp.children_of": org.uid, name: "even", page_size: 1, page_token: named.nextPageToken }),
          "page_token",
          "other name",
        );
        assertInvalidArgument(
          await list({ "uidp.children_of": org.uid, page_size: 1, page_token: named.nextPageToken }),
          "page_token",
          "name dropped",
        );
        // the same filter, spelled in camelCase, is the same filter
        const same = await listOk({ "uidp.childrenOf": org.uid, pageSize: 2, pageToken: token });
        assert.deepEqual(uids(same.groups), byUid().slice(2, 4));
      });

      it("are bound to the order: another order_by is INVALID_ARGUMENT (page_token)", async () => {
        const first = await listOk({ "uidp.children_of": org.uid, page_size: 2, order_by: "name" });
        const token = first.nextPageToken!;
        for (const orderBy of ["name desc", "create_time", "uid", undefined, "update_time desc"]) {
          assertInvalidArgument(
            await list({ "uidp.children_of": org.uid, page_size: 2, order_by: orderBy, page_token: token }),
            "page_token",
            String(orderBy),
          );
        }
        // equivalent spellings of the same order continue the walk
        const expected = uids(sorted(children, { key: "name", desc: false }));
        for (const orderBy of ["name asc", "name"]) {
          const next = await listOk({ "uidp.children_of": org.uid, page_size: 2, orderBy, pageToken: token });
          assert.deepEqual(uids(next.groups), expected.slice(2, 4), orderBy);
        }
        const byDefault = await listOk({ "uidp.children_of": org.uid, page_size: 2 });
        const next = await listOk({
          "uidp.children_of": org.uid,
          page_size: 2,
          order_by: "uid asc",
          page_token: byDefault.nextPageToken,
        });
        assert.deepEqual(uids(next.groups), byUid().slice(2, 4));
      });

      it("allow another page_size on the next page", async () => {
        const first = await listOk({ "uidp.children_of": org.uid, page_size: 2 });
        const next = await listOk({ "uidp.children_of": org.uid, page_size: 4, page_token: first.nextPageToken });
        assert.deepEqual(uids(next.groups), byUid().slice(2, 6));
      });

      it("expire after 3 days: an expired token restarts at page 1 with no error", async () => {
        const params = { "uidp.children_of": org.uid, page_size: 2, order_by: "name" };
        const fresh = await listOk(params);
        const page2 = await listOk({ ...params, page_token: fresh.nextPageToken });
        assert.notDeepEqual(uids(page2.groups), uids(fresh.groups));

        // the real cursor of page 1's token, re-issued 4 days ago (expired a day ago)
        const current = await (await tokenCodec(Date.now)).decode(fresh.nextPageToken!);
        assert.equal(current.kind, "ok");
        const cursor = (current as { cursor: PageCursor }).cursor;
        const old = await tokenCodec(() => Date.now() - 4 * DAY_MS);
        const expired = await old.encode({ ...cursor, skipped: 5 });
        const restarted = await list({ ...params, page_token: expired });
        assert.equal(restarted.status, 200, JSON.stringify(restarted.body));
        assert.deepEqual(uids(restarted.body.groups), uids(fresh.groups));
        assert.equal(restarted.body.totalCount, fresh.totalCount);
        assert.equal(restarted.body.skipped, 0, "an expired walk's skipped count is not carried on");
        assert.ok(restarted.body.nextPageToken);
        // ...and the restarted walk continues normally
        const again = await listOk({ ...params, page_token: restarted.body.nextPageToken });
        assert.deepEqual(uids(again.groups), uids(page2.groups));

        // any expired token restarts, even one whose cursor would not match this request
        const foreign = await old.encode({
          order: "bogus asc",
          filter: "not-this-filter",
          after: ["zzz", "zzz"],
          skipped: 0,
        });
        const restarted2 = await list({ ...params, page_token: foreign });
        assert.equal(restarted2.status, 200, JSON.stringify(restarted2.body));
        assert.deepEqual(uids(restarted2.body.groups), uids(fresh.groups));

        // with skip: the restarted page is page 1 with the skip applied
        const skipFresh = await listOk({ ...params, skip: 1 });
        const skipRestart = await listOk({ ...params, skip: 1, page_token: expired });
        assert.deepEqual(uids(skipRestart.groups), uids(skipFresh.groups));
        assert.equal(skipRestart.skipped, 1);
      });

      it("are still valid 2 days after they were issued", async () => {
        const params = { "uidp.children_of": org.uid, page_size: 2, order_by: "name" };
        const fresh = await listOk(params);
        const page2 = await listOk({ ...params, page_token: fresh.nextPageToken });
        const current = await (await tokenCodec(Date.now)).decode(fresh.nextPageToken!);
        assert.equal(current.kind, "ok");
        const cursor = (current as { cursor: PageCursor }).cursor;
        const twoDaysOld = await (await tokenCodec(() => Date.now() - 2 * DAY_MS)).encode(cursor);
        const res = await listOk({ ...params, page_token: twoDaysOld });
        assert.deepEqual(uids(res.groups), uids(page2.groups));
        assert.equal(res.nextPageToken !== undefined, page2.nextPageToken !== undefined);
        // a 2-day-old token is still bound to its filter
        assertInvalidArgument(await list({ ...params, name: "odd", page_token: twoDaysOld }), "page_token");
      });
    });

    // ---------------------------------------------------------------------------------------
    // 14. order_by

    describe("order_by", () => {
      let org: Group;
      let members: Group[];
      before(async () => {
        org = await createGroup("order org");
        // several groups with the SAME name, so the uid tie-breaker decides their order
        for (const name of ["m", "a", "m", "z", "a", "m", "m", "a.b", "a b", "a_b", "m"]) await createGroup(name, org);
        await touch(await createGroup("late", org));
        members = descendants(org);
        assert.equal(members.length, 13);
      });

      const cases: [string | undefined, SortKey, boolean][] = [
        [undefined, "uid", false],
        ["", "uid", false],
        ["uid", "uid", false],
        ["uid desc", "uid", true],
        ["name", "name", false],
        ["name asc", "name", false],
        ["name desc", "name", true],
        ["created_at desc", "createTime", true],
        ["created_at", "createTime", false],
        ["create_time", "createTime", false],
        ["create_time desc", "createTime", true],
        ["createTime desc", "createTime", true],
        ["createTime", "createTime", false],
        ["update_time", "updateTime", false],
        ["update_time desc", "updateTime", true],
        ["updateTime desc", "updateTime", true],
        ["updated_at", "updateTime", false],
        ["createdAt desc", "createTime", true],
        ["updatedAt", "updateTime", false],
      ];
      for (const [orderBy, key, desc] of cases) {
        it(`order_by ${JSON.stringify(orderBy)} sorts by ${key} ${desc ? "desc" : "asc"}, ties by uid ${desc ? "desc" : "asc"}`, async () => {
          const expected = uids(sorted(members, { key, desc }));
          const one = await listOk({ "uidp.descendants_of": org.uid, order_by: orderBy });
          assert.deepEqual(uids(one.groups), expected);
          // and the same across pages of 3, with the camelCase parameter name
          const pages = await walk({ "uidp.descendants_of": org.uid, orderBy, page_size: 3 });
          assert.deepEqual(
            pages.flatMap((p) => uids(p.groups)),
            expected,
          );
        });
      }

      it("breaks ties between equal names by uid, in the direction of the order", async () => {
        const ms = uids(members.filter((g) => g.name === "m"));
        assert.equal(ms.length, 5);
        const asc = [...ms].sort(cmp);
        for (const [orderBy, want] of [
          ["name", asc],
          ["name desc", [...asc].reverse()],
        ] as const) {
          const body = await listOk({ "uidp.descendants_of": org.uid, order_by: orderBy });
          const got = uids(body.groups.filter((g) => g.name === "m"));
          assert.deepEqual(
            got,
            want,
            `${orderBy}: equal names must be ordered by uid ${orderBy.endsWith("desc") ? "desc" : "asc"}`,
          );
          // and the equal names are contiguous
          const names = body.groups.map((g) => g.name);
          const first = names.indexOf("m");
          assert.deepEqual(names.slice(first, first + 5), ["m", "m", "m", "m", "m"]);
          // page boundaries inside the run of equal names keep that order
          const pages = await walk({ "uidp.descendants_of": org.uid, order_by: orderBy, page_size: 2 });
          assert.deepEqual(
            uids(pages.flatMap((p) => p.groups).filter((g) => g.name === "m")),
            want,
            `${orderBy}, pages of 2`,
          );
        }
      });

      it("compares names bytewise (the C collation)", async () => {
        const body = await listOk({ "uidp.children_of": org.uid, order_by: "name" });
        const names = [...new Set(body.groups.map((g) => g.name))];
        assert.deepEqual(names, ["a", "a b", "a.b", "a_b", "late", "m", "z"]);
      });

      it("rejects unknown fields and malformed clauses (INVALID_ARGUMENT, order_by)", async () => {
        for (const bad of ["description", "foo", "name sideways", "name desc desc", "verified", "name, name", ","]) {
          assertInvalidArgument(await list({ order_by: bad }), "order_by", bad);
        }
      });
    });

    // ---------------------------------------------------------------------------------------
    // 15. skip

    describe("skip", () => {
      let org: Group;
      let expected: string[];
      before(async () => {
        org = await createGroup("skip org");
        for (let i = 0; i < 10; i++) await createGroup(`s${i % 3}`, org);
        expected = uids(
          sorted(
            descendants(org).filter((g) => g.uid !== org.uid),
            { key: "uid", desc: false },
          ),
        );
        assert.equal(expected.length, 10);
      });
      const scope = () => ({ "uidp.children_of": org.uid });

      it("rejects a negative skip (INVALID_ARGUMENT, skip)", async () => {
        assertInvalidArgument(await list({ ...scope(), skip: -1 }), "skip");
      });

      it("reports skipped: 0 when no skip is given", async () => {
        const body = await listOk(scope());
        assert.ok("skipped" in body);
        assert.equal(body.skipped, 0);
        assert.equal((await listOk({ ...scope(), skip: 0 })).skipped, 0);
      });

      it("skips that many results before the page, then continues from the cursor", async () => {
        const p1 = await listOk({ ...scope(), page_size: 3, skip: 2 });
        assert.deepEqual(uids(p1.groups), expected.slice(2, 5));
        assert.equal(p1.skipped, 2);
        assert.equal(p1.totalCount, "10");
        // page 2 without a skip starts right after page 1
        const p2 = await listOk({ ...scope(), page_size: 3, page_token: p1.nextPageToken });
        assert.deepEqual(uids(p2.groups), expected.slice(5, 8));
        assert.equal(p2.skipped, 2, "skipped accumulates over the walk (nothing more skipped)");
        // page 2 with skip=3 starts 3 after the end of page 1
        const p2s = await listOk({ ...scope(), page_size: 3, skip: 3, page_token: p1.nextPageToken });
        assert.deepEqual(uids(p2s.groups), expected.slice(8, 10));
        assert.equal(p2s.skipped, 5);
        assert.ok(!("nextPageToken" in p2s));
        assert.equal(p2s.totalCount, "10");
      });

      it("skipped accumulates across the pages of one walk", async () => {
        const pages = await walk({ ...scope(), page_size: 2 }, { skip: 1 });
        const model = skipWalkModel(expected, 2, 1);
        assert.deepEqual(
          pages.map((p) => uids(p.groups)),
          model.map((m) => m.uids),
        );
        assert.deepEqual(
          pages.map((p) => p.skipped),
          [1, 2, 3, 4],
        );
        assert.deepEqual(
          model.map((m) => m.skipped),
          [1, 2, 3, 4],
        );
      });

      it("past the end: returns what remains and reports what was really skipped", async () => {
        const some = await listOk({ ...scope(), skip: 8 });
        assert.deepEqual(uids(some.groups), expected.slice(8));
        assert.equal(some.skipped, 8);
        const none = await listOk({ ...scope(), skip: 15 });
        assert.deepEqual(none.groups, []);
        assert.equal(none.skipped, 10);
        assert.equal(none.totalCount, "10");
        assert.ok(!("nextPageToken" in none));
        const exact = await listOk({ ...scope(), skip: 10 });
        assert.deepEqual(exact.groups, []);
        assert.equal(exact.skipped, 10);
        // from a cursor: 5 walked, 5 left; a skip of 7 runs past the end after skipping 5
        const p1 = await listOk({ ...scope(), page_size: 5 });
        const partial = await listOk({ ...scope(), page_size: 5, skip: 7, page_token: p1.nextPageToken });
        assert.deepEqual(partial.groups, []);
        assert.equal(partial.skipped, 5, "only 5 were left to skip");
        // the walk model: page_size 5, skip 3 → [3..8), then 2 left: skip runs out
        const pages = await walk({ ...scope(), page_size: 5 }, { skip: 3 });
        assert.deepEqual(
          pages.map((p) => uids(p.groups)),
          [expected.slice(3, 8), []],
        );
        assert.deepEqual(
          pages.map((p) => p.skipped),
          [3, 5],
        );
      });

      it("works with every order", async () => {
        const members = descendants(org).filter((g) => g.uid !== org.uid);
        for (const [orderBy, key, desc] of [
          ["name desc", "name", true],
          ["create_time desc", "createTime", true],
          ["name", "name", false],
        ] as const) {
          const exp = uids(sorted(members, { key, desc }));
          const pages = await walk({ ...scope(), page_size: 3, order_by: orderBy }, { skip: 2 });
          const model = skipWalkModel(exp, 3, 2);
          assert.deepEqual(
            pages.map((p) => uids(p.groups)),
            model.map((m) => m.uids),
            orderBy,
          );
          assert.deepEqual(
            pages.map((p) => p.skipped),
            model.map((m) => m.skipped),
            orderBy,
          );
        }
      });
    });

    // ---------------------------------------------------------------------------------------
    // 16 + 17. totalCount and filters

    describe("filters and totalCount", () => {
      // fa ─┬─ x ─┬─ x1 ── x1a
      //     │     └─ x2
      //     └─ y ── y1
      // fb ── x
      let fa: Group, fb: Group, x: Group, x1: Group, x2: Group, x1a: Group, y: Group, y1: Group, bx: Group;
      before(async () => {
        fa = await createGroup("filter root");
        fb = await createGroup("filter root");
        x = await createGroup("x", fa);
        y = await createGroup("y", fa);
        x1 = await createGroup("x1", x);
        x2 = await createGroup("x2", x);
        x1a = await createGroup("x1a", x1);
        y1 = await createGroup("y1", y);
        bx = await createGroup("x", fb);
      });

      async function expectSet(params: Params, want: Group[], what: string) {
        const body = await listOk({ ...params, page_size: 200 });
        assert.deepEqual(uids(body.groups), uids(sorted(want, { key: "uid", desc: false })), what);
        assert.equal(body.totalCount, String(want.length), `${what}: totalCount`);
        assert.ok(!("nextPageToken" in body), what);
      }

      it("uidp.descendants_of: the group itself and everything beneath it", async () => {
        await expectSet({ "uidp.descendants_of": fa.uid }, [fa, x, y, x1, x2, x1a, y1], "fa");
        await expectSet({ "uidp.descendants_of": x.uid }, [x, x1, x2, x1a], "x");
        await expectSet({ "uidp.descendantsOf": x1.uid }, [x1, x1a], "x1 (camelCase)");
        await expectSet({ "uidp.descendants_of": x1a.uid }, [x1a], "leaf");
        await expectSet({ "uidp.descendants_of": fb.uid }, [fb, bx], "fb");
        await expectSet({ "uidp.descendants_of": "0".repeat(40) }, [], "unknown root");
        await expectSet({ "uidp.descendants_of": `${fa.uid}/${"0".repeat(16)}` }, [], "unknown child");
      });

      it("uidp.children_of: direct children only", async () => {
        await expectSet({ "uidp.children_of": fa.uid }, [x, y], "fa");
        await expectSet({ "uidp.children_of": x.uid }, [x1, x2], "x");
        await expectSet({ "uidp.childrenOf": x1.uid }, [x1a], "x1 (camelCase)");
        await expectSet({ "uidp.children_of": x1a.uid }, [], "leaf");
      });

      it("uidp.ancestors_of: the group itself and its ancestors", async () => {
        await expectSet({ "uidp.ancestors_of": x1a.uid }, [fa, x, x1, x1a], "x1a");
        await expectSet({ "uidp.ancestors_of": y1.uid }, [fa, y, y1], "y1");
        await expectSet({ "uidp.ancestorsOf": fa.uid }, [fa], "root (camelCase)");
        await expectSet({ "uidp.ancestors_of": bx.uid }, [fb, bx], "fb/x");
      });

      it("uidp.in_root=true: root groups only", async () => {
        const roots = [...all.values()].filter((g) => !g.uid.includes("/"));
        assert.ok(roots.length >= 4);
        await expectSet({ "uidp.in_root": true }, roots, "in_root");
        await expectSet({ "uidp.inRoot": true }, roots, "inRoot");
      });

      it("uidp.ids: exactly those groups", async () => {
        await expectSet({ "uidp.ids": [x1.uid, y1.uid, fb.uid] }, [x1, y1, fb], "ids");
        await expectSet({ "uidp.ids": [x2.uid] }, [x2], "one id");
        await expectSet({ "uidp.ids": [x2.uid, "f".repeat(40)] }, [x2], "an unknown id");
      });

      it("name: exact match only", async () => {
        const named = (n: string) => [...all.values()].filter((g) => g.name === n);
        await expectSet({ name: "x" }, named("x"), "x");
        assert.ok(named("x").length >= 2);
        await expectSet({ name: "x1" }, [x1], "x1 (not x1a: a prefix does not match)");
        await expectSet({ name: "x1a" }, [x1a], "x1a");
        await expectSet({ name: "x1%" }, [], "no LIKE patterns");
        await expectSet({ name: "filter" }, [], "prefix of filter root");
        await expectSet({ name: "filter root" }, named("filter root"), "with a space");
        await expectSet({ name: "X" }, [], "case-sensitive");
      });

      it("filters combine (AND)", async () => {
        await expectSet({ "uidp.descendants_of": fa.uid, name: "x" }, [x], "descendants + name");
        await expectSet({ "uidp.descendants_of": fb.uid, name: "x" }, [bx], "other org + name");
        await expectSet({ "uidp.children_of": fa.uid, name: "y" }, [y], "children + name");
        await expectSet({ "uidp.children_of": fa.uid, name: "x1" }, [], "children + grandchild's name");
        await expectSet({ "uidp.in_root": true, name: "filter root" }, [fa, fb], "in_root + name");
        await expectSet(
          { "uidp.descendants_of": fa.uid, "uidp.ids": [x1.uid, y1.uid, fb.uid, bx.uid] },
          [x1, y1],
          "descendants + ids",
        );
        await expectSet({ "uidp.ancestors_of": x1a.uid, "uidp.children_of": fa.uid }, [x], "ancestors + children");
        await expectSet(
          { "uidp.descendants_of": x.uid, "uidp.in_root": true },
          [],
          "descendants of a non-root + in_root",
        );
        await expectSet({ "uidp.ancestors_of": x1a.uid, name: "x1" }, [x1], "ancestors + name");
      });

      it("rejects an invalid UIDP in any filter (INVALID_ARGUMENT naming the field)", async () => {
        const bad = ["nothex", fa.uid.toUpperCase(), fa.uid + "/", fa.uid + "/abc", "0".repeat(39)];
        for (const value of bad) {
          assertInvalidArgument(await list({ "uidp.descendants_of": value }), "uidp.descendants_of", value);
          assertInvalidArgument(await list({ "uidp.children_of": value }), "uidp.children_of", value);
          assertInvalidArgument(await list({ "uidp.ancestors_of": value }), "uidp.ancestors_of", value);
        }
        for (const ids of [["nothex"], [x.uid, "nothex"]]) {
          const res = await list({ "uidp.ids": ids });
          assert.equal(res.status, 400, JSON.stringify(res.body));
          assert.equal((res.body as any).code, 3);
          const field: string = (res.body as any).details.find((d: any) => d.fieldViolations)?.fieldViolations[0]
            ?.field;
          assert.ok(field?.startsWith("uidp.ids"), field);
          assert.ok((res.body as any).message.startsWith(`Invalid argument: ${field}: `));
        }
      });

      it("totalCount counts all matches across all pages, identical on every page, and respects filters", async () => {
        for (const [params, want] of [
          [{ "uidp.descendants_of": fa.uid }, 7],
          [{ "uidp.descendants_of": fa.uid, name: "x" }, 1],
          [{ "uidp.children_of": x.uid }, 2],
          [{ "uidp.descendants_of": org1.uid }, 250],
          [{}, all.size],
          [{ name: "x" }, [...all.values()].filter((g) => g.name === "x").length],
        ] as [Params, number][]) {
          const pages = await walk({ ...params, page_size: want > 20 ? 97 : 2 });
          assert.ok(pages.length >= 2 || want <= 2);
          for (const p of pages) assert.equal(p.totalCount, String(want), JSON.stringify(params));
          assert.equal(pages.flatMap((p) => p.groups).length, want);
        }
        // with skip, totalCount still counts every match
        const skipped = await listOk({ "uidp.descendants_of": fa.uid, skip: 4, page_size: 1 });
        assert.equal(skipped.totalCount, "7");
        const empty = await listOk({ "uidp.descendants_of": "0".repeat(40) });
        assert.equal(empty.totalCount, "0");
        assert.deepEqual(empty.groups, []);
        assert.equal(empty.skipped, 0);
      });
    });
  });
}
