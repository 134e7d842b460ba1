// Names wherever an id goes: every command turns what the user typed (a uid, a name, a group path
// like `acme/team`, a repo ref like `acme/team/app`) into the resource here, through the API's own
// list calls, so only what the caller may see is found. A uid is taken as it is. A name that
// matches nothing is refused saying what was looked for; one that matches several is refused
// listing them, with their paths and uids.
import { GroupsService, type Group } from "../gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { IdentitiesService, type Identity } from "../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import {
  IdentityProvidersService,
  type IdentityProvider,
} from "../gen/chainguard/platform/iam/v2beta1/identity_providers_pb.js";
import { RolesService, type Role } from "../gen/chainguard/platform/iam/v2beta1/roles_pb.js";
import { ReposService, type Repo } from "../gen/chainguard/platform/registry/v2beta1/repos_pb.js";
import { ancestorsOf, isUsableFrom, isValidUidp, parentOf } from "../core/uidp.js";
import { CliError, UsageError } from "./errors.js";
import { listAll } from "./output.js";
import type { Session } from "./session.js";

/** A repo's uid: its group's uid and one more segment. */
const REPO_UID = /^[0-9a-f]{40}(\/[0-9a-f]{16})+$/;
/** A folder's uid segment (after its parent's uid). */
const UID_SEGMENT = /^[0-9a-f]{16}$/;

export interface GroupFilter {
  childrenOf?: string;
  descendantsOf?: string;
  inRoot?: boolean;
  ids?: string[];
  name?: string;
}

