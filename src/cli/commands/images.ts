// `bulwark images`: the registry's repos and tags (through the Repos and Tags APIs), the images
// in a group with their tags, and a tag's history (the registry's own extension endpoint).
import { create, toJson, type MessageInitShape } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { Option, type Command } from "commander";
import { RegistryExtensionsService } from "../../gen/bulwark/registry/v1/visibility_pb.js";
import {
  CatalogTier,
  RepoSchema,
  ReposService,
  type Repo,
} from "../../gen/chainguard/platform/registry/v2beta1/repos_pb.js";
import { TagSchema, TagsService, type Tag } from "../../gen/chainguard/platform/registry/v2beta1/tags_pb.js";
import type { UIDPFilterSchema } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { clientCommand, repeatable, run } from "../command.js";
import { confirm } from "../confirm.js";
import { CliError, UsageError, unreachable } from "../errors.js";
import { listAll, messageView, time, type Printer, type View } from "../output.js";
import type { Session } from "../session.js";
import { parentUid, repoPaths, resolveRepo } from "../resolve.js";
import { countText, registerImageContents, vulnerabilityCounts } from "./images-contents.js";

function tierName(tier: CatalogTier): string {
  return tier === CatalogTier.UNSPECIFIED ? "" : (CatalogTier[tier] ?? String(tier)).toLowerCase();
}

const TIER_NAMES = Object.keys(CatalogTier)
  .filter((k) => Number.isNaN(Number(k)) && k !== "UNSPECIFIED")
  .map((k) => k.toLowerCase());

function parseTier(value: string): CatalogTier {
  const tier = CatalogTier[value.toUpperCase().replace(/^CATALOG_TIER_/, "") as keyof typeof CatalogTier];
  if (tier === undefined)
    throw new UsageError(`--catalog-tier must be one of ${TIER_NAMES.join(", ")} (got ${JSON.stringify(value)})`);
  return tier;
}

/** "sha256:0123456789ab…" reads better in a table than 71 characters. */
const DIGEST_IN_TABLE = 19;

/** Repos as a table: NAME is the full name the registry knows (`acme/team/app`), by uid from `paths`. */
export const repoView = (paths: ReadonlyMap<string, string>) =>
  messageView(RepoSchema, [
    { header: "ID", value: (r) => r.uid },
    { header: "NAME", value: (r) => paths.get(r.uid) ?? r.name },
    { header: "DESCRIPTION", value: (r) => r.description, max: 40 },
    { header: "TIER", value: (r) => tierName(r.catalogTier), wide: true },
    { header: "BUNDLES", value: (r) => r.bundles.join(", "), wide: true },
    { header: "ALIASES", value: (r) => r.aliases.join(", "), wide: true },
    { header: "ACTIVE TAGS", value: (r) => r.activeTags.join(", "), wide: true },
    { header: "CREATED", value: (r) => time(r.createTime), wide: true },
    { header: "UPDATED", value: (r) => time(r.updateTime), wide: true },
  ]);

/** One repo (with its full name and, when known, whether it is public), as a command that changed it prints it. */
async function printRepo(session: Session, print: Printer, repo: Repo, isPublic?: boolean): Promise<void> {
  const view = repoView(await repoPaths(session, [repo]));
  if (isPublic === undefined) return print.one(view, repo);
  print.one(
    {
      columns: [
        ...view.columns.slice(0, 2),
        { header: "PUBLIC", value: () => (isPublic ? "yes" : "no") },
        ...view.columns.slice(2),
      ],
      id: view.id,
      json: (r: Repo) => ({ ...(view.json(r) as object), public: isPublic }),
    },
    repo,
  );
}

/** Tags as a table; VULNS: the count of the newest report of ours for the tag's image (`counts`, by digest). */
export const tagView = (counts: ReadonlyMap<string, number>) =>
  messageView(TagSchema, [
    { header: "ID", value: (t) => t.uid },
    { header: "NAME", value: (t) => t.name },
    { header: "DIGEST", value: (t) => t.digest, max: DIGEST_IN_TABLE },
    { header: "VULNS", value: (t) => countText(counts, t.digest) },
    { header: "UPDATED", value: (t) => time(t.updateTime) },
    { header: "DEPRECATED", value: (t) => (t.deprecated ? "yes" : "no") },
  ]);

