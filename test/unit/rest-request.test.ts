// REST request building (src/server/transcoder.ts: collectRoutes + buildRequest), grpc-gateway
// style: path variables, then the body ("*", one field, or none), then query parameters; a PATCH
// without update_mask gets one from the JSON keys present. Routes come from the real generated
// services and their google.api.http options, dispatched as the transcoder does: the first route
// of the verb, in specificity order, whose template matches.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { getOption, toJson, type DescService, type JsonValue } from "@bufbuild/protobuf";
import { buildRequest, collectRoutes, type RestRoute } from "../../src/server/transcoder.js";
import { http } from "../../src/gen/google/api/annotations_pb.js";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { IdentitiesService } from "../../src/gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import { IdentityProvidersService } from "../../src/gen/chainguard/platform/iam/v2beta1/identity_providers_pb.js";
import { RoleBindingsService } from "../../src/gen/chainguard/platform/iam/v2beta1/role_bindings_pb.js";
import { AdvisoriesService } from "../../src/gen/chainguard/platform/vulnerabilities/v2beta1/advisories_pb.js";
import { SecurityTokenService } from "../../src/gen/platform/oidc/v1/oidc.platform_pb.js";
import { Registry } from "../../src/gen/platform/registry/v1/registry.platform_pb.js";
import { RoleBindings as RoleBindingsV1 } from "../../src/gen/platform/iam/v1/role_binding.platform_pb.js";
import { expectInvalidArgument } from "./expect-error.js";

const SERVICES: DescService[] = [
  GroupsService,
  IdentitiesService,
  IdentityProvidersService,
  RoleBindingsService,
  AdvisoriesService,
  SecurityTokenService,
  Registry,
  RoleBindingsV1,
];
// collectRoutes reads only the service descriptors; handlers are never called here.
const ROUTES = collectRoutes(SERVICES.map((service) => ({ service, handlers: {} })));

const ROOT = "0123456789abcdef0123456789abcdef01234567";
const UIDP = `${ROOT}/0011223344556677`;

type Query = Record<string, string | string[] | undefined>;

interface Call {
  query?: Query;
  /** raw body text; objects are JSON-encoded */
  body?: string | JsonValue;
  contentType?: string;
}

function route(verb: string, path: string): { route: RestRoute; match: RegExpExecArray } {
  for (const r of ROUTES) {
    if (r.verb !== verb) continue;
    const match = r.template.regex.exec(path);
    if (match) return { route: r, match };
  }
  throw new Error(`no route for ${verb} ${path}`);
}

/** Builds the request for a call and returns the method name and the request as proto JSON. */
function build(verb: string, path: string, call: Call = {}): { method: string; json: JsonValue } {
  const { route: r, match } = route(verb, path);
  const { body } = call;
  const raw = body === undefined ? undefined : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
  const request = buildRequest(r, match, call.query ?? {}, raw, call.contentType);
  return { method: r.method.name, json: toJson(r.method.input, request) };
}

const NOT_AN_OBJECT = { field: "body", description: "must be a JSON object" };

/** Just the request JSON. */
const req = (verb: string, path: string, call: Call = {}) => build(verb, path, call).json;

