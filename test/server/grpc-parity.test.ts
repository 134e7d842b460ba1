// Transport parity: an independent gRPC client (@grpc/grpc-js + @grpc/proto-loader, built from the
// .proto sources) sees the same data and the same errors (code, message, typed google.rpc details
// in grpc-status-details-bin) as REST/JSON; the Connect-family transports (gRPC, Connect, gRPC-Web;
// binary and JSON; HTTP/1.1 and h2c) work on the same port; REST works over h2c; unimplemented
// RPCs are UNIMPLEMENTED / HTTP 501, never 500.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { equals, isMessage, type DescMessage, type Message, type MessageShape } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import {
  Http2SessionManager,
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import {
  GroupsService,
  OrgKindSchema,
  OrgStatusSchema,
  type Group,
} from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  PreconditionFailureSchema,
  ResourceInfoSchema,
} from "../../src/gen/google/rpc/error_details_pb.js";
import { backends } from "../support/db-templates.js";
import { query, restClient, type JsonResponse } from "../support/http.js";
import { ERROR_DOMAIN, startTestServer, type TestServer, bearer } from "../support/server.js";
import { VERSION } from "../../src/core/version.js";
import {
  errorDetailsRegistry,
  grpcClient,
  grpcError,
  statusFromRestBody,
  statusFromTrailer,
  statusJson,
  timestampMillis,
  unpackDetails,
  type Plain,
  type UnaryClient,
} from "../support/grpc.js";
import { HANG_MS } from "../support/wait.js";

const G = "/iam/v2beta1/groups";
const RFC3339_MILLIS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const GROUP_JSON_KEYS = [
  "createTime",
  "description",
  "kind",
  "name",
  "resourceLimits",
  "status",
  "uid",
  "updateTime",
  "verified",
];
const CODE_NAME: Record<number, string> = {
  3: "INVALID_ARGUMENT",
  5: "NOT_FOUND",
  9: "FAILED_PRECONDITION",
  12: "UNIMPLEMENTED",
};

/** The REST view of a group and the gRPC (proto-loader) view must describe the same resource. */
function assertSameGroup(g: Plain, rest: Record<string, any>, what: string): void {
  assert.deepEqual(Object.keys(rest).sort(), GROUP_JSON_KEYS, `${what}: REST keys`);
  assert.equal(g.uid, rest.uid, `${what}: uid`);
  assert.equal(g.name, rest.name, `${what}: name`);
  assert.equal(g.description, rest.description, `${what}: description`);
  assert.equal(g.verified, rest.verified, `${what}: verified`);
  assert.deepEqual(g.resourceLimits, rest.resourceLimits, `${what}: resourceLimits`);
  assert.equal(g.kind, rest.kind, `${what}: kind`);
  assert.equal(g.status, rest.status, `${what}: status`);
  for (const ts of ["createTime", "updateTime"] as const) {
    assert.match(rest[ts], RFC3339_MILLIS, `${what}: REST ${ts} format`);
    assert.equal(
      timestampMillis(g[ts]),
      Date.parse(rest[ts]),
      `${what}: ${ts} instant (gRPC ${JSON.stringify(g[ts])}, REST ${rest[ts]})`,
    );
  }
}

/** protobuf-es Group (Connect clients) vs the grpc-js view: exact, including nanoseconds. */
function assertSameGroupEs(es: Group, g: Plain, what: string): void {
  assert.equal(es.uid, g.uid, `${what}: uid`);
  assert.equal(es.name, g.name, `${what}: name`);
  assert.equal(es.description, g.description, `${what}: description`);
  assert.equal(es.verified, g.verified, `${what}: verified`);
  assert.deepEqual({ ...es.resourceLimits }, g.resourceLimits, `${what}: resourceLimits`);
  assert.equal(OrgKindSchema.value[es.kind]?.name, g.kind, `${what}: kind`);
  assert.equal(OrgStatusSchema.value[es.status]?.name, g.status, `${what}: status`);
  for (const ts of ["createTime", "updateTime"] as const) {
    assert.ok(es[ts], `${what}: ${ts} missing`);
    assert.equal(String(es[ts]!.seconds), g[ts].seconds, `${what}: ${ts}.seconds`);
    assert.equal(es[ts]!.nanos, g[ts].nanos, `${what}: ${ts}.nanos`);
  }
}

function detailOf<D extends DescMessage>(details: Message[], schema: D): MessageShape<D> {
  const found = details.filter((d) => isMessage(d, schema));
  assert.equal(
    found.length,
    1,
    `expected exactly one ${schema.typeName} detail, got ${details.map((d) => d.$typeName).join(", ")}`,
  );
  return found[0] as MessageShape<D>;
}

