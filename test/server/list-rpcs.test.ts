// Every served List RPC, GENERATED from what the server serves: the shared list rules (page size,
// cursor walks, order_by over each sortable field with the uid tie-breaker, skip / skipped,
// totalCount, token binding, errors) checked over REST on every backend, plus one gRPC call each.
//
// The List RPCs come from the registered feature modules (server/modules.ts), kept to methods
// named List* whose google.api.http rule is a GET; the REST URL comes from that rule and the
// sortable fields from the module's `listings` entry for the item message. A test also
// probes every service in src/gen over gRPC and checks the running server answers exactly those.
// A served List RPC without a fixture factory in FACTORIES (keyed by the response's repeated
// field, e.g. "groups") FAILS: a new List RPC needs a fixture here. The list engine itself is
// tested in depth (500-group walks, token expiry, filters) by list-engine.test.ts, on groups.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import {
  getOption,
  hasOption,
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescService,
} from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import { http } from "../../src/gen/google/api/annotations_pb.js";
import { DEFAULT_PAGE_SIZE, type ListableResource } from "../../src/core/list.js";
import { MODULES } from "../../src/server/modules.js";
import { backends } from "../support/db-templates.js";
import {
  createAccountAssociation,
  createGroup,
  createGroupInvite,
  createIdentity,
  createIdentityProvider,
  createRole,
  createRoleBinding,
  createSubscription,
  VIEWER_ROLE_UID,
  type Api,
  type Json,
} from "../support/fixtures.js";
import { assertInvalidArgument } from "../support/assertions.js";
import { query, restClient, type JsonResponse, type QueryParams as Params } from "../support/http.js";
import { skipWalkModel } from "../support/lists.js";
import { cgaId, importAdvisory } from "../support/advisories.js";
import { startTestServer, type TestServer, bearer } from "../support/server.js";
import { REPO_ROOT, moduleUrl } from "../support/paths.js";

const ROOT = REPO_ROOT;
/** items per List RPC (account associations: one per group, so 7 child groups) */
const N = 7;
const PAGE = 3;

// ---------------------------------------------------------------------------------------------
// Fixtures: a factory per List RPC, keyed by the response's repeated field (JSON name). Each
// creates `n` items in `org`'s subtree and returns exactly what `uidp.descendants_of=<org>`
// must list, as the server returned it. Names repeat on purpose (ties for the uid tie-breaker)
// and use punctuation whose bytewise order differs from a natural-language collation.

type Factory = (api: Api, org: Json, n: number) => Promise<Json[]>;

const NAMES = ["beta", "alpha", "beta", "a b", "zed", "alpha", "0day"];
const nameOf = (i: number) => NAMES[i % NAMES.length]!;

async function times(n: number, make: (i: number) => Promise<Json>): Promise<Json[]> {
  const out: Json[] = [];
  for (let i = 0; i < n; i++) out.push(await make(i));
  return out;
}