describe("collectRoutes", () => {
  it("makes one route per google.api.http rule, additional bindings included", () => {
    const exchange = SecurityTokenService.method.exchange;
    const rule = getOption(exchange, http);
    assert.equal(rule.additionalBindings.length, 1);
    const routes = ROUTES.filter((r) => r.method === exchange);
    assert.deepEqual(routes.map((r) => `${r.verb} ${r.template.source}`).sort(), [
      "GET /sts/exchange",
      "POST /sts/exchange",
    ]);
  });

  it("records the body rule of each route", () => {
    const body = (verb: string, path: string) => route(verb, path).route.body;
    assert.equal(body("GET", "/iam/v2beta1/groups"), "");
    assert.equal(body("POST", `/iam/v2beta1/groups/${ROOT}`), "group");
    assert.equal(body("POST", "/iam/v2beta1/roleBindings:batchCreate"), "*");
  });

  it("dispatches to the most specific template", () => {
    const method = (verb: string, path: string) => build(verb, path).method;
    assert.equal(method("GET", "/iam/v2beta1/groups"), "ListGroups");
    assert.equal(method("GET", `/iam/v2beta1/groups/${UIDP}`), "GetGroup");
    assert.equal(method("GET", "/iam/v2beta1/groups:lookupGroup"), "LookupGroup");
    assert.equal(method("GET", "/iam/v2beta1/groups:checkEligibility"), "CheckEligibility");
    assert.equal(method("GET", "/iam/v2beta1/identities:lookupIdentity"), "LookupIdentity");
    assert.equal(method("POST", "/iam/v2beta1/roleBindings:batchCreate"), "BatchCreateRoleBindings");
    assert.equal(method("POST", `/iam/v2beta1/roleBindings/${UIDP}`), "CreateRoleBinding");
    assert.equal(method("POST", `/iam/v2beta1/groups/${UIDP}:requestGroupAccess`), "RequestGroupAccess");
    assert.equal(method("POST", `/iam/v2beta1/groups/${UIDP}`), "CreateGroup");
    assert.equal(method("POST", `/iam/v2beta1/identityProviders/${UIDP}:regenerateScimToken`), "RegenerateScimToken");
    assert.equal(method("POST", `/iam/v2beta1/identityProviders/${UIDP}:generateScimToken`), "GenerateScimToken");
    assert.equal(method("PATCH", "/iam/v2beta1/identities:updateIdentityMetadata"), "UpdateIdentityMetadata");
    assert.equal(method("PATCH", `/iam/v2beta1/identities/${UIDP}`), "UpdateIdentity");
    assert.throws(() => route("PUT", "/iam/v2beta1/groups"), /no route/);
  });
});

describe("path variables", () => {
  it("set the named field, a slash-containing UIDP whole", () => {
    assert.deepEqual(req("GET", `/iam/v2beta1/groups/${UIDP}`), { uid: UIDP });
    assert.deepEqual(req("DELETE", `/iam/v2beta1/identities/${ROOT}`), { uid: ROOT });
  });

  it("are percent-decoded", () => {
    assert.deepEqual(req("GET", "/iam/v2beta1/groups/a%2Fb%20c%3Ad"), { uid: "a/b c:d" });
    assert.deepEqual(req("GET", "/iam/v2beta1/groups/%E2%9C%93"), { uid: "✓" });
    // "+" is only a space in forms, not in paths
    assert.deepEqual(req("GET", "/iam/v2beta1/groups/a+b"), { uid: "a+b" });
  });

  it("reject malformed percent-encoding, naming the variable", () => {
    for (const path of ["/iam/v2beta1/groups/a%zz", "/iam/v2beta1/groups/a%E0%A4%A", "/iam/v2beta1/groups/%"]) {
      expectInvalidArgument(() => req("GET", path), {
        field: "uid",
        description: "malformed percent-encoding in path",
      });
    }
    expectInvalidArgument(() => req("PATCH", "/iam/v2beta1/groups/%C3%28", { body: {} }), {
      field: "group.uid",
      description: "malformed percent-encoding in path",
    });
  });

  it("an empty trailing {parent=**} gives an empty field (a root group)", () => {
    assert.deepEqual(req("POST", "/iam/v2beta1/groups", { body: { name: "root" } }), { group: { name: "root" } });
    assert.deepEqual(req("POST", "/iam/v2beta1/groups/", { body: { name: "root" } }), { group: { name: "root" } });
  });

  it("a nested {group.uid=**} sets the field inside the body message", () => {
    assert.deepEqual(req("PATCH", `/iam/v2beta1/groups/${UIDP}`, { body: { name: "n" } }), {
      group: { uid: UIDP, name: "n" },
      updateMask: "name",
    });
  });

  it("override the same field sent in the body, under either name", () => {
    const path = `/iam/v2beta1/groups/${UIDP}:requestGroupAccess`;
    assert.deepEqual(req("POST", path, { body: { groupUid: "evil" } }), { groupUid: UIDP });
    assert.deepEqual(req("POST", path, { body: { group_uid: "evil" } }), { groupUid: UIDP });
    assert.deepEqual(req("PATCH", `/iam/v2beta1/groups/${UIDP}`, { body: { uid: "evil", name: "n" } }), {
      group: { uid: UIDP, name: "n" },
      updateMask: "name",
    });
  });
});