interface Parity {
  /** the typed details (from the gRPC trailer; equal to REST's) */
  details: Message[];
  message: string;
}

/**
 * The same bad request over grpc-js and REST: same gRPC code (REST body `code`), same HTTP status
 * per the gateway mapping, same message, and the same typed details in the same order.
 */
async function assertErrorParity(
  grpcCall: Promise<unknown>,
  restCall: Promise<JsonResponse>,
  code: number,
  httpStatus: number,
): Promise<Parity> {
  const [err, res] = await Promise.all([grpcError(grpcCall), restCall]);
  assert.equal(err.code, code, `gRPC status: ${err.code} ${err.details}`);
  assert.equal(res.status, httpStatus, `REST status for ${JSON.stringify(res.body)}`);
  assert.equal(res.body.code, code, "REST body code");
  assert.equal(typeof res.body.message, "string");
  // grpc-message (grpc-js puts it in err.details) and the Status in the trailer agree with REST.
  // Connect percent-encodes grpc-message with encodeURIComponent while grpc-js decodes it with
  // decodeURI, which leaves reserved characters (":" "," "$" ...) as %XX: decode the rest here.
  assert.equal(decodeURIComponent(err.details), res.body.message, "grpc-message vs REST message");
  const fromTrailer = statusFromTrailer(err);
  assert.equal(fromTrailer.code, code, "trailer Status.code");
  assert.equal(fromTrailer.message, res.body.message, "trailer Status.message vs REST message");
  // REST body is exactly the canonical JSON of the same google.rpc.Status.
  const fromRest = statusFromRestBody(res.body);
  assert.deepEqual(statusJson(fromTrailer), res.body, "trailer Status (as JSON) vs REST body");
  const grpcDetails = unpackDetails(fromTrailer);
  const restDetails = unpackDetails(fromRest);
  assert.deepEqual(
    grpcDetails.map((d) => d.$typeName),
    restDetails.map((d) => d.$typeName),
    "detail types and order",
  );
  grpcDetails.forEach((d, i) => {
    const schema = errorDetailsRegistry.getMessage(d.$typeName)!;
    assert.ok(equals(schema, d, restDetails[i]!), `detail ${d.$typeName} differs between gRPC and REST`);
  });
  // AIP-193: the ErrorInfo comes first and carries the reason and the configured domain.
  assert.ok(isMessage(grpcDetails[0], ErrorInfoSchema), "first detail is ErrorInfo");
  const info = grpcDetails[0];
  assert.equal(info.reason, CODE_NAME[code], "ErrorInfo.reason");
  assert.equal(info.domain, ERROR_DOMAIN, "ErrorInfo.domain");
  return { details: grpcDetails, message: fromTrailer.message };
}

function violationFields(details: Message[]): string[] {
  return detailOf(details, BadRequestSchema).fieldViolations.map((v) => v.field);
}

function tamper(token: string): string {
  // JWE compact: header.key.iv.ciphertext.tag; flip one character in the middle of the ciphertext.
  const parts = token.split(".");
  assert.equal(parts.length, 5, "page token is a JWE in compact form");
  const ct = parts[3]!;
  const i = Math.floor(ct.length / 2);
  parts[3] = ct.slice(0, i) + (ct[i] === "A" ? "B" : "A") + ct.slice(i + 1);
  return parts.join(".");
}

interface H2Response {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: any;
}

function h2Request(session: http2.ClientHttp2Session, path: string, token?: string): Promise<H2Response> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ":method": "GET",
      ":path": path,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    });
    let headers: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => (headers = h));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", reject);
    stream.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      try {
        resolve({ status: Number(headers[":status"]), headers, body: JSON.parse(text) });
      } catch {
        reject(new Error(`not JSON over h2 (${headers[":status"]}): ${text}`));
      }
    });
    stream.end();
  });
}

