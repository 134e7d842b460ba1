// What the registry pages share: a repo's name in the registry (for pull commands), the registry's
// host, a tag's digest, and the public/private switch of a repo.
import { useState } from "react";
import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { RegistryExtensionsService } from "../../../../src/gen/bulwark/registry/v1/visibility_pb.js";
import { TagsService } from "../../../../src/gen/chainguard/platform/registry/v2/tags_pb.js";
import { client } from "../../api";
import { useAccess } from "../../access";
import { useLoad } from "../../ui/load";
import { Button } from "../../ui/forms";
import { ErrorNote } from "../../ui/feedback";
import { groupOf, type VisibleGroup } from "../../ui/groups";

/** A digest cut for a table ("sha256:0123456789ab"); the whole one is in the title. */
export const shortDigest = (digest: string) => digest.replace(/^(sha\d+:[0-9a-f]{12})[0-9a-f]+$/, "$1");

/**
 * The repo's name in the registry (README, "The registry": the organization, each child group,
 * then the repo's path): each group by its name when the caller can see it, else by its uid's own
 * segment, which the registry also resolves.
 */
export function registryPath(repoUid: string, repoName: string, groups: VisibleGroup[]): string {
  const byUid = new Map(groups.map((g) => [g.uid, g.name]));
  const segments = groupOf(repoUid).split("/");
  const names = segments.map((segment, i) => byUid.get(segments.slice(0, i + 1).join("/")) ?? segment);
  return [...names, repoName].join("/");
}

/**
 * The registry's host, as the registry itself names it: its challenge to a request without
 * credentials says `service="<registry host>"` (README, "The registry"); the page's own host
 * (the CLI's default) when it says nothing.
 */
async function loadRegistryHost(): Promise<string> {
  try {
    const response = await fetch("/v2/", { credentials: "omit" });
    const challenge = response.headers.get("www-authenticate") ?? "";
    return /service="([^"]+)"/.exec(challenge)?.[1] ?? location.host;
  } catch {
    return location.host;
  }
}

let registryHost: Promise<string> | undefined;

export function useRegistryHost(): string {
  const loaded = useLoad(() => (registryHost ??= loadRegistryHost()), []);
  return loaded.data ?? location.host;
}

/** The digest a tag or digest reference names in a repo (a digest is itself). */
export async function resolveRef(repoUid: string, ref: string): Promise<{ digest: string; tag?: string }> {
  if (/^sha\d+:[0-9a-f]+$/.test(ref)) return { digest: ref };
  const { tags } = await client(TagsService).listTags({ uidp: { childrenOf: repoUid }, name: ref, pageSize: 1 });
  const tag = tags[0];
  if (!tag) throw new Error(`The repository has no tag "${ref}".`);
  return { digest: tag.digest, tag: tag.name };
}

/** Whether a repo is public, and (for a caller who may update the repo) the switch. */
export function Visibility({ repoUid, repoName }: { repoUid: string; repoName: string }) {
  const { can } = useAccess();
  const loaded = useLoad(() => client(RegistryExtensionsService).getRepoVisibility({ uid: repoUid }), [repoUid]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  if (loaded.error) return <ErrorNote error={loaded.error} />;
  if (!loaded.data) return <span className="muted">…</span>;
  const isPublic = loaded.data.public;
  const action = isPublic ? "Make private" : "Make public";
  const toggle = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await client(RegistryExtensionsService).updateRepoVisibility({
        visibility: { uid: repoUid, public: !isPublic },
        updateMask: create(FieldMaskSchema, { paths: ["public"] }),
      });
      loaded.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span className="visibility">
      <span>{isPublic ? "Public" : "Private"}</span>{" "}
      {can("repo.update", repoUid) && (
        // the visible words first in the name (WCAG 2.5.3), then which repo
        <Button busy={busy} onClick={toggle} aria-label={`${action}: ${repoName}`}>
          {action}
        </Button>
      )}
      <ErrorNote error={error} />
    </span>
  );
}
