// RegistryExtensionsService (bulwark.registry.v1, a documented extension): a repo's visibility
// (public repos are pulled without credentials) and a tag's deprecation after its creation.
import { create } from "@bufbuild/protobuf";
import {
  RegistryExtensionsService,
  RepoVisibilitySchema,
  type RepoVisibility,
} from "../gen/bulwark/registry/v1/visibility_pb.js";
import { invalidArgument } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import { bindService } from "../core/service.js";
import { requireUid } from "../core/validate.js";
import { found, written } from "../platform/outcomes.js";
import type { RepoRow, ReposRepository } from "./storage/repos.js";
import type { TagsRepository } from "./storage/tags.js";
import { toTag } from "./tags.js";

function toVisibility(row: RepoRow): RepoVisibility {
  return create(RepoVisibilitySchema, { uid: row.uid, public: row.public });
}

export interface RepoVisibilityDeps {
  repos: ReposRepository;
  tags: TagsRepository;
  now: () => Date;
}

export function repoVisibilityService({ repos, tags, now }: RepoVisibilityDeps) {
  return bindService(RegistryExtensionsService, {
    async getRepoVisibility(req, call) {
      requireUid("uid", req.uid);
      return toVisibility(found(await repos.get(req.uid, call.freshness), "repo", req.uid));
    },

    async updateRepoVisibility(req) {
      const patch = req.visibility;
      if (!patch) throw invalidArgument({ field: "visibility", description: "is required" });
      requireUid("visibility.uid", patch.uid);
      const current = toVisibility(found(await repos.get(patch.uid), "repo", patch.uid));
      const { updated, changed } = applyFieldMask(RepoVisibilitySchema, current, patch, req.updateMask);
      // Nothing named: nothing written (a stale read must not be written back).
      if (!changed.includes("public")) return current;
      return toVisibility(written(await repos.setPublic(patch.uid, updated.public, now())));
    },

    async deprecateTag(req) {
      requireUid("uid", req.uid);
      return toTag(written(await tags.setDeprecated(req.uid, true, now())));
    },

    async undeprecateTag(req) {
      requireUid("uid", req.uid);
      return toTag(written(await tags.setDeprecated(req.uid, false, now())));
    },
  });
}