describe('body "*"', () => {
  const path = `/iam/v2beta1/identityProviders/${UIDP}:generateScimToken`;

  it("decodes the whole request from the body, with proto or JSON names", () => {
    assert.deepEqual(req("POST", path, { body: { never_expires: true } }), {
      identityProviderUid: UIDP,
      neverExpires: true,
    });
    assert.deepEqual(req("POST", path, { body: { expireTime: "2030-01-02T03:04:05Z" } }), {
      identityProviderUid: UIDP,
      expireTime: "2030-01-02T03:04:05Z",
    });
    assert.deepEqual(
      req("POST", "/iam/v2beta1/roleBindings:batchCreate", {
        body: { parent: ROOT, requests: [{ parent: ROOT, roleBinding: { identity_uid: "i", roleUid: "r" } }] },
      }),
      { parent: ROOT, requests: [{ parent: ROOT, roleBinding: { identityUid: "i", roleUid: "r" } }] },
    );
  });

  it("an absent or empty body leaves only the path fields", () => {
    assert.deepEqual(req("POST", path), { identityProviderUid: UIDP });
    assert.deepEqual(req("POST", path, { body: "" }), { identityProviderUid: UIDP });
  });

  it("must be a JSON object", () => {
    for (const body of ["[]", "null", '"text"', "42", "true"]) {
      expectInvalidArgument(() => req("POST", path, { body }), NOT_AN_OBJECT);
    }
  });

  it("takes no query parameters for request fields", () => {
    expectInvalidArgument(() => req("POST", path, { query: { never_expires: "true" } }), {
      field: "never_expires",
      description: '"never_expires" is taken from the path or body, not the query string',
    });
    expectInvalidArgument(() => req("POST", path, { query: { neverExpires: "true" } }), {
      field: "neverExpires",
      description: '"neverExpires" is taken from the path or body, not the query string',
    });
  });

  it("names the field that fails to decode", () => {
    expectInvalidArgument(() => req("POST", path, { body: { neverExpires: "maybe" } }), {
      field: "never_expires",
      description: /^cannot decode: /,
    });
    expectInvalidArgument(() => req("POST", path, { body: { expire_time: "yesterday" } }), {
      field: "expire_time",
      description: /^cannot decode: /,
    });
    expectInvalidArgument(() => req("POST", path, { body: { bogus: 1 } }), {
      field: "bogus",
      description: /^cannot decode: key "bogus" is unknown/,
    });
    expectInvalidArgument(
      () =>
        req("POST", "/iam/v2beta1/roleBindings:batchCreate", {
          body: { requests: [{ roleBinding: { roleUid: 7 } }] },
        }),
      { field: "requests", description: /^cannot decode: / },
    );
  });
});

describe("a named body field", () => {
  const create = `/iam/v2beta1/groups/${ROOT}`;

  it("decodes the body as that field; the rest comes from the path", () => {
    assert.deepEqual(req("POST", create, { body: { name: "eng", description: "d", kind: "ORG_KIND_DEV" } }), {
      parent: ROOT,
      group: { name: "eng", description: "d", kind: "ORG_KIND_DEV" },
    });
    assert.deepEqual(req("POST", create, { body: { resource_limits: { repos: 3 } } }), {
      parent: ROOT,
      group: { resourceLimits: { repos: 3 } },
    });
  });

  it("an absent body leaves the field unset", () => {
    assert.deepEqual(req("POST", create), { parent: ROOT });
  });

  it("a message body must be a JSON object", () => {
    for (const body of ["[]", "null", '"eng"', "1"]) {
      expectInvalidArgument(() => req("POST", create, { body }), NOT_AN_OBJECT);
    }
  });

  it("a repeated body field takes a JSON array", () => {
    const batch = `/iam/v1/rolebindings/batch/${ROOT}`;
    assert.deepEqual(req("POST", batch, { body: [{ identity: "i", role: "r" }] }), {
      parent: ROOT,
      roleBindings: [{ identity: "i", role: "r" }],
    });
    expectInvalidArgument(() => req("POST", batch, { body: { identity: "i" } }), {
      field: "role_bindings",
      description: /^cannot decode: /,
    });
  });

  it("rejects malformed JSON", () => {
    for (const body of ["{bad", '{"name": "x"', "{'name': 'x'}"]) {
      expectInvalidArgument(() => req("POST", create, { body }), { field: "body", description: /^malformed JSON: / });
    }
  });

  it("names decode failures relative to the body, at any depth", () => {
    expectInvalidArgument(() => req("POST", create, { body: { name: 5 } }), {
      field: "name",
      description: "cannot decode: expected string, got 5",
    });
    expectInvalidArgument(() => req("POST", create, { body: { nmae: "eng" } }), {
      field: "nmae",
      description: /^cannot decode: key "nmae" is unknown/,
    });
    expectInvalidArgument(() => req("POST", create, { body: { kind: "ORG_KIND_NOPE" } }), {
      field: "kind",
      description: 'invalid value "ORG_KIND_NOPE"',
    });
    expectInvalidArgument(
      () => req("POST", `/iam/v2beta1/identityProviders/${ROOT}`, { body: { name: "x", oidc: { clientId: 5 } } }),
      { field: "oidc.client_id", description: "cannot decode: expected string, got 5" },
    );
    expectInvalidArgument(
      () => req("POST", `/iam/v2beta1/identityProviders/${ROOT}`, { body: { oidc: { issuer: "i", nope: true } } }),
      { field: "oidc.nope", description: /key "nope" is unknown/ },
    );
  });

  it("takes no query parameters inside the body field, nor for path fields", () => {
    expectInvalidArgument(() => req("POST", create, { query: { "group.name": "x" }, body: {} }), {
      field: "group.name",
      description: '"group.name" is taken from the path or body, not the query string',
    });
    expectInvalidArgument(() => req("POST", create, { query: { parent: ROOT }, body: {} }), {
      field: "parent",
      description: '"parent" is taken from the path or body, not the query string',
    });
    expectInvalidArgument(() => req("GET", `/iam/v2beta1/groups/${ROOT}`, { query: { uid: ROOT } }), {
      field: "uid",
      description: '"uid" is taken from the path or body, not the query string',
    });
  });

  it("a rule without a body ignores a JSON body", () => {
    assert.deepEqual(req("GET", "/iam/v2beta1/groups", { body: { name: "x" }, contentType: "application/json" }), {});
  });
});

