// `bulwark iam roles`: built-in and custom roles, and the capability names a role is made of.
// Capabilities are typed by the names the API's v1 interface and `auth token capabilities` use
// ("groups.list"), checked here against the generated enum before anything is sent.
import { create, getOption } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import type { Command } from "commander";
import {
  Capability,
  CapabilitySchema,
  internal_only,
  name as capabilityNameOption,
} from "../../gen/capabilities/capabilities_pb.js";
import { RoleSchema, RolesService, type Role } from "../../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { parentUid, resolveRole } from "../resolve.js";
import { clientCommand, examples, repeatable, run } from "../command.js";
import { confirm } from "../confirm.js";
import { CliError, UsageError } from "../errors.js";
import { listAll, messageView, time, type View } from "../output.js";
import type { Session } from "../session.js";

/** A capability as people type it ("groups.list"); the enum's name when it has no other. */
export function capabilityName(capability: Capability): string {
  const value = CapabilitySchema.value[capability];
  return (value && getOption(value, capabilityNameOption)) || Capability[capability] || String(capability);
}

interface CapabilityInfo {
  name: string;
  value: Capability;
  /** the platform's own services hold it; no role may */
  internal: boolean;
}

const CAPABILITIES: CapabilityInfo[] = CapabilitySchema.values
  .filter((v) => v.number !== Capability.UNKNOWN)
  .map((v) => ({
    name: capabilityName(v.number),
    value: v.number as Capability,
    internal: v.number === Capability.CAP_INTERNAL || getOption(v, internal_only),
  }));

const BY_NAME = new Map<string, CapabilityInfo>();
for (const info of CAPABILITIES) {
  BY_NAME.set(info.name, info);
  BY_NAME.set(Capability[info.value], info); // CAP_IAM_GROUPS_LIST works too
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++)
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

/** Grantable capability names a mistyped one was probably meant to be, best first. */
function closeMatches(typed: string): string[] {
  const text = typed.toLowerCase();
  return CAPABILITIES.filter((c) => !c.internal)
    .map((c) => ({ name: c.name, distance: c.name.includes(text) ? 0 : editDistance(text, c.name) }))
    .filter((c) => c.distance <= Math.max(2, Math.floor(text.length / 4)))
    .sort((a, b) => a.distance - b.distance || a.name.localeCompare(b.name))
    .slice(0, 5)
    .map((c) => c.name);
}

/** Capability names (repeated flags, each possibly comma-separated) as enum values; a typo is a UsageError. */
export function parseCapabilities(lists: string[]): Capability[] {
  const names = lists
    .flatMap((l) => l.split(","))
    .map((n) => n.trim())
    .filter(Boolean);
  if (names.length === 0)
    throw new UsageError("name at least one capability (see `bulwark iam roles capabilities list`)");
  return names.map((typed) => {
    const info = BY_NAME.get(typed);
    if (!info) {
      const near = closeMatches(typed);
      throw new UsageError(
        `unknown capability ${JSON.stringify(typed)}` +
          (near.length ? `: did you mean ${near.join(", ")}?` : "") +
          " (`bulwark iam roles capabilities list` names them all)",
      );
    }
    if (info.internal) throw new UsageError(`${info.name} is for the platform's own services: no role may hold it`);
    return info.value;
  });
}

const isBuiltin = (role: Role) => !role.uid.includes("/");

export const roleView = messageView(RoleSchema, [
  { header: "ID", value: (r) => r.uid },
  { header: "NAME", value: (r) => r.name },
  { header: "DESCRIPTION", value: (r) => r.description, max: 40 },
  { header: "CAPABILITIES", value: (r) => r.capabilities.map(capabilityName).join(", "), max: 50 },
  { header: "BUILT-IN", value: (r) => (isBuiltin(r) ? "yes" : "no") },
  { header: "CREATED", value: (r) => time(r.createTime), wide: true },
]);

const capabilityView: View<CapabilityInfo> = {
  columns: [
    { header: "NAME", value: (c) => c.name },
    { header: "ENUM", value: (c) => Capability[c.value] ?? String(c.value), wide: true },
    { header: "INTERNAL", value: (c) => (c.internal ? "yes" : "no"), wide: true },
  ],
  id: (c) => c.name,
  json: (c) => ({ name: c.name, enum: Capability[c.value], internal: c.internal }),
};