const FACTORIES: Record<string, Factory> = {
  // descendants_of includes the named group itself
  groups: async (api, org, n) => [org, ...(await times(n, (i) => createGroup(api, org.uid, nameOf(i))))],
  roles: (api, org, n) => times(n, (i) => createRole(api, org.uid, nameOf(i))),
  identities: (api, org, n) => times(n, (i) => createIdentity(api, org.uid, nameOf(i), `s-${i}`)),
  // distinct identities bound to the built-in viewer role at the org; most in one batch, which
  // gives them one create_time (ties for the uid tie-breaker), the rest one by one
  roleBindings: async (api, org, n) => {
    const identities = await times(n, (i) => createIdentity(api, org.uid, `bound ${i}`, `b-${i}`));
    const batched = Math.ceil(n / 2);
    const res: JsonResponse = await api.post("/iam/v2beta1/roleBindings:batchCreate", {
      parent: org.uid,
      roleUid: VIEWER_ROLE_UID,
      requests: identities.slice(0, batched).map((x) => ({ roleBinding: { identityUid: x.uid } })),
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const rest = await times(n - batched, (i) => createRoleBinding(api, org.uid, identities[batched + i]!.uid));
    return [...(res.body.roleBindings as Json[]), ...rest];
  },
  identityProviders: (api, org, n) => times(n, (i) => createIdentityProvider(api, org.uid, nameOf(i))),
  // one association per group: its uid is the group's
  accountAssociations: (api, org, n) =>
    times(n, async (i) => createAccountAssociation(api, (await createGroup(api, org.uid, `acct ${i}`)).uid, nameOf(i))),
  // decreasing ttls: expiration order is the reverse of creation order
  groupInvites: (api, org, n) => times(n, (i) => createGroupInvite(api, org.uid, 3600 + (n - i) * 60)),
  // names repeat, so each repo gets its own group (a name is unique within one); OCI names have no spaces
  repos: (api, org, n) =>
    times(n, async (i) => createRepo(api, (await createGroup(api, org.uid, `repos ${i}`)).uid, ociName(i))),
  // one repo per tag, for the same reason
  tags: (api, org, n) =>
    times(n, async (i) => {
      const repo = await createRepo(api, org.uid, `tagged-${i}`);
      const digest = `sha256:${createHash("sha256").update(String(i)).digest("hex")}`;
      const res = await api.post(`/registry/v2beta1/tags/${repo.uid}`, { name: ociName(i), digest });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body as Json;
    }),
  // artifact names repeat (ties on artifact_name); advisory ids and component names follow them
  advisories: (api, org, n) => times(n, (i) => importAdvisory(api, org.uid, cgaId(1000 + i), nameOf(i))),
  // the audit trail: the org's own creation and each group's, as ListEvents answers them
  events: async (api, org, n) => {
    await times(n - 1, (i) => createGroup(api, org.uid, nameOf(i)));
    const res: JsonResponse = await api.get(`/bulwark/events/v1/events?uidp.descendants_of=${org.uid}&page_size=200`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.events.length, n);
    return res.body.events as Json[];
  },
  // sinks repeat (ties on sink, the one sortable field) and sort bytewise ("a.b" before "alpha")
  subscriptions: (api, org, n) =>
    times(n, (i) => createSubscription(api, org.uid, `https://receiver.example.com/${ociName(i)}`)),
};

/** The names above as OCI repository and tag names ("a b" → "a.b"). */
const ociName = (i: number) => nameOf(i).replace(" ", ".");

async function createRepo(api: Api, group: string, name: string): Promise<Json> {
  const res = await api.post(`/registry/v2beta1/repos/${group}`, { name });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as Json;
}

// ---------------------------------------------------------------------------------------------
// The served List RPCs.

/** Every served service, as the registered modules declare them (the server binds exactly these). */
const SERVED: DescService[] = MODULES.flatMap((m) => m.services);

/** Every module's listings, by the item message's full name. */
const LISTINGS = new Map<string, ListableResource>(MODULES.flatMap((m) => Object.entries(m.listings)));

interface ListRpc {
  service: DescService;
  method: DescMethod;
  /** the GET template of the http rule */
  path: string;
  /** the response's repeated message field (its JSON name keys FACTORIES), if exactly one */
  itemsField?: DescField;
  item?: DescMessage;
  listingName?: string;
  listing?: ListableResource;
  factory?: Factory;
}

/**
 * List RPCs of items without a uid, paged by a key of their own rather than by the list engine's
 * uid/uidp rules: their suites test their paging (ListDeliveries: test/events/audit.test.ts).
 */
const NOT_UID_PAGED = new Set(["bulwark.events.v1.DeliveriesService.ListDeliveries"]);

/**
 * A paged List RPC. The v1 interface's lists (`items` envelopes, no page_size but for EOL tags:
 * they answer every match, up to a documented limit) are not paged and are tested in
 * test/v1-*.test.ts.
 */
function isListMethod(m: DescMethod): boolean {
  return (
    !NOT_UID_PAGED.has(m.parent.typeName + "." + m.name) &&
    m.name.startsWith("List") &&
    m.methodKind === "unary" &&
    hasOption(m, http) &&
    getOption(m, http).pattern.case === "get" &&
    m.input.fields.some((f) => f.name === "page_size") &&
    !m.output.fields.some((f) => f.name === "items")
  );
}

function listRpcsOf(services: DescService[]): ListRpc[] {
  const rpcs: ListRpc[] = [];
  for (const service of services) {
    for (const method of service.methods) {
      if (!isListMethod(method)) continue;
      const repeated = method.output.fields.filter((f) => f.fieldKind === "list" && f.listKind === "message");
      const itemsField = repeated.length === 1 ? repeated[0] : undefined;
      const item =
        itemsField?.fieldKind === "list" && itemsField.listKind === "message" ? itemsField.message : undefined;
      const listingName = item?.typeName;
      rpcs.push({
        service,
        method,
        path: getOption(method, http).pattern.value as string,
        itemsField,
        item,
        listingName,
        listing: listingName ? LISTINGS.get(listingName) : undefined,
        factory: itemsField ? FACTORIES[itemsField.jsonName] : undefined,
      });
    }
  }
  return rpcs;
}

const LIST_RPCS = listRpcsOf(SERVED);

// ---------------------------------------------------------------------------------------------
// Expected orders, computed here from the items the factories returned: strings compare
// bytewise (timestamps are fixed-width RFC 3339 with milliseconds), ties by uid in the
// direction of the first key.

interface Order {
  /** proto field name ("uid", "create_time", ...) */
  field: string;
  desc: boolean;
}

function parseOrder(text: string): Order {
  const words = text.trim().split(/\s+/);
  assert.ok(words.length <= 2 && !text.includes(","), `only single-key default orders are modelled here: "${text}"`);
  return { field: words[0]!, desc: words[1]?.toLowerCase() === "desc" };
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function jsonNameOf(item: DescMessage, field: string): string {
  const f = item.fields.find((x) => x.name === field);
  assert.ok(f, `${item.typeName} has no field ${field} (named sortable by its listing)`);
  return f.jsonName;
}

function sortedUids(items: Json[], item: DescMessage, order: Order): string[] {
  const key = jsonNameOf(item, order.field);
  return [...items]
    .sort((a, b) => {
      const c = cmp(String(a[key]), String(b[key])) || cmp(a.uid, b.uid);
      return order.desc ? -c : c;
    })
    .map((x) => x.uid as string);
}

/** The PATCH template of the service's Update<Item> RPC, if it has one. */
function updatePath(service: DescService, item: DescMessage): string | undefined {
  const m = service.methods.find((x) => x.name === `Update${item.name}` && hasOption(x, http));
  const rule = m && getOption(m, http);
  return rule?.pattern.case === "patch" ? rule.pattern.value : undefined;
}

type Unary = (request: object) => Promise<Record<string, unknown>>;

function unaryMethods(service: DescService, transport: ReturnType<typeof createGrpcTransport>): Record<string, Unary> {
  return createClient(service, transport) as unknown as Record<string, Unary>;
}

// ---------------------------------------------------------------------------------------------

/** Every service the generated code in src/gen describes, whether served or not. */
async function generatedServices(): Promise<DescService[]> {
  const files = readdirSync(join(ROOT, "src", "gen"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith("_pb.ts"))
    .sort();
  const byName = new Map<string, DescService>();
  for (const file of files) {
    const mod = (await import(moduleUrl(join("src", "gen", file)))) as Record<string, unknown>;
    for (const value of Object.values(mod)) {
      if (value && typeof value === "object" && (value as { kind?: unknown }).kind === "service") {
        const s = value as DescService;
        byName.set(s.typeName, s);
      }
    }
  }
  return [...byName.values()];
}

for (const backend of backends()) {
  describe(`List RPCs [${backend}]`, () => {
    let server: TestServer;
    let api: Api;
    let sessions: Http2SessionManager;
    let grpc: ReturnType<typeof createGrpcTransport>;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      sessions = new Http2SessionManager(server.url);
      grpc = createGrpcTransport({
        baseUrl: server.url,
        interceptors: [bearer(server.operatorToken)],
        sessionManager: sessions,
      });
    });
    after(async () => {
      sessions?.abort();
      await server?.close();
    });

    it("the running server answers the List RPCs of exactly the modules' services (every generated service probed over gRPC)", async () => {
      const generated = await generatedServices();
      const names = (ss: DescService[]) => ss.map((s) => s.typeName).sort();
      for (const s of SERVED)
        assert.ok(
          generated.some((g) => g === s),
          `${s.typeName} is served but not found in src/gen`,
        );
      const answered: DescService[] = [];
      for (const service of generated) {
        const lists = service.methods.filter((m) => m.name.startsWith("List") && m.methodKind === "unary");
        if (lists.length === 0) continue;
        const client = unaryMethods(service, grpc);
        let served = false;
        for (const m of lists) {
          // An empty List request reads and never writes.
          const err = await client[m.localName]!({}).then(
            () => undefined,
            (e: unknown) => ConnectError.from(e),
          );
          if (err && err.code === Code.Unimplemented && /unknown method/.test(err.rawMessage)) continue;
          served = true;
          assert.ok(
            !err || err.code !== Code.Unimplemented,
            `${service.typeName}.${m.name} is served without a handler: ${err?.message}`,
          );
        }
        if (served) answered.push(service);
      }
      assert.deepEqual(names(answered), names(SERVED.filter((s) => s.methods.some((m) => m.name.startsWith("List")))));
      assert.ok(LIST_RPCS.length >= 7, `only ${LIST_RPCS.length} List RPCs found`);
    });

    it("every fixture factory belongs to a served List RPC (no stale fixtures)", () => {
      const keys = new Set(LIST_RPCS.map((r) => r.itemsField?.jsonName));
      for (const key of Object.keys(FACTORIES)) assert.ok(keys.has(key), `FACTORIES.${key} matches no served List RPC`);
    });

    for (const rpc of LIST_RPCS) {
      const label = `${rpc.service.name}.${rpc.method.name} (GET ${rpc.path})`;
      const ready = rpc.factory && rpc.listing && rpc.item && rpc.itemsField;
      const skip = ready ? false : "setup incomplete: see the first test of this RPC";
      describe(label, () => {
        const key = rpc.itemsField?.jsonName ?? "";
        const item = rpc.item!;
        const listing = rpc.listing!;
        let org: Json;
        let items: Json[];
        let total: string;
        const scope = () => ({ "uidp.descendants_of": org.uid });

        before(async () => {
          if (!ready) return;
          const started = Date.now();
          org = await createGroup(api, undefined, `list org ${key.toLowerCase()}`);
          items = await rpc.factory!(api, org, N);
          // Touch two items (the later one first) so update_time order differs from creation order.
          const patch =
            listing.sortable.update_time && item.fields.some((f) => f.name === "description")
              ? updatePath(rpc.service, item)
              : undefined;
          if (patch) {
            for (const i of [4, 1]) {
              const uid = items[i]!.uid as string;
              const res: JsonResponse = await api.patch(patch.replace(/\{[^}]+\}/, uid), {
                description: `touched ${i}`,
              });
              assert.equal(res.status, 200, JSON.stringify(res.body));
              items[i] = res.body;
            }
          }
          total = String(items.length);
          console.log(`[${backend}] ${label}: ${items.length} items in ${Date.now() - started} ms`);
        });

        async function list(params: Params) {
          return api.get(rpc.path + query(params));
        }

        async function listOk(params: Params): Promise<Json> {
          const res = await list(params);
          assert.equal(res.status, 200, `${query(params)}: ${JSON.stringify(res.body)}`);
          assert.ok(Array.isArray(res.body[key]), `${key} missing: ${JSON.stringify(res.body)}`);
          assert.equal(typeof res.body.totalCount, "string");
          assert.equal(typeof res.body.skipped, "number");
          assert.notEqual(res.body.nextPageToken, "", "an empty nextPageToken must be omitted");
          return res.body;
        }

        const uidsOf = (page: Json) => (page[key] as Json[]).map((x) => x.uid as string);

        async function walk(params: Params, perPage: Params = {}): Promise<Json[]> {
          const pages: Json[] = [];
          let token: string | undefined;
          do {
            pages.push(await listOk({ ...scope(), ...params, ...perPage, page_token: token }));
            token = pages.at(-1)!.nextPageToken;
            assert.ok(pages.length <= 20, "walk did not end");
          } while (token !== undefined);
          return pages;
        }

        /** A page_size=3 walk in `order`: every item once, in order, totalCount on every page. */
        async function assertWalk(orderBy: string | undefined, order: Order) {
          const where = `order_by=${orderBy ?? "(default)"}`;
          const expected = sortedUids(items, item, order);
          const pages = await walk({ order_by: orderBy, page_size: PAGE });
          const got = pages.flatMap(uidsOf);
          assert.equal(new Set(got).size, got.length, `${where}: an item came twice`);
          assert.deepEqual(got, expected, where);
          assert.equal(pages.length, Math.ceil(expected.length / PAGE), where);
          for (const [i, p] of pages.entries()) {
            assert.equal(p.totalCount, total, `${where}: totalCount on page ${i + 1}`);
            assert.equal(p.skipped, 0, `${where}: skipped on page ${i + 1}`);
          }
          assert.ok(!("nextPageToken" in pages.at(-1)!), `${where}: last page has a nextPageToken`);
          // the sort key the server ordered by is the one it shows
          if (order.field !== "uid") {
            const k = jsonNameOf(item, order.field);
            const mine = new Map(items.map((x) => [x.uid as string, x]));
            for (const x of pages.flatMap((p) => p[key] as Json[]))
              assert.equal(x[k], mine.get(x.uid)![k], `${where}: ${k} of ${x.uid}`);
          }
        }

        it("has a fixture factory, a *Listing, a uidp filter and a GET path without variables", () => {
          assert.ok(rpc.itemsField, `${rpc.method.output.typeName} must have exactly one repeated message field`);
          assert.ok(
            rpc.factory,
            `no fixture factory for ${label}: add FACTORIES["${rpc.itemsField.jsonName}"] to test/server/list-rpcs.test.ts`,
          );
          assert.ok(rpc.listing, `no listing for ${rpc.listingName} in its module's listings`);
          assert.ok(
            rpc.item!.fields.some((f) => f.name === "uid"),
            `${rpc.item!.typeName} has no uid`,
          );
          assert.ok(
            rpc.method.input.fields.some((f) => f.name === "uidp"),
            `${rpc.method.input.typeName} has no uidp filter`,
          );
          for (const f of ["page_size", "page_token", "order_by", "skip"]) {
            assert.ok(
              rpc.method.input.fields.some((x) => x.name === f),
              `${rpc.method.input.typeName} has no ${f}`,
            );
          }
          for (const f of ["next_page_token", "total_count", "skipped"]) {
            assert.ok(
              rpc.method.output.fields.some((x) => x.name === f),
              `${rpc.method.output.typeName} has no ${f}`,
            );
          }
          assert.ok(!rpc.path.includes("{"), `path variables in ${rpc.path} are not modelled here`);
        });

        it(
          "default page size: fewer than 50 items come on one page, in the default order, without a nextPageToken",
          { skip },
          async () => {
            assert.ok(items.length < DEFAULT_PAGE_SIZE);
            const body = await listOk(scope());
            assert.deepEqual(
              uidsOf(body),
              sortedUids(items, item, parseOrder(listing.defaultOrder)),
              `default order "${listing.defaultOrder}"`,
            );
            assert.ok(!("nextPageToken" in body));
            assert.equal(body.totalCount, total);
            assert.equal(body.skipped, 0);
          },
        );

        it("page_size=3 walks every item exactly once in uid order; totalCount on every page", { skip }, async () => {
          await assertWalk("uid", { field: "uid", desc: false });
          await assertWalk(undefined, parseOrder(listing.defaultOrder));
        });

        it("order_by=uid desc reverses it", { skip }, async () => {
          await assertWalk("uid desc", { field: "uid", desc: true });
          const asc = sortedUids(items, item, { field: "uid", desc: false });
          assert.deepEqual(uidsOf(await listOk({ ...scope(), order_by: "uid desc" })), [...asc].reverse());
        });

        for (const field of Object.keys(rpc.listing?.sortable ?? {})) {
          it(`order_by=${field} and ${field} desc walk in order, ties broken by uid`, { skip }, async () => {
            await assertWalk(field, { field, desc: false });
            await assertWalk(`${field} asc`, { field, desc: false });
            await assertWalk(`${field} desc`, { field, desc: true });
            if (field === "name") {
              const names = items.map((x) => x.name as string);
              assert.ok(
                new Set(names).size < names.length,
                "the fixture has no equal names: the tie-breaker is untested",
              );
            }
          });
        }

        it("other spellings of the sortable fields (aliases, camelCase) order the same", { skip }, async () => {
          const spellings: [string, string][] = Object.entries(listing.aliases ?? {});
          for (const field of Object.keys(listing.sortable)) {
            const camel = field.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
            if (camel !== field) spellings.push([camel, field]);
          }
          for (const [spelling, field] of spellings) {
            for (const dir of ["", " desc"]) {
              const expected = sortedUids(items, item, { field, desc: dir !== "" });
              assert.deepEqual(
                uidsOf(await listOk({ ...scope(), order_by: spelling + dir })),
                expected,
                `order_by=${spelling}${dir}`,
              );
            }
          }
        });

        it("page_size=-1 and skip=-1 are INVALID_ARGUMENT (page_size, skip)", { skip }, async () => {
          assertInvalidArgument(await list({ ...scope(), page_size: -1 }), "page_size");
          assertInvalidArgument(await list({ ...scope(), skip: -1 }), "skip");
        });

        it(
          "skip=2 with page_size=3: `skipped` accumulates and the pages hold the expected slices",
          { skip },
          async () => {
            for (const [orderBy, order] of [
              ["uid", { field: "uid", desc: false }],
              [undefined, parseOrder(listing.defaultOrder)],
            ] as const) {
              const expected = sortedUids(items, item, order);
              const model = skipWalkModel(expected, PAGE, 2);
              const pages = await walk({ order_by: orderBy, page_size: PAGE }, { skip: 2 });
              const where = `skip 2, order_by=${orderBy ?? "(default)"}`;
              assert.deepEqual(
                pages.map(uidsOf),
                model.map((m) => m.uids),
                where,
              );
              assert.deepEqual(
                pages.map((p) => p.skipped),
                model.map((m) => m.skipped),
                where,
              );
              for (const p of pages) assert.equal(p.totalCount, total, where);
              assert.ok(!("nextPageToken" in pages.at(-1)!), where);
            }
          },
        );

        it("a skip past the end gives an empty page, skipped = what remained", { skip }, async () => {
          const n = items.length;
          const first = await listOk({ ...scope(), page_size: PAGE, skip: n + 5 });
          assert.deepEqual(first[key], []);
          assert.equal(first.skipped, n);
          assert.equal(first.totalCount, total);
          assert.ok(!("nextPageToken" in first));
          // from a cursor: what remained after page 1
          const page1 = await listOk({ ...scope(), page_size: PAGE });
          const rest = await listOk({ ...scope(), page_size: PAGE, skip: 100, page_token: page1.nextPageToken });
          assert.deepEqual(rest[key], []);
          assert.equal(rest.skipped, n - PAGE);
          assert.equal(rest.totalCount, total);
          assert.ok(!("nextPageToken" in rest));
        });

        it("a tampered page token is INVALID_ARGUMENT (page_token)", { skip }, async () => {
          const token = (await listOk({ ...scope(), page_size: PAGE })).nextPageToken as string;
          assert.ok(token);
          const mid = Math.floor(token.length / 2);
          assert.notEqual(token[mid], ".");
          const flipped = token.slice(0, mid) + (token[mid] === "A" ? "B" : "A") + token.slice(mid + 1);
          assertInvalidArgument(
            await list({ ...scope(), page_size: PAGE, page_token: flipped }),
            "page_token",
            "flipped",
          );
          assertInvalidArgument(
            await list({ ...scope(), page_size: PAGE, page_token: "garbage" }),
            "page_token",
            "garbage",
          );
        });

        it("a page token is bound to its order_by and filter", { skip }, async () => {
          const token = (await listOk({ ...scope(), page_size: PAGE, order_by: "uid" })).nextPageToken as string;
          for (const orderBy of ["uid desc", ...Object.keys(listing.sortable)]) {
            assertInvalidArgument(
              await list({ ...scope(), page_size: PAGE, order_by: orderBy, page_token: token }),
              "page_token",
              orderBy,
            );
          }
          assertInvalidArgument(
            await list({ page_size: PAGE, order_by: "uid", page_token: token }),
            "page_token",
            "filter dropped",
          );
          // the same order, spelled differently, continues the walk
          const next = await listOk({ ...scope(), page_size: PAGE, order_by: "uid asc", page_token: token });
          assert.deepEqual(uidsOf(next), sortedUids(items, item, { field: "uid", desc: false }).slice(PAGE, 2 * PAGE));
        });

        it("order_by a field that is not sortable is INVALID_ARGUMENT (order_by)", { skip }, async () => {
          const unsortable = ["bogus", "name", "update_time", "description"].filter((f) => !(f in listing.sortable));
          for (const orderBy of unsortable)
            assertInvalidArgument(await list({ ...scope(), order_by: orderBy }), "order_by", orderBy);
          assertInvalidArgument(await list({ ...scope(), order_by: "uid sideways" }), "order_by", "bad direction");
        });

        it("gRPC: one call answers the same uids and totalCount as REST page 1", { skip }, async () => {
          const client = unaryMethods(rpc.service, grpc);
          const res = await client[rpc.method.localName]!({ uidp: { descendantsOf: org.uid } });
          const got = (res[rpc.itemsField!.localName] as { uid: string }[]).map((x) => x.uid);
          assert.deepEqual(got, uidsOf(await listOk(scope())));
          assert.equal(res.totalCount, BigInt(items.length));
          assert.equal(res.nextPageToken, "");
          const paged = await client[rpc.method.localName]!({
            uidp: { descendantsOf: org.uid },
            pageSize: PAGE,
            orderBy: "uid desc",
          });
          assert.deepEqual(
            (paged[rpc.itemsField!.localName] as { uid: string }[]).map((x) => x.uid),
            uidsOf(await listOk({ ...scope(), page_size: PAGE, order_by: "uid desc" })),
          );
          const err = await client[rpc.method.localName]!({ pageSize: -1 }).then(
            () => undefined,
            (e: unknown) => ConnectError.from(e),
          );
          assert.equal(err?.code, Code.InvalidArgument);
        });
      });
    }
  });
}
