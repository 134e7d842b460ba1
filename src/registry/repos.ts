// ReposService: repositories inside a group, and their READMEs.
import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  CatalogTier,
  CustomOverlaySchema,
  ListReposRequestSchema,
  RepoReadmeSchema,
  RepoSchema,
  ReposService,
  SyncConfigSchema,
  type Repo,
} from "../gen/chainguard/platform/registry/v2beta1/repos_pb.js";
import { invalidArgument, type FieldViolation } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import { NAMED_RESOURCE_LISTING, type ListableResource, type ListEngineDeps } from "../core/list.js";
import { bindService } from "../core/service.js";
import { newChildUidp } from "../core/uidp.js";
import { descriptionViolations, requireUid, throwIfViolations } from "../core/validate.js";
import { listResponse } from "../platform/list.js";
import { deleted, found, written } from "../platform/outcomes.js";
import { MAX_NAME_LENGTH, REPO_NAME_COMPONENT, isRepositoryName } from "./names.js";
import type { RepoFields, RepoRow, ReposRepository } from "./storage/repos.js";

export const repoListing: ListableResource = NAMED_RESOURCE_LISTING;

/** Most characters of a README (its own limit: far above the default string rule's). */
export const MAX_README_LENGTH = 262_144;

// Stored values are the server's own JSON; a field a later version dropped is no reason to fail.
const LENIENT = { ignoreUnknownFields: true } as const;

export function toRepo(row: RepoRow): Repo {
  return create(RepoSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    catalogTier: row.catalog_tier,
    bundles: row.bundles,
    aliases: row.aliases,
    activeTags: row.active_tags,
    syncConfig: row.sync_config === null ? undefined : fromJson(SyncConfigSchema, row.sync_config, LENIENT),
    customOverlay: row.custom_overlay === null ? undefined : fromJson(CustomOverlaySchema, row.custom_overlay, LENIENT),
    createTime: timestampFromDate(row.create_time),
    updateTime: timestampFromDate(row.update_time),
  });
}

export function repoNameViolations(name: string, field = "name"): FieldViolation[] {
  if (name === "") return [{ field, description: "is required" }];
  if (!isRepositoryName(name)) {
    return [
      {
        field,
        description: `name must be path components matching ^${REPO_NAME_COMPONENT}$ joined by "/", at most ${MAX_NAME_LENGTH} characters`,
      },
    ];
  }
  return [];
}

/** Empty REQUIRED fields and negative ids of the custom overlay's entries. */
function overlayViolations(repo: Repo): FieldViolation[] {
  const overlay = repo.customOverlay;
  if (!overlay) return [];
  const v: FieldViolation[] = [];
  const need = (field: string, value: string) => value === "" && v.push({ field, description: "is required" });
  overlay.contents?.runtimeKeyring.forEach((e, i) => {
    need(`custom_overlay.contents.runtime_keyring[${i}].name`, e.name);
    need(`custom_overlay.contents.runtime_keyring[${i}].content`, e.content);
  });
  // User and group ids are never negative (and v1 clients read them as uint32).
  const id = (field: string, value: number) => value < 0 && v.push({ field, description: "must not be negative" });
  overlay.accounts?.users.forEach((u, i) => {
    need(`custom_overlay.accounts.users[${i}].username`, u.username);
    id(`custom_overlay.accounts.users[${i}].uid`, u.uid);
    id(`custom_overlay.accounts.users[${i}].gid`, u.gid);
  });
  overlay.accounts?.groups.forEach((g, i) => {
    need(`custom_overlay.accounts.groups[${i}].groupname`, g.groupname);
    id(`custom_overlay.accounts.groups[${i}].gid`, g.gid);
  });
  overlay.certificates?.additional.forEach((e, i) => {
    need(`custom_overlay.certificates.additional[${i}].name`, e.name);
    need(`custom_overlay.certificates.additional[${i}].content`, e.content);
  });
  return v;
}