describe("query parameters", () => {
  const list = "/iam/v2beta1/groups";

  it("set fields by proto or JSON name", () => {
    assert.deepEqual(req("GET", list, { query: { page_size: "5", order_by: "name desc", skip: "2" } }), {
      pageSize: 5,
      orderBy: "name desc",
      skip: 2,
    });
    assert.deepEqual(req("GET", list, { query: { pageSize: "5", orderBy: "name", pageToken: "t" } }), {
      pageSize: 5,
      orderBy: "name",
      pageToken: "t",
    });
  });

  it("reach nested fields with dotted paths, in either naming", () => {
    assert.deepEqual(req("GET", list, { query: { "uidp.descendants_of": ROOT, "uidp.childrenOf": UIDP } }), {
      uidp: { descendantsOf: ROOT, childrenOf: UIDP },
    });
  });

  it("repeat a key for a list; one value makes a one-element list", () => {
    assert.deepEqual(req("GET", list, { query: { "uidp.ids": [ROOT, UIDP] } }), { uidp: { ids: [ROOT, UIDP] } });
    assert.deepEqual(req("GET", list, { query: { "uidp.ids": ROOT } }), { uidp: { ids: [ROOT] } });
    assert.deepEqual(req("GET", "/sts/exchange", { query: { aud: ["a", "b"], scopes: "s" } }), {
      aud: ["a", "b"],
      scopes: ["s"],
    });
  });

  it("refuse a repeated key for a singular field", () => {
    expectInvalidArgument(() => req("GET", list, { query: { name: ["a", "b"] } }), {
      field: "name",
      description: '"name" is given more than once',
    });
  });

  it("skip keys whose value is undefined", () => {
    assert.deepEqual(req("GET", list, { query: { name: undefined, page_size: "1" } }), { pageSize: 1 });
  });

  it("read booleans as true/false/1/0", () => {
    for (const [raw, value] of [
      ["true", true],
      ["1", true],
      ["false", false],
      ["0", false],
    ] as const) {
      const json = req("GET", "/registry/v1/tags", { query: { exclude_dates: raw, "uidp.in_root": raw } });
      // proto JSON omits false (but keeps the uidp message the key created)
      assert.deepEqual(json, value ? { excludeDates: true, uidp: { inRoot: true } } : { uidp: {} }, raw);
    }
    expectInvalidArgument(() => req("GET", "/registry/v1/tags", { query: { exclude_dates: "yes" } }), {
      field: "exclude_dates",
      description: '"yes" is not a boolean',
    });
    expectInvalidArgument(() => req("GET", "/registry/v1/tags", { query: { excludeDates: "TRUE" } }), {
      field: "exclude_dates",
      description: '"TRUE" is not a boolean',
    });
  });

  it("read enums by name or number, in singular and repeated fields", () => {
    const identities = "/iam/v2beta1/identities";
    assert.deepEqual(req("GET", identities, { query: { relationship_type: "RELATIONSHIP_TYPE_STATIC" } }), {
      relationshipType: "RELATIONSHIP_TYPE_STATIC",
    });
    assert.deepEqual(req("GET", identities, { query: { relationshipType: "3" } }), {
      relationshipType: "RELATIONSHIP_TYPE_AWS_IDENTITY",
    });
    const advisories = "/vulnerabilities/v2beta1/advisories";
    assert.deepEqual(req("GET", advisories, { query: { event_review_states: ["1", "REVIEW_STATE_APPROVED"] } }), {
      eventReviewStates: ["REVIEW_STATE_PENDING", "REVIEW_STATE_APPROVED"],
    });
    expectInvalidArgument(() => req("GET", identities, { query: { relationship_type: "STATIC" } }), {
      field: "relationship_type",
      description: 'invalid value "STATIC"',
    });
    expectInvalidArgument(() => req("GET", advisories, { query: { eventReviewStates: "x" } }), {
      field: "event_review_states",
      description: 'invalid value "x"',
    });
  });

  it("read well-known types from their JSON text", () => {
    assert.deepEqual(req("GET", "/registry/v1/tags", { query: { updated_since: "2024-05-06T07:08:09Z" } }), {
      updatedSince: "2024-05-06T07:08:09Z",
    });
    expectInvalidArgument(() => req("GET", "/registry/v1/tags", { query: { updated_since: "last week" } }), {
      field: "updated_since",
      description: /^cannot decode: /,
    });
  });

  it("name the field whose value fails to decode", () => {
    expectInvalidArgument(() => req("GET", list, { query: { page_size: "abc" } }), {
      field: "page_size",
      description: /^cannot decode: .*int32.*"abc"/,
    });
    expectInvalidArgument(() => req("GET", list, { query: { skip: "1.5" } }), {
      field: "skip",
      description: /^cannot decode: /,
    });
  });

  it("refuse unknown keys, however deep", () => {
    for (const key of ["bogus", "uidp.bogus", "page_size.x", "uidp.ids.x", "", "Page_Size"]) {
      expectInvalidArgument(() => req("GET", list, { query: { [key]: "1" } }), {
        field: key,
        description: `unknown query parameter "${key}"`,
      });
    }
  });

  it("refuse message and map fields, which have no query-string form", () => {
    expectInvalidArgument(() => req("GET", list, { query: { uidp: ROOT } }), {
      field: "uidp",
      description: '"uidp" cannot be set from the query string',
    });
  });
});

