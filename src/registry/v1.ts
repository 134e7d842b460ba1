// v1 Registry (package chainguard.platform.registry) onto the v2beta1 ReposService and
// TagsService (and the extension's tag deprecation): repos and tags as v1 clients see them —
// `id`, a repo's README inline, tags' `lastUpdated` — plus the summaries v1 computed.
import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import * as v1 from "../gen/platform/registry/v1/registry.platform_pb.js";
import * as apko from "../gen/platform/registry/v1/apko.platform_pb.js";
import * as repos from "../gen/chainguard/platform/registry/v2beta1/repos_pb.js";
import * as tags from "../gen/chainguard/platform/registry/v2beta1/tags_pb.js";
import { RegistryExtensionsService } from "../gen/bulwark/registry/v1/visibility_pb.js";
import { invalidArgument, type FieldViolation } from "../core/errors.js";
import { requireUid } from "../core/validate.js";
import { found } from "../platform/outcomes.js";
import { bindService, type CallContext, type ServiceBinding, type ServiceHandlers } from "../core/service.js";
import { parentOf } from "../core/uidp.js";
import { REPLACE_ALL, delegateTo, listAll, oneOrNone, sameWire, type Delegate } from "../platform/v1.js";
import { MAX_HISTORY } from "./oci/history.js";
import type { TagsRepository } from "./storage/tags.js";
import { toTag } from "./tags.js";
import { recoverable } from "../storage/ambient-transaction.js";

function syncToV1(s: repos.SyncConfig | undefined): v1.SyncConfig | undefined {
  if (!s) return undefined;
  return create(v1.SyncConfigSchema, {
    source: s.source,
    uniqueTags: s.uniqueTags,
    expiration: s.expirationTime,
    google: s.google,
    amazon: s.amazon,
    azure: s.azure,
    apkoOverlay: s.apkoOverlay,
    gracePeriod: s.gracePeriod,
  });
}

function syncFromV1(s: v1.SyncConfig | undefined) {
  if (!s) return undefined;
  if (s.syncApks)
    throw invalidArgument({ field: "sync_config.sync_apks", description: "is not supported by this server" });
  return {
    source: s.source,
    uniqueTags: s.uniqueTags,
    expirationTime: s.expiration,
    google: s.google,
    amazon: s.amazon,
    azure: s.azure,
    apkoOverlay: s.apkoOverlay,
    gracePeriod: s.gracePeriod,
  };
}

// The overlays agree on the wire but for the certificates' field number (v1 15, v2beta1 5) and
// the accounts: v1's numbers its fields differently and its ids are uint32 (v2beta1's int32), so
// accounts are copied field by field, and an id v2beta1 cannot hold is the client's error.
function overlayToV1(o: repos.CustomOverlay | undefined): v1.CustomOverlay | undefined {
  if (!o) return undefined;
  const out = sameWire(v1.CustomOverlaySchema, repos.CustomOverlaySchema, {
    ...o,
    certificates: undefined,
    accounts: undefined,
  });
  if (o.certificates)
    out.certificates = sameWire(
      v1.CustomOverlay_CertificatesSchema,
      repos.CustomOverlay_CertificatesSchema,
      o.certificates,
    );
  if (o.accounts) out.accounts = accountsToV1(o.accounts);
  return out;
}

function overlayFromV1(o: v1.CustomOverlay | undefined): repos.CustomOverlay | undefined {
  if (!o) return undefined;
  const out = sameWire(repos.CustomOverlaySchema, v1.CustomOverlaySchema, {
    ...o,
    certificates: undefined,
    accounts: undefined,
  });
  if (o.certificates)
    out.certificates = sameWire(
      repos.CustomOverlay_CertificatesSchema,
      v1.CustomOverlay_CertificatesSchema,
      o.certificates,
    );
  if (o.accounts) out.accounts = accountsFromV1(o.accounts);
  return out;
}