/** Every group a list request matches, page after page. */
export async function listGroups(session: Session, filter: GroupFilter, limit?: number): Promise<Group[]> {
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

/**
 * Each group's path of names, root first (`acme/team`), for the groups with these uids (a group's
 * own uid, or the uid of anything in it: a repo, an identity). An ancestor the caller cannot see
 * is shown by its uid (an organization) or uid segment (a folder); so is one whose organization's
 * name another visible organization shares, so that the path names one group.
 */
export async function groupPaths(session: Session, uids: Iterable<string>): Promise<Map<string, string>> {
  const wanted = [...new Set(uids)].filter(isValidUidp);
  const chains = new Map(wanted.map((uid) => [uid, ancestorsOf(uid).concat(uid)]));
  const all = [...new Set([...chains.values()].flat())];
  const groups = new Map<string, Group>();
  // One call per 200 uids: the API caps a page there.
  for (let i = 0; i < all.length; i += 200)
    for (const g of await listGroups(session, { ids: all.slice(i, i + 200) })) groups.set(g.uid, g);
  const rootNames = [...new Set([...groups.values()].filter((g) => !g.uid.includes("/")).map((g) => g.name))];
  const shared = new Set<string>();
  for (const name of rootNames) if ((await listGroups(session, { inRoot: true, name }, 2)).length > 1) shared.add(name);
  const segmentOf = (uid: string) => {
    const g = groups.get(uid);
    const root = !uid.includes("/");
    if (g && !(root && shared.has(g.name))) return g.name;
    return root ? uid : uid.slice(uid.lastIndexOf("/") + 1);
  };
  return new Map([...chains].map(([uid, chain]) => [uid, chain.map(segmentOf).join("/")]));
}

/** Refuses a name that matched several groups: how many, and each by its path and uid. */
async function ambiguous(session: Session, what: string, uids: string[]): Promise<CliError> {
  const paths = await groupPaths(session, uids);
  const lines = uids.map((uid) => `  ${paths.get(uid) ?? uid} (${uid})`);
  return new CliError(`${uids.length} ${what}; name one by its path or uid:\n${lines.join("\n")}`);
}

/**
 * A group by uid, by name (anywhere the caller can see), or by its path of names from its
 * organization (`acme/team/builds`; a segment may also be an organization's uid or a folder's uid
 * segment). With `root`, only organizations.
 */
export async function resolveGroup(session: Session, ref: string, options: { root?: boolean } = {}): Promise<Group> {
  const what = options.root ? "organization" : "group";
  if (isValidUidp(ref)) {
    const group = await session.call(() => session.client(GroupsService).getGroup({ uid: ref }));
    if (options.root && group.uid.includes("/"))
      throw new CliError(`${ref} is a folder, not an organization: use \`bulwark iam folders\``);
    return group;
  }
  const segments = ref.split("/");
  if (segments.some((s) => s.trim() === ""))
    throw new UsageError(`${JSON.stringify(ref)} names no ${what}: give a uid, a name, or a path like acme/team`);
  if (options.root && segments.length > 1)
    throw new UsageError(`${JSON.stringify(ref)} is a path: an organization is named by its name or uid alone`);
  const last = segments[segments.length - 1]!;
  let found = await listGroups(session, { name: last, inRoot: options.root });
  if (segments.length > 1) {
    // The path must lead from an organization down to the group, segment by segment.
    const chainsOf = found.map((g) => ancestorsOf(g.uid).concat(g.uid));
    const ancestors = [...new Set(chainsOf.flatMap((c) => c.slice(0, -1)))];
    const names = new Map<string, string>();
    for (let i = 0; i < ancestors.length; i += 200)
      for (const g of await listGroups(session, { ids: ancestors.slice(i, i + 200) })) names.set(g.uid, g.name);
    const matches = (uid: string, segment: string) =>
      names.get(uid) === segment ||
      uid === segment ||
      (UID_SEGMENT.test(segment) && uid.endsWith(`/${segment}`) && uid.includes("/"));
    found = found.filter((_, i) => {
      const chain = chainsOf[i]!;
      return chain.length === segments.length && chain.slice(0, -1).every((uid, d) => matches(uid, segments[d]!));
    });
  }
  if (found.length === 0) {
    const lookedFor =
      segments.length > 1
        ? `no group at the path ${JSON.stringify(ref)} (an organization ${JSON.stringify(segments[0])}, then ` +
          `${segments
            .slice(1)
            .map((s) => JSON.stringify(s))
            .join(" in it, then ")}) is visible to you`
        : `no ${what} named ${JSON.stringify(ref)} is visible to you`;
    throw new CliError(
      `${lookedFor} (\`bulwark iam ${options.root ? "organizations" : "folders"} list -o tree\` shows what you can see)`,
    );
  }
  if (found.length > 1)
    throw await ambiguous(
      session,
      `${what}s are named ${JSON.stringify(ref)}`,
      found.map((g) => g.uid),
    );
  return found[0]!;
}

/** A group reference (uid, name or path) as its uid. */
export async function groupUid(session: Session, ref: string): Promise<string> {
  return isValidUidp(ref) ? ref : (await resolveGroup(session, ref)).uid;
}

/**
 * The uid of the group a command works in: --parent (a uid, name or path), else the configured
 * default group. With `required` (the command, for the message), its absence is a usage error.
 */
export async function parentUid(session: Session, required: string): Promise<string>;
export async function parentUid(session: Session): Promise<string | undefined>;
export async function parentUid(session: Session, required?: string): Promise<string | undefined> {
  const ref = required === undefined ? session.parent() : session.parent(true, required);
  return ref === undefined ? undefined : groupUid(session, ref);
}

async function listRolesNamed(session: Session, name: string): Promise<Role[]> {
  const client = session.client(RolesService);
  return listAll(async (pageToken, pageSize) => {
    const res = await session.call(() => client.listRoles({ name, pageSize, pageToken }));
    return { items: res.roles, nextPageToken: res.nextPageToken };
  });
}

/** Where a role is defined, for a candidate list: built-in roles have no group. */
const roleGroup = (r: Role) => parentOf(r.uid) ?? "";

/**
 * A role by uid or name. With `usableIn`, only a role that may be bound in that group: a
 * built-in one, or one defined there or above it.
 */
export async function resolveRole(session: Session, ref: string, usableIn?: string): Promise<Role> {
  const where = usableIn ? `usable in group ${usableIn}` : "visible to you";
  if (isValidUidp(ref)) {
    const role = await session.call(() => session.client(RolesService).getRole({ uid: ref }));
    if (usableIn && !isUsableFrom(role.uid, usableIn))
      throw new CliError(`the role ${role.name} (${role.uid}) is not ${where}`);
    return role;
  }
  const named = await listRolesNamed(session, ref);
  const found = usableIn ? named.filter((r) => isUsableFrom(r.uid, usableIn)) : named;
  if (found.length === 0)
    throw new CliError(`no role named ${JSON.stringify(ref)} is ${where} (\`bulwark iam roles list\` shows them)`);
  if (found.length > 1) {
    const paths = await groupPaths(session, found.map(roleGroup).filter(Boolean));
    const lines = found.map(
      (r) => `  ${roleGroup(r) ? `${paths.get(roleGroup(r))}/` : "(built-in) "}${r.name} (${r.uid})`,
    );
    throw new CliError(
      `${found.length} roles named ${JSON.stringify(ref)} are ${where}; name one by its uid:\n${lines.join("\n")}`,
    );
  }
  return found[0]!;
}

/** Refuses a name several resources in different groups share, each shown as <group path>/<name> (uid). */
async function sharedName(session: Session, kind: string, ref: string, found: { uid: string }[]): Promise<CliError> {
  const paths = await groupPaths(
    session,
    found.map((f) => parentOf(f.uid) ?? f.uid),
  );
  const lines = found.map((f) => `  ${paths.get(parentOf(f.uid) ?? "") ?? parentOf(f.uid)}/${ref} (${f.uid})`);
  return new CliError(
    `${found.length} ${kind} named ${JSON.stringify(ref)} are visible to you; name one by its uid:\n${lines.join("\n")}`,
  );
}

/** How to find one kind of resource that has a name: by uid, and by name through its list. */
interface NamedKind<T> {
  /** singular and plural, as messages say them */
  one: string;
  many: string;
  /** the command that lists them */
  lister: string;
  get(uid: string): Promise<T>;
  page(name: string, pageToken: string, pageSize: number): Promise<{ items: T[]; nextPageToken: string }>;
}

/** A resource by uid, or by name (which must then be unambiguous among those the caller sees). */
async function resolveNamed<T extends { uid: string }>(session: Session, ref: string, kind: NamedKind<T>): Promise<T> {
  if (isValidUidp(ref)) return session.call(() => kind.get(ref));
  const found = await listAll((pageToken, pageSize) => session.call(() => kind.page(ref, pageToken, pageSize)));
  if (found.length === 0)
    throw new CliError(`no ${kind.one} named ${JSON.stringify(ref)} is visible to you (\`${kind.lister}\` shows them)`);
  if (found.length > 1) throw await sharedName(session, kind.many, ref, found);
  return found[0]!;
}

/** An identity by uid, or by name. */
export function resolveIdentity(session: Session, ref: string): Promise<Identity> {
  const client = session.client(IdentitiesService);
  return resolveNamed(session, ref, {
    one: "identity",
    many: "identities",
    lister: "bulwark iam identities list",
    get: (uid) => client.getIdentity({ uid }),
    page: async (name, pageToken, pageSize) => {
      const res = await client.listIdentities({ name, pageSize, pageToken });
      return { items: res.identities, nextPageToken: res.nextPageToken };
    },
  });
}

/** An identity provider by uid, or by name. */
export function resolveIdentityProvider(session: Session, ref: string): Promise<IdentityProvider> {
  const client = session.client(IdentityProvidersService);
  return resolveNamed(session, ref, {
    one: "identity provider",
    many: "identity providers",
    lister: "bulwark iam identity-providers list",
    get: (uid) => client.getIdentityProvider({ uid }),
    page: async (name, pageToken, pageSize) => {
      const res = await client.listIdentityProviders({ name, pageSize, pageToken });
      return { items: res.identityProviders, nextPageToken: res.nextPageToken };
    },
  });
}

/** The child group `segment` names under `parent` (by name, or by its uid's last segment), if any. */
async function childGroup(session: Session, parent: string, segment: string): Promise<Group | undefined> {
  const byName = (await listGroups(session, { childrenOf: parent, name: segment })).filter((g) => g.name === segment);
  if (byName.length === 1) return byName[0];
  if (UID_SEGMENT.test(segment))
    return (await listGroups(session, { childrenOf: parent })).find((g) => g.uid === `${parent}/${segment}`);
  return undefined;
}

/**
 * A repo by uid, or by the name the registry knows it by: `<organization name or uid>/<image>`,
 * where leading segments that name folders descend into them (as the registry resolves names:
 * `acme/team/app` is the repo app in the folder team of acme).
 */
export async function resolveRepo(session: Session, ref: string): Promise<Repo> {
  if (REPO_UID.test(ref)) return session.call(() => session.client(ReposService).getRepo({ uid: ref }));
  const segments = ref.split("/");
  if (segments.length < 2 || segments.some((s) => s === ""))
    throw new UsageError(`${JSON.stringify(ref)} is neither a repo uid nor <organization>/[<folder>/…]<image>`);
  // Folders named by the leading segments, as deep as they go; a repo's own name may contain
  // slashes and start like a folder, so each depth is tried from the deepest up.
  const chain = [await resolveGroup(session, segments[0]!, { root: true })];
  while (chain.length < segments.length - 1) {
    const child = await childGroup(session, chain[chain.length - 1]!.uid, segments[chain.length]!);
    if (!child) break;
    chain.push(child);
  }
  const client = session.client(ReposService);
  for (let depth = chain.length - 1; depth >= 0; depth--) {
    const group = chain[depth]!;
    const path = segments.slice(depth + 1).join("/");
    const found = await session.call(() => client.listRepos({ uidp: { childrenOf: group.uid }, name: path }));
    const repo = found.repos.find((r) => r.name === path);
    if (repo) return repo;
  }
  const deepest = chain[chain.length - 1]!;
  const paths = await groupPaths(session, [deepest.uid]);
  throw new CliError(
    `no repo ${JSON.stringify(segments.slice(chain.length).join("/"))} in ${paths.get(deepest.uid)} (${deepest.uid}) ` +
      "is visible to you (`bulwark images repos list` shows them)",
  );
}

/** Each repo's full name as the registry knows it (`acme/team/app`), by repo uid. */
export async function repoPaths(session: Session, repos: Repo[]): Promise<Map<string, string>> {
  const groups = await groupPaths(
    session,
    repos.map((r) => parentOf(r.uid) ?? r.uid),
  );
  return new Map(repos.map((r) => [r.uid, `${groups.get(parentOf(r.uid) ?? "") ?? parentOf(r.uid)}/${r.name}`]));
}