async function listRolePages(
  session: Session,
  filter: { descendantsOf?: string; inRoot?: boolean; name?: string },
  limit?: number,
): Promise<Role[]> {
  const client = session.client(RolesService);
  return listAll(async (pageToken, pageSize) => {
    const res = await session.call(() =>
      client.listRoles({
        uidp: { descendantsOf: filter.descendantsOf ?? "", inRoot: filter.inRoot ?? false },
        name: filter.name ?? "",
        pageSize,
        pageToken,
      }),
    );
    return { items: res.roles, nextPageToken: res.nextPageToken };
  }, limit);
}

/** Built-in roles first, then the custom ones under `parent` (all levels), or every custom role visible. */
export async function listRoles(
  session: Session,
  filter: { parent?: string; name?: string },
  limit = 0,
): Promise<Role[]> {
  const builtins = await listRolePages(session, { inRoot: true, name: filter.name }, limit);
  if (limit > 0 && builtins.length >= limit) return builtins.slice(0, limit);
  const custom = (await listRolePages(session, { descendantsOf: filter.parent, name: filter.name })).filter(
    (r) => !isBuiltin(r),
  );
  const all = [...builtins, ...custom];
  return limit > 0 ? all.slice(0, limit) : all;
}

interface RoleUpdateFlags {
  name?: string;
  description?: string;
  capabilities?: string[];
  addCapabilities?: string[];
  removeCapabilities?: string[];
}

/** The new capability set an update asks for, or undefined when it leaves them alone. */
function updatedCapabilities(flags: RoleUpdateFlags, current: Role): Capability[] | undefined {
  const adding = flags.addCapabilities !== undefined || flags.removeCapabilities !== undefined;
  if (flags.capabilities !== undefined && adding)
    throw new UsageError("--capabilities replaces the set: use it alone, or --add-capabilities/--remove-capabilities");
  if (flags.capabilities !== undefined) return parseCapabilities(flags.capabilities);
  if (!adding) return undefined;
  const set = new Set(current.capabilities);
  for (const c of flags.addCapabilities ? parseCapabilities(flags.addCapabilities) : []) set.add(c);
  for (const c of flags.removeCapabilities ? parseCapabilities(flags.removeCapabilities) : []) set.delete(c);
  if (set.size === 0) throw new UsageError("a role needs at least one capability: this would remove them all");
  return [...set];
}