/** A repo with its full name and its tags, for `images list`. */
interface Image {
  repo: Repo;
  path: string;
  tags: Tag[];
  /** the vulnerability count of the image its most recently updated tag names; undefined: no report of ours */
  vulnerabilities?: number;
}

/** The tag updated last (the image a repo's row stands for), if any. */
const newestTag = (tags: readonly Tag[]) =>
  tags.reduce<Tag | undefined>((a, b) => (!a || time(b.updateTime) > time(a.updateTime) ? b : a), undefined);

const newestTime = (image: Image) =>
  image.tags.map((t) => time(t.updateTime)).reduce((a, b) => (b > a ? b : a), time(image.repo.updateTime));

const imageView: View<Image> = {
  columns: [
    { header: "ID", value: (i) => i.repo.uid, wide: true },
    { header: "REPO", value: (i) => i.path },
    { header: "TAGS", value: (i) => i.tags.map((t) => t.name).join(", "), max: 40 },
    {
      header: "DIGESTS",
      value: (i) => [...new Set(i.tags.map((t) => t.digest))].join(", "),
      wide: true,
    },
    { header: "VULNS", value: (i) => String(i.vulnerabilities ?? "-") },
    { header: "UPDATED", value: newestTime },
  ],
  id: (i) => i.repo.uid,
  json: (i) => ({ ...(toJson(RepoSchema, i.repo) as object), tags: i.tags.map((t) => toJson(TagSchema, t)) }),
};

interface HistoryRecord {
  updateTimestamp: string;
  digest: string;
}

const historyView: View<HistoryRecord> = {
  columns: [
    { header: "UPDATED", value: (h) => h.updateTimestamp.replace(/\.\d+Z$/, "Z") },
    { header: "DIGEST", value: (h) => h.digest },
  ],
  id: (h) => h.digest,
  json: (h) => h,
};

type UidpFilter = MessageInitShape<typeof UIDPFilterSchema>;

/**
 * Lists cover the whole subtree of --parent (as the hosted CLI's do); without it, everything
 * visible. Repos and tags come sorted by name, for people to find them.
 */
const under = (parent: string | undefined): UidpFilter | undefined => (parent ? { descendantsOf: parent } : undefined);

export async function listRepos(session: Session, parent: string | undefined, name?: string, limit?: number) {
  const client = session.client(ReposService);
  return listAll(async (pageToken, pageSize) => {
    const res = await session.call(() =>
      client.listRepos({ uidp: under(parent), name, orderBy: "name", pageSize, pageToken }),
    );
    return { items: res.repos, nextPageToken: res.nextPageToken };
  }, limit);
}

async function listTags(session: Session, uidp: UidpFilter | undefined, limit?: number) {
  const client = session.client(TagsService);
  return listAll(async (pageToken, pageSize) => {
    const res = await session.call(() => client.listTags({ uidp, orderBy: "name", pageSize, pageToken }));
    return { items: res.tags, nextPageToken: res.nextPageToken };
  }, limit);
}

/**
 * An image reference `[<registry>/]<org>/<image>[:<tag>]`. Like docker, a first segment is a
 * registry when it has a port, is localhost, or has a dot and more segments follow; it is also
 * one when it is the configured registry.
 */
