// IdentityProviders over REST (and a gRPC smoke), black box, on every backend: CRUD, the OIDC
// rules, the default role's existence and visibility, the write-only client secret (encrypted at
// rest, never returned), immutable correlation_rule, listing, delete preconditions, SCIM absent.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { compactDecrypt, decodeProtectedHeader } from "jose";
import { toBinary, toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  IdentityProviderSchema,
  IdentityProvidersService,
  ListIdentityProvidersResponseSchema,
} from "../../src/gen/chainguard/platform/iam/v2beta1/identity_providers_pb.js";
import { BadRequestSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { builtinRoleUid } from "../../src/iam/builtin-roles.js";
import { IdentityProvidersRepository } from "../../src/iam/storage/identity-providers.js";
import { loadSharedSecret } from "../../src/storage/server-secrets.js";
import { assertInvalid, assertResourceNotFound, fieldViolations } from "../support/assertions.js";
import { backends } from "../support/db-templates.js";
import { createGroup, createRole } from "../support/fixtures.js";
import { restClient, type JsonResponse } from "../support/http.js";
import { operatorGrpc, startTestServer, type TestServer } from "../support/server.js";

const IDP = "/iam/v2beta1/identityProviders";
const VIEWER = builtinRoleUid("viewer");
const MISSING_ROLE = "f".repeat(40);

for (const backend of backends()) {
  describe(`identity providers [${backend}]`, () => {
    let server: TestServer;
    let api: ReturnType<typeof restClient>;
    let org: any;
    let team: any;
    let sibling: any;
    before(async () => {
      server = await startTestServer(backend);
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, "idp org");
      team = await createGroup(api, org.uid, "team");
      sibling = await createGroup(api, org.uid, "sibling");
    });
    after(() => server.close());

    const oidc = (over: Record<string, unknown> = {}) => ({
      issuer: "https://idp.example.com/realms/acme",
      clientId: "bulwark-client",
      additionalScopes: ["email", "profile"],
      groupsClaim: "groups",
      pkceEnabled: true,
      correlationRule: "CORRELATION_RULE_SUB_EQUALS_EXTERNAL_ID",
      ...over,
    });
    const body = (over: Record<string, unknown> = {}) => ({
      name: "corp sso",
      description: "the IdP",
      defaultRole: VIEWER,
      oidc: oidc(),
      ...over,
    });
    async function createIdp(parent: string, over: Record<string, unknown> = {}) {
      const res = await api.post(`${IDP}/${parent}`, body(over));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    }
    const countAll = async () => (await api.get(`${IDP}?page_size=1`)).body.totalCount as string;
    const secretColumn = async (uid: string) =>
      await server.db
        .selectFrom("identity_providers")
        .select(["client_secret_encrypted", "oidc"])
        .where("uid", "=", uid)
        .executeTakeFirstOrThrow();
    // The key the server unseals (storage/server-secrets.ts), as it does.
    const idpKey = () => loadSharedSecret(server.db, "idp_client_secrets");
    const decryptColumn = async (jwe: string) =>
      new TextDecoder().decode((await compactDecrypt(jwe, await idpKey())).plaintext);

    it("creates an IdP under a group: child uid, OIDC configuration echoed, no secret, no scim", async () => {
      const res = await api.post(`${IDP}/${team.uid}`, body({ oidc: oidc({ clientSecret: "create-secret" }) }));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const idp = res.body;
      assert.match(idp.uid, new RegExp(`^${team.uid}/[0-9a-f]{16}$`));
      assert.equal(idp.name, "corp sso");
      assert.equal(idp.description, "the IdP");
      assert.equal(idp.defaultRole, VIEWER);
      // Defaults are emitted, so clientSecret shows as "" (the secret itself never does).
      assert.deepEqual(idp.oidc, { ...oidc(), clientSecret: "" });
      assert.equal("scim" in idp, false);
      assert.equal(idp.updateTime, idp.createTime);
      const got = await api.get(`${IDP}/${idp.uid}`);
      assert.equal(got.status, 200);
      assert.deepEqual(got.body, idp);
    });

    it("requires a valid, existing parent group", async () => {
      const before = await countAll();
      assertInvalid(await api.post(IDP, body()), "parent", "no parent");
      assertInvalid(await api.post(`${IDP}/nope`, body()), "parent", "malformed parent");
      const missing = "0".repeat(40);
      assertResourceNotFound(await api.post(`${IDP}/${missing}`, body()), "group", missing);
      assert.equal(await countAll(), before);
    });

    it("applies the groups' name rule and changes nothing on bad input", async () => {
      const before = await countAll();
      for (const name of ["", "Corp", "corp!", "a/b", "ü"]) {
        const res = await api.post(`${IDP}/${team.uid}`, body({ name }));
        assertInvalid(res, "name", JSON.stringify(name));
        assert.deepEqual(fieldViolations(res), [
          { field: "name", description: 'name must match "^[a-z0-9 ._-]{1,}$"' },
        ]);
      }
      assertInvalid(await api.post(`${IDP}/${team.uid}`, body({ description: "x".repeat(4097) })), "description");
      assert.equal(await countAll(), before);
    });

    it("default_role: required, must exist, must be visible from the group (built-in, own or ancestor's custom role)", async () => {
      const before = await countAll();
      assertInvalid(await api.post(`${IDP}/${team.uid}`, body({ defaultRole: "" })), "default_role", "empty");
      assertInvalid(
        await api.post(`${IDP}/${team.uid}`, body({ defaultRole: "not-a-uid" })),
        "default_role",
        "malformed",
      );
      assertResourceNotFound(
        await api.post(`${IDP}/${team.uid}`, body({ defaultRole: MISSING_ROLE })),
        "role",
        MISSING_ROLE,
      );
      const siblingRole = await createRole(api, sibling.uid, "sibling role");
      assertResourceNotFound(
        await api.post(`${IDP}/${team.uid}`, body({ defaultRole: siblingRole.uid })),
        "role",
        siblingRole.uid,
      );
      const sub = await createGroup(api, team.uid, "sub");
      const descendantRole = await createRole(api, sub.uid, "descendant role");
      assertResourceNotFound(
        await api.post(`${IDP}/${team.uid}`, body({ defaultRole: descendantRole.uid })),
        "role",
        descendantRole.uid,
      );
      assert.equal(await countAll(), before);

      const orgRole = await createRole(api, org.uid, "org role");
      const teamRole = await createRole(api, team.uid, "team role");
      for (const role of [VIEWER, builtinRoleUid("owner"), orgRole.uid, teamRole.uid]) {
        const idp = await createIdp(team.uid, { name: "visible role", defaultRole: role });
        assert.equal(idp.defaultRole, role);
      }
    });

    it("the database itself refuses a default role invisible from the group", async () => {
      const siblingRole = await createRole(api, sibling.uid, "db check role");
      const repo = new IdentityProvidersRepository(server.db);
      const fields = {
        name: "direct",
        description: "",
        defaultRoleUid: siblingRole.uid,
        oidc: {},
        clientSecretEncrypted: null,
      };
      const result = await repo.insert(`${team.uid}/0123456789abcdef`, team.uid, fields, new Date());
      assert.deepEqual(result, { kind: "missing", resource: "role", uid: siblingRole.uid });
      const missingGroup = await repo.insert(
        `${"0".repeat(40)}/0123456789abcdef`,
        "0".repeat(40),
        { ...fields, defaultRoleUid: VIEWER },
        new Date(),
      );
      assert.deepEqual(missingGroup, { kind: "missing", resource: "group", uid: "0".repeat(40) });
    });

    it("oidc.issuer must be an absolute https URL (http only on loopback), without fragment", async () => {
      const before = await countAll();
      for (const issuer of [
        "",
        "idp.example.com",
        "/realms/acme",
        "https:idp.example.com",
        "ftp://idp.example.com",
        "http://idp.example.com",
        "http://10.0.0.1",
        "http://localhost.evil.com",
        "https://idp.example.com/#frag",
        "https://idp.example.com#",
        " https://idp.example.com",
        "https://idp.example.com/?a=b",
        "https://user:pw@idp.example.com",
        "https://",
      ]) {
        assertInvalid(
          await api.post(`${IDP}/${team.uid}`, body({ oidc: oidc({ issuer }) })),
          "oidc.issuer",
          JSON.stringify(issuer),
        );
      }
      assert.equal(await countAll(), before);
      for (const issuer of [
        "https://accounts.google.com",
        "https://idp.example.com:8443/realms/x/",
        "http://127.0.0.1:5556/dex",
        "http://localhost/x",
        "http://[::1]:8080",
      ]) {
        const idp = await createIdp(team.uid, { name: "issuer ok", oidc: oidc({ issuer }) });
        assert.equal(idp.oidc.issuer, issuer, "stored as given");
      }
    });

    it("oidc is required, and so is oidc.client_id", async () => {
      const before = await countAll();
      const { oidc: _omit, ...noOidc } = body();
      assertInvalid(await api.post(`${IDP}/${team.uid}`, noOidc), "oidc");
      assertInvalid(await api.post(`${IDP}/${team.uid}`, body({ oidc: oidc({ clientId: "" }) })), "oidc.client_id");
      assertInvalid(
        await api.post(`${IDP}/${team.uid}`, body({ oidc: oidc({ clientId: "   " }) })),
        "oidc.client_id",
        "blank",
      );
      assert.equal(await countAll(), before);
    });

    it("oidc.additional_scopes: each a non-empty token without spaces, named by index", async () => {
      const before = await countAll();
      const res = await api.post(
        `${IDP}/${team.uid}`,
        body({ oidc: oidc({ additionalScopes: ["email", "", "two words", "tab\t", "ok:scope"] }) }),
      );
      assert.equal(res.status, 400);
      assert.deepEqual(
        fieldViolations(res).map((v) => v.field),
        ["oidc.additional_scopes[1]", "oidc.additional_scopes[2]", "oidc.additional_scopes[3]"],
      );
      assert.equal(await countAll(), before);
    });

    it("reports every violation at once", async () => {
      const res = await api.post(`${IDP}/${team.uid}`, {
        name: "Bad",
        oidc: { issuer: "http://example.com", additionalScopes: [" "] },
      });
      assert.deepEqual(
        fieldViolations(res).map((v) => v.field),
        ["name", "oidc.issuer", "oidc.client_id", "oidc.additional_scopes[0]"],
      );
    });

    it("never returns the client secret (create, get, list, update over REST) and stores only ciphertext", async () => {
      const secret = `plaintext-secret-${randomBytes(8).toString("hex")}`;
      const responses: JsonResponse[] = [];
      const created = await api.post(
        `${IDP}/${team.uid}`,
        body({ name: "secretive", oidc: oidc({ clientSecret: secret }) }),
      );
      assert.equal(created.status, 200);
      const uid = created.body.uid;
      responses.push(created);
      responses.push(await api.get(`${IDP}/${uid}`));
      responses.push(await api.get(`${IDP}?uidp.children_of=${team.uid}&name=secretive`));
      responses.push(await api.patch(`${IDP}/${uid}`, { description: "patched" }));
      responses.push(await api.patch(`${IDP}/${uid}`, { oidc: { ...oidc(), clientSecret: secret } }));
      responses.push(
        await api.patch(`${IDP}/${uid}?update_mask=oidc.client_secret`, { oidc: { clientSecret: secret } }),
      );
      for (const res of responses) {
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const text = JSON.stringify(res.body);
        assert.ok(!text.includes(secret), `secret leaked: ${text}`);
        for (const shown of [res.body, ...(res.body.identityProviders ?? [])].filter((i) => i.oidc)) {
          assert.equal(shown.oidc.clientSecret, "", text);
        }
      }
      assert.equal(responses[2]!.body.identityProviders.length, 1);

      const row = await secretColumn(uid);
      assert.ok(row.client_secret_encrypted, "a secret is stored");
      assert.ok(!row.client_secret_encrypted.includes(secret));
      assert.ok(!JSON.stringify(row.oidc).includes(secret), "the oidc column does not hold the secret");
      assert.equal(row.client_secret_encrypted.split(".").length, 5, "a compact JWE");
      const header = decodeProtectedHeader(row.client_secret_encrypted);
      assert.equal(header.alg, "dir");
      assert.equal(header.enc, "A256GCM");
      assert.equal(await decryptColumn(row.client_secret_encrypted), secret, "it decrypts under the server key");
    });

    it("never returns the client secret over gRPC either", async () => {
      const secret = `grpc-secret-${randomBytes(8).toString("hex")}`;
      const { client, close } = operatorGrpc(server, IdentityProvidersService);
      try {
        const leaks = (m: Parameters<typeof toJsonString>[1], schema: Parameters<typeof toJsonString>[0]) => {
          assert.ok(!toJsonString(schema, m).includes(secret));
          assert.ok(!Buffer.from(toBinary(schema, m)).includes(secret));
        };
        const created = await client.createIdentityProvider({
          parent: team.uid,
          identityProvider: {
            name: "grpc idp",
            defaultRole: VIEWER,
            configuration: {
              case: "oidc",
              value: { issuer: "https://grpc.example.com", clientId: "c", clientSecret: secret },
            },
          },
        });
        leaks(created, IdentityProviderSchema);
        assert.equal(created.configuration.case, "oidc");
        assert.equal(created.configuration.value?.clientSecret, "");
        assert.equal(created.scim, undefined);
        leaks(await client.getIdentityProvider({ uid: created.uid }), IdentityProviderSchema);
        const list = await client.listIdentityProviders({ uidp: { childrenOf: team.uid }, name: "grpc idp" });
        assert.equal(list.identityProviders.length, 1);
        leaks(list, ListIdentityProvidersResponseSchema);
        // No mask over gRPC: the populated fields change; the oidc block comes back with an empty
        // secret, which keeps the stored one.
        const before = (await secretColumn(created.uid)).client_secret_encrypted;
        const updated = await client.updateIdentityProvider({
          identityProvider: {
            uid: created.uid,
            description: "via grpc",
            configuration: { case: "oidc", value: { ...created.configuration.value!, groupsClaim: "roles" } },
          },
        });
        leaks(updated, IdentityProviderSchema);
        assert.equal(updated.description, "via grpc");
        assert.equal(updated.configuration.case === "oidc" && updated.configuration.value.groupsClaim, "roles");
        assert.equal((await secretColumn(created.uid)).client_secret_encrypted, before);
        assert.equal(await decryptColumn(before!), secret);

        const err = await client
          .createIdentityProvider({
            parent: team.uid,
            identityProvider: {
              name: "x",
              defaultRole: VIEWER,
              configuration: { case: "oidc", value: { issuer: "http://x.example", clientId: "c" } },
            },
          })
          .then(
            () => assert.fail("accepted an http issuer"),
            (e: unknown) => ConnectError.from(e),
          );
        assert.equal(err.code, Code.InvalidArgument);
        assert.deepEqual(
          err.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field),
          ["oidc.issuer"],
        );

        await client.deleteIdentityProvider({ uid: created.uid });
        const gone = await client.getIdentityProvider({ uid: created.uid }).then(
          () => assert.fail("still there"),
          (e: unknown) => ConnectError.from(e),
        );
        assert.equal(gone.code, Code.NotFound);
      } finally {
        close();
      }
    });

    it("PATCH: nested mask paths, and a replaced oidc block keeps the stored secret unless a new one is sent", async () => {
      const idp = await createIdp(team.uid, { name: "rotating", oidc: oidc({ clientSecret: "first" }) });
      const first = (await secretColumn(idp.uid)).client_secret_encrypted!;

      const renamed = await api.patch(`${IDP}/${idp.uid}`, { name: "rotating2" });
      assert.equal(renamed.status, 200);
      assert.equal(renamed.body.name, "rotating2");
      assert.deepEqual(renamed.body.oidc, idp.oidc);

      const issuer = await api.patch(`${IDP}/${idp.uid}`, { oidc: { issuer: "https://new.example.com" } });
      assert.equal(issuer.status, 200, JSON.stringify(issuer.body));
      assert.deepEqual(issuer.body.oidc, { ...idp.oidc, issuer: "https://new.example.com" });
      assert.equal((await secretColumn(idp.uid)).client_secret_encrypted, first);

      // The whole block, as read back (no clientSecret): the secret stays.
      const whole = await api.patch(`${IDP}/${idp.uid}?update_mask=oidc`, {
        oidc: { ...issuer.body.oidc, pkceEnabled: false, additionalScopes: [] },
      });
      assert.equal(whole.status, 200, JSON.stringify(whole.body));
      assert.equal(whole.body.oidc.pkceEnabled, false);
      assert.deepEqual(whole.body.oidc.additionalScopes, []);
      assert.equal((await secretColumn(idp.uid)).client_secret_encrypted, first);
      assert.equal(await decryptColumn(first), "first");

      // A non-empty secret rotates it.
      const rotated = await api.patch(`${IDP}/${idp.uid}`, { oidc: { clientSecret: "second" } });
      assert.equal(rotated.status, 200);
      const second = (await secretColumn(idp.uid)).client_secret_encrypted!;
      assert.notEqual(second, first);
      assert.equal(await decryptColumn(second), "second");
      assert.deepEqual(rotated.body.oidc, whole.body.oidc);
      assert.ok(rotated.body.updateTime >= whole.body.updateTime);
      assert.equal(rotated.body.createTime, idp.createTime);
    });

    it("PATCH validates like create and changes nothing when it fails", async () => {
      // (no correlation rule, so that removing the block is refused for being required)
      const idp = await createIdp(team.uid, { name: "strict idp", oidc: oidc({ correlationRule: undefined }) });
      const cases: Array<[string, unknown, string]> = [
        ["", { name: "Nope" }, "name"],
        ["", { oidc: { issuer: "http://example.com" } }, "oidc.issuer"],
        ["", { oidc: { clientId: "" } }, "oidc.client_id"],
        ["", { oidc: { additionalScopes: ["a b"] } }, "oidc.additional_scopes[0]"],
        ["", { oidc: null }, "oidc"],
        ["", { defaultRole: "" }, "default_role"],
        ["?update_mask=scim", {}, "update_mask"],
        ["?update_mask=bogus", {}, "update_mask"],
      ];
      for (const [query, patch, field] of cases)
        assertInvalid(await api.patch(`${IDP}/${idp.uid}${query}`, patch), field, JSON.stringify(patch));
      const siblingRole = await createRole(api, sibling.uid, "patch sibling role");
      assertResourceNotFound(
        await api.patch(`${IDP}/${idp.uid}`, { defaultRole: siblingRole.uid }),
        "role",
        siblingRole.uid,
      );
      assertResourceNotFound(await api.patch(`${IDP}/${idp.uid}`, { defaultRole: MISSING_ROLE }), "role", MISSING_ROLE);
      assert.deepEqual((await api.get(`${IDP}/${idp.uid}`)).body, idp);
      const teamRole = await createRole(api, team.uid, "patch team role");
      const ok = await api.patch(`${IDP}/${idp.uid}`, { defaultRole: teamRole.uid });
      assert.equal(ok.status, 200);
      assert.equal(ok.body.defaultRole, teamRole.uid);
      const missing = `${team.uid}/0123456789abcdef`;
      assertResourceNotFound(await api.patch(`${IDP}/${missing}`, { name: "x" }), "identity provider", missing);
    });

    it("oidc.correlation_rule is immutable: a change is INVALID_ARGUMENT, resending the same value is fine", async () => {
      const idp = await createIdp(team.uid, { name: "correlated" });
      for (const [query, patch] of [
        ["", { oidc: { correlationRule: "CORRELATION_RULE_OID_EQUALS_EXTERNAL_ID" } }],
        ["?update_mask=oidc", { oidc: { ...idp.oidc, correlationRule: "CORRELATION_RULE_OID_EQUALS_EXTERNAL_ID" } }],
        ["?update_mask=oidc.correlation_rule", { oidc: { correlationRule: "CORRELATION_RULE_UNSPECIFIED" } }],
        ["", { oidc: null }],
      ] as const) {
        const res = await api.patch(`${IDP}/${idp.uid}${query}`, patch);
        assertInvalid(res, "oidc.correlation_rule", `${query} ${JSON.stringify(patch)}`);
      }
      assert.deepEqual((await api.get(`${IDP}/${idp.uid}`)).body, idp);
      const same = await api.patch(`${IDP}/${idp.uid}`, { description: "same rule", oidc: { ...idp.oidc } });
      assert.equal(same.status, 200, JSON.stringify(same.body));
      assert.equal(same.body.oidc.correlationRule, "CORRELATION_RULE_SUB_EQUALS_EXTERNAL_ID");
      assert.equal(same.body.description, "same rule");
    });

    it("lists with uidp and name filters, order_by, paging, skip and totalCount", async () => {
      const root = await createGroup(api, undefined, "list root");
      const a = await createGroup(api, root.uid, "a");
      const b = await createGroup(api, root.uid, "b");
      const made: any[] = [];
      for (const [group, name] of [
        [a, "delta"],
        [a, "alpha"],
        [b, "charlie"],
        [b, "bravo"],
        [root, "echo"],
      ] as const) {
        made.push(await createIdp(group.uid, { name }));
      }
      const list = async (q: string) => {
        const res = await api.get(`${IDP}?${q}`);
        assert.equal(res.status, 200, `${q}: ${JSON.stringify(res.body)}`);
        return res.body;
      };
      const names = (r: any) => (r.identityProviders ?? []).map((i: any) => i.name);

      const all = await list(`uidp.descendants_of=${root.uid}&order_by=name`);
      assert.deepEqual(names(all), ["alpha", "bravo", "charlie", "delta", "echo"]);
      assert.equal(all.totalCount, "5");
      assert.deepEqual(names(await list(`uidp.children_of=${a.uid}&order_by=name desc`)), ["delta", "alpha"]);
      assert.deepEqual(names(await list(`uidp.children_of=${root.uid}`)), ["echo"]);
      assert.deepEqual(names(await list(`uidp.descendants_of=${root.uid}&name=bravo`)), ["bravo"]);
      assert.deepEqual(names(await list(`uidp.descendants_of=${root.uid}&order_by=create_time desc`)), [
        "echo",
        "bravo",
        "charlie",
        "alpha",
        "delta",
      ]);

      const page1 = await list(`uidp.descendants_of=${root.uid}&order_by=name&page_size=2`);
      assert.deepEqual(names(page1), ["alpha", "bravo"]);
      assert.equal(page1.totalCount, "5");
      const page2 = await list(
        `uidp.descendants_of=${root.uid}&order_by=name&page_size=2&page_token=${encodeURIComponent(page1.nextPageToken)}`,
      );
      assert.deepEqual(names(page2), ["charlie", "delta"]);
      const skipped = await list(`uidp.descendants_of=${root.uid}&order_by=name&skip=3`);
      assert.deepEqual(names(skipped), ["delta", "echo"]);
      assert.equal(skipped.skipped, 3);

      const wrongToken = await api.get(
        `${IDP}?uidp.descendants_of=${a.uid}&order_by=name&page_size=2&page_token=${encodeURIComponent(page1.nextPageToken)}`,
      );
      assertInvalid(wrongToken, "page_token");
      assertInvalid(await api.get(`${IDP}?order_by=issuer`), "order_by");
      assertInvalid(await api.get(`${IDP}?uidp.children_of=nope`), "uidp.children_of");
    });

    it("deletes; a missing IdP is NOT_FOUND", async () => {
      const idp = await createIdp(team.uid, { name: "doomed" });
      const del = await api.delete(`${IDP}/${idp.uid}`);
      assert.equal(del.status, 200);
      assert.deepEqual(del.body, {});
      assertResourceNotFound(await api.get(`${IDP}/${idp.uid}`), "identity provider", idp.uid);
      assertResourceNotFound(await api.delete(`${IDP}/${idp.uid}`), "identity provider", idp.uid);
      assertInvalid(await api.delete(`${IDP}/nope`), "uid");
    });

    it("a group holding an IdP, or a role that is an IdP's default, cannot be deleted (RESOURCE_NOT_EMPTY)", async () => {
      const group = await createGroup(api, org.uid, "holder");
      const role = await createRole(api, group.uid, "default role");
      const idp = await createIdp(group.uid, { name: "held", defaultRole: role.uid });

      const delGroup = await api.delete(`/iam/v2beta1/groups/${group.uid}`);
      assert.equal(delGroup.status, 400);
      assert.equal(delGroup.body.code, 9);
      assert.match(delGroup.body.message, /cannot delete group with .*child identity providers/);
      const pf = delGroup.body.details.find(
        (d: any) => d["@type"] === "type.googleapis.com/google.rpc.PreconditionFailure",
      );
      assert.equal(pf.violations[0].type, "RESOURCE_NOT_EMPTY");

      const delRole = await api.delete(`/iam/v2beta1/roles/${role.uid}`);
      assert.equal(delRole.status, 400);
      assert.equal(delRole.body.message, "Precondition failed: cannot delete role with identity providers");

      assert.equal((await api.delete(`${IDP}/${idp.uid}`)).status, 200);
      assert.equal((await api.delete(`/iam/v2beta1/roles/${role.uid}`)).status, 200);
      assert.equal((await api.delete(`/iam/v2beta1/groups/${group.uid}`)).status, 200);
    });

    it("deleting a group with only an IdP says exactly which children block it", async () => {
      const group = await createGroup(api, org.uid, "only idp");
      await createIdp(group.uid, { name: "lonely" });
      const res = await api.delete(`/iam/v2beta1/groups/${group.uid}`);
      assert.equal(res.status, 400);
      assert.equal(res.body.message, "Precondition failed: cannot delete group with child identity providers");
    });

    it("SCIM RPCs are UNIMPLEMENTED: HTTP 501 over REST, status 12 over gRPC", async () => {
      const idp = await createIdp(team.uid, { name: "scimless" });
      for (const verb of ["generateScimToken", "regenerateScimToken", "revokeScimToken", "setScimEnabled"]) {
        const res = await api.post(`${IDP}/${idp.uid}:${verb}`, {});
        assert.equal(res.status, 501, `${verb}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.code, 12);
        assert.match(res.body.message, /not implemented/);
      }
      const { client, close } = operatorGrpc(server, IdentityProvidersService);
      try {
        const calls: Array<[string, () => Promise<unknown>]> = [
          ["GenerateScimToken", () => client.generateScimToken({ identityProviderUid: idp.uid })],
          ["RegenerateScimToken", () => client.regenerateScimToken({ identityProviderUid: idp.uid })],
          ["RevokeScimToken", () => client.revokeScimToken({ identityProviderUid: idp.uid })],
          ["SetScimEnabled", () => client.setScimEnabled({ identityProviderUid: idp.uid, enabled: true })],
        ];
        for (const [name, call] of calls) {
          const err = await call().then(
            () => assert.fail(`${name} succeeded`),
            (e: unknown) => ConnectError.from(e),
          );
          assert.equal(err.code, Code.Unimplemented, `${name}: ${err.message}`);
          assert.equal(err.code, 12);
        }
      } finally {
        close();
      }
      assert.equal("scim" in (await api.get(`${IDP}/${idp.uid}`)).body, false);
    });

    it("correlation rule enum values round-trip", async () => {
      const idp = await createIdp(team.uid, {
        name: "oid rule",
        oidc: oidc({ correlationRule: "CORRELATION_RULE_OID_EQUALS_EXTERNAL_ID" }),
      });
      assert.equal(idp.oidc.correlationRule, "CORRELATION_RULE_OID_EQUALS_EXTERNAL_ID");
      const none = await createIdp(team.uid, { name: "no rule", oidc: oidc({ correlationRule: undefined }) });
      assert.equal(none.oidc.correlationRule, "CORRELATION_RULE_UNSPECIFIED");
    });
  });
}