export function registerRoles(iam: Command): void {
  const roles = examples(
    iam.command("roles").alias("role").description("roles: named sets of capabilities (built-in and custom)"),
    ["bulwark iam roles list --parent <group uid>", "bulwark iam roles capabilities list"],
  );

  run<{ name?: string }>(
    clientCommand(roles, "list", {
      description: "list the built-in roles and the custom roles under --parent (all levels), or all you can see",
      examples: [
        "bulwark iam roles list",
        "bulwark iam roles list --parent <org uid> -o wide",
        "bulwark iam roles list --name viewer -o id",
      ],
      parent: true,
      list: true,
    }).option("--name <name>", "only roles with this name"),
    async ({ session, print, opts }) => {
      print.list(roleView, await listRoles(session, { parent: await parentUid(session), name: opts.name }, opts.limit));
    },
  );

  run(
    clientCommand(roles, "describe <role>", {
      description: "show one role (by uid or name) with all its capabilities",
      examples: ["bulwark iam roles describe viewer -o wide", "bulwark iam roles describe <uid> -o json"],
    }),
    async ({ session, print }, ref: string) => {
      print.one(roleView, await resolveRole(session, ref));
    },
  );

  run<{ description?: string; capabilities?: string[] }>(
    clientCommand(roles, "create <name>", {
      description: "create a custom role in --parent",
      examples: [
        "bulwark iam roles create deployer --parent <org uid> --capabilities repo.list,manifest.list",
        'bulwark iam roles create auditor --capabilities groups.list --capabilities roles.list --description "reads IAM"',
      ],
      parent: true,
    })
      .option("--capabilities <names>", "its capabilities, comma-separated (repeatable)", repeatable)
      .option("--description <text>", "what it is for"),
    async ({ session, print, opts }, name: string) => {
      if (!opts.capabilities)
        throw new UsageError("roles create needs --capabilities (`bulwark iam roles capabilities list` names them)");
      const capabilities = parseCapabilities(opts.capabilities);
      const parent = await parentUid(session, "roles create");
      const role = await session.call(() =>
        session
          .client(RolesService)
          .createRole({ parent, role: { name, description: opts.description ?? "", capabilities } }),
      );
      print.one(roleView, role);
    },
  );

  run<RoleUpdateFlags>(
    clientCommand(roles, "update <role>", {
      description: "rename a custom role, change its description, or change its capabilities",
      examples: [
        "bulwark iam roles update <uid> --add-capabilities repo.create --remove-capabilities repo.delete",
        'bulwark iam roles update deployer --capabilities repo.list,tag.list --description "lists images"',
      ],
    })
      .option("--name <name>", "its new name")
      .option("--description <text>", "its new description")
      .option("--capabilities <names>", "replace its capabilities with these, comma-separated (repeatable)", repeatable)
      .option("--add-capabilities <names>", "add these capabilities, comma-separated (repeatable)", repeatable)
      .option("--remove-capabilities <names>", "remove these capabilities, comma-separated (repeatable)", repeatable),
    async ({ session, print, opts }, ref: string) => {
      const anything = [opts.name, opts.description, opts.capabilities, opts.addCapabilities, opts.removeCapabilities];
      if (anything.every((v) => v === undefined))
        throw new UsageError(
          "nothing to change: pass --name, --description, --capabilities, --add-capabilities or --remove-capabilities",
        );
      // Names are checked before anything is read from the server.
      for (const list of [opts.capabilities, opts.addCapabilities, opts.removeCapabilities])
        if (list) parseCapabilities(list);
      const current = await resolveRole(session, ref);
      if (isBuiltin(current))
        throw new CliError(`${current.name} is a built-in role: it cannot be changed (create a custom one)`);
      const capabilities = updatedCapabilities(opts, current);
      const paths = [
        ...(opts.name !== undefined ? ["name"] : []),
        ...(opts.description !== undefined ? ["description"] : []),
        ...(capabilities !== undefined ? ["capabilities"] : []),
      ];
      const role = await session.call(() =>
        session.client(RolesService).updateRole({
          role: {
            uid: current.uid,
            name: opts.name ?? current.name,
            description: opts.description ?? current.description,
            capabilities: capabilities ?? current.capabilities,
          },
          updateMask: create(FieldMaskSchema, { paths }),
        }),
      );
      print.one(roleView, role);
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(roles, "delete <role>", {
      description: "delete a custom role (by uid or name)",
      examples: ["bulwark iam roles delete <uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, ref: string) => {
      const role = await resolveRole(session, ref);
      if (isBuiltin(role)) throw new CliError(`${role.name} is a built-in role: it cannot be deleted`);
      await confirm(io, `Delete the role ${role.name} (${role.uid})?`, opts.yes);
      await session.call(() => session.client(RolesService).deleteRole({ uid: role.uid }));
      print.done(`deleted role ${role.name} (${role.uid})`, { id: role.uid, json: {} });
    },
  );

  const capabilities = examples(roles.command("capabilities").description("the capabilities roles are made of"), [
    "bulwark iam roles capabilities list",
  ]);
  run<{ all?: boolean }>(
    clientCommand(capabilities, "list", {
      description: "list the capability names a role may hold (no server needed)",
      examples: ["bulwark iam roles capabilities list", "bulwark iam roles capabilities list -o wide --all"],
    }).option("--all", "also the platform's internal capabilities, which no role may hold"),
    async ({ print, opts }) => {
      // Plain code-unit order, so `sort` in a shell agrees.
      const shown = CAPABILITIES.filter((c) => opts.all || !c.internal).sort((a, b) => (a.name < b.name ? -1 : 1));
      print.list(capabilityView, shown);
    },
  );
}
