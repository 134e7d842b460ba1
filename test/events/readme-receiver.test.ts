// The README's receiver example, run as written (only its constants set to this server, its port,
// and `jose` resolved to this checkout's), as the sink of a real subscription: it accepts the
// server's real deliveries (events of its group and of a group below it), and refuses a token for
// another audience, for another group (also one below its own), one without the body's digest or
// with another body's (a forged body under a valid token), one signed by a key the issuer does not
// publish, and none at all.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT, generateKeyPair } from "jose";
import { exited } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { createHash } from "node:crypto";
import { restClient } from "../support/http.js";
import { createGroup, createSubscription, type Api } from "../support/fixtures.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { until, watchOutput, withinHang, type WatchedOutput } from "../support/wait.js";

/** The first ```js block of the README's "Events and the audit trail" section. */
function readmeReceiver(): string {
  const readme = readFileSync(join(process.cwd(), "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Events and the audit trail"));
  const block = /```js\n([\s\S]*?)```/.exec(section);
  assert.ok(block, "the README's receiver example");
  return block[1]!;
}

/** `text` with `pattern` replaced; the pattern must occur exactly once (else the README changed shape). */
function replaceOnce(text: string, pattern: RegExp, replacement: string): string {
  const found = text.match(new RegExp(pattern.source, "g")) ?? [];
  assert.equal(found.length, 1, `${pattern} once in the README's receiver`);
  return text.replace(pattern, () => replacement);
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

for (const backend of backends()) {
  describe(`the README's receiver example [${backend}]`, () => {
    let server: TestServer;
    let dir: string;
    let receiver: ChildProcess;
    let output: WatchedOutput;
    let sink: string;
    let group: string;
    let deliveries = 0;
    let api: Api;

    /** A delivery's body (as the server sends it) of a made-up event. */
    const bodyOf = (name: string) =>
      JSON.stringify({ actor: { subject: "bulwark:operator" }, body: { uid: group, name } });
    const digestOf = (body: string) => `sha256:${createHash("sha256").update(body).digest("hex")}`;

    /** POSTs one event as a delivery does (binary mode); the receiver's status. */
    const deliver = async (authorization: string | undefined, body = bodyOf("readme")) => {
      const id = `${group}/${String(++deliveries).padStart(16, "0")}`;
      const res = await fetch(sink, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "ce-id": id,
          "ce-type": "dev.chainguard.api.iam.group.created.v1",
          "ce-source": server.url,
          "ce-subject": group,
          "ce-specversion": "1.0",
          "ce-time": new Date().toISOString(),
          "ce-group": group,
          "ce-audience": "customer",
          ...(authorization ? { authorization } : {}),
        },
        body,
      });
      await res.arrayBuffer();
      return { status: res.status, id };
    };
    /** A token as the server mints for a delivery (sub, aud [sink, customer], the body's digest), with changes. */
    const webhookToken = (opts: { subject?: string; audience?: string; digest?: string | null; body?: string } = {}) =>
      server
        .tokenFor(opts.subject ?? `webhook:${group}`, {
          audience: [opts.audience ?? sink, "customer"],
          ...(opts.digest === null ? {} : { webhookDigest: opts.digest ?? digestOf(opts.body ?? bodyOf("readme")) }),
        })
        .then((t) => `Bearer ${t}`);

    before(async () => {
      server = await startTestServer(backend, { events: { allowInsecureSinks: true, deliveryPollMs: 20 } });
      api = restClient(server.url, server.operatorToken);
      group = (await createGroup(api, undefined, "readme")).uid as string;
      const port = await freePort();
      sink = `http://127.0.0.1:${port}/bulwark`;
      let code = readmeReceiver();
      code = replaceOnce(code, /from "jose"/, `from ${JSON.stringify(import.meta.resolve("jose"))}`);
      code = replaceOnce(code, /const ISSUER = "[^"]*"/, `const ISSUER = ${JSON.stringify(server.tokens.urls.issuer)}`);
      code = replaceOnce(code, /const SINK = "[^"]*"/, `const SINK = ${JSON.stringify(sink)}`);
      code = replaceOnce(code, /const GROUP = "[^"]*"/, `const GROUP = ${JSON.stringify(group)}`);
      code = replaceOnce(code, /\.listen\(8000\)/, `.listen(${port}, "127.0.0.1")`);
      dir = mkdtempSync(join(tmpdir(), "bulwark-readme-receiver-"));
      writeFileSync(join(dir, "receiver.mjs"), code);
      receiver = spawn(process.execPath, [join(dir, "receiver.mjs")], { stdio: ["ignore", "pipe", "pipe"] });
      output = watchOutput(receiver);
      await until(
        () =>
          fetch(sink, { method: "POST" }).then(
            (r) => r.status,
            () => undefined,
          ),
        () => `the receiver listening on ${sink}:\n${output.text()}`,
      );
    });
    after(async () => {
      if (receiver && receiver.exitCode === null) {
        receiver.kill();
        await withinHang(exited(receiver), "the receiver's exit");
      }
      if (dir) rmSync(dir, { recursive: true, force: true });
      await server?.close();
    });

    it("accepts the server's real deliveries to a subscription, of its group and of a group below", async () => {
      const subscription = await createSubscription(api, group, sink);
      const team = await createGroup(api, group, "team");
      const renamed = await api.patch(`/iam/v2beta1/groups/${team.uid}`, { description: "changed" });
      assert.equal(renamed.status, 200, JSON.stringify(renamed.body));
      const events = (await server.db
        .selectFrom("events")
        .select(["seq", "uid", "type"])
        .where("subject", "=", team.uid)
        .orderBy("seq")
        .execute()) as { seq: string; uid: string; type: string }[];
      assert.deepEqual(
        events.map((e) => e.type),
        ["dev.chainguard.api.iam.group.created.v1", "dev.chainguard.api.iam.group.updated.v1"],
      );
      for (const event of events)
        await output.waitFor(
          new RegExp(`${event.uid} ${event.type.replace(/\./g, "\\.")} ${team.uid} bulwark:operator`),
        );
      await until(async () => {
        const states = await server.db
          .selectFrom("event_deliveries")
          .select(["state", "last_status_code"])
          .where("subscription_uid", "=", subscription.uid)
          .where("event_seq", "in", events.map((e) => e.seq) as never[])
          .execute();
        return states.length === 2 && states.every((r) => r.state === "delivered" && r.last_status_code === 204);
      }, "both deliveries recorded as delivered with the receiver's 204");
    });

    it("accepts a delivery made as the server makes them, and reads its headers and body", async () => {
      const { status, id } = await deliver(await webhookToken());
      assert.equal(status, 204);
      await output.waitFor(
        new RegExp(`${id} dev\\.chainguard\\.api\\.iam\\.group\\.created\\.v1 ${group} bulwark:operator`),
      );
    });

    it("refuses another group (one below its own too), another audience, a forged body, no digest, an unknown key and no token", async () => {
      assert.equal((await deliver(await webhookToken({ subject: `webhook:${"f".repeat(40)}` }))).status, 401);
      assert.equal((await deliver(await webhookToken({ subject: `webhook:${group}/0123456789abcdef` }))).status, 401);
      assert.equal((await deliver(await webhookToken({ audience: server.tokens.urls.apiAudience }))).status, 401);
      // a valid token of one delivery, sent with another body
      assert.equal((await deliver(await webhookToken({ body: bodyOf("readme") }), bodyOf("forged"))).status, 401);
      assert.equal((await deliver(await webhookToken({ digest: null }))).status, 401);
      assert.equal((await deliver(`Bearer ${server.operatorToken}`)).status, 401);
      const { privateKey } = await generateKeyPair("ES256");
      const body = bodyOf("readme");
      const forged = await new SignJWT({ webhook: { digest: digestOf(body) } })
        .setProtectedHeader({ alg: "ES256", kid: "not-published" })
        .setIssuer(server.tokens.urls.issuer)
        .setAudience([sink, "customer"])
        .setSubject(`webhook:${group}`)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(privateKey);
      assert.equal((await deliver(`Bearer ${forged}`, body)).status, 401);
      assert.equal((await deliver(undefined)).status, 401);
    });
  });
}