/** The writable fields of a repo, validated; output-only fields (at any depth) are dropped. */
function validated(repo: Repo): RepoFields {
  const v = [...repoNameViolations(repo.name), ...descriptionViolations(repo.description)];
  if (CatalogTier[repo.catalogTier] === undefined)
    v.push({ field: "catalog_tier", description: `unknown CatalogTier ${repo.catalogTier}` });
  if (repo.syncConfig && repo.syncConfig.source === "")
    v.push({ field: "sync_config.source", description: "is required" });
  v.push(...overlayViolations(repo));
  throwIfViolations(v);
  const sync = repo.syncConfig;
  return {
    name: repo.name,
    description: repo.description,
    catalogTier: repo.catalogTier,
    bundles: repo.bundles,
    aliases: repo.aliases,
    activeTags: repo.activeTags,
    // unique_tags, expiration_time, apko_overlay and grace_period are the platform's to set
    syncConfig: sync
      ? toJson(
          SyncConfigSchema,
          create(SyncConfigSchema, {
            source: sync.source,
            google: sync.google,
            amazon: sync.amazon,
            azure: sync.azure,
          }),
        )
      : null,
    customOverlay: repo.customOverlay ? toJson(CustomOverlaySchema, repo.customOverlay) : null,
  };
}

function readmeViolations(content: string): FieldViolation[] {
  return [...content].length > MAX_README_LENGTH
    ? [{ field: "content", description: `must be at most ${MAX_README_LENGTH} characters` }]
    : [];
}

export interface ReposDeps {
  repos: ReposRepository;
  lists: ListEngineDeps;
  now: () => Date;
}

export function reposService({ repos, lists, now }: ReposDeps) {
  return bindService(ReposService, {
    async createRepo(req) {
      requireUid("parent", req.parent);
      const fields = validated(req.repo ?? create(RepoSchema));
      return toRepo(
        written(await repos.insert({ uid: newChildUidp(req.parent), parentUid: req.parent, ...fields, now: now() })),
      );
    },

    async getRepo(req, call) {
      requireUid("uid", req.uid);
      return toRepo(found(await repos.get(req.uid, call.freshness), "repo", req.uid));
    },

    async listRepos(req, call) {
      const { items, ...page } = await listResponse({
        lists,
        resource: repoListing,
        schema: ListReposRequestSchema,
        request: req,
        query: repos.listQuery({ uidp: req.uidp, name: req.name }),
        toItems: (rows: RepoRow[]) => rows.map(toRepo),
        call,
      });
      return { repos: items, ...page };
    },

    async updateRepo(req) {
      const patch = req.repo;
      if (!patch) throw invalidArgument({ field: "repo", description: "is required" });
      requireUid("repo.uid", patch.uid);
      const result = await repos.update(
        patch.uid,
        (current) => validated(applyFieldMask(RepoSchema, toRepo(current), patch, req.updateMask).updated),
        now(),
      );
      return toRepo(written(result));
    },

    async deleteRepo(req) {
      requireUid("uid", req.uid);
      // Everything in the repo goes with it: tags, manifests, blob links (the blobs themselves
      // are garbage once nothing links them).
      return deleted(await repos.delete(req.uid), "repo", req.uid);
    },

    async getRepoReadme(req, call) {
      requireUid("uid", req.uid);
      const row = found(await repos.getReadme(req.uid, call.freshness), "repo", req.uid);
      return create(RepoReadmeSchema, { uid: row.uid, content: row.readme });
    },

    async updateRepoReadme(req) {
      const patch = req.repoReadme;
      if (!patch) throw invalidArgument({ field: "repo_readme", description: "is required" });
      requireUid("repo_readme.uid", patch.uid);
      const result = await repos.updateReadme(
        patch.uid,
        (content) => {
          const current = create(RepoReadmeSchema, { uid: patch.uid, content });
          const { updated } = applyFieldMask(RepoReadmeSchema, current, patch, req.updateMask);
          throwIfViolations(readmeViolations(updated.content));
          return updated.content;
        },
        now(),
      );
      const row = written(result);
      return create(RepoReadmeSchema, { uid: row.uid, content: row.readme });
    },
  });
}
