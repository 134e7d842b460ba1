// IdentitiesService over REST (and a gRPC smoke), on every backend.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { exportJWK, generateKeyPair, generateSecret } from "jose";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { IdentitiesService } from "../../src/gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import { anchored, matchesAnchored } from "../../src/core/patterns.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { ERROR_DOMAIN, startTestServer, type TestServer, bearer } from "../support/server.js";

const NAME_RULE = 'name must match "^[a-z0-9 ._-]{1,}$"';
const VIEWER = "63921b2c44617e3f2603851537be0123af4a57d7";
const GITHUB = "https://token.actions.githubusercontent.com";

describe("anchored patterns", () => {
  it("match the whole value, never a substring", () => {
    assert.equal(matchesAnchored("repo:acme/.*", "repo:acme/app:ref:refs/heads/main"), true);
    assert.equal(matchesAnchored("repo:acme/.*", "xrepo:acme/app"), false);
    assert.equal(matchesAnchored("a|b", "ab"), false, "alternation is grouped inside the anchors");
    assert.equal(anchored("sub-[0-9]+").test("sub-12 trailing"), false);
  });
});

for (const backend of backends()) {
  describe(`identities over REST [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let org: string;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      org = (await api.post("/iam/v2beta1/groups", { name: "acme" })).body.uid;
    });
    after(() => server.close());

    const createIdentity = async (body: unknown, parent = org) => api.post(`/iam/v2beta1/identities/${parent}`, body);
    const claimMatch = (subject: string) => ({ issuer: GITHUB, subject });

    it("answers an empty body exactly like a nameless group, and creates nothing", async () => {
      const res = await createIdentity({});
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, {
        code: 3,
        message: `Invalid argument: name: ${NAME_RULE}`,
        details: [
          { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "INVALID_ARGUMENT", domain: ERROR_DOMAIN },
          {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            fieldViolations: [{ field: "name", description: NAME_RULE }],
          },
        ],
      });
      assert.equal((await api.get(`/iam/v2beta1/identities?uidp.descendants_of=${org}`)).body.totalCount, "0");
    });

    it("creates a claim-match identity under the group, with lastSeenTime set", async () => {
      const res = await createIdentity({
        name: "deployer",
        description: "CI",
        claimMatch: claimMatch("repo:acme/app:ref:refs/heads/main"),
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const id = res.body;
      assert.match(id.uid, new RegExp(`^${org}/[0-9a-f]{16}$`));
      assert.deepEqual(id.claimMatch, {
        issuer: GITHUB,
        subject: "repo:acme/app:ref:refs/heads/main",
        claims: {},
        claimPatterns: {},
      });
      assert.equal(id.lastSeenTime, id.createTime);
      assert.match(id.lastSeenTime, /\.\d{3}Z$/);
      assert.deepEqual((await api.get(`/iam/v2beta1/identities/${id.uid}`)).body, id);
    });

    it("requires exactly one relationship and one of issuer/issuerPattern and subject/subjectPattern", async () => {
      const noRel = await createIdentity({ name: "x" });
      assert.equal(noRel.status, 400);
      assert.equal(noRel.body.details[1].fieldViolations[0].field, "relationship");
      const noIss = await createIdentity({ name: "x", claimMatch: { subject: "s" } });
      assert.deepEqual(
        noIss.body.details[1].fieldViolations.map((v: { field: string }) => v.field),
        ["claim_match.issuer"],
      );
      const noSub = await createIdentity({ name: "x", claimMatch: { issuerPattern: "https://.*" } });
      assert.deepEqual(
        noSub.body.details[1].fieldViolations.map((v: { field: string }) => v.field),
        ["claim_match.subject"],
      );
      const both = await createIdentity({
        name: "x",
        claimMatch: { issuer: GITHUB, issuerPattern: ".*", subject: "s" },
      });
      assert.equal(both.status, 400, "two members of one oneof");
      const two = await createIdentity({
        name: "x",
        claimMatch: claimMatch("s"),
        servicePrincipal: "SERVICE_PRINCIPAL_COSIGNED",
      });
      assert.equal(two.status, 400, "two relationships");
    });

    it("rejects patterns that do not compile and issuers that are not URLs", async () => {
      const cases: [unknown, string][] = [
        [{ issuer: GITHUB, subjectPattern: "repo:(acme" }, "claim_match.subject_pattern"],
        [{ issuerPattern: "[", subject: "s" }, "claim_match.issuer_pattern"],
        [{ issuer: GITHUB, subject: "s", audiencePattern: "*" }, "claim_match.audience_pattern"],
        [{ issuer: GITHUB, subject: "s", claimPatterns: { ref: "(" } }, "claim_match.claim_patterns[ref]"],
        [{ issuer: "not a url", subject: "s" }, "claim_match.issuer"],
      ];
      for (const [cm, field] of cases) {
        const res = await createIdentity({ name: "bad", claimMatch: cm });
        assert.equal(res.status, 400, JSON.stringify(cm));
        assert.equal(res.body.details[1].fieldViolations[0].field, field);
      }
      const ok = await createIdentity({
        name: "patterns",
        claimMatch: {
          issuerPattern: "https://token\\.actions\\..*",
          subjectPattern: "repo:acme/.*",
          audience: "bulwark",
          claims: { ref: "refs/heads/main" },
          claimPatterns: { workflow: "deploy-.*" },
        },
      });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      assert.deepEqual(ok.body.claimMatch.claimPatterns, { workflow: "deploy-.*" });
    });

    it("validates static keys as a JWKS of public keys", async () => {
      const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
      const pub = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" };
      const good = await createIdentity({
        name: "static",
        staticKeys: {
          issuer: "https://issuer.example",
          subject: "svc",
          issuerKeys: JSON.stringify({ keys: [pub] }),
          audiences: ["bulwark"],
          expirationTime: new Date(Date.now() + 86400_000).toISOString(),
        },
      });
      assert.equal(good.status, 200, JSON.stringify(good.body));
      assert.equal(good.body.staticKeys.subject, "svc");
      const secret = await exportJWK(await generateSecret("HS256", { extractable: true }));
      const bad: [string, unknown][] = [
        ["not json", "{"],
        ["no keys", JSON.stringify({ keys: [] })],
        ["private", JSON.stringify({ keys: [await exportJWK(privateKey)] })],
        ["symmetric", JSON.stringify({ keys: [secret] })],
        ["garbage key", JSON.stringify({ keys: [{ kty: "EC", crv: "P-256", x: "AA", y: "BB" }] })],
      ];
      for (const [label, issuerKeys] of bad) {
        const res = await createIdentity({
          name: "static",
          staticKeys: { issuer: "https://issuer.example", subject: "svc", issuerKeys },
        });
        assert.equal(res.status, 400, label);
        assert.equal(res.body.details[1].fieldViolations[0].field, "static_keys.issuer_keys", label);
      }
      const expired = await createIdentity({
        name: "static",
        staticKeys: {
          issuer: "https://issuer.example",
          subject: "svc",
          issuerKeys: JSON.stringify({ keys: [pub] }),
          expirationTime: "2000-01-01T00:00:00Z",
        },
      });
      assert.equal(expired.body.details[1].fieldViolations[0].field, "static_keys.expiration_time");
    });

    it("validates AWS identities and service principals", async () => {
      const aws = await createIdentity({
        name: "aws",
        awsIdentity: { awsAccount: "123456789012", arnPattern: "arn:aws:iam::123456789012:role/.*" },
      });
      assert.equal(aws.status, 200, JSON.stringify(aws.body));
      const badAccount = await createIdentity({
        name: "aws",
        awsIdentity: { awsAccount: "1234", arn: "arn:aws:iam::1234:role/x" },
      });
      assert.equal(badAccount.body.details[1].fieldViolations[0].field, "aws_identity.aws_account");
      const sp = await createIdentity({ name: "signer", servicePrincipal: "SERVICE_PRINCIPAL_COSIGNED" });
      assert.equal(sp.status, 200);
      assert.equal(sp.body.servicePrincipal, "SERVICE_PRINCIPAL_COSIGNED");
      const unspecified = await createIdentity({ name: "signer", servicePrincipal: "SERVICE_PRINCIPAL_UNSPECIFIED" });
      assert.equal(unspecified.status, 400);
    });

    it("lists with the shared engine plus the relationship_type filter", async () => {
      const sub = (await api.post(`/iam/v2beta1/groups/${org}`, { name: "listing" })).body.uid;
      for (let i = 0; i < 4; i++) await createIdentity({ name: `ci-${i}`, claimMatch: claimMatch(`s-${i}`) }, sub);
      await createIdentity({ name: "sp", servicePrincipal: "SERVICE_PRINCIPAL_INGESTER" }, sub);
      const all = await api.get(`/iam/v2beta1/identities?uidp.descendants_of=${sub}&page_size=2&order_by=name%20desc`);
      assert.equal(all.body.totalCount, "5");
      assert.deepEqual(
        all.body.identities.map((i: { name: string }) => i.name),
        ["sp", "ci-3"],
      );
      const cm = await api.get(
        `/iam/v2beta1/identities?uidp.descendants_of=${sub}&relationship_type=RELATIONSHIP_TYPE_CLAIM_MATCH`,
      );
      assert.equal(cm.body.totalCount, "4");
      const spOnly = await api.get(
        `/iam/v2beta1/identities?uidp.children_of=${sub}&relationshipType=RELATIONSHIP_TYPE_SERVICE_PRINCIPAL`,
      );
      assert.deepEqual(
        spOnly.body.identities.map((i: { name: string }) => i.name),
        ["sp"],
      );
      const byName = await api.get(`/iam/v2beta1/identities?uidp.descendants_of=${sub}&name=ci-2`);
      assert.equal(byName.body.totalCount, "1");
      const bad = await api.get(`/iam/v2beta1/identities?relationship_type=NOPE`);
      assert.equal(bad.status, 400);
    });

    it("updates with presence semantics, masks, nested paths and relationship switches", async () => {
      const id = (
        await createIdentity({
          name: "upd",
          description: "d",
          claimMatch: { issuer: GITHUB, subjectPattern: "repo:acme/.*" },
        })
      ).body;
      const nested = await api.patch(`/iam/v2beta1/identities/${id.uid}`, { claimMatch: { subject: "repo:acme/x" } });
      assert.equal(nested.status, 200, JSON.stringify(nested.body));
      assert.deepEqual(
        nested.body.claimMatch,
        { issuer: GITHUB, subject: "repo:acme/x", claims: {}, claimPatterns: {} },
        "issuer kept, pattern replaced by exact subject",
      );
      assert.equal(nested.body.description, "d");
      const masked = await api.patch(`/iam/v2beta1/identities/${id.uid}?update_mask=description`, {
        description: "only",
        name: "ignored",
      });
      assert.equal(masked.body.name, "upd");
      assert.equal(masked.body.description, "only");
      const switched = await api.patch(`/iam/v2beta1/identities/${id.uid}`, {
        servicePrincipal: "SERVICE_PRINCIPAL_APKO_BUILDER",
      });
      assert.equal(switched.body.servicePrincipal, "SERVICE_PRINCIPAL_APKO_BUILDER");
      assert.equal(switched.body.claimMatch, undefined);
      const invalid = await api.patch(`/iam/v2beta1/identities/${id.uid}`, {
        claimMatch: { issuer: GITHUB, subjectPattern: "(" },
      });
      assert.equal(invalid.status, 400);
      assert.equal(
        (await api.get(`/iam/v2beta1/identities/${id.uid}`)).body.servicePrincipal,
        "SERVICE_PRINCIPAL_APKO_BUILDER",
        "a rejected update changes nothing",
      );
      const outputOnly = await api.patch(`/iam/v2beta1/identities/${id.uid}?update_mask=email`, { email: "x@y" });
      assert.equal(outputOnly.status, 400);
    });

    it("looks identities up by exact issuer and subject", async () => {
      const id = (await createIdentity({ name: "lookup", claimMatch: claimMatch("repo:acme/lookup") })).body;
      const found = await api.get(
        `/iam/v2beta1/identities:lookupIdentity?issuer=${encodeURIComponent(GITHUB)}&subject=repo:acme/lookup`,
      );
      assert.equal(found.status, 200);
      assert.deepEqual(found.body, { uid: id.uid });
      const missing = await api.get(
        `/iam/v2beta1/identities:lookupIdentity?issuer=${encodeURIComponent(GITHUB)}&subject=nobody`,
      );
      assert.equal(missing.status, 404);
      const noArgs = await api.get(`/iam/v2beta1/identities:lookupIdentity`);
      assert.equal(noArgs.status, 400);
      assert.deepEqual(
        noArgs.body.details[1].fieldViolations.map((v: { field: string }) => v.field),
        ["issuer", "subject"],
      );
    });

    it("refuses to delete an identity that is still bound, and deletes it once unbound", async () => {
      const id = (await createIdentity({ name: "bound", claimMatch: claimMatch("bound") })).body;
      const binding = (await api.post(`/iam/v2beta1/roleBindings/${org}`, { identityUid: id.uid, roleUid: VIEWER }))
        .body;
      const refused = await api.delete(`/iam/v2beta1/identities/${id.uid}`);
      assert.equal(refused.status, 400);
      assert.equal(refused.body.code, 9);
      assert.deepEqual(refused.body.details[1].violations, [
        { type: "RESOURCE_NOT_EMPTY", description: "cannot delete identity with role bindings" },
      ]);
      assert.equal((await api.delete(`/iam/v2beta1/roleBindings/${binding.uid}`)).status, 200);
      assert.equal((await api.delete(`/iam/v2beta1/identities/${id.uid}`)).status, 200);
      assert.equal((await api.get(`/iam/v2beta1/identities/${id.uid}`)).status, 404);
    });

    it("keeps a group with identities from being deleted", async () => {
      const g = (await api.post(`/iam/v2beta1/groups/${org}`, { name: "holder" })).body.uid;
      await createIdentity({ name: "member", claimMatch: claimMatch("member") }, g);
      const res = await api.delete(`/iam/v2beta1/groups/${g}`);
      assert.equal(res.status, 400);
      assert.equal(res.body.details[1].violations[0].description, "cannot delete group with child identities");
    });

    it("answers NOT_FOUND for a missing group and the same data over gRPC", async () => {
      assert.equal((await createIdentity({ name: "x", claimMatch: claimMatch("x") }, "0".repeat(40))).status, 404);
      const client = createClient(
        IdentitiesService,
        createGrpcTransport({ baseUrl: server.url, interceptors: [bearer(server.operatorToken)] }),
      );
      const created = await client.createIdentity({
        parent: org,
        identity: {
          name: "grpc",
          relationship: {
            case: "claimMatch",
            value: { iss: { case: "issuer", value: GITHUB }, sub: { case: "subject", value: "grpc" } },
          },
        },
      });
      const viaRest = (await api.get(`/iam/v2beta1/identities/${created.uid}`)).body;
      assert.equal(viaRest.name, "grpc");
      assert.equal(viaRest.claimMatch.subject, "grpc");
      const got = await client.getIdentity({ uid: created.uid });
      assert.equal(got.relationship.case, "claimMatch");
    });
  });
}