function accountsToV1(a: repos.CustomOverlay_Accounts): apko.ApkoConfig_Accounts {
  // v2beta1 refuses negative ids on write; one stored before that reads as 0, not as a 500.
  const id = (n: number) => Math.max(0, n);
  return create(apko.ApkoConfig_AccountsSchema, {
    runAs: a.runAs,
    users: a.users.map((u) => ({
      uid: id(u.uid),
      userName: u.username,
      gid: id(u.gid),
      groupName: u.groupName,
      shell: u.shell,
      homeDir: u.homeDir,
    })),
    groups: a.groups.map((g) => ({ gid: id(g.gid), groupName: g.groupname, members: g.members })),
  });
}

/** The largest id v2beta1's int32 fields hold. */
const MAX_ACCOUNT_ID = 2 ** 31 - 1;

function accountsFromV1(a: apko.ApkoConfig_Accounts): repos.CustomOverlay_Accounts {
  const violations: FieldViolation[] = [];
  const id = (field: string, n: number) => {
    if (n > MAX_ACCOUNT_ID)
      violations.push({ field: `custom_overlay.accounts.${field}`, description: `must be at most ${MAX_ACCOUNT_ID}` });
    return n;
  };
  const accounts = create(repos.CustomOverlay_AccountsSchema, {
    runAs: a.runAs,
    users: a.users.map((u, i) => ({
      username: u.userName,
      uid: id(`users[${i}].uid`, u.uid),
      gid: id(`users[${i}].gid`, u.gid ?? 0),
      groupName: u.groupName,
      shell: u.shell,
      homeDir: u.homeDir,
    })),
    groups: a.groups.map((g, i) => ({
      groupname: g.groupName,
      gid: id(`groups[${i}].gid`, g.gid),
      members: g.members,
    })),
  });
  if (violations.length) throw invalidArgument(violations);
  return accounts;
}

function repoToV1(r: repos.Repo, readme = ""): v1.Repo {
  return create(v1.RepoSchema, {
    id: r.uid,
    name: r.name,
    description: r.description,
    catalogTier: r.catalogTier as number,
    bundles: r.bundles,
    readme,
    syncConfig: syncToV1(r.syncConfig),
    customOverlay: overlayToV1(r.customOverlay),
    aliases: r.aliases,
    createTime: r.createTime,
    activeTags: r.activeTags,
  });
}

function repoFromV1(r: v1.Repo | undefined) {
  const v = r ?? create(v1.RepoSchema);
  return {
    uid: v.id,
    name: v.name,
    description: v.description,
    catalogTier: v.catalogTier as number,
    bundles: v.bundles,
    aliases: v.aliases,
    activeTags: v.activeTags,
    syncConfig: syncFromV1(v.syncConfig),
    customOverlay: overlayFromV1(v.customOverlay),
  };
}

function tagToV1(t: tags.Tag): v1.Tag {
  return create(v1.TagSchema, {
    id: t.uid,
    name: t.name,
    digest: t.digest,
    lastUpdated: t.updateTime,
    deprecated: t.deprecated,
    bundles: t.bundles,
  });
}

/** "1.2.3" → [1, 2, 3]; undefined for names that are not a dotted version (latest, sha-…). */
function versionOf(name: string): number[] | undefined {
  const m = /^v?(\d+(?:\.\d+)*)(?:-r\d+)?$/.exec(name);
  return m ? m[1]!.split(".").map(Number) : undefined;
}

function compareVersions(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? -1) - (b[i] ?? -1);
    if (d !== 0) return d;
  }
  return 0;
}

export interface V1RegistryStores {
  tags: TagsRepository;
}

type V1Handlers = ServiceHandlers<typeof v1.Registry>;

/** What the v1 handlers are built on: the v2beta1 services they delegate to, and the tags store. */
interface Adapter {
  repo: Delegate<typeof repos.ReposService>;
  tag: Delegate<typeof tags.TagsService>;
  extension: Delegate<typeof RegistryExtensionsService>;
  stores: V1RegistryStores;
}

export function v1RegistryService(bindings: readonly ServiceBinding[], stores: V1RegistryStores): ServiceBinding {
  const a: Adapter = {
    repo: delegateTo(repos.ReposService, bindings),
    tag: delegateTo(tags.TagsService, bindings),
    extension: delegateTo(RegistryExtensionsService, bindings),
    stores,
  };
  return bindService(v1.Registry, { ...repoHandlers(a), ...tagHandlers(a) });
}

