// Partial updates (src/core/fieldmask.ts, AIP-134/203) on real resource schemas: Group (output-only
// fields, a map), IdentityProvider (a oneof whose message has an IMMUTABLE field, an output-only
// message) and Identity (a oneof of messages with maps).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create, equals, type MessageInitShape } from "@bufbuild/protobuf";
import { FieldMaskSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { applyFieldMask, fieldBehaviors, isOutputOnly } from "../../src/core/fieldmask.js";
import { FieldBehavior } from "../../src/gen/google/api/field_behavior_pb.js";
import { GroupSchema, OrgKind, OrgStatus } from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import {
  IdentityProviderSchema,
  IdentityProvider_OIDC_CorrelationRule as CorrelationRule,
} from "../../src/gen/chainguard/platform/iam/v2beta1/identity_providers_pb.js";
import { IdentitySchema } from "../../src/gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import { expectInvalidArgument } from "./expect-error.js";

const mask = (...paths: string[]) => create(FieldMaskSchema, { paths });

const UID = "0123456789abcdef0123456789abcdef01234567";

function group(init: MessageInitShape<typeof GroupSchema> = {}) {
  return create(GroupSchema, {
    uid: UID,
    name: "eng",
    description: "engineering",
    verified: true,
    kind: OrgKind.CUSTOMER,
    status: OrgStatus.READY,
    resourceLimits: { repos: 10 },
    createTime: timestampFromMs(1_000),
    updateTime: timestampFromMs(2_000),
    ...init,
  });
}

function idp(init: MessageInitShape<typeof IdentityProviderSchema> = {}) {
  const defaults: MessageInitShape<typeof IdentityProviderSchema> = {
    uid: `${UID}/0011223344556677`,
    name: "okta",
    defaultRole: "viewer",
    configuration: {
      case: "oidc",
      value: {
        issuer: "https://issuer.example",
        clientId: "client",
        clientSecret: "secret",
        additionalScopes: ["email", "profile"],
        correlationRule: CorrelationRule.SUB_EQUALS_EXTERNAL_ID,
      },
    },
    scim: { endpointUrl: "https://scim.example", etag: "e1" },
  };
  // a shallow merge: `init` replaces whole top-level fields (configuration included)
  return create(IdentityProviderSchema, { ...defaults, ...init } as MessageInitShape<typeof IdentityProviderSchema>);
}

describe("field behaviors", () => {
  it("reads google.api.field_behavior from the schema", () => {
    const field = (name: string) => GroupSchema.fields.find((f) => f.name === name)!;
    assert.deepEqual(fieldBehaviors(field("uid")), [FieldBehavior.OUTPUT_ONLY]);
    assert.deepEqual(fieldBehaviors(field("name")), [FieldBehavior.REQUIRED]);
    assert.equal(isOutputOnly(field("uid")), true);
    assert.equal(isOutputOnly(field("create_time")), true);
    assert.equal(isOutputOnly(field("resource_limits")), true);
    assert.equal(isOutputOnly(field("name")), false);
    assert.equal(isOutputOnly(field("verified")), false);
  });
});

describe("applyFieldMask without a mask", () => {
  it("changes the patch's populated, writable fields and nothing else", () => {
    const existing = group();
    const patch = create(GroupSchema, { name: "platform", verified: false, description: "" });
    for (const m of [undefined, mask()]) {
      const { updated, changed } = applyFieldMask(GroupSchema, existing, patch, m);
      // false and "" are not populated in proto3, so they do not count as changes
      assert.deepEqual(changed, ["name"]);
      assert.ok(equals(GroupSchema, updated, group({ name: "platform" })));
    }
  });

  it("never writes output-only fields from the patch", () => {
    const existing = group();
    const patch = create(GroupSchema, {
      uid: "ffffffffffffffffffffffffffffffffffffffff",
      status: OrgStatus.SUSPENDED,
      resourceLimits: { repos: 9999 },
      createTime: timestampFromMs(5),
      description: "new",
    });
    const { updated, changed } = applyFieldMask(GroupSchema, existing, patch, undefined);
    assert.deepEqual(changed, ["description"]);
    assert.ok(equals(GroupSchema, updated, group({ description: "new" })));
  });

  it("returns a copy and leaves both inputs untouched", () => {
    const existing = group();
    const patch = create(GroupSchema, { name: "platform" });
    const { updated } = applyFieldMask(GroupSchema, existing, patch, undefined);
    assert.notEqual(updated, existing);
    assert.ok(equals(GroupSchema, existing, group()));
    assert.ok(equals(GroupSchema, patch, create(GroupSchema, { name: "platform" })));
  });

  it("an empty patch changes nothing", () => {
    const { updated, changed } = applyFieldMask(GroupSchema, group(), create(GroupSchema), undefined);
    assert.deepEqual(changed, []);
    assert.ok(equals(GroupSchema, updated, group()));
  });

  it("replaces a populated top-level message whole, so its immutable fields must be resent", () => {
    const patch = create(IdentityProviderSchema, {
      configuration: { case: "oidc", value: { issuer: "https://other.example", clientId: "c2" } },
    });
    expectInvalidArgument(() => applyFieldMask(IdentityProviderSchema, idp(), patch, undefined), {
      field: "oidc.correlation_rule",
      description: "is immutable and cannot be changed",
    });
    const resent = create(IdentityProviderSchema, {
      configuration: {
        case: "oidc",
        value: {
          issuer: "https://other.example",
          clientId: "c2",
          correlationRule: CorrelationRule.SUB_EQUALS_EXTERNAL_ID,
        },
      },
    });
    const { updated, changed } = applyFieldMask(IdentityProviderSchema, idp(), resent, undefined);
    assert.deepEqual(changed, ["oidc"]);
    assert.equal(updated.configuration.case, "oidc");
    assert.equal(updated.configuration.value?.clientSecret, "", "whole message replaced, not merged");
    assert.deepEqual(updated.configuration.value?.additionalScopes, []);
  });
});

describe("applyFieldMask with explicit paths", () => {
  it("changes exactly the listed fields, ignoring the rest of the patch", () => {
    const patch = create(GroupSchema, { name: "platform", description: "ignored", kind: OrgKind.DEV });
    const { updated, changed } = applyFieldMask(GroupSchema, group(), patch, mask("name", "kind"));
    assert.deepEqual(changed, ["name", "kind"]);
    assert.ok(equals(GroupSchema, updated, group({ name: "platform", kind: OrgKind.DEV })));
  });

  it("clears a listed field the patch leaves unset (present in the mask = present)", () => {
    const empty = create(GroupSchema);
    const { updated, changed } = applyFieldMask(GroupSchema, group(), empty, mask("description", "verified"));
    assert.deepEqual(changed, ["description", "verified"]);
    assert.equal(updated.description, "");
    assert.equal(updated.verified, false);
    assert.equal(updated.name, "eng");
  });

  it("accepts JSON names and reports proto names", () => {
    const patch = create(IdentityProviderSchema, { defaultRole: "editor" });
    const { updated, changed } = applyFieldMask(IdentityProviderSchema, idp(), patch, mask("defaultRole"));
    assert.deepEqual(changed, ["default_role"]);
    assert.equal(updated.defaultRole, "editor");
  });

  it("follows nested paths, keeping the sibling fields", () => {
    const patch = create(IdentityProviderSchema, {
      configuration: { case: "oidc", value: { clientId: "new-client", clientSecret: "ignored" } },
    });
    const { updated, changed } = applyFieldMask(IdentityProviderSchema, idp(), patch, mask("oidc.client_id"));
    assert.deepEqual(changed, ["oidc.client_id"]);
    const oidc = updated.configuration.case === "oidc" ? updated.configuration.value : undefined;
    assert.equal(oidc?.clientId, "new-client");
    assert.equal(oidc?.clientSecret, "secret");
    assert.equal(oidc?.issuer, "https://issuer.example");
    assert.equal(oidc?.correlationRule, CorrelationRule.SUB_EQUALS_EXTERNAL_ID);
  });

  it("clears a nested field when the patch lacks its parent message", () => {
    const empty = create(IdentityProviderSchema);
    const { updated } = applyFieldMask(IdentityProviderSchema, idp(), empty, mask("oidc.client_id"));
    const oidc = updated.configuration.case === "oidc" ? updated.configuration.value : undefined;
    assert.equal(oidc?.clientId, "");
    assert.equal(oidc?.issuer, "https://issuer.example");
  });

  it("creates the parent message when only the patch has it", () => {
    const existing = idp({ configuration: { case: undefined } });
    const patch = create(IdentityProviderSchema, {
      configuration: { case: "oidc", value: { issuer: "https://i.example", clientId: "ignored" } },
    });
    const { updated } = applyFieldMask(IdentityProviderSchema, existing, patch, mask("oidc.issuer"));
    assert.equal(updated.configuration.case, "oidc");
    assert.equal(updated.configuration.value?.issuer, "https://i.example");
    assert.equal(updated.configuration.value?.clientId, "");
  });

  it("leaves an absent parent absent when neither side has it", () => {
    const existing = idp({ configuration: { case: undefined } });
    const empty = create(IdentityProviderSchema);
    const { updated } = applyFieldMask(IdentityProviderSchema, existing, empty, mask("oidc.issuer"));
    assert.equal(updated.configuration.case, undefined);
  });

  it("replaces lists and maps whole", () => {
    const patch = create(IdentityProviderSchema, {
      configuration: { case: "oidc", value: { additionalScopes: ["groups"] } },
    });
    const { updated } = applyFieldMask(IdentityProviderSchema, idp(), patch, mask("oidc.additional_scopes"));
    assert.deepEqual(updated.configuration.value?.additionalScopes, ["groups"]);

    const identity = create(IdentitySchema, {
      name: "ci",
      relationship: {
        case: "claimMatch",
        value: { iss: { case: "issuer", value: "https://i" }, claims: { a: "1", b: "2" } },
      },
    });
    const identityPatch = create(IdentitySchema, {
      relationship: { case: "claimMatch", value: { claims: { c: "3" } } },
    });
    const result = applyFieldMask(IdentitySchema, identity, identityPatch, mask("claim_match.claims"));
    assert.equal(result.updated.relationship.case, "claimMatch");
    assert.deepEqual(result.updated.relationship.value?.claims, { c: "3" });
    assert.deepEqual(result.updated.relationship.value?.iss, { case: "issuer", value: "https://i" });
  });

  it("switches a oneof when the mask names the other member", () => {
    const identity = create(IdentitySchema, {
      name: "ci",
      relationship: { case: "claimMatch", value: { iss: { case: "issuer", value: "https://i" } } },
    });
    const patch = create(IdentitySchema, {
      relationship: { case: "staticKeys", value: { issuer: "https://s", subject: "s", issuerKeys: "{}" } },
    });
    const switched = applyFieldMask(IdentitySchema, identity, patch, mask("static_keys")).updated;
    assert.equal(switched.relationship.case, "staticKeys");
    assert.equal(switched.relationship.value?.subject, "s");
    // naming the member the patch does not set clears the oneof
    const cleared = applyFieldMask(IdentitySchema, identity, patch, mask("claim_match")).updated;
    assert.equal(cleared.relationship.case, undefined);
  });
});

describe('applyFieldMask with "*"', () => {
  it("replaces every mutable field and no output-only one", () => {
    const patch = create(GroupSchema, { name: "platform", uid: "ignored", status: OrgStatus.SUSPENDED });
    const { updated, changed } = applyFieldMask(GroupSchema, group(), patch, mask("*"));
    assert.deepEqual(changed, ["name", "description", "verified", "kind"]);
    assert.ok(
      equals(
        GroupSchema,
        updated,
        group({ name: "platform", description: "", verified: false, kind: OrgKind.UNSPECIFIED }),
      ),
    );
  });

  it("still refuses to change an immutable field nested in a replaced message", () => {
    const patch = idp({
      configuration: { case: "oidc", value: { issuer: "https://issuer.example", clientId: "client" } },
    });
    expectInvalidArgument(() => applyFieldMask(IdentityProviderSchema, idp(), patch, mask("*")), {
      field: "oidc.correlation_rule",
      description: "is immutable and cannot be changed",
    });
  });

  it("is only special on its own", () => {
    expectInvalidArgument(() => applyFieldMask(GroupSchema, group(), group(), mask("*", "name")), {
      field: "update_mask",
      description: 'unknown field "*"',
    });
  });
});

describe("applyFieldMask rejects", () => {
  const cases: Array<[string, string]> = [
    ["nope", 'unknown field "nope"'],
    ["", 'unknown field ""'],
    ["name.first", 'unknown field "name.first"'],
    ["NAME", 'unknown field "NAME"'],
    ["uid", 'field "uid" is output only'],
    ["create_time", 'field "create_time" is output only'],
    ["createTime", 'field "createTime" is output only'],
    ["resource_limits", 'field "resource_limits" is output only'],
  ];
  for (const [path, description] of cases) {
    it(`path ${JSON.stringify(path)}: ${description}`, () => {
      expectInvalidArgument(() => applyFieldMask(GroupSchema, group(), group(), mask(path)), {
        field: "update_mask",
        description,
      });
    });
  }

  it("unknown and output-only paths below a message field", () => {
    expectInvalidArgument(() => applyFieldMask(IdentityProviderSchema, idp(), idp(), mask("oidc.nope")), {
      field: "update_mask",
      description: 'unknown field "oidc.nope"',
    });
    expectInvalidArgument(() => applyFieldMask(IdentityProviderSchema, idp(), idp(), mask("scim.etag")), {
      field: "update_mask",
      description: 'field "scim.etag" is output only',
    });
  });

  it("a bad path even when the others are fine, naming the request's mask field", () => {
    expectInvalidArgument(() => applyFieldMask(GroupSchema, group(), group(), mask("name", "uid"), "field_mask"), {
      field: "field_mask",
      description: 'field "uid" is output only',
    });
  });

  it("a changed immutable field, but not an unchanged one", () => {
    const rule = (correlationRule: CorrelationRule) =>
      create(IdentityProviderSchema, { configuration: { case: "oidc", value: { correlationRule } } });
    const onlyRule = mask("oidc.correlation_rule");
    const immutable = { field: "oidc.correlation_rule", description: "is immutable and cannot be changed" };
    expectInvalidArgument(
      () => applyFieldMask(IdentityProviderSchema, idp(), rule(CorrelationRule.OID_EQUALS_EXTERNAL_ID), onlyRule),
      immutable,
    );
    const same = applyFieldMask(IdentityProviderSchema, idp(), rule(CorrelationRule.SUB_EQUALS_EXTERNAL_ID), onlyRule);
    assert.deepEqual(same.changed, ["oidc.correlation_rule"]);
    // setting it where it was unset is a change too (AIP-203: only on create)
    const unset = idp({ configuration: { case: "oidc", value: { issuer: "https://issuer.example" } } });
    expectInvalidArgument(
      () => applyFieldMask(IdentityProviderSchema, unset, rule(CorrelationRule.SUB_EQUALS_EXTERNAL_ID), onlyRule),
      immutable,
    );
  });
});
