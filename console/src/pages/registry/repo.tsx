// One repository: its tags (TagsService.ListTags, paged and sorted), the pull command of a tag,
// where a tag has pointed over time (Registry.ListTagHistory), and (for a caller who may update
// tags) deprecating a tag and lifting its deprecation (RegistryExtensionsService).
import { useState } from "react";
import { RegistryExtensionsService } from "../../../../src/gen/bulwark/registry/v1/visibility_pb.js";
import { ReposService } from "../../../../src/gen/chainguard/platform/registry/v2/repos_pb.js";
import { TagsService, type Tag } from "../../../../src/gen/chainguard/platform/registry/v2/tags_pb.js";
import { Registry, type TagHistory } from "../../../../src/gen/platform/registry/v1/registry.platform_pb.js";
import { client } from "../../api";
import { useAccess } from "../../access";
import { href, Link, useQueryState } from "../../router";
import { useAction, useLoad } from "../../ui/load";
import { DataTable, ListTable, usePagedList } from "../../ui/list";
import { Done, Empty, ErrorNote, Loading } from "../../ui/feedback";
import { Button } from "../../ui/forms";
import { groupOf, pathOf, useVisibleGroups } from "../../ui/groups";
import { ConfirmButton, CopyValue, Page, Section, Time } from "../../ui/misc";
import { registryPath, shortDigest, useRegistryHost, Visibility } from "./common";

export function RepoPage() {
  const [query] = useQueryState();
  const uid = query.get("uid") ?? "";
  const repo = useLoad(() => client(ReposService).getRepo({ uid }), [uid]);
  if (!uid) return <NoRepo />;
  if (repo.error)
    return (
      <Page title="Repository">
        <ErrorNote error={repo.error} />
      </Page>
    );
  if (!repo.data)
    return (
      <Page title="Repository">
        <Loading what="the repository" />
      </Page>
    );
  return <RepoView uid={uid} name={repo.data.name} description={repo.data.description} />;
}

function NoRepo() {
  return (
    <Page title="Repository">
      <p>
        No repository is named. <Link to="/console/repos">Choose one among the repositories</Link>.
      </p>
    </Page>
  );
}

