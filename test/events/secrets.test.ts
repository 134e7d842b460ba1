// No secret in any event. Property: every field of every evented method's response whose name
// looks secret is removed by the outbox's redaction (src/events/redact.ts) or listed below as not
// secret, with why. Practice: real calls that answer secrets (an invite's code, an exchanged
// token), then the whole events table is searched for each secret's text.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { DescMessage } from "@bufbuild/protobuf";
import { eventSpecOf } from "../../src/events/outbox.js";
import { isSecretField } from "../../src/events/redact.js";
import { backends } from "../support/db-templates.js";
import { createGroupInvite } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { pullTokenIdentity } from "../support/principals.js";
import { startTestServer, type TestServer } from "../support/server.js";

/** Names that look like secrets anywhere in their words. */
const LOOKS_SECRET = /code|token|secret|password|key|credential|private/i;

/** Fields whose names look secret but hold none, with why. */
const NOT_SECRET: Record<string, string> = {
  // A static-keys identity's public JWKS: verification keys, published by design.
  issuerKeys: "public keys (JWKS) an identity's tokens are verified with",
  // AIP-193 error and status codes, OCI error codes: what went wrong, not a credential.
  errorCode: "an error's code",
  // A role's or binding's capability keys name permissions.
  keys: "names of things, not key material",
  staticKeys: "an identity's issuer, subject, audiences and public JWKS: what its tokens are verified with",
  tokenExpireTime: "when a SCIM token expires: a time",
  previousTokenExpireTime: "when the replaced SCIM token expires: a time",
  credentialState: "whether a SCIM token is set: a state",
  keyId: "the id of the key an invite code is signed with: names the public key",
  runtimeKeyring: "URLs of public APK signing keys",
};

/** Every field of a message, at any depth, by JSON name (each message type visited once). */
function fieldsOf(desc: DescMessage, path = "", seen = new Set<string>()): string[] {
  if (seen.has(desc.typeName)) return [];
  seen.add(desc.typeName);
  const out: string[] = [];
  for (const field of desc.fields) {
    const here = path ? `${path}.${field.jsonName}` : field.jsonName;
    out.push(here);
    // Redaction removes a secret field with everything under it: look inside only what is kept.
    if (isSecretField(field.jsonName)) continue;
    const inner =
      field.fieldKind === "message"
        ? field.message
        : field.fieldKind === "map"
          ? field.mapKind === "message"
            ? field.message
            : undefined
          : field.fieldKind === "list" && field.listKind === "message"
            ? field.message
            : undefined;
    if (inner && !inner.typeName.startsWith("google.protobuf.")) out.push(...fieldsOf(inner, here, new Set(seen)));
  }
  return out;
}

describe("no secret in an RPC's event (every evented method's response)", () => {
  it("each secret-looking field is redacted or listed as not secret", async () => {
    const server = await startTestServer("pglite");
    try {
      const unexplained: string[] = [];
      let evented = 0;
      for (const binding of server.bindings)
        for (const method of binding.service.methods) {
          if (method.methodKind !== "unary" || !eventSpecOf(method)) continue;
          evented++;
          for (const path of fieldsOf(method.output)) {
            const name = path.slice(path.lastIndexOf(".") + 1);
            if (!LOOKS_SECRET.test(name) || isSecretField(name) || name in NOT_SECRET) continue;
            unexplained.push(`${binding.service.typeName}.${method.name}: ${path}`);
          }
        }
      assert.ok(evented > 10, `evented methods found: ${evented}`);
      assert.deepEqual(unexplained, []);
    } finally {
      await server.close();
    }
  });
});

for (const backend of backends()) {
  describe(`no secret in the events table [${backend}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(backend);
    });
    after(() => server.close());

    it("an invite's code and exchanged tokens never reach an event", async () => {
      const api = restClient(server.url, server.operatorToken);
      const org = await api.post("/iam/v2beta1/groups", { name: "secrets" });
      assert.equal(org.status, 200);
      const invite = await createGroupInvite(api, org.body.uid);
      const secrets: string[] = [invite.code as string];
      const ci = await pullTokenIdentity(api, org.body.uid, "ci", "https://ci.example/aud");
      const upstream = await ci.pullToken();
      const exchanged = await restClient(server.url, upstream).get(
        `/sts/exchange?identity=${encodeURIComponent(ci.uid)}`,
      );
      assert.equal(exchanged.status, 200, JSON.stringify(exchanged.body));
      secrets.push(upstream, exchanged.body.token as string, server.operatorToken);
      const rows = await server.db.selectFrom("events").selectAll().execute();
      assert.ok(
        rows.some((r) => String(r.type).includes("invite")),
        "the invite's event is recorded",
      );
      const all = JSON.stringify(rows);
      for (const secret of secrets) {
        assert.ok(secret.length > 8);
        assert.ok(!all.includes(secret), `a secret appears in an event: ${secret.slice(0, 6)}…`);
      }
    });
  });
}