for (const backend of backends()) {
  describe(`gRPC / REST parity [${backend}]`, () => {
    let server: TestServer;
    let rest: ReturnType<typeof restClient>;
    let rpc: UnaryClient;
    // A tree for listing: root "lr" with item-0..item-5 and item-0/item-0.sub (8 descendants incl. root),
    // and an unrelated root with a child the descendants_of filter must exclude.
    let listRoot: Plain;
    let items: Plain[] = [];
    const expectedDesc = ["lr", "item-5", "item-4", "item-3", "item-2", "item-1", "item-0.sub", "item-0"];
    let byName = new Map<string, Plain>();

    before(async () => {
      server = await startTestServer(backend);
      rest = restClient(server.url, server.operatorToken);
      rpc = grpcClient(server.port, undefined, server.operatorToken);
      listRoot = await rpc.call("CreateGroup", { parent: "", group: { name: "lr", description: "list root" } });
      for (let i = 0; i < 6; i++) {
        items.push(
          await rpc.call("CreateGroup", {
            parent: listRoot.uid,
            group: { name: `item-${i}`, description: `item ${i}` },
          }),
        );
      }
      const sub = await rpc.call("CreateGroup", { parent: items[0]!.uid, group: { name: "item-0.sub" } });
      const other = await rpc.call("CreateGroup", { parent: "", group: { name: "other" } });
      await rpc.call("CreateGroup", { parent: other.uid, group: { name: "item-9" } });
      byName = new Map([listRoot, ...items, sub].map((g) => [g.name, g]));
    });

    after(async () => {
      rpc?.close();
      await server?.close();
    });

    test("grpc-js CreateGroup (root and child) and GetGroup match the REST view", async () => {
      const root = await rpc.call("CreateGroup", {
        parent: "",
        group: { name: "parity root", description: "made over grpc" },
      });
      assert.match(root.uid, /^[0-9a-f]{40}$/);
      assert.equal(root.name, "parity root");
      assert.equal(root.description, "made over grpc");
      assert.equal(root.verified, false);
      assert.deepEqual(root.resourceLimits, {});
      assert.equal(timestampMillis(root.createTime), timestampMillis(root.updateTime));

      const child = await rpc.call("CreateGroup", {
        parent: root.uid,
        group: { name: "child-a", description: "a child" },
      });
      assert.match(child.uid, new RegExp(`^${root.uid}/[0-9a-f]{16}$`));

      for (const created of [root, child]) {
        const got = await rpc.call("GetGroup", { uid: created.uid });
        assert.deepEqual(got, created, "GetGroup returns what CreateGroup returned");
        const res = await rest.get(`${G}/${created.uid}`);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assertSameGroup(got, res.body, `group ${created.name}`);
      }

      // And the other way round: created over REST, read over gRPC.
      const viaRest = await rest.post(`${G}/${root.uid}`, { name: "child-rest", description: "made over rest" });
      assert.equal(viaRest.status, 200, JSON.stringify(viaRest.body));
      const got = await rpc.call("GetGroup", { uid: viaRest.body.uid });
      assertSameGroup(got, viaRest.body, "REST-created child");
      const rootViaRest = await rest.post(G, { name: "rest root" });
      assert.equal(rootViaRest.status, 200, JSON.stringify(rootViaRest.body));
      assert.match(rootViaRest.body.uid, /^[0-9a-f]{40}$/);
      assertSameGroup(await rpc.call("GetGroup", { uid: rootViaRest.body.uid }), rootViaRest.body, "REST-created root");
    });

    test("grpc-js ListGroups: descendants_of, page_size, order_by, page_token walk and skip match REST", async () => {
      const filter = { uidp: { descendantsOf: listRoot.uid }, pageSize: 3, orderBy: "name desc" };
      const restParams = { "uidp.descendants_of": listRoot.uid, page_size: 3, order_by: "name desc" };

      // Walk over gRPC and over REST independently.
      const grpcPages: Plain[] = [];
      let token = "";
      do {
        const page = await rpc.call("ListGroups", { ...filter, pageToken: token });
        grpcPages.push(page);
        token = page.nextPageToken;
        assert.ok(grpcPages.length <= 5, "walk does not end");
      } while (token !== "");
      const restPages: any[] = [];
      let restToken: string | undefined;
      do {
        const res = await rest.get(G + query({ ...restParams, ...(restToken ? { page_token: restToken } : {}) }));
        assert.equal(res.status, 200, JSON.stringify(res.body));
        restPages.push(res.body);
        restToken = res.body.nextPageToken;
        assert.ok(restPages.length <= 5, "walk does not end");
      } while (restToken !== undefined);

      assert.equal(grpcPages.length, 3, "8 groups at 3 a page is 3 pages");
      assert.equal(restPages.length, 3);
      assert.deepEqual(
        grpcPages.flatMap((p) => p.groups.map((g: Plain) => g.name)),
        expectedDesc,
        "order_by name desc over gRPC",
      );
      grpcPages.forEach((gp, i) => {
        const rp = restPages[i];
        assert.equal(gp.totalCount, "8", `page ${i}: gRPC totalCount`);
        assert.equal(rp.totalCount, "8", `page ${i}: REST totalCount (int64 as a JSON string)`);
        assert.equal(gp.skipped, 0);
        assert.equal(rp.skipped, 0);
        assert.equal(gp.nextPageToken !== "", "nextPageToken" in rp, `page ${i}: both or neither have a next page`);
        assert.equal(gp.groups.length, rp.groups.length, `page ${i}: size`);
        gp.groups.forEach((g: Plain, j: number) => assertSameGroup(g, rp.groups[j], `page ${i} item ${j}`));
      });

      // Tokens are interchangeable between transports (same server, same cursor format).
      const first = grpcPages[0]!;
      const second = await rest.get(G + query({ ...restParams, page_token: first.nextPageToken }));
      assert.equal(second.status, 200, JSON.stringify(second.body));
      assert.deepEqual(
        second.body.groups.map((g: any) => g.uid),
        grpcPages[1]!.groups.map((g: Plain) => g.uid),
      );
      const third = await rpc.call("ListGroups", { ...filter, pageToken: second.body.nextPageToken });
      assert.deepEqual(
        third.groups.map((g: Plain) => g.uid),
        grpcPages[2]!.groups.map((g: Plain) => g.uid),
      );

      // skip: leaves out the first results, `skipped` reports it and stays over the walk.
      const skipped1 = await rpc.call("ListGroups", { ...filter, skip: 2 });
      const restSkipped1 = await rest.get(G + query({ ...restParams, skip: 2 }));
      assert.deepEqual(
        skipped1.groups.map((g: Plain) => g.name),
        expectedDesc.slice(2, 5),
      );
      assert.equal(skipped1.skipped, 2);
      assert.equal(skipped1.totalCount, "8");
      assert.equal(restSkipped1.body.skipped, 2);
      assert.equal(restSkipped1.body.totalCount, "8");
      skipped1.groups.forEach((g: Plain, j: number) =>
        assertSameGroup(g, restSkipped1.body.groups[j], `skip page item ${j}`),
      );
      const skipped2 = await rpc.call("ListGroups", { ...filter, pageToken: skipped1.nextPageToken });
      const restSkipped2 = await rest.get(G + query({ ...restParams, page_token: restSkipped1.body.nextPageToken }));
      assert.deepEqual(
        skipped2.groups.map((g: Plain) => g.name),
        expectedDesc.slice(5),
      );
      assert.deepEqual(
        restSkipped2.body.groups.map((g: any) => g.name),
        expectedDesc.slice(5),
      );
      assert.equal(skipped2.skipped, 2);
      assert.equal(restSkipped2.body.skipped, 2);
      assert.equal(skipped2.nextPageToken, "");
      assert.equal("nextPageToken" in restSkipped2.body, false);

      // skip past the end: an empty page, skipped = what was there.
      const past = await rpc.call("ListGroups", { ...filter, skip: 20 });
      const restPast = await rest.get(G + query({ ...restParams, skip: 20 }));
      assert.deepEqual(past.groups, []);
      assert.deepEqual(restPast.body.groups, []);
      assert.equal(past.skipped, restPast.body.skipped);
      assert.equal(past.totalCount, restPast.body.totalCount);

      // The filter excludes the other tree; default order (uid) agrees too.
      const all = await rpc.call("ListGroups", { uidp: { descendantsOf: listRoot.uid } });
      const restAll = await rest.get(G + query({ "uidp.descendants_of": listRoot.uid }));
      assert.equal(all.groups.length, 8);
      assert.deepEqual(
        all.groups.map((g: Plain) => g.uid),
        [...all.groups.map((g: Plain) => g.uid)].sort(),
      );
      assert.deepEqual(
        all.groups.map((g: Plain) => g.uid),
        restAll.body.groups.map((g: any) => g.uid),
      );
      assert.ok(all.groups.every((g: Plain) => g.uid.startsWith(listRoot.uid)));
    });

    test("grpc-js UpdateGroup with and without update_mask, and DeleteGroup, match REST", async () => {
      const root = await rpc.call("CreateGroup", { parent: "", group: { name: "upd root" } });
      const a = await rpc.call("CreateGroup", { parent: root.uid, group: { name: "upd-a", description: "a before" } });
      const b = await rpc.call("CreateGroup", { parent: root.uid, group: { name: "upd-b", description: "b before" } });

      // With a mask: only the masked fields change; the rest of the patch is ignored.
      const masked = await rpc.call("UpdateGroup", {
        group: { uid: a.uid, name: "upd-a renamed", description: "ignored", verified: true },
        updateMask: { paths: ["name", "verified"] },
      });
      assert.equal(masked.name, "upd-a renamed");
      assert.equal(masked.verified, true);
      assert.equal(masked.description, "a before");
      assert.equal(timestampMillis(masked.createTime), timestampMillis(a.createTime));
      assert.ok(timestampMillis(masked.updateTime) >= timestampMillis(a.updateTime));
      assertSameGroup(masked, (await rest.get(`${G}/${a.uid}`)).body, "after masked update");

      // Without a mask: the populated fields of the patch change (empty name is not populated).
      const unmasked = await rpc.call("UpdateGroup", { group: { uid: b.uid, description: "b after" } });
      assert.equal(unmasked.name, "upd-b");
      assert.equal(unmasked.description, "b after");
      assertSameGroup(unmasked, (await rest.get(`${G}/${b.uid}`)).body, "after mask-less update");

      // REST PATCH, read back over gRPC.
      const patched = await rest.patch(`${G}/${b.uid}${query({ update_mask: "description" })}`, {
        description: "b via rest",
        name: "ignored",
      });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      assert.equal(patched.body.name, "upd-b");
      assert.equal(patched.body.description, "b via rest");
      assertSameGroup(await rpc.call("GetGroup", { uid: b.uid }), patched.body, "after REST PATCH");

      // Delete over gRPC: Empty back; gone on both transports.
      assert.deepEqual(await rpc.call("DeleteGroup", { uid: a.uid }), {});
      assert.equal((await rest.get(`${G}/${a.uid}`)).status, 404);
      assert.equal((await grpcError(rpc.call("GetGroup", { uid: a.uid }))).code, grpc.status.NOT_FOUND);
      // Delete over REST: gone over gRPC.
      const del = await rest.delete(`${G}/${b.uid}`);
      assert.equal(del.status, 200, JSON.stringify(del.body));
      assert.deepEqual(del.body, {});
      assert.equal((await grpcError(rpc.call("GetGroup", { uid: b.uid }))).code, grpc.status.NOT_FOUND);
      assert.deepEqual(await rpc.call("DeleteGroup", { uid: root.uid }), {});
    });

    test("errors: same code, message and typed details over grpc-js (grpc-status-details-bin) and REST", async () => {
      // Create with an empty name, under a parent and as a root.
      let p = await assertErrorParity(
        rpc.call("CreateGroup", { parent: listRoot.uid, group: { name: "" } }),
        rest.post(`${G}/${listRoot.uid}`, { name: "" }),
        3,
        400,
      );
      assert.deepEqual(violationFields(p.details), ["name"]);
      p = await assertErrorParity(
        rpc.call("CreateGroup", { parent: "", group: { name: "" } }),
        rest.post(G, { name: "" }),
        3,
        400,
      );
      assert.deepEqual(violationFields(p.details), ["name"]);

      // Unknown but valid uid: NOT_FOUND with ResourceInfo.
      const unknown = "0123456789abcdef0123456789abcdef01234567";
      p = await assertErrorParity(rpc.call("GetGroup", { uid: unknown }), rest.get(`${G}/${unknown}`), 5, 404);
      const info = detailOf(p.details, ResourceInfoSchema);
      assert.equal(info.resourceType, "group");
      assert.equal(info.resourceName, unknown);
      // ... also for an unknown child and for deleting an unknown group.
      p = await assertErrorParity(
        rpc.call("GetGroup", { uid: `${listRoot.uid}/0000000000000000` }),
        rest.get(`${G}/${listRoot.uid}/0000000000000000`),
        5,
        404,
      );
      assert.equal(detailOf(p.details, ResourceInfoSchema).resourceName, `${listRoot.uid}/0000000000000000`);
      await assertErrorParity(rpc.call("DeleteGroup", { uid: unknown }), rest.delete(`${G}/${unknown}`), 5, 404);
      // Create under an unknown parent.
      p = await assertErrorParity(
        rpc.call("CreateGroup", { parent: unknown, group: { name: "x" } }),
        rest.post(`${G}/${unknown}`, { name: "x" }),
        5,
        404,
      );
      assert.equal(detailOf(p.details, ResourceInfoSchema).resourceName, unknown);

      // Invalid uid, also one whose echo in the message needs percent-encoding in grpc-message.
      p = await assertErrorParity(rpc.call("GetGroup", { uid: "nope" }), rest.get(`${G}/nope`), 3, 400);
      assert.deepEqual(violationFields(p.details), ["uid"]);
      const odd = "grüße, ☃: ok?";
      p = await assertErrorParity(
        rpc.call("GetGroup", { uid: odd }),
        rest.get(`${G}/${encodeURIComponent(odd)}`),
        3,
        400,
      );
      assert.ok(p.message.includes(odd), p.message);

      // Delete a non-empty group: FAILED_PRECONDITION (HTTP 400) with PreconditionFailure.
      p = await assertErrorParity(
        rpc.call("DeleteGroup", { uid: listRoot.uid }),
        rest.delete(`${G}/${listRoot.uid}`),
        9,
        400,
      );
      const pf = detailOf(p.details, PreconditionFailureSchema);
      assert.equal(pf.violations.length, 1);
      assert.equal(pf.violations[0]!.type, "RESOURCE_NOT_EMPTY");
      assert.ok((await rpc.call("GetGroup", { uid: listRoot.uid })).uid, "the group is still there");

      // Negative page_size.
      p = await assertErrorParity(rpc.call("ListGroups", { pageSize: -1 }), rest.get(`${G}?page_size=-1`), 3, 400);
      assert.deepEqual(violationFields(p.details), ["page_size"]);

      // Tampered page token (same token on both transports).
      const params = { uidp: { descendantsOf: listRoot.uid }, pageSize: 2 };
      const page = await rpc.call("ListGroups", params);
      assert.notEqual(page.nextPageToken, "");
      const bad = tamper(page.nextPageToken);
      p = await assertErrorParity(
        rpc.call("ListGroups", { ...params, pageToken: bad }),
        rest.get(G + query({ "uidp.descendants_of": listRoot.uid, page_size: 2, page_token: bad })),
        3,
        400,
      );
      assert.deepEqual(violationFields(p.details), ["page_token"]);
      // A genuine token reused with another order_by.
      p = await assertErrorParity(
        rpc.call("ListGroups", { ...params, orderBy: "name", pageToken: page.nextPageToken }),
        rest.get(
          G +
            query({
              "uidp.descendants_of": listRoot.uid,
              page_size: 2,
              order_by: "name",
              page_token: page.nextPageToken,
            }),
        ),
        3,
        400,
      );
      assert.deepEqual(violationFields(p.details), ["page_token"]);

      // Bad update mask path.
      p = await assertErrorParity(
        rpc.call("UpdateGroup", { group: { uid: items[1]!.uid, name: "x" }, updateMask: { paths: ["no_such_field"] } }),
        rest.patch(`${G}/${items[1]!.uid}?update_mask=no_such_field`, { name: "x" }),
        3,
        400,
      );
      assert.deepEqual(violationFields(p.details), ["update_mask"]);
    });

    test("Connect-family transports on the same port: gRPC (h2), Connect (1.1/h2, binary/JSON, GET), gRPC-Web (1.1/h2)", async () => {
      const baseUrl = server.url;
      const child = byName.get("item-2")!;
      const restChild = (await rest.get(`${G}/${child.uid}`)).body;
      const restFirstPage = (
        await rest.get(G + query({ "uidp.descendants_of": listRoot.uid, page_size: 3, order_by: "name desc" }))
      ).body;
      const unknown = "fedcba9876543210fedcba9876543210fedcba98";
      const restNotFound = (await rest.get(`${G}/${unknown}`)).body;

      const managers: Http2SessionManager[] = [];
      const h2 = () => {
        const m = new Http2SessionManager(baseUrl);
        managers.push(m);
        return { httpVersion: "2" as const, sessionManager: m };
      };
      const variants: Array<[string, () => Transport]> = [
        [
          "gRPC h2 binary",
          () => createGrpcTransport({ baseUrl, interceptors: [bearer(server.operatorToken)], ...h2() }),
        ],
        [
          "gRPC h2 JSON",
          () =>
            createGrpcTransport({
              baseUrl,
              interceptors: [bearer(server.operatorToken)],
              ...h2(),
              useBinaryFormat: false,
            }),
        ],
        [
          "Connect HTTP/1.1 JSON",
          () =>
            createConnectTransport({
              baseUrl,
              interceptors: [bearer(server.operatorToken)],
              httpVersion: "1.1",
              useBinaryFormat: false,
            }),
        ],
        [
          "Connect HTTP/1.1 binary",
          () =>
            createConnectTransport({
              baseUrl,
              interceptors: [bearer(server.operatorToken)],
              httpVersion: "1.1",
              useBinaryFormat: true,
            }),
        ],
        [
          "Connect HTTP/1.1 JSON GET",
          () =>
            createConnectTransport({
              baseUrl,
              interceptors: [bearer(server.operatorToken)],
              httpVersion: "1.1",
              useBinaryFormat: false,
              useHttpGet: true,
            }),
        ],
        [
          "Connect h2 binary",
          () =>
            createConnectTransport({
              baseUrl,
              interceptors: [bearer(server.operatorToken)],
              ...h2(),
              useBinaryFormat: true,
            }),
        ],
        [
          "Connect h2 JSON",
          () =>
            createConnectTransport({
              baseUrl,
              interceptors: [bearer(server.operatorToken)],
              ...h2(),
              useBinaryFormat: false,
            }),
        ],
        [
          "gRPC-Web HTTP/1.1 binary",
          () =>
            createGrpcWebTransport({
              baseUrl,
              interceptors: [bearer(server.operatorToken)],
              httpVersion: "1.1",
              useBinaryFormat: true,
            }),
        ],
        [
          "gRPC-Web HTTP/1.1 JSON",
          () =>
            createGrpcWebTransport({
              baseUrl,
              interceptors: [bearer(server.operatorToken)],
              httpVersion: "1.1",
              useBinaryFormat: false,
            }),
        ],
        [
          "gRPC-Web h2 binary",
          () =>
            createGrpcWebTransport({
              baseUrl,
              interceptors: [bearer(server.operatorToken)],
              ...h2(),
              useBinaryFormat: true,
            }),
        ],
      ];
      const viaGrpcJs = await rpc.call("GetGroup", { uid: child.uid });
      try {
        for (const [name, make] of variants) {
          const client = createClient(GroupsService, make());
          const got = await client.getGroup({ uid: child.uid }, { timeoutMs: HANG_MS });
          assertSameGroupEs(got, viaGrpcJs, `${name}: GetGroup`);
          assertSameGroup(viaGrpcJs, restChild, `${name}: GetGroup vs REST`);
          assert.equal(timestampMs(got.createTime!), Date.parse(restChild.createTime), `${name}: createTime vs REST`);

          const list = await client.listGroups({
            uidp: { descendantsOf: listRoot.uid },
            pageSize: 3,
            orderBy: "name desc",
          });
          assert.equal(list.totalCount, 8n, `${name}: totalCount`);
          assert.equal(String(list.totalCount), restFirstPage.totalCount);
          assert.equal(list.skipped, 0);
          assert.notEqual(list.nextPageToken, "");
          assert.deepEqual(
            list.groups.map((g) => g.uid),
            restFirstPage.groups.map((g: any) => g.uid),
            `${name}: ListGroups page`,
          );

          const err = await client.getGroup({ uid: unknown }).then(
            () => assert.fail(`${name}: GetGroup of an unknown uid succeeded`),
            (e: unknown) => ConnectError.from(e),
          );
          assert.equal(err.code, Code.NotFound, `${name}: ${err.message}`);
          assert.equal(err.rawMessage, restNotFound.message, `${name}: message`);
          const [info, ...moreInfo] = err.findDetails(ErrorInfoSchema);
          assert.equal(moreInfo.length, 0);
          assert.equal(info?.reason, "NOT_FOUND", `${name}: ErrorInfo.reason`);
          assert.equal(info?.domain, ERROR_DOMAIN, `${name}: ErrorInfo.domain`);
          assert.equal(err.findDetails(ResourceInfoSchema)[0]?.resourceName, unknown, `${name}: ResourceInfo`);

          const invalid = await client.getGroup({ uid: "nope" }).then(
            () => assert.fail(`${name}: GetGroup "nope" succeeded`),
            (e: unknown) => ConnectError.from(e),
          );
          assert.equal(invalid.code, Code.InvalidArgument, `${name}: ${invalid.message}`);
          assert.deepEqual(
            invalid.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field),
            ["uid"],
          );

          const unimpl = await client.lookupGroup({}).then(
            () => assert.fail(`${name}: LookupGroup succeeded`),
            (e: unknown) => ConnectError.from(e),
          );
          assert.equal(unimpl.code, Code.Unimplemented, `${name}: ${unimpl.message}`);
          assert.equal(unimpl.findDetails(ErrorInfoSchema)[0]?.reason, "UNIMPLEMENTED");
        }
      } finally {
        for (const m of managers) m.abort();
      }
    });

    test("REST over h2c on the same port: same JSON as HTTP/1.1", async () => {
      const child = byName.get("item-0.sub")!;
      const unknown = "00000000000000000000000000000000000000ff";
      const session = http2.connect(`http://127.0.0.1:${server.port}`);
      session.on("error", () => {});
      try {
        for (const path of [
          `${G}/${child.uid}`,
          `${G}/${listRoot.uid}`,
          "/healthz",
          G + query({ "uidp.descendants_of": listRoot.uid, page_size: 3, order_by: "name desc" }),
          `${G}/${unknown}`,
        ]) {
          const [viaH2, viaH1] = await Promise.all([h2Request(session, path, server.operatorToken), rest.get(path)]);
          assert.equal(viaH2.status, viaH1.status, `${path}: status`);
          assert.match(String(viaH2.headers["content-type"]), /^application\/json/, `${path}: content-type`);
          if (path.includes("page_size")) {
            // Page tokens are encrypted with a fresh IV each time: compare everything else.
            assert.equal(typeof viaH2.body.nextPageToken, "string");
            delete viaH2.body.nextPageToken;
            delete viaH1.body.nextPageToken;
          }
          assert.deepEqual(viaH2.body, viaH1.body, `${path}: body`);
        }
        const health = await h2Request(session, "/healthz");
        assert.equal(health.status, 200);
        assert.deepEqual(health.body, { status: "SERVING", version: VERSION });
        const got = await h2Request(session, `${G}/${child.uid}`, server.operatorToken);
        assert.equal(got.status, 200);
        assertSameGroup(await rpc.call("GetGroup", { uid: child.uid }), got.body, "h2c REST vs gRPC");
      } finally {
        session.close();
      }
    });

    test("unimplemented RPCs: UNIMPLEMENTED over gRPC, HTTP 501 over REST, never 500", async () => {
      await assertErrorParity(rpc.call("LookupGroup", {}), rest.get(`${G}:lookupGroup`), 12, 501);
      await assertErrorParity(rpc.call("CheckEligibility", {}), rest.get(`${G}:checkEligibility`), 12, 501);
      await assertErrorParity(
        rpc.call("RequestGroupAccess", { groupUid: listRoot.uid }),
        rest.post(`${G}/${listRoot.uid}:requestGroupAccess`, {}),
        12,
        501,
      );

      // A gRPC method this server does not serve at all.
      const Unknown = grpc.makeGenericClientConstructor(
        {
          nothing: {
            path: "/bulwark.test.v1.NoSuchService/Nothing",
            requestStream: false,
            responseStream: false,
            requestSerialize: (b: Buffer) => b,
            requestDeserialize: (b: Buffer) => b,
            responseSerialize: (b: Buffer) => b,
            responseDeserialize: (b: Buffer) => b,
          },
        },
        "NoSuchService",
      );
      const raw = new Unknown(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
      try {
        const err = await grpcError(
          new Promise((resolve, reject) =>
            (raw as any).nothing(Buffer.alloc(0), { deadline: Date.now() + HANG_MS }, (e: unknown, r: unknown) =>
              e ? reject(e) : resolve(r),
            ),
          ),
        );
        assert.equal(err.code, grpc.status.UNIMPLEMENTED, `unknown gRPC method: ${err.code} ${err.details}`);
      } finally {
        raw.close();
      }
    });

    // gRPC (PROTOCOL-HTTP2, status codes): an unknown method is answered with HTTP 200 and
    // grpc-status 12, in the gRPC protocol, not with the REST catch-all's 404 JSON.
    test("unknown gRPC method: HTTP 200 with grpc-status 12 in the gRPC protocol", async () => {
      const session = http2.connect(`http://127.0.0.1:${server.port}`);
      session.on("error", () => {});
      try {
        const { headers, trailers } = await new Promise<{
          headers: http2.IncomingHttpHeaders;
          trailers: http2.IncomingHttpHeaders;
        }>((resolve, reject) => {
          const stream = session.request({
            ":method": "POST",
            ":path": "/bulwark.test.v1.NoSuchService/Nothing",
            "content-type": "application/grpc",
            te: "trailers",
          });
          let headers: http2.IncomingHttpHeaders = {};
          let trailers: http2.IncomingHttpHeaders = {};
          stream.on("response", (h) => (headers = h));
          stream.on("trailers", (t) => (trailers = t));
          stream.on("data", () => {});
          stream.on("error", reject);
          stream.on("end", () => resolve({ headers, trailers }));
          stream.end(Buffer.from([0, 0, 0, 0, 0]));
        });
        assert.equal(headers[":status"], 200);
        assert.match(String(headers["content-type"]), /^application\/grpc/);
        assert.equal(trailers["grpc-status"] ?? headers["grpc-status"], "12");
      } finally {
        session.close();
      }
    });
  });
}
