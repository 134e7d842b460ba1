// `bulwark iam invites`: codes that let someone join a group with a role. The code is shown once,
// by `create`; afterwards only its key id identifies it. Accepting one is `bulwark auth login --invite-code`.
import { create } from "@bufbuild/protobuf";
import { DurationSchema, type Duration } from "@bufbuild/protobuf/wkt";
import { InvalidArgumentError, Option, type Command } from "commander";
import {
  GroupInviteSchema,
  GroupInvitesService,
  type GroupInvite,
} from "../../gen/chainguard/platform/iam/v2beta1/group_invites_pb.js";
import { clientCommand, run } from "../command.js";
import { confirm } from "../confirm.js";
import type { CliIo } from "../io.js";
import { listAll, messageView, time, type Printer } from "../output.js";
import { durationMillis } from "../durations.js";
import { parentUid, resolveRole } from "../resolve.js";

/** --ttl: a duration (`168h`, `30m`, `1h30m`) as a protobuf Duration. */
export function parseTtl(value: string): Duration {
  const millis = durationMillis(value);
  if (millis === undefined) throw new InvalidArgumentError(`invalid duration "${value}": use e.g. 168h, 30m, 1h30m`);
  return create(DurationSchema, { seconds: BigInt(Math.floor(millis / 1000)), nanos: (millis % 1000) * 1_000_000 });
}

const inviteView = messageView(GroupInviteSchema, [
  { header: "ID", value: (i) => i.uid },
  { header: "EXPIRATION", value: (i) => time(i.expirationTime) },
  { header: "KEYID", value: (i) => i.keyId },
  { header: "ROLE", value: (i) => i.role?.name || i.roleUid },
  { header: "EMAIL", value: (i) => i.email, wide: true },
  { header: "SINGLE-USE", value: (i) => (i.singleUse ? "yes" : "no"), wide: true },
  { header: "CREATED", value: (i) => time(i.createTime), wide: true },
]);

/** What people see after `create`: the invite, then its code (never shown again) and how to use it. */
function printCreated(print: Printer, io: CliIo, invite: GroupInvite): void {
  if (print.format === "terse") {
    print.write(invite.code + "\n");
    return;
  }
  print.one(inviteView, invite);
  // -o id prints the uid for scripts; the code, shown only now, goes to stderr rather than be lost.
  if (print.format === "id") io.stderr.write(`invite code (shown only this once): ${invite.code}\n`);
  if (print.format === "table" || print.format === "wide")
    print.write(
      `\nInvite code (shown only this once; anyone holding it can join):\n  ${invite.code}\n` +
        `To accept it:\n  bulwark auth login --invite-code ${invite.code}\n`,
    );
}

export function registerInvites(iam: Command): void {
  const invites = iam.command("invites").alias("invite").description("invitations to join a group with a role");

  run<{ role: string; ttl: Duration; email?: string; singleUse?: boolean }>(
    clientCommand(invites, "create", {
      description:
        "invite someone into --parent with a role; prints the code once (-o terse: the code alone, -o id: the invite's uid)",
      examples: [
        "bulwark iam invites create --parent <group uid> --role viewer",
        "bulwark iam invites create --parent <group uid> --role editor --ttl 24h --email dev@example.com --single-use",
        "CODE=$(bulwark iam invites create --parent <group uid> --role viewer -o terse)",
      ],
      parent: true,
    })
      .requiredOption(
        "--role <role>",
        "the role to grant: a uid, or a name (built-in, or a custom role of the group or above)",
      )
      .addOption(
        new Option("--ttl <duration>", "how long the code stays valid (at most 720h)")
          .argParser(parseTtl)
          .default(parseTtl("168h"), "168h"),
      )
      .option("--email <address>", "only someone signing in with this verified email may accept it")
      .option("--single-use", "the code works only once"),
    async ({ session, print, opts, io }) => {
      const parent = await parentUid(session, "invites create");
      const roleUid = (await resolveRole(session, opts.role, parent)).uid;
      const invite = await session.call(() =>
        session.client(GroupInvitesService).createGroupInvite({
          parent,
          groupInvite: { roleUid, ttl: opts.ttl, email: opts.email ?? "", singleUse: opts.singleUse ?? false },
        }),
      );
      printCreated(print, io, invite);
    },
  );

  run(
    clientCommand(invites, "list", {
      description: "list the invites in --parent and the groups below it (or every invite you can see)",
      examples: ["bulwark iam invites list --parent <group uid>", "bulwark iam invites list -o wide --limit 20"],
      parent: true,
      list: true,
    }),
    async ({ session, print, opts }) => {
      const parent = await parentUid(session);
      const client = session.client(GroupInvitesService);
      const rows = await listAll(async (pageToken, pageSize) => {
        const res = await session.call(() =>
          client.listGroupInvites({ uidp: parent ? { descendantsOf: parent } : undefined, pageSize, pageToken }),
        );
        return { items: res.groupInvites, nextPageToken: res.nextPageToken };
      }, opts.limit);
      print.list(inviteView, rows);
    },
  );

  run(
    clientCommand(invites, "describe <invite>", {
      description: "show one invite (its code is never shown again)",
      examples: ["bulwark iam invites describe <invite uid>", "bulwark iam invites describe <invite uid> -o json"],
    }),
    async ({ session, print }, uid: string) => {
      print.one(inviteView, await session.call(() => session.client(GroupInvitesService).getGroupInvite({ uid })));
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(invites, "delete <invite>", {
      description: "revoke an invite: its code stops working",
      examples: ["bulwark iam invites delete <invite uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, uid: string) => {
      await confirm(io, `Delete the invite ${uid}?`, opts.yes);
      await session.call(() => session.client(GroupInvitesService).deleteGroupInvite({ uid }));
      print.done(`deleted invite ${uid}`, { id: uid, json: {} });
    },
  );
}