describe("update_mask", () => {
  const patch = `/iam/v2beta1/groups/${UIDP}`;

  it("from the query string, in snake or camel case, under either name", () => {
    assert.deepEqual(req("PATCH", patch, { query: { update_mask: "resource_limits, name" }, body: { name: "n" } }), {
      group: { uid: UIDP, name: "n" },
      updateMask: "resourceLimits,name",
    });
    assert.deepEqual(req("PATCH", patch, { query: { updateMask: "description" }, body: { name: "n" } }), {
      group: { uid: UIDP, name: "n" },
      updateMask: "description",
    });
  });

  it("an explicit empty mask is kept, not replaced by the present keys", () => {
    assert.deepEqual(req("PATCH", patch, { query: { update_mask: "" }, body: { name: "n" } }), {
      group: { uid: UIDP, name: "n" },
      updateMask: "",
    });
  });

  it("is made from the keys present in a PATCH body (proto names, nested paths)", () => {
    assert.deepEqual(req("PATCH", patch, { body: { name: "n", description: "" } }), {
      group: { uid: UIDP, name: "n" },
      updateMask: "name,description",
    });
    assert.deepEqual(req("PATCH", patch, { body: { verified: false } }), {
      group: { uid: UIDP },
      updateMask: "verified",
    });
    const idp = `/iam/v2beta1/identityProviders/${UIDP}`;
    const body = { default_role: "r", oidc: { clientSecret: "s", additional_scopes: [] } };
    assert.deepEqual(req("PATCH", idp, { body }), {
      identityProvider: { uid: UIDP, defaultRole: "r", oidc: { clientSecret: "s" } },
      updateMask: "defaultRole,oidc.clientSecret,oidc.additionalScopes",
    });
    // an empty object names the whole message
    assert.deepEqual(req("PATCH", idp, { body: { oidc: {} } }), {
      identityProvider: { uid: UIDP, oidc: {} },
      updateMask: "oidc",
    });
  });

  it("counts a null value as present (it clears the field)", () => {
    assert.deepEqual(req("PATCH", patch, { body: { description: null } }), {
      group: { uid: UIDP },
      updateMask: "description",
    });
  });

  it("leaves output-only keys out of the mask", () => {
    const body = { name: "n", createTime: "2020-01-01T00:00:00Z", status: "ORG_STATUS_READY" };
    assert.deepEqual(req("PATCH", patch, { body }), {
      group: { uid: UIDP, name: "n", createTime: "2020-01-01T00:00:00Z", status: "ORG_STATUS_READY" },
      updateMask: "name",
    });
    const idp = `/iam/v2beta1/identityProviders/${UIDP}`;
    assert.deepEqual(req("PATCH", idp, { body: { name: "n", scim: { etag: "e" } } }), {
      identityProvider: { uid: UIDP, name: "n", scim: { etag: "e" } },
      updateMask: "name",
    });
  });

  it("with nothing writable present, empties the patch and sets no mask", () => {
    const bodies: Array<Call["body"]> = [
      undefined,
      "",
      {},
      { uid: "x" },
      { createTime: "2020-01-01T00:00:00Z", resourceLimits: { a: 1 } },
    ];
    for (const body of bodies) {
      assert.deepEqual(req("PATCH", patch, { body }), { group: { uid: UIDP } }, JSON.stringify(body));
    }
  });

  it('is not made for a PATCH whose body is "*"', () => {
    // grpc-gateway only fills the mask for a named body field.
    const body = { identityMetadata: { company: "c" } };
    assert.deepEqual(req("PATCH", "/iam/v2beta1/identities:updateIdentityMetadata", { body }), body);
  });

  it("is not made for other verbs", () => {
    assert.deepEqual(req("POST", `/iam/v2beta1/groups/${ROOT}`, { body: { name: "n" } }), {
      parent: ROOT,
      group: { name: "n" },
    });
  });

  it("still rejects a bad value next to a present key", () => {
    expectInvalidArgument(() => req("PATCH", patch, { body: { name: "n", verified: "yes" } }), {
      field: "verified",
      description: /^cannot decode: /,
    });
    expectInvalidArgument(() => req("PATCH", patch, { body: { name: "n", nmae: "n" } }), {
      field: "nmae",
      description: /key "nmae" is unknown/,
    });
  });
});

