// Repository names: `<organization name or uid>/<group>/.../<repo path>`. The first segment is an
// organization (a root group) by uid, or by name when exactly one organization has it; each
// following segment descends into a child group (by name or by its uid's last segment) as long
// as one exists; the rest is the repo path inside the deepest group reached. Groups are read
// through iam's group directory, repos through the registry's own repository.
import type { GroupDirectory, GroupRef } from "../iam/api.js";
import type { RepoRef } from "./storage/repos.js";

/** The OCI distribution spec's repository name grammar: path components like this, joined by "/". */
export const REPO_NAME_COMPONENT = "[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*";
const COMPONENT = new RegExp(`^${REPO_NAME_COMPONENT}$`);
/** The spec's tag grammar. */
export const TAG_PATTERN = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;
export const MAX_NAME_LENGTH = 255;

export function isRepositoryName(name: string): boolean {
  return name.length <= MAX_NAME_LENGTH && name.split("/").every((c) => COMPONENT.test(c));
}

export interface ResolvedName {
  /** the name as the client wrote it */
  name: string;
  /** the deepest group the name reaches */
  group: GroupRef;
  /** the repo path inside that group ("app", "tools/app") */
  path: string;
  /** the repo, when it exists */
  repo?: RepoRef;
}

/** What names need of the repos: one found by group and path, and every repo under some subtrees. */
export interface RepoLookup {
  ref(parentUid: string, name: string): Promise<RepoRef | undefined>;
  /** every repo under the given subtrees ("all": everywhere): its path and group */
  catalog(visibility: "all" | readonly string[]): Promise<{ name: string; parent_uid: string }[]>;
}

export class RepositoryNames {
  constructor(
    private readonly groups: GroupDirectory,
    private readonly repos: RepoLookup,
  ) {}

  /** Resolves a repository name; undefined when its organization does not exist (or is ambiguous). */
  async resolve(name: string): Promise<ResolvedName | undefined> {
    const segments = name.split("/");
    if (segments.length < 2) return undefined;
    const roots = await this.groups.rootsByUidOrName(segments[0]!);
    if (roots.length !== 1) return undefined;
    let group = roots[0]!;
    let i = 1;
    // Descend while a child group matches and at least one segment is left for the repo path.
    for (; i < segments.length - 1; i++) {
      const child = await this.groups.childByNameOrSegment(group.uid, segments[i]!);
      if (!child) break;
      group = child;
    }
    const path = segments.slice(i).join("/");
    return { name, group, path, repo: await this.repos.ref(group.uid, path) };
  }

  /** The names of every repo under the given subtrees ("all": everywhere), sorted. */
  async catalog(visibility: "all" | readonly string[]): Promise<string[]> {
    if (visibility !== "all" && visibility.length === 0) return [];
    return (await this.namesOf(await this.repos.catalog(visibility))).sort();
  }

  /** The names the catalog lists for these repos (same order). */
  async namesOf(repos: readonly { name: string; parent_uid: string }[]): Promise<string[]> {
    const chains = repos.map((r) => ancestry(r.parent_uid));
    const groups = new Map<string, GroupRef>();
    for (const g of await this.groups.byUids([...new Set(chains.flat())])) groups.set(g.uid, g);
    const entries = repos.map((r, i) => ({
      repo: r.name,
      groups: chains[i]!.map((uid) => groups.get(uid) ?? { uid, name: "" }),
    }));
    const roots = [...new Set(entries.map((e) => e.groups[0]!.name))];
    const counts = await this.groups.rootNameCounts(roots);
    const unique = new Set(roots.filter((r) => counts.get(r) === 1));
    return entries.map((e) => canonicalName(e.groups, e.repo, unique));
  }
}

/** A group's uid and its ancestors', root first. */
function ancestry(groupUid: string): string[] {
  const parts = groupUid.split("/");
  return parts.map((_, i) => parts.slice(0, i + 1).join("/"));
}

/**
 * The name a catalog lists for a repo: each group by its name when that name is a valid path
 * component (and, for an organization, unique), else by its uid (segment).
 */
export function canonicalName(groups: GroupRef[], repoPath: string, uniqueRootNames: ReadonlySet<string>): string {
  const parts = groups.map((g, i) => {
    const byName = COMPONENT.test(g.name) && (i > 0 || uniqueRootNames.has(g.name));
    return byName ? g.name : i === 0 ? g.uid : g.uid.slice(g.uid.lastIndexOf("/") + 1);
  });
  return [...parts, repoPath].join("/");
}
