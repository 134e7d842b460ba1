// What List RPCs show, as a property test on every backend. Each round grows random group trees
// in three fresh organizations (depth ≤ 4), random identities (workloads, one human) with
// random role bindings (built-in and custom roles), identity providers, invites and account
// associations, picks two random principals, and walks every List RPC with small pages:
//   - every returned item lies in a subtree where the principal holds that List capability
//     (built-in roles: wherever it holds CAP_IAM_ROLES_LIST);
//   - every such item comes exactly once (order_by=uid and the default order), and a walk with
//     `skip` on every page returns exactly the modelled slices and `skipped`;
//   - totalCount is the number of visible items, on every page;
//   - filtered by children_of or descendants_of a random group (visible or not), exactly the
//     visible items under it;
//   - nothing from a tree the principal has no binding in ever appears (ListEvents included: no
//     event of another tenant's groups, none of no group).
// Earlier rounds' trees stay in the database as noise. The PRNG is seeded: the seed is printed,
// and BULWARK_TEST_SEED=<seed> replays a run (BULWARK_TEST_ROUNDS changes the number of rounds).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { backends } from "../support/db-templates.js";
import {
  createAccountAssociation,
  createGroup,
  createGroupInvite,
  createIdentity,
  createIdentityProvider,
  createRole,
  createRoleBinding,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { skipWalkModel } from "../support/lists.js";
import { builtinCaps, holdsAll, holdsAnywhere, isAncestorOrSelf, type ModelBinding } from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";

const SEED = process.env.BULWARK_TEST_SEED
  ? Number(process.env.BULWARK_TEST_SEED) >>> 0
  : (Math.random() * 2 ** 32) >>> 0;
const ROUNDS = Number(process.env.BULWARK_TEST_ROUNDS ?? 20);
const MAX_DEPTH = 4;

/** mulberry32: small, fast, deterministic. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => {
    assert.ok(xs.length > 0, "pick from an empty list");
    return xs[int(0, xs.length - 1)]!;
  };
  return { next, int, pick, chance: (p: number) => next() < p };
}
type Rng = ReturnType<typeof prng>;

/** The List RPCs, by response field: path and the capability that shows an item. */
const LISTS = [
  { key: "groups", path: "/iam/v2beta1/groups", cap: "CAP_IAM_GROUPS_LIST" },
  { key: "identities", path: "/iam/v2beta1/identities", cap: "CAP_IAM_IDENTITY_LIST" },
  { key: "roles", path: "/iam/v2beta1/roles", cap: "CAP_IAM_ROLES_LIST" },
  { key: "roleBindings", path: "/iam/v2beta1/roleBindings", cap: "CAP_IAM_ROLE_BINDINGS_LIST" },
  { key: "identityProviders", path: "/iam/v2beta1/identityProviders", cap: "CAP_IAM_IDENTITY_PROVIDERS_LIST" },
  { key: "groupInvites", path: "/iam/v2beta1/groupInvites", cap: "CAP_IAM_GROUP_INVITES_LIST" },
  { key: "accountAssociations", path: "/iam/v2beta1/accountAssociations", cap: "CAP_IAM_ACCOUNT_ASSOCIATIONS_LIST" },
  // the audit trail: every change above recorded an event in its group (a root identity's in none)
  { key: "events", path: "/bulwark/events/v1/events", cap: "CAP_EVENTS_SUBSCRIPTION_LIST" },
] as const;
type ListKey = (typeof LISTS)[number]["key"];
const LIST_CAPS = LISTS.map((l) => l.cap);
const BUILTINS = ["viewer", "editor", "owner", "registry.pull", "registry.pull_token_creator"];

interface Group {
  uid: string;
  depth: number;
}

interface Role {
  uid: string;
  /** undefined for built-in roles */
  parent?: string;
  caps: ReadonlySet<string>;
}

/** Everything that exists, by list. */
type World = Record<ListKey, Set<string>>;

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

for (const backend of backends()) {
  describe(`List visibility, property test [${backend}]`, () => {
    let server: TestServer;
    let op: Api;
    let builtins: Role[] = [];
    const world: World = Object.fromEntries(LISTS.map((l) => [l.key, new Set<string>()])) as World;
    let calls = 0;

    before(async () => {
      server = await startTestServer(backend);
      op = restClient(server.url, server.operatorToken);
      const roles = (await op.get("/iam/v2beta1/roles?uidp.in_root=true&page_size=200")).body.roles as Json[];
      builtins = roles.filter((r) => BUILTINS.includes(r.name)).map((r) => ({ uid: r.uid, caps: builtinCaps(r.name) }));
      assert.equal(builtins.length, BUILTINS.length);
      for (const r of roles) world.roles.add(r.uid);
      console.log(`[${backend}] visibility seed ${SEED} (replay: BULWARK_TEST_SEED=${SEED}), ${ROUNDS} rounds`);
    });
    after(async () => {
      await server?.close();
    });

    /** One round's world: three organizations and what hangs off them; returns the principals. */
    async function grow(rng: Rng, round: number) {
      const groups: Group[] = [];
      for (let o = 0; o < 3; o++) {
        const org = await createGroup(op, undefined, `r${round} org ${o}`);
        const tree: Group[] = [{ uid: org.uid, depth: 1 }];
        for (let i = rng.int(0, 7); i > 0; i--) {
          const parent = rng.pick(tree.filter((g) => g.depth < MAX_DEPTH));
          tree.push({
            uid: (await createGroup(op, parent.uid, `r${round} g${tree.length}`)).uid,
            depth: parent.depth + 1,
          });
        }
        groups.push(...tree);
      }
      for (const g of groups) world.groups.add(g.uid);

      const roles: Role[] = [...builtins];
      for (let i = rng.int(0, 3); i > 0; i--) {
        const at = rng.pick(groups).uid;
        const caps: string[] = LIST_CAPS.filter(() => rng.chance(0.4));
        if (caps.length === 0 || rng.chance(0.2)) caps.push("CAP_REPO_LIST");
        const role = await createRole(op, at, `r${round} role ${i}`, caps);
        roles.push({ uid: role.uid, parent: at, caps: new Set(caps) });
        world.roles.add(role.uid);
      }

      // identities: workloads at random groups, and one human (root-level)
      const identities: { uid: string; at?: string }[] = [];
      for (let i = rng.int(3, 6); i > 0; i--) {
        const at = rng.pick(groups).uid;
        const identity = await createIdentity(op, at, `r${round} id ${i}`, `r${round}-${i}-${SEED}`);
        identities.push({ uid: identity.uid, at });
        world.identities.add(identity.uid);
      }
      const human = await op.post("/iam/v2beta1/identities/", {
        name: `r${round} human`,
        claimMatch: { issuer: "https://people.example", subject: `r${round}-h-${SEED}` },
      });
      assert.equal(human.status, 200, JSON.stringify(human.body));
      identities.push({ uid: human.body.uid });

      const grants = new Map<string, ModelBinding[]>(identities.map((x) => [x.uid, []]));
      const made = new Set<string>();
      for (const identity of identities) {
        // where it may be bound: its group and below (a human: anywhere)
        const usable = groups.filter((g) => !identity.at || isAncestorOrSelf(identity.at, g.uid));
        for (let i = rng.int(identity.at ? 0 : 1, 3); i > 0; i--) {
          const at = rng.pick(usable).uid;
          const role = rng.pick(roles.filter((r) => !r.parent || isAncestorOrSelf(r.parent, at)));
          const key = `${at} ${identity.uid} ${role.uid}`;
          if (made.has(key)) continue;
          made.add(key);
          const binding = await createRoleBinding(op, at, identity.uid, role.uid);
          world.roleBindings.add(binding.uid);
          grants.get(identity.uid)!.push({ at, caps: role.caps });
        }
      }

      for (let i = rng.int(0, 3); i > 0; i--)
        world.identityProviders.add((await createIdentityProvider(op, rng.pick(groups).uid, `r${round} idp ${i}`)).uid);
      for (let i = rng.int(0, 3); i > 0; i--)
        world.groupInvites.add((await createGroupInvite(op, rng.pick(groups).uid, 3600 + i)).uid);
      for (let i = rng.int(0, 3); i > 0; i--) {
        const free = groups.filter((g) => !world.accountAssociations.has(g.uid));
        if (free.length)
          world.accountAssociations.add(
            (await createAccountAssociation(op, rng.pick(free).uid, `r${round} acct ${i}`)).uid,
          );
      }
      // every event recorded so far, this round's changes included
      const events = await server.db.selectFrom("events").select("uid").execute();
      for (const e of events as { uid: string }[]) world.events.add(e.uid);
      return { identities, grants };
    }

    function visibleTo(bindings: readonly ModelBinding[], list: (typeof LISTS)[number]): string[] {
      const out: string[] = [];
      for (const uid of world[list.key]) {
        const builtin = list.key === "roles" && !uid.includes("/");
        if (builtin ? holdsAnywhere(bindings, ["CAP_IAM_ROLES_LIST"]) : holdsAll(bindings, uid, [list.cap]))
          out.push(uid);
      }
      return out.sort(cmp);
    }

    async function page(
      api: Api,
      list: (typeof LISTS)[number],
      params: Record<string, string | number | undefined>,
      where: string,
    ): Promise<Json> {
      const q = Object.entries(params)
        .filter(([, v]) => v !== undefined && v !== "")
        .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`)
        .join("&");
      calls++;
      const res = await api.get(`${list.path}${q ? `?${q}` : ""}`);
      assert.equal(res.status, 200, `${where}: ${JSON.stringify(res.body)}`);
      assert.ok(!("nextPageToken" in res.body) || res.body.nextPageToken !== "", where);
      return { ...res.body, items: (res.body[list.key] ?? []) as Json[] };
    }

    /** Every page of a walk; `skip` is sent on every page. */
    async function walk(
      api: Api,
      list: (typeof LISTS)[number],
      pageSize: number,
      orderBy: string | undefined,
      skip: number,
      where: string,
      filter: Record<string, string> = {},
    ): Promise<Json[]> {
      const pages: Json[] = [];
      let token: string | undefined;
      do {
        pages.push(
          await page(
            api,
            list,
            { ...filter, page_size: pageSize, order_by: orderBy, skip: skip || undefined, page_token: token },
            `${where}, page ${pages.length + 1}`,
          ),
        );
        token = pages.at(-1)!.nextPageToken;
        assert.ok(pages.length <= 500, `${where}: the walk does not end`);
      } while (token);
      return pages;
    }

    /** Walks every List RPC as `principal` and checks it against the model. */
    async function checkPrincipal(
      rng: Rng,
      round: number,
      principal: { uid: string; at?: string },
      bindings: readonly ModelBinding[],
    ): Promise<number> {
      let checkedItems = 0;
      const api = restClient(server.url, await server.tokenFor(principal.uid));
      const roots = new Set(bindings.map((b) => b.at.split("/")[0]));
      const shown = bindings.map((b) => ({
        at: b.at,
        caps: [...b.caps].filter((c) => (LIST_CAPS as readonly string[]).includes(c)),
      }));
      const context = `[seed ${SEED}, round ${round}, principal ${principal.uid} (${principal.at ? "workload" : "human"}), bindings ${JSON.stringify(shown)}]`;
      try {
        for (const list of LISTS) {
          const expected = visibleTo(bindings, list);
          const total = String(expected.length);
          checkedItems += expected.length;
          const pageSize = rng.int(1, 4);
          const where = `${context} ${list.key}, page_size ${pageSize}`;

          // order_by=uid, no skip: exactly the visible items, in order, once each
          const pages = await walk(api, list, pageSize, "uid", 0, `${where}, order_by uid`);
          const got = pages.flatMap((p) => p.items.map((x: Json) => x.uid as string));
          for (const uid of got) {
            const builtin = list.key === "roles" && !uid.includes("/");
            assert.ok(
              builtin || roots.has(uid.split("/")[0]),
              `${where}: ${uid} is from a tree the principal has no binding in`,
            );
          }
          assert.deepEqual(got, expected, `${where}: order_by uid`);
          for (const p of pages) {
            assert.equal(p.totalCount, total, `${where}: totalCount`);
            assert.equal(p.skipped, 0, `${where}: skipped`);
          }

          // the default order: the same set, once each
          const byDefault = (await walk(api, list, pageSize, undefined, 0, `${where}, default order`)).flatMap((p) =>
            p.items.map((x: Json) => x.uid as string),
          );
          assert.equal(new Set(byDefault).size, byDefault.length, `${where}: default order repeats an item`);
          assert.deepEqual([...byDefault].sort(cmp), expected, `${where}: default order`);

          // skip on every page: the modelled slices and skipped counts
          const skip = rng.int(1, 3);
          const skipped = await walk(api, list, pageSize, "uid", skip, `${where}, skip ${skip}`);
          assert.deepEqual(
            skipped.map((p) => ({ uids: p.items.map((x: Json) => x.uid as string), skipped: p.skipped })),
            skipWalkModel(expected, pageSize, skip).map(({ uids, skipped }) => ({ uids, skipped })),
            `${where}: skip ${skip} on every page`,
          );
          for (const p of skipped) assert.equal(p.totalCount, total, `${where}: totalCount with skip`);

          // children_of or descendants_of a random group, visible or not: the visible items under it
          // (a UIDP item's parent is its uid without the last segment)
          const anchor = rng.pick([...world.groups]);
          const children = rng.chance(0.5);
          const under = (uid: string) =>
            children ? uid.slice(0, Math.max(0, uid.lastIndexOf("/"))) === anchor : isAncestorOrSelf(anchor, uid);
          const name = children ? "uidp.children_of" : "uidp.descendants_of";
          const filtered = expected.filter(under);
          const fwhere = `${where}, ${name}=${anchor}`;
          const fpages = await walk(api, list, pageSize, "uid", 0, fwhere, { [name]: anchor });
          assert.deepEqual(
            fpages.flatMap((p) => p.items.map((x: Json) => x.uid as string)),
            filtered,
            fwhere,
          );
          for (const p of fpages) assert.equal(p.totalCount, String(filtered.length), `${fwhere}: totalCount`);
        }
      } catch (err) {
        if (err instanceof Error) err.message = `${context} ${err.message}\n(replay: BULWARK_TEST_SEED=${SEED})`;
        throw err;
      }
      return checkedItems;
    }

    it(`${ROUNDS} rounds: List RPCs show exactly what the principal may list, once each, with matching totalCount and skip`, async () => {
      const rng = prng(SEED);
      const started = Date.now();
      let checkedItems = 0;
      let withNothing = 0;
      for (let round = 1; round <= ROUNDS; round++) {
        const { identities, grants } = await grow(rng, round);
        for (const principal of [rng.pick(identities), rng.pick(identities)]) {
          const n = await checkPrincipal(rng, round, principal, grants.get(principal.uid)!);
          checkedItems += n;
          if (n === 0) withNothing++;
        }
      }
      console.log(
        `[${backend}] visibility: ${ROUNDS} rounds, ${2 * ROUNDS} principals (${withNothing} seeing nothing), ${checkedItems} visible items checked, ` +
          `${calls} List calls, ${Object.values(world).reduce((n, s) => n + s.size, 0)} resources, ${Date.now() - started} ms`,
      );
    });
  });
}