describe("form bodies on rules without a body", () => {
  const form = "application/x-www-form-urlencoded";

  it("are read as more query parameters, repeated keys adding up", () => {
    assert.deepEqual(req("POST", "/sts/exchange", { body: "aud=a&aud=b&scopes=s&cap=c1", contentType: form }), {
      aud: ["a", "b"],
      cap: ["c1"],
      scopes: ["s"],
    });
    assert.deepEqual(
      req("POST", "/sts/exchange", {
        query: { aud: "q" },
        body: "aud=a+b&identity=x%2Fy",
        contentType: `${form}; charset=utf-8`,
      }),
      { aud: ["q", "a b"], identity: "x/y" },
    );
  });

  it("are validated like the query string", () => {
    expectInvalidArgument(() => req("POST", "/sts/exchange", { body: "nope=1", contentType: form }), {
      field: "nope",
      description: 'unknown query parameter "nope"',
    });
    expectInvalidArgument(
      () => req("POST", "/sts/exchange", { query: { identity: "a" }, body: "identity=b", contentType: form }),
      { field: "identity", description: '"identity" is given more than once' },
    );
  });

  it("are ignored under any other content type", () => {
    assert.deepEqual(req("POST", "/sts/exchange", { body: "aud=a", contentType: "text/plain" }), {});
    assert.deepEqual(req("POST", "/sts/exchange", { body: '{"aud":["a"]}', contentType: "application/json" }), {});
  });
});

// Once known bugs, now fixed.
describe("bad input the transcoder used to let through or misname", () => {
  it("a PATCH body with only unknown keys is rejected like any other body", () => {
    expectInvalidArgument(() => req("PATCH", `/iam/v2beta1/groups/${UIDP}`, { body: { nmae: "typo" } }), {
      field: "nmae",
      description: /key "nmae" is unknown/,
    });
  });

  it("a bad nested boolean query parameter is named by its full path", () => {
    expectInvalidArgument(() => req("GET", "/iam/v2beta1/groups", { query: { "uidp.in_root": "yes" } }), {
      field: "uidp.in_root",
      description: '"yes" is not a boolean',
    });
  });
});