function RepoView({ uid, name, description }: { uid: string; name: string; description: string }) {
  const [query] = useQueryState();
  const chosen = query.get("tag") ?? "";
  const groups = useVisibleGroups();
  const host = useRegistryHost();
  const path = registryPath(uid, name, groups.data ?? []);
  const list = usePagedList(
    async (page) => {
      const res = await client(TagsService).listTags({
        uidp: { childrenOf: uid },
        pageSize: page.pageSize,
        pageToken: page.pageToken,
        skip: page.skip,
        orderBy: page.orderBy,
      });
      return { items: res.tags, nextPageToken: res.nextPageToken, totalCount: res.totalCount };
    },
    [uid],
    { defaultOrder: "update_time desc" },
  );
  const groupPath = pathOf(groups.data, groupOf(uid));
  const pullTag = chosen || list.items[0]?.name;
  const historyLink = (tag: Tag) => href("/console/repo", { ...Object.fromEntries(query), tag: tag.name });
  // A tag lives in its repo, the repo in its group: the group is the scope of the capability.
  const { can } = useAccess();
  const mayUpdateTags = can("tag.update", groupOf(uid));
  const [done, setDone] = useState("");
  const change = useAction(async (tag: Tag, deprecate: boolean) => {
    setDone("");
    const extensions = client(RegistryExtensionsService);
    const answer = deprecate
      ? await extensions.deprecateTag({ uid: tag.uid })
      : await extensions.undeprecateTag({ uid: tag.uid });
    setDone(answer.deprecated ? `Deprecated ${tag.name}.` : `${tag.name} is no longer deprecated.`);
    list.loaded.reload();
  });
  return (
    <Page title={name}>
      <dl className="facts">
        <dt>Group</dt>
        <dd>{groupPath}</dd>
        <dt>Visibility</dt>
        <dd>
          <Visibility repoUid={uid} repoName={name} />
        </dd>
        {description && (
          <>
            <dt>Description</dt>
            <dd>{description}</dd>
          </>
        )}
      </dl>
      <Section title="Pull">
        {pullTag ? (
          <CopyValue label="Pull command" value={`docker pull ${host}/${path}:${pullTag}`} />
        ) : (
          <Empty>No tag to pull yet.</Empty>
        )}
      </Section>
      <Section title="Tags">
        <ErrorNote error={change.error} />
        {done && <Done>{done}</Done>}
        <ListTable<Tag>
          list={list}
          caption={`Tags of ${name}`}
          noun="tags"
          rowKey={(t) => t.uid}
          empty="No tags. Push an image to tag one."
          columns={[
            {
              header: "Tag",
              sort: "name",
              cell: (t) => <Link to={href("/console/image", { repo: uid, ref: t.name })}>{t.name}</Link>,
            },
            {
              header: "Digest",
              cell: (t) => (
                <Link to={href("/console/image", { repo: uid, ref: t.digest })} title={t.digest}>
                  <code>{shortDigest(t.digest)}</code>
                </Link>
              ),
            },
            { header: "Updated", sort: "update_time", cell: (t) => <Time value={t.updateTime} /> },
            { header: "Deprecated", cell: (t) => (t.deprecated ? "Deprecated" : "No") },
            {
              header: "History",
              cell: (t) => (
                <Link
                  to={historyLink(t)}
                  aria-label={`History of ${t.name}`}
                  aria-current={t.name === chosen ? "true" : undefined}
                >
                  History
                </Link>
              ),
            },
            ...(mayUpdateTags
              ? [
                  {
                    header: "Actions",
                    cell: (t: Tag) =>
                      t.deprecated ? (
                        <Button busy={change.busy} onClick={() => void change.run(t, false)}>
                          {`Undeprecate ${t.name}`}
                        </Button>
                      ) : (
                        <ConfirmButton
                          label={`Deprecate ${t.name}`}
                          confirmLabel="Yes, deprecate"
                          question={`Deprecate the tag ${t.name}? Pulls keep working; the tag is marked deprecated.`}
                          busy={change.busy}
                          onConfirm={() => change.run(t, true)}
                        />
                      ),
                  },
                ]
              : []),
          ]}
        />
      </Section>
      {chosen && <TagHistorySection repoUid={uid} tag={chosen} />}
    </Page>
  );
}

function TagHistorySection({ repoUid, tag }: { repoUid: string; tag: string }) {
  const history = useLoad(async () => {
    const { tags } = await client(TagsService).listTags({ uidp: { childrenOf: repoUid }, name: tag, pageSize: 1 });
    if (!tags[0]) throw new Error(`The repository has no tag "${tag}".`);
    const { items } = await client(Registry).listTagHistory({ parentId: tags[0].uid });
    return [...items].reverse();
  }, [repoUid, tag]);
  return (
    <Section title={`History of ${tag}`}>
      {history.error ? (
        <ErrorNote error={history.error} />
      ) : !history.data ? (
        <Loading what="the history" />
      ) : history.data.length === 0 ? (
        <Empty>No moves recorded.</Empty>
      ) : (
        <div className="table-scroll">
          <DataTable<TagHistory>
            caption={`Where ${tag} pointed, newest first`}
            rows={history.data}
            rowKey={(h) => `${h.digest}@${h.updateTimestamp?.seconds}.${h.updateTimestamp?.nanos}`}
            columns={[
              { header: "Since", cell: (h) => <Time value={h.updateTimestamp} /> },
              {
                header: "Digest",
                cell: (h) => (
                  <Link to={href("/console/image", { repo: repoUid, ref: h.digest })}>
                    <code>{h.digest}</code>
                  </Link>
                ),
              },
            ]}
          />
        </div>
      )}
    </Section>
  );
}
