// The repositories the caller may see: filtered by group and exact name, paged and sorted by the
// list engine (ReposService.ListRepos), each public or private (RegistryExtensionsService).
import { ReposService, type Repo } from "../../../../src/gen/chainguard/platform/registry/v2/repos_pb.js";
import { client } from "../../api";
import { href, Link, useQueryState } from "../../router";
import { ListTable, resetPosition, usePagedList } from "../../ui/list";
import { TextField } from "../../ui/forms";
import { GroupSelect, groupOf, pathOf, under, useGroupParam, useVisibleGroups } from "../../ui/groups";
import { Page, Time } from "../../ui/misc";
import { Visibility } from "./common";

export function ReposPage() {
  const [query, setQuery] = useQueryState();
  const [group, setGroup] = useGroupParam();
  const name = query.get("name") ?? "";
  const groups = useVisibleGroups();
  const list = usePagedList(
    async (page) => {
      const res = await client(ReposService).listRepos({
        uidp: under(group),
        name: name || undefined,
        pageSize: page.pageSize,
        pageToken: page.pageToken,
        skip: page.skip,
        orderBy: page.orderBy,
      });
      return { items: res.repos, nextPageToken: res.nextPageToken, totalCount: res.totalCount };
    },
    [group, name],
    { defaultOrder: "name" },
  );
  return (
    <Page title="Repositories">
      <div className="form inline" role="search" aria-label="Filter repositories">
        <GroupSelect label="Group" value={group} allowAll="All groups" onValue={setGroup} />
        <TextField
          label="Name"
          type="search"
          value={name}
          hint="The repository's exact name"
          onValue={(value) => setQuery({ name: value.trim(), ...resetPosition })}
        />
      </div>
      <ListTable<Repo>
        list={list}
        caption="Repositories"
        noun="repositories"
        rowKey={(r) => r.uid}
        empty="No repository matches. Push an image to create one."
        columns={[
          {
            header: "Name",
            sort: "name",
            cell: (r) => <Link to={href("/console/repo", { uid: r.uid })}>{r.name}</Link>,
          },
          { header: "Group", cell: (r) => pathOf(groups.data, groupOf(r.uid)) },
          { header: "Visibility", cell: (r) => <Visibility repoUid={r.uid} repoName={r.name} /> },
          { header: "Updated", sort: "update_time", cell: (r) => <Time value={r.updateTime} /> },
        ]}
      />
    </Page>
  );
}
