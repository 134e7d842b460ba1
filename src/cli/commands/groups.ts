// `bulwark iam organizations` and `bulwark iam folders`: groups at the root and below it.
import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import type { Command } from "commander";
import { GroupSchema, GroupsService, type Group } from "../../gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { clientCommand, run } from "../command.js";
import { isValidUidp } from "../../core/uidp.js";
import { confirm } from "../confirm.js";
import { CliError, UsageError } from "../errors.js";
import { listAll, messageView, renderTree, time } from "../output.js";
import type { Session } from "../session.js";

export const groupView = messageView(GroupSchema, [
  { header: "ID", value: (g) => g.uid },
  { header: "NAME", value: (g) => g.name },
  { header: "DESCRIPTION", value: (g) => g.description, max: 40 },
  { header: "VERIFIED", value: (g) => (g.verified ? "yes" : "no"), wide: true },
  { header: "CREATED", value: (g) => time(g.createTime), wide: true },
]);

/** Every group a list request matches, page after page. */
export async function listGroups(
  session: Session,
  filter: { childrenOf?: string; descendantsOf?: string; inRoot?: boolean; ids?: string[]; name?: string },
  limit?: number,
): Promise<Group[]> {
  const client = session.client(GroupsService);
  return listAll(async (pageToken, pageSize) => {
    const res = await session.call(() =>
      client.listGroups({
        uidp: {
          childrenOf: filter.childrenOf ?? "",
          descendantsOf: filter.descendantsOf ?? "",
          inRoot: filter.inRoot ?? false,
          ids: filter.ids ?? [],
        },
        name: filter.name ?? "",
        pageSize,
        pageToken,
      }),
    );
    return { items: res.groups, nextPageToken: res.nextPageToken };
  }, limit);
}

/** A group named by uid, or by name (which must then be unambiguous among the groups the caller sees). */
export async function resolveGroup(session: Session, ref: string, root?: boolean): Promise<Group> {
  if (isValidUidp(ref)) return session.call(() => session.client(GroupsService).getGroup({ uid: ref }));
  const found = await listGroups(session, { name: ref, inRoot: root });
  if (found.length === 0)
    throw new CliError(`no ${root ? "organization" : "group"} named ${JSON.stringify(ref)} is visible to you`);
  if (found.length > 1)
    throw new CliError(
      `${found.length} groups are named ${JSON.stringify(ref)}: use a uid (${found.map((g) => g.uid).join(", ")})`,
    );
  return found[0]!;
}

/** A tree cut at N groups would drop arbitrary subtrees: it is drawn whole. */
function noLimitWithTree(limit: number | undefined): void {
  if (limit) throw new UsageError("--limit does not apply to -o tree (the whole tree is drawn)");
}

function updateMask(opts: { name?: string; description?: string }): string[] {
  const paths = [
    ...(opts.name !== undefined ? ["name"] : []),
    ...(opts.description !== undefined ? ["description"] : []),
  ];
  if (!paths.length) throw new UsageError("nothing to change: pass --name and/or --description");
  return paths;
}