export function parseImageRef(ref: string, defaultRegistry: string): { registry: string; name: string; tag?: string } {
  if (ref.includes("@")) throw new UsageError(`${JSON.stringify(ref)}: a tag's history is asked by tag, not digest`);
  let rest = ref;
  let tag: string | undefined;
  const colon = rest.lastIndexOf(":");
  if (colon > rest.lastIndexOf("/")) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  const segments = rest.split("/");
  const first = segments[0]!;
  const isRegistry =
    segments.length > 1 &&
    (first === defaultRegistry ||
      first.includes(":") ||
      first === "localhost" ||
      (first.includes(".") && segments.length > 2));
  const registry = isRegistry ? first : defaultRegistry;
  const name = (isRegistry ? segments.slice(1) : segments).join("/");
  if (name.split("/").length < 2 || name.split("/").some((s) => s === "") || tag === "")
    throw new UsageError(`${JSON.stringify(ref)} is not an image reference: [<registry>/]<organization>/<image>:<tag>`);
  return { registry, name, tag };
}

/**
 * The registry's base URL. The same server serves the API and the registry, so the registry
 * speaks the API's scheme when it is on the API's host; elsewhere https, except loopback (as docker).
 */
function registryUrl(session: Session, registry: string): string {
  const api = new URL(session.apiUrl);
  if (registry === api.host) return `${api.protocol}//${registry}`;
  const host = registry.replace(/:\d+$/, "");
  const loopback = host === "localhost" || host.startsWith("127.") || host === "[::1]";
  return `${loopback ? "http" : "https"}://${registry}`;
}

function checkTime(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{4}-\d\d-\d\dT/.test(value) || Number.isNaN(Date.parse(value)))
    throw new UsageError(`${flag} must be an RFC 3339 time, e.g. 2024-01-31T00:00:00Z (got ${JSON.stringify(value)})`);
  return value;
}

/** GET `<registry>/v2/<name>/_chainguard/history/<tag>` with a registry token: the tag's digests, oldest first. */
async function tagHistory(
  session: Session,
  ref: { registry: string; name: string; tag: string },
  range: { start?: string; end?: string },
): Promise<HistoryRecord[]> {
  // Only this platform's registry gets our tokens.
  if (ref.registry !== session.registryHost)
    throw new CliError(
      `${ref.registry} is not this platform's registry (${session.registryHost}): name an image there, ` +
        "or set the registry with --registry / `bulwark config set registry <host>`",
    );
  const { token } = await session.token(ref.registry);
  const url = new URL(
    `${registryUrl(session, ref.registry)}/v2/${ref.name}/_chainguard/history/${encodeURIComponent(ref.tag)}`,
  );
  if (range.start) url.searchParams.set("start", range.start);
  if (range.end) url.searchParams.set("end", range.end);
  let res: Response;
  try {
    res = await fetch(url, { headers: { authorization: `Bearer ${token}`, accept: "application/json" } });
  } catch (err) {
    throw unreachable(url.origin, err) ?? new CliError(`cannot reach ${url.origin}: ${(err as Error).message}`);
  }
  const body = (await res.json().catch(() => undefined)) as
    { history?: HistoryRecord[]; errors?: { code?: string; message?: string }[] } | undefined;
  if (!res.ok) {
    const said = body?.errors?.map((e) => e.message || e.code).join("; ") || res.statusText;
    const what = `${ref.registry}/${ref.name}:${ref.tag}`;
    if (res.status === 404) throw new CliError(`no history for ${what}: ${said}`);
    throw new CliError(`the registry refused the history of ${what} (${res.status}): ${said}`);
  }
  const history = body?.history ?? [];
  return [...history].sort((a, b) => Date.parse(a.updateTimestamp) - Date.parse(b.updateTimestamp));
}

/** The repo fields an update names (its visibility is another resource, `visibility` says whether it changes too). */
function updateMask(
  opts: { name?: string; description?: string; catalogTier?: string },
  visibility: boolean,
): string[] {
  const paths = [
    ...(opts.name !== undefined ? ["name"] : []),
    ...(opts.description !== undefined ? ["description"] : []),
    ...(opts.catalogTier !== undefined ? ["catalog_tier"] : []),
  ];
  if (!paths.length && !visibility)
    throw new UsageError("nothing to change: pass --name, --description, --catalog-tier, --public or --private");
  return paths;
}

