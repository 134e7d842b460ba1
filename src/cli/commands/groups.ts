// `bulwark iam organizations` and `bulwark iam folders`: groups at the root and below it.
import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import type { Command } from "commander";
import { GroupSchema, GroupsService, type Group } from "../../gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2beta1/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2beta1/repos_pb.js";
import { clientCommand, run, type Context } from "../command.js";
import { confirm } from "../confirm.js";
import { CliError, UsageError } from "../errors.js";
import { messageView, renderTree, time } from "../output.js";
import { groupPaths, listGroups, parentUid, resolveGroup } from "../resolve.js";
import type { Session } from "../session.js";

export const groupView = messageView(GroupSchema, [
  { header: "ID", value: (g) => g.uid },
  { header: "NAME", value: (g) => g.name },
  { header: "DESCRIPTION", value: (g) => g.description, max: 40 },
  { header: "VERIFIED", value: (g) => (g.verified ? "yes" : "no"), wide: true },
  { header: "CREATED", value: (g) => time(g.createTime), wide: true },
]);

/** What a group directly holds that the server's delete would be refused for, counted by kind. */
async function contentsOf(session: Session, uid: string): Promise<string[]> {
  const inIt = { childrenOf: uid };
  // One page of one item each: the list's totalCount is the count, whatever the group holds.
  const page = { uidp: inIt, pageSize: 1 };
  const count = async (list: () => Promise<{ totalCount?: bigint }>) =>
    Number((await session.call(list)).totalCount ?? 0n);
  const [groups, repos, identities, roles, bindings] = await Promise.all([
    count(() => session.client(GroupsService).listGroups(page)),
    count(() => session.client(ReposService).listRepos(page)),
    count(() => session.client(IdentitiesService).listIdentities(page)),
    count(() => session.client(RolesService).listRoles(page)),
    count(() => session.client(RoleBindingsService).listRoleBindings(page)),
  ]);
  const plural = (n: number, one: string, many: string) => (n === 1 ? `1 ${one}` : `${n} ${many}`);
  return [
    groups ? plural(groups, "child group", "child groups") : "",
    repos ? plural(repos, "repo", "repos") : "",
    identities ? plural(identities, "identity", "identities") : "",
    roles ? plural(roles, "custom role", "custom roles") : "",
    bindings ? plural(bindings, "role binding", "role bindings") : "",
  ].filter(Boolean);
}

const inWords = (items: string[]) =>
  items.length < 2 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;

/**
 * Deletes a group the way the server allows: only an empty one (everything in a group refers to
 * it, and the server refuses to delete what is still referred to). A group that visibly holds
 * something is refused here, saying what; an empty one is confirmed, then deleted, and a refusal
 * for what the caller cannot see arrives in the server's words.
 */
async function deleteGroup(ctx: Context<{ yes?: boolean }>, kind: "organization" | "folder", group: Group) {
  const { session, print, opts, io } = ctx;
  const path = (await groupPaths(session, [group.uid])).get(group.uid) ?? group.name;
  const what = `the ${kind} ${path} (${group.uid})`;
  const holds = await contentsOf(session, group.uid);
  if (holds.length)
    throw new CliError(
      `cannot delete ${what}: it holds ${inWords(holds)}, and the server deletes only an empty group ` +
        "(nothing left in it: child groups, repos, identities, roles, role bindings, invites, identity providers). " +
        "Delete those first.",
    );
  await confirm(io, `Delete ${what}? It is empty; this cannot be undone.`, opts.yes);
  await session.call(() => session.client(GroupsService).deleteGroup({ uid: group.uid }));
  print.done(`deleted ${kind} ${path} (${group.uid})`, { id: group.uid, json: {} });
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
      print.one(groupView, await resolveGroup(session, ref, { root: true }));
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
      description: "delete an organization (the server deletes only an empty one)",
      examples: ["bulwark iam organizations delete acme --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async (ctx, ref: string) => deleteGroup(ctx, "organization", await resolveGroup(ctx.session, ref, { root: true })),
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
      const parent = await parentUid(session);
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
      const parent = await parentUid(session, "folders create");
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
      description: "delete a folder (the server deletes only an empty one)",
      examples: ["bulwark iam folders delete acme/team/builds --yes", "bulwark iam folders delete <uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async (ctx, ref: string) => {
      const group = await resolveGroup(ctx.session, ref);
      if (!group.uid.includes("/"))
        throw new UsageError(`${group.name} is an organization: use \`bulwark iam organizations delete\``);
      await deleteGroup(ctx, "folder", group);
    },
  );
}