export function registerGroups(iam: Command): void {
  const orgs = iam
    .command("organizations")
    .alias("orgs")
    .alias("organization")
    .description("organizations: the groups at the root of the tree");

  run<{ name?: string }>(
    clientCommand(orgs, "list", {
      description: "list the organizations you can see (-o tree: with every folder under them)",
      examples: [
        "bulwark iam organizations list",
        "bulwark iam organizations list -o tree",
        "bulwark iam orgs list -o id",
      ],
      list: true,
      tree: true,
    }).option("--name <name>", "only organizations with this name"),
    async ({ session, print, opts }) => {
      if (print.format === "tree") {
        noLimitWithTree(opts.limit);
        const groups = await listGroups(session, { name: opts.name });
        print.write(
          renderTree(
            groups.map((g) => ({ uid: g.uid, label: g.name })),
            print.style,
          ),
        );
        return;
      }
      print.list(groupView, await listGroups(session, { inRoot: true, name: opts.name }, opts.limit));
    },
  );

  run(
    clientCommand(orgs, "describe <organization>", {
      description: "show one organization (by uid or name)",
      examples: ["bulwark iam organizations describe acme", "bulwark iam organizations describe <uid> -o json"],
    }),
    async ({ session, print }, ref: string) => {
      print.one(groupView, await resolveGroup(session, ref, true));
    },
  );

  run<{ description?: string }>(
    clientCommand(orgs, "create <name>", {
      description: "create an organization (an operator, or a server that lets anyone create one)",
      examples: ['bulwark iam organizations create acme --description "Acme Corp"'],
    }).option("--description <text>", "what it is for"),
    async ({ session, print, opts }, name: string) => {
      const group = await session.call(() =>
        session.client(GroupsService).createGroup({ parent: "", group: { name, description: opts.description ?? "" } }),
      );
      print.one(groupView, group);
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(orgs, "delete <organization>", {
      description: "delete an organization and everything in it",
      examples: ["bulwark iam organizations delete acme --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, ref: string) => {
      const group = await resolveGroup(session, ref, true);
      await confirm(io, `Delete the organization ${group.name} (${group.uid}) and everything in it?`, opts.yes);
      await session.call(() => session.client(GroupsService).deleteGroup({ uid: group.uid }));
      print.done(`deleted organization ${group.name} (${group.uid})`, { id: group.uid, json: {} });
    },
  );

  const folders = iam.command("folders").alias("folder").description("folders: groups inside an organization");

  run<{ name?: string }>(
    clientCommand(folders, "list", {
      description: "list the folders under --parent (all levels), or every folder you can see",
      examples: ["bulwark iam folders list --parent <org uid>", "bulwark iam folders list -o tree"],
      parent: true,
      list: true,
      tree: true,
    }).option("--name <name>", "only folders with this name"),
    async ({ session, print, opts }) => {
      const parent = session.parent();
      if (print.format === "tree") noLimitWithTree(opts.limit);
      // Under a parent, one more than the limit (the parent itself is among its descendants);
      // without one, organizations are dropped after listing, so the limit applies after that.
      const limit = opts.limit && parent ? opts.limit + 1 : undefined;
      const all = await listGroups(session, { descendantsOf: parent, name: opts.name }, limit);
      // descendants include the group itself: a folder list is what is under it
      const folderList = all.filter((g) => g.uid.includes("/") && g.uid !== parent);
      if (print.format === "tree") {
        print.write(
          renderTree(
            folderList.map((g) => ({ uid: g.uid, label: g.name })),
            print.style,
          ),
        );
        return;
      }
      print.list(groupView, opts.limit ? folderList.slice(0, opts.limit) : folderList);
    },
  );

  run(
    clientCommand(folders, "describe <folder>", {
      description: "show one folder (by uid or name)",
      examples: ["bulwark iam folders describe <uid>", "bulwark iam folders describe builds -o json"],
    }),
    async ({ session, print }, ref: string) => {
      print.one(groupView, await resolveGroup(session, ref));
    },
  );

  run<{ description?: string }>(
    clientCommand(folders, "create <name>", {
      description: "create a folder in --parent",
      examples: ["bulwark iam folders create builds --parent <org uid>"],
      parent: true,
    }).option("--description <text>", "what it is for"),
    async ({ session, print, opts }, name: string) => {
      const parent = session.parent(true, "folders create");
      const group = await session.call(() =>
        session.client(GroupsService).createGroup({ parent, group: { name, description: opts.description ?? "" } }),
      );
      print.one(groupView, group);
    },
  );

  run<{ name?: string; description?: string }>(
    clientCommand(folders, "update <folder>", {
      description: "rename a folder or change its description",
      examples: ['bulwark iam folders update <uid> --name releases --description "release builds"'],
    })
      .option("--name <name>", "its new name")
      .option("--description <text>", "its new description"),
    async ({ session, print, opts }, ref: string) => {
      const paths = updateMask(opts);
      const current = await resolveGroup(session, ref);
      const group = await session.call(() =>
        session.client(GroupsService).updateGroup({
          group: {
            uid: current.uid,
            name: opts.name ?? current.name,
            description: opts.description ?? current.description,
          },
          updateMask: create(FieldMaskSchema, { paths }),
        }),
      );
      print.one(groupView, group);
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(folders, "delete <folder>", {
      description: "delete a folder and everything in it",
      examples: ["bulwark iam folders delete <uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, ref: string) => {
      const group = await resolveGroup(session, ref);
      if (!group.uid.includes("/"))
        throw new UsageError(`${group.name} is an organization: use \`bulwark iam organizations delete\``);
      await confirm(io, `Delete the folder ${group.name} (${group.uid}) and everything in it?`, opts.yes);
      await session.call(() => session.client(GroupsService).deleteGroup({ uid: group.uid }));
      print.done(`deleted folder ${group.name} (${group.uid})`, { id: group.uid, json: {} });
    },
  );
}
