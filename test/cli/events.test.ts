// `bulwark events subscriptions|deliveries|redeliver` and `bulwark audit list` as a user runs them
// against a real server (in-process, test/support/cli.ts); `audit list --follow` as the real binary,
// stopped with SIGINT as Ctrl-C would. Sinks are on the reserved `.invalid` domain: nothing is ever
// delivered to them, so every delivery stays pending and the states are known.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { BIN, CliHome, collapse, exited, normalize, runCli, type CliOptions } from "../support/cli.js";
import { backends } from "../support/db-templates.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { watchOutput, withinHang } from "../support/wait.js";

const SINK = "https://hooks.bulwark.invalid/all";
const REGISTRY_SINK = "https://hooks.bulwark.invalid/registry";
const GROUP_CREATED = "dev.chainguard.api.iam.group.created.v1";

interface EventJson {
  uid: string;
  type: string;
  subject: string;
  group: string;
  actor?: { subject: string };
  body: Record<string, unknown>;
}

for (const backend of backends()) {
  describe(`bulwark events and bulwark audit [${backend}]`, () => {
    let server: TestServer;
    let home: CliHome;
    let org: string;
    /** the subscription receiving every type, and the one filtered to the registry's */
    let everything: string;
    let registryOnly: string;
    /** a folder made after both subscriptions: its created event */
    let folder: string;

    const env = () => ({ BULWARK_API_URL: server.url, BULWARK_TOKEN: server.operatorToken });
    const cli = (args: string[], options: CliOptions = {}) =>
      runCli(home, args, { ...options, env: { ...env(), ...options.env } });
    const ok = async (args: string[]) => {
      const res = await cli(args);
      assert.equal(res.code, 0, `bulwark ${args.join(" ")}: ${res.stderr}`);
      assert.equal(res.stderr, "");
      return res.stdout;
    };
    const json = async <T>(args: string[]): Promise<T> => JSON.parse(await ok([...args, "-o", "json"])) as T;
    const id = async (args: string[]) => (await ok([...args, "-o", "id"])).trim();
    const fails = async (code: number, args: string[]) => {
      const res = await cli(args);
      assert.equal(res.code, code, `bulwark ${args.join(" ")}: exit ${res.code}\n${res.stdout}${res.stderr}`);
      assert.equal(res.stdout, "");
      assert.doesNotMatch(res.stderr, /\n\s+at /, "no stack trace");
      return res.stderr;
    };

    before(async () => {
      server = await startTestServer(backend);
      home = new CliHome();
      org = await id(["iam", "organizations", "create", "cli-events"]);
      everything = await id(["events", "subscriptions", "create", SINK, "--parent", "cli-events"]);
      registryOnly = await id([
        "events",
        "subscriptions",
        "create",
        REGISTRY_SINK,
        "--parent",
        org,
        "--type",
        "dev.chainguard.registry.",
      ]);
      folder = await id(["iam", "folders", "create", "team", "--parent", org]);
    });
    after(async () => {
      home?.close();
      await server?.close();
    });

    it("creates subscriptions under a group by name, with and without a type filter, and lists them with their types", async () => {
      assert.match(everything, new RegExp(`^${org}/[0-9a-f]{16}$`));
      assert.match(registryOnly, new RegExp(`^${org}/[0-9a-f]{16}$`));
      const listed = await json<{ uid: string; sink: string; types?: string[] }[]>([
        "events",
        "subscriptions",
        "list",
        "--parent",
        org,
      ]);
      assert.deepEqual(
        listed
          .map((s) => ({ uid: s.uid, sink: s.sink, types: s.types ?? [] }))
          .sort((a, b) => a.sink.localeCompare(b.sink)),
        [
          { uid: everything, sink: SINK, types: [] },
          { uid: registryOnly, sink: REGISTRY_SINK, types: ["dev.chainguard.registry."] },
        ],
      );
      const table = collapse(normalize(await ok(["events", "subscriptions", "list", "--parent", org])));
      assert.equal(
        table.split("\n").sort().join("\n"),
        ["ID  SINK  TYPES", `<uid>  ${REGISTRY_SINK}  dev.chainguard.registry.`, `<uid>  ${SINK}  (all)`, ""]
          .sort()
          .join("\n"),
      );
    });

    it("lists a subscription's deliveries: the filtered one got none of the group's events, the other one each", async () => {
      const deliveries = await json<{ eventId: string; eventType: string; eventSubject: string; state: string }[]>([
        "events",
        "deliveries",
        "list",
        everything,
      ]);
      const folderCreated = deliveries.find((d) => d.eventSubject === folder);
      assert.ok(folderCreated, `the folder's event among ${JSON.stringify(deliveries)}`);
      assert.equal(folderCreated.eventType, GROUP_CREATED);
      assert.equal(folderCreated.state, "STATE_PENDING");
      assert.deepEqual(await json(["events", "deliveries", "list", registryOnly]), []);
      // nothing reaches a .invalid sink
      assert.deepEqual(await json(["events", "deliveries", "list", everything, "--state", "delivered"]), []);
      assert.equal(
        (await json<unknown[]>(["events", "deliveries", "list", everything, "--state", "pending,failed"])).length,
        deliveries.length,
      );
      const table = await ok(["events", "deliveries", "list", everything]);
      assert.match(table.split("\n")[0]!, /^EVENT +TYPE +STATE +ATTEMPTS +STATUS +NEXT ATTEMPT +LAST ERROR$/);
      assert.match(table, new RegExp(`${folderCreated.eventId} +${GROUP_CREATED.replace(/\./g, "\\.")} +pending`));
      assert.match(
        await fails(2, ["events", "deliveries", "list", everything, "--state", "lost"]),
        /--state takes pending, delivered, failed/,
      );
    });

    it("redelivers one event, or a time range, and refuses to guess which", async () => {
      const [first] = await json<{ eventId: string }[]>(["events", "deliveries", "list", everything, "--limit", "1"]);
      assert.ok(first);
      assert.equal(
        await ok(["events", "redeliver", everything, "--event", first.eventId]),
        `queued 1 delivery again for ${everything}\n`,
      );
      const all = await json<unknown[]>(["events", "deliveries", "list", everything]);
      assert.deepEqual(await json(["events", "redeliver", everything, "--since", "1h"]), { count: String(all.length) });
      assert.deepEqual(await json(["events", "redeliver", everything, "--since", "2h", "--until", "1h"]), {
        count: "0",
      });
      assert.match(await fails(2, ["events", "redeliver", everything]), /needs --event <id> or --since/);
      assert.match(
        await fails(2, ["events", "redeliver", everything, "--event", first.eventId, "--since", "1h"]),
        /--event or --since/,
      );
      assert.match(
        await fails(2, ["events", "redeliver", everything, "--since", "yesterday"]),
        /duration ago|RFC 3339/,
      );
    });

    it("lists the audit trail of a group's subtree, filtered by type, prefix, subject, actor and time", async () => {
      const events = await json<EventJson[]>(["audit", "list", "--parent", org]);
      const created = events.find((e) => e.subject === folder && e.type === GROUP_CREATED);
      assert.ok(created, `the folder's creation among ${JSON.stringify(events.map((e) => [e.type, e.subject]))}`);
      assert.equal(created.group, folder);
      assert.equal(created.actor?.subject, "bulwark:operator");
      assert.equal(created.body.uid, folder);
      for (const e of events) assert.ok(e.group === org || e.group.startsWith(`${org}/`), `${e.group} is in ${org}`);

      const bySubject = await json<EventJson[]>([
        "audit",
        "list",
        "--subject",
        folder,
        "--type",
        "dev.chainguard.api.iam.",
      ]);
      assert.deepEqual(
        bySubject.map((e) => e.type),
        [GROUP_CREATED],
      );
      assert.deepEqual(
        (
          await json<EventJson[]>([
            "audit",
            "list",
            "--parent",
            org,
            "--type",
            GROUP_CREATED,
            "--actor",
            "bulwark:operator",
          ])
        )
          .map((e) => e.subject)
          .sort(),
        events
          .filter((e) => e.type === GROUP_CREATED)
          .map((e) => e.subject)
          .sort(),
      );
      assert.deepEqual(await json(["audit", "list", "--parent", org, "--type", "dev.chainguard.registry."]), []);
      assert.equal(
        (await json<EventJson[]>(["audit", "list", "--parent", org, "--since", "1h"])).length,
        events.length,
      );
      assert.deepEqual(await json(["audit", "list", "--parent", org, "--until", "1h"]), []);
      assert.deepEqual(
        (await ok(["audit", "list", "--parent", org, "--limit", "1", "-o", "id"])).trim().split("\n").length,
        1,
      );
      const table = await ok(["audit", "list", "--subject", folder]);
      assert.match(table.split("\n")[0]!, /^TIME +TYPE +SUBJECT +ACTOR$/);
      assert.match(await fails(2, ["audit", "list", "--follow", "--until", "1h"]), /--follow and --until/);
    });

    it("deletes a subscription only when confirmed", async () => {
      const doomed = await id([
        "events",
        "subscriptions",
        "create",
        "https://hooks.bulwark.invalid/doomed",
        "--parent",
        org,
      ]);
      assert.match(await fails(2, ["events", "subscriptions", "delete", doomed]), /--yes/);
      assert.equal(await ok(["events", "subscriptions", "delete", doomed, "-y"]), `deleted subscription ${doomed}\n`);
      const left = await json<{ uid: string }[]>(["events", "subscriptions", "list", "--parent", org]);
      assert.ok(!left.some((s) => s.uid === doomed));
    });

    it("follows the audit trail: the recent events, then each new one as one JSON line, until SIGINT", async () => {
      const child = spawn(
        process.execPath,
        [BIN, "audit", "list", "--parent", org, "--follow", "-o", "json", "--poll-interval", "100ms"],
        {
          stdio: ["ignore", "pipe", "pipe"],
          env: { ...process.env, ...env(), HOME: home.dir, BULWARK_CONFIG_DIR: home.configDir },
        },
      );
      try {
        const output = watchOutput(child);
        // the backlog: the folder made before the follow started
        await output.waitFor(new RegExp(`"subject":"${folder}"`));
        const later = await id(["iam", "folders", "create", "later", "--parent", org]);
        await output.waitFor(new RegExp(`"subject":"${later}"`));
        child.kill("SIGINT");
        assert.equal(await withinHang(exited(child), "the follow's exit after SIGINT"), 0);
        const lines = output.text().trim().split("\n");
        const parsed = lines.map((l) => JSON.parse(l) as EventJson); // every line one event
        const uids = parsed.map((e) => e.uid);
        assert.equal(new Set(uids).size, uids.length, "no event printed twice");
        const laterAt = parsed.findIndex((e) => e.subject === later);
        const folderAt = parsed.findIndex((e) => e.subject === folder && e.type === GROUP_CREATED);
        assert.ok(folderAt >= 0 && folderAt < laterAt, "oldest first");
      } finally {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      }
    });
  });
}