async function readmeOf(a: Adapter, uid: string, call: CallContext): Promise<string> {
  return (await a.repo("getRepoReadme", { uid }, call)).content;
}

async function tagsOf(a: Adapter, filter: v1.TagFilter | { uidp: { childrenOf: string } }, call: CallContext) {
  const f = create(v1.TagFilterSchema, filter);
  if (f.id) return oneOrNone(() => a.tag("getTag", { uid: f.id }, call));
  return listAll(async (pageSize, pageToken) => {
    const page = await a.tag(
      "listTags",
      {
        uidp: f.uidp,
        name: f.name,
        updatedSince: f.updatedSince,
        // v1 includes everything unless told to leave it out; v2beta1 the other way round
        includeReferrers: !f.excludeReferrers,
        includeDates: !f.excludeDates,
        includeEpochs: !f.excludeEpochs,
        digest: f.digest,
        pageSize,
        pageToken,
      },
      call,
    );
    return { items: page.tags, nextPageToken: page.nextPageToken };
  });
}

function repoHandlers(a: Adapter) {
  const { repo } = a;
  return {
    createRepo: (req, call) => createRepo(a, req, call),
    async updateRepo(req, call) {
      // PUT: the whole repo, its README included (left out: emptied).
      const updated = await repo("updateRepo", { repo: repoFromV1(req), updateMask: REPLACE_ALL }, call);
      await repo(
        "updateRepoReadme",
        { repoReadme: { uid: updated.uid, content: req.readme }, updateMask: { paths: ["content"] } },
        call,
      );
      return repoToV1(updated, req.readme);
    },
    async listRepos(req, call) {
      const items = req.id
        ? await oneOrNone(() => repo("getRepo", { uid: req.id }, call))
        : await listAll(async (pageSize, pageToken) => {
            const page = await repo(
              "listRepos",
              { uidp: req.uidp, name: req.name === "" ? undefined : req.name, pageSize, pageToken },
              call,
            );
            return { items: page.repos, nextPageToken: page.nextPageToken };
          });
      const named = req.id && req.name ? items.filter((r) => r.name === req.name) : items;
      // v1 lists carry no README (it is read per repo); the list stays one query per page.
      return create(v1.RepoListSchema, { items: named.map((r) => repoToV1(r)) });
    },
    async getRepoCountBySource(req, call) {
      // The repos the caller can see that sync from the repo `id`.
      const all = await listAll(async (pageSize, pageToken) => {
        const page = await repo("listRepos", { pageSize, pageToken }, call);
        return { items: page.repos, nextPageToken: page.nextPageToken };
      });
      return { count: BigInt(all.filter((r) => r.syncConfig?.source === req.id).length) };
    },
    async deleteRepo(req, call) {
      return repo("deleteRepo", { uid: req.id }, call);
    },
  } satisfies Partial<V1Handlers>;
}

async function createRepo(a: Adapter, req: v1.CreateRepoRequest, call: CallContext): Promise<v1.Repo> {
  const { uid: _uid, ...fields } = repoFromV1(req.repo);
  try {
    // Recoverable: the conflict below goes on reading, inside the outbox's transaction.
    const created = await recoverable(() => a.repo("createRepo", { parent: req.parentId, repo: fields }, call));
    if (req.repo?.readme)
      await a.repo("updateRepoReadme", { repoReadme: { uid: created.uid, content: req.repo.readme } }, call);
    return repoToV1(created, req.repo?.readme ?? "");
  } catch (err) {
    // Without prevent_existing, v1 answered the repo that already had the name.
    if (req.preventExisting || ConnectError.from(err).code !== Code.AlreadyExists) throw err;
    const page = await a.repo("listRepos", { uidp: { childrenOf: req.parentId }, name: fields.name }, call);
    const existing = page.repos[0];
    if (!existing) throw err;
    return repoToV1(existing, await readmeOf(a, existing.uid, call));
  }
}

