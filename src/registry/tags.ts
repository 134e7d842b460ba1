// TagsService: tags of a repo. A tag made here may name a digest the repo does not hold (yet):
// the documented tutorial creates tags by API, and a later push fills the content in.
import { TAG_PATTERN } from "./names.js";
import { DIGEST_PATTERN } from "./storage/blob-store.js";
import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ListTagsRequestSchema,
  TagSchema,
  TagsService,
  type Tag,
} from "../gen/chainguard/platform/registry/v2beta1/tags_pb.js";
import type { FieldViolation } from "../core/errors.js";
import type { ListableResource, ListEngineDeps } from "../core/list.js";
import { bindService } from "../core/service.js";
import { newChildUidp } from "../core/uidp.js";
import { requireUid, throwIfViolations } from "../core/validate.js";
import { listResponse } from "../platform/list.js";
import { deleted, found, written } from "../platform/outcomes.js";
import type { TagRow, TagsRepository } from "./storage/tags.js";

// Tags have no create_time: they sort by name and by when they last moved.
export const tagListing: ListableResource = {
  sortable: {
    name: { column: "name", kind: "text" },
    update_time: { column: "update_time", kind: "timestamp" },
  },
  aliases: { updated_at: "update_time" },
  defaultOrder: "uid",
};

export function toTag(row: TagRow): Tag {
  return create(TagSchema, {
    uid: row.uid,
    name: row.name,
    digest: row.digest,
    updateTime: timestampFromDate(row.update_time),
    deprecated: row.deprecated,
    bundles: row.bundles,
  });
}

function patternViolations(field: string, value: string, pattern: RegExp): FieldViolation[] {
  if (value === "") return [{ field, description: "is required" }];
  return pattern.test(value) ? [] : [{ field, description: `${field} must match "${pattern.source}"` }];
}

export interface TagsDeps {
  tags: TagsRepository;
  lists: ListEngineDeps;
  now: () => Date;
}

export function tagsService({ tags, lists, now }: TagsDeps) {
  return bindService(TagsService, {
    async createTag(req) {
      requireUid("parent", req.parent);
      const tag = req.tag ?? create(TagSchema);
      throwIfViolations([
        ...patternViolations("name", tag.name, TAG_PATTERN),
        ...patternViolations("digest", tag.digest, DIGEST_PATTERN),
      ]);
      const row = written(
        await tags.insert({
          uid: newChildUidp(req.parent),
          repoUid: req.parent,
          name: tag.name,
          digest: tag.digest,
          deprecated: tag.deprecated,
          bundles: tag.bundles,
          now: now(),
        }),
      );
      return toTag(row);
    },

    async getTag(req, call) {
      requireUid("uid", req.uid);
      return toTag(found(await tags.get(req.uid, call.freshness), "tag", req.uid));
    },

    async listTags(req, call) {
      // include_referrers, include_dates and include_epochs ask for what Tag has no field for.
      if (req.digest !== "") throwIfViolations(patternViolations("digest", req.digest, DIGEST_PATTERN));
      const { items, ...page } = await listResponse({
        lists,
        resource: tagListing,
        schema: ListTagsRequestSchema,
        request: req,
        query: tags.listQuery({
          uidp: req.uidp,
          name: req.name,
          digest: req.digest,
          updatedSince: req.updatedSince && timestampDate(req.updatedSince),
        }),
        toItems: (rows: TagRow[]) => rows.map(toTag),
        call,
      });
      return { tags: items, ...page };
    },

    async deleteTag(req) {
      requireUid("uid", req.uid);
      return deleted(await tags.delete(req.uid), "tag", req.uid);
    },
  });
}