export function registerImages(program: Command): void {
  const images = program
    .command("images")
    .description("the registry's images: repos, their tags, tag history, and what is inside them");
  registerImageContents(images);

  run(
    clientCommand(images, "list", {
      description: "list the repos under --parent (all levels; default: all you can see) with their tags",
      examples: ["bulwark images list --parent <org uid>", "bulwark images list -o wide   # with digests"],
      parent: true,
      list: true,
    }),
    async ({ session, print, opts }) => {
      const parent = await parentUid(session);
      const repos = await listRepos(session, parent, undefined, opts.limit);
      const paths = await repoPaths(session, repos);
      // One list of every tag in the subtree (sorted by name) rather than one per repo: a tag's uid
      // extends its repo's.
      const tags = await listTags(session, under(parent));
      const byRepo = new Map<string, Tag[]>();
      for (const tag of tags) {
        const repoUid = tag.uid.slice(0, tag.uid.lastIndexOf("/"));
        const list = byRepo.get(repoUid) ?? [];
        byRepo.set(repoUid, list);
        list.push(tag);
      }
      const rows: Image[] = [];
      for (const repo of repos) {
        const repoTags = byRepo.get(repo.uid) ?? [];
        const shown = newestTag(repoTags);
        // one ListVulnReports per repo that has a tag to count for
        const counted = shown && print.format !== "json" && print.format !== "id";
        const vulnerabilities = counted ? (await vulnerabilityCounts(session, repo.uid)).get(shown.digest) : undefined;
        rows.push({ repo, path: paths.get(repo.uid) ?? repo.name, tags: repoTags, vulnerabilities });
      }
      print.list(imageView, rows);
    },
  );

  const repos = images.command("repos").alias("repo").description("repos: the images of a group");

  run<{ name?: string }>(
    clientCommand(repos, "list", {
      description: "list the repos under --parent (all levels; default: all you can see)",
      examples: ["bulwark images repos list --parent <org uid>", "bulwark images repos list --name app -o json"],
      parent: true,
      list: true,
    }).option("--name <name>", "only repos with this name"),
    async ({ session, print, opts }) => {
      const found = await listRepos(session, await parentUid(session), opts.name, opts.limit);
      print.list(repoView(await repoPaths(session, found)), found);
    },
  );

  run<{ description?: string; catalogTier?: string; alias?: string[]; bundle?: string[] }>(
    clientCommand(repos, "create <name>", {
      description: "create a repo in --parent (pushing to <org>/<name> also creates it)",
      examples: [
        'bulwark images repos create app --parent <org uid> --description "our app"',
        "bulwark images repos create tools/builder --parent <folder uid> --catalog-tier devtools",
      ],
      parent: true,
    })
      .option("--description <text>", "what it is for")
      .option("--catalog-tier <tier>", `its catalog tier (${TIER_NAMES.join(", ")})`)
      .option("--alias <alias>", "another name it is known by (repeatable)", repeatable)
      .option("--bundle <bundle>", "a bundle it belongs to (repeatable)", repeatable),
    async ({ session, print, opts }, name: string) => {
      const parent = await parentUid(session, "images repos create");
      const repo = await session.call(() =>
        session.client(ReposService).createRepo({
          parent,
          repo: {
            name,
            description: opts.description ?? "",
            catalogTier: opts.catalogTier === undefined ? CatalogTier.UNSPECIFIED : parseTier(opts.catalogTier),
            aliases: opts.alias ?? [],
            bundles: opts.bundle ?? [],
          },
        }),
      );
      await printRepo(session, print, repo);
    },
  );

  run<{ name?: string; description?: string; catalogTier?: string; public?: boolean; private?: boolean }>(
    clientCommand(repos, "update <repo>", {
      description:
        "rename a repo, change its description or catalog tier, or make it public or private " +
        "(repo: uid or <org>/[<folder>/…]<image>)",
      examples: [
        'bulwark images repos update acme/app --description "the storefront"',
        "bulwark images repos update acme/team/app --public   # anyone may pull it without credentials",
        "bulwark images repos update <repo uid> --name storefront --private",
      ],
    })
      .option("--name <name>", "its new name")
      .option("--description <text>", "its new description")
      .option("--catalog-tier <tier>", `its new catalog tier (${TIER_NAMES.join(", ")})`)
      .addOption(new Option("--public", "anyone may pull it, without credentials").conflicts("private"))
      .addOption(new Option("--private", "only callers allowed to pull it may (the default)").conflicts("public")),
    async ({ session, print, opts }, ref: string) => {
      const visibility = opts.public ? true : opts.private ? false : undefined;
      const paths = updateMask(opts, visibility !== undefined);
      const tier = opts.catalogTier === undefined ? undefined : parseTier(opts.catalogTier);
      let repo = await resolveRepo(session, ref);
      if (paths.length) {
        const current = repo;
        repo = await session.call(() =>
          session.client(ReposService).updateRepo({
            repo: {
              uid: current.uid,
              name: opts.name ?? current.name,
              description: opts.description ?? current.description,
              catalogTier: tier ?? current.catalogTier,
            },
            updateMask: create(FieldMaskSchema, { paths }),
          }),
        );
      }
      if (visibility === undefined) return printRepo(session, print, repo);
      const updated = await session.call(() =>
        session.client(RegistryExtensionsService).updateRepoVisibility({
          visibility: { uid: repo.uid, public: visibility },
          updateMask: create(FieldMaskSchema, { paths: ["public"] }),
        }),
      );
      await printRepo(session, print, repo, updated.public);
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(repos, "delete <repo>", {
      description: "delete a repo with all its tags and manifests (repo: uid or <org>/<image>)",
      examples: ["bulwark images repos delete acme/app --yes", "bulwark images repos delete <repo uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, ref: string) => {
      const repo = await resolveRepo(session, ref);
      const path = (await repoPaths(session, [repo])).get(repo.uid) ?? repo.name;
      const tagCount = (await listTags(session, { childrenOf: repo.uid })).length;
      const tags =
        tagCount === 0 ? "It has no tags" : `Its ${tagCount === 1 ? "tag goes" : `${tagCount} tags go`} with it`;
      await confirm(io, `Delete the repo ${path} (${repo.uid})? ${tags}; this cannot be undone.`, opts.yes);
      await session.call(() => session.client(ReposService).deleteRepo({ uid: repo.uid }));
      print.done(`deleted repo ${path} (${repo.uid})`, { id: repo.uid, json: {} });
    },
  );

  const tags = images.command("tags").alias("tag").description("tags: the names of an image's versions");

  run(
    clientCommand(tags, "list <repo>", {
      description: "list a repo's tags (repo: uid or <org>/<image>)",
      examples: ["bulwark images tags list acme/app", "bulwark images tags list <repo uid> -o json"],
      list: true,
    }),
    async ({ session, print, opts }, ref: string) => {
      const repo = await resolveRepo(session, ref);
      const tags = await listTags(session, { childrenOf: repo.uid }, opts.limit);
      const counts =
        print.format === "json" || print.format === "id" ? new Map() : await vulnerabilityCounts(session, repo.uid);
      print.list(tagView(counts), tags);
    },
  );

  run<{ start?: string; end?: string; registry?: string }>(
    clientCommand(images, "history <image>", {
      description:
        "list the digests a tag has pointed to, oldest first (image: [<registry>/]<org>/<image>:<tag>, tag default latest)",
      examples: [
        "bulwark images history acme/app:latest",
        "bulwark images history registry.example.com/acme/app:1.2 --start 2024-01-01T00:00:00Z -o json",
      ],
    })
      .option("--start <time>", "only records from this RFC 3339 time")
      .option("--end <time>", "only records up to this RFC 3339 time")
      .option("--registry <host>", "the registry, when the image does not name it [env BULWARK_REGISTRY]"),
    async ({ session, print, opts }, image: string) => {
      const range = { start: checkTime("--start", opts.start), end: checkTime("--end", opts.end) };
      const ref = parseImageRef(image, session.registryHost);
      print.list(historyView, await tagHistory(session, { ...ref, tag: ref.tag ?? "latest" }, range));
    },
  );
}