function tagHandlers(a: Adapter) {
  const { tag } = a;
  return {
    async createTag(req, call) {
      const t = req.tag ?? create(v1.TagSchema);
      const created = await tag(
        "createTag",
        { parent: req.repoId, tag: { name: t.name, digest: t.digest, deprecated: t.deprecated, bundles: t.bundles } },
        call,
      );
      return tagToV1(created);
    },
    updateTag: (req, call) => updateTag(a, req, call),
    async deleteTag(req, call) {
      return tag("deleteTag", { uid: req.id }, call);
    },
    async listTags(req, call) {
      return create(v1.TagListSchema, { items: (await tagsOf(a, req, call)).map(tagToV1) });
    },
    getRepoTagsSummary: (req, call) => repoTagsSummary(a, req, call),
    async listEolTags() {
      // The registry keeps no end-of-life data about packages: no tag is known to be EOL.
      return create(v1.EolTagListSchema, { items: [] });
    },
    async listTagHistory(req, call) {
      const current = await tag("getTag", { uid: req.parentId }, call);
      const rows = await a.stores.tags.history(
        parentOf(current.uid)!,
        current.name,
        req.start && timestampDate(req.start),
        req.end && timestampDate(req.end),
        MAX_HISTORY,
      );
      return create(v1.TagHistoryListSchema, {
        items: rows.map((r) => ({ updateTimestamp: timestampFromDate(r.update_time), digest: r.digest })),
      });
    },
  } satisfies Partial<V1Handlers>;
}

/**
 * v2beta1 has no UpdateTag: a tag's name and digest move by a push (or a new tag), so a v1 PUT
 * may change only `deprecated`, through the same handlers as the extension's RPCs. Read from the
 * store, not through GetTag: updating needs CAP_TAG_UPDATE (checked by the v1 rule on `id`), not
 * CAP_TAG_LIST.
 */
async function updateTag(a: Adapter, req: v1.Tag, call: CallContext): Promise<v1.Tag> {
  requireUid("id", req.id);
  const current = toTag(found(await a.stores.tags.get(req.id), "tag", req.id));
  const moved = [
    ...(req.name !== current.name ? ["name"] : []),
    ...(req.digest !== current.digest ? ["digest"] : []),
    ...(req.bundles.join() !== current.bundles.join() ? ["bundles"] : []),
  ];
  if (moved.length)
    throw invalidArgument(
      moved.map((field) => ({
        field,
        description: "cannot be changed by UpdateTag (push the image to move a tag); only `deprecated` can",
      })),
    );
  if (req.deprecated === current.deprecated) return tagToV1(current);
  const updated = await a.extension(req.deprecated ? "deprecateTag" : "undeprecateTag", { uid: req.id }, call);
  return tagToV1(updated);
}

async function repoTagsSummary(a: Adapter, req: v1.GetRepoTagsSummaryRequest, call: CallContext) {
  const all = await tagsOf(
    a,
    create(v1.TagFilterSchema, {
      uidp: { childrenOf: req.repoId },
      excludeReferrers: req.excludeReferrers,
      excludeDates: req.excludeDates,
      excludeEpochs: req.excludeEpochs,
    }),
    call,
  );
  const time = (t: tags.Tag) => (t.updateTime ? timestampDate(t.updateTime).getTime() : 0);
  const latest = all.reduce<tags.Tag | undefined>((a, t) => (!a || time(t) > time(a) ? t : a), undefined);
  // the highest dotted version among the tag names ("1.2.10" over "1.2.9"), if any
  const versions = all
    .map((t) => ({ name: t.name, v: versionOf(t.name) }))
    .filter((x): x is { name: string; v: number[] } => x.v !== undefined)
    .sort((a, b) => compareVersions(b.v, a.v));
  return create(v1.RepoTagsSummarySchema, {
    id: req.repoId,
    tagCount: BigInt(all.length),
    lastUpdated: latest?.updateTime,
    latestTag: latest && tagToV1(latest),
    latestVersion: versions[0]?.name ?? "",
  });
}
