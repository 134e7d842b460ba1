// One image of a repo, by tag or digest: its platforms, sizes and creation time (the inventory the
// server read, ImageContentsService.GetImageInventory), its SBOM to download (GetImageSbom), its
// vulnerability report (Vulnerabilities.ListVulnReports, filtered by severity and fix state) and
// what changed against another tag of the repo (DiffImages).
import { useState } from "react";
import {
  ImageContentsService,
  ImageInventory_State,
  type ImageInventory,
} from "../../../../src/gen/bulwark/registry/v1/images_pb.js";
import { ReposService } from "../../../../src/gen/chainguard/platform/registry/v2/repos_pb.js";
import { TagsService } from "../../../../src/gen/chainguard/platform/registry/v2/tags_pb.js";
import type {
  PackageReference,
  PackagesDiff_ChangedPackageReference,
  VulnerabilityReference,
} from "../../../../src/gen/platform/registry/v1/registry.platform_pb.js";
import {
  Vulnerabilities,
  Vulnerability_Fix_State,
  Vulnerability_Severity,
  type Vulnerability,
} from "../../../../src/gen/platform/registry/v1/vulnerabilities.platform_pb.js";
import { client } from "../../api";
import { href, Link, useQueryState } from "../../router";
import { useAction, useLoad, type Loaded } from "../../ui/load";
import { DataTable } from "../../ui/list";
import { Button, SelectField } from "../../ui/forms";
import { Done, Empty, ErrorNote, Loading } from "../../ui/feedback";
import { useVisibleGroups } from "../../ui/groups";
import { CopyValue, formatBytes, Page, Section, SeverityBadge, Time } from "../../ui/misc";
import { registryPath, resolveRef, shortDigest, useRegistryHost } from "./common";

const SEVERITIES = ["CRITICAL", "HIGH", "MEDIUM", "LOW", "NEGLIGIBLE", "UNKNOWN"];
const STATES: Record<string, string> = {
  FIXED: "Fixed",
  NOT_FIXED: "Not fixed",
  WONT_FIX: "Won't fix",
  UNKNOWN: "Unknown",
};

export function ImagePage() {
  const [query] = useQueryState();
  const repoUid = query.get("repo") ?? "";
  const ref = query.get("ref") ?? "";
  const image = useLoad(async () => {
    const [repo, resolved] = await Promise.all([
      client(ReposService).getRepo({ uid: repoUid }),
      resolveRef(repoUid, ref),
    ]);
    return { repo, ...resolved };
  }, [repoUid, ref]);
  const title = image.data
    ? `${image.data.repo.name}${image.data.tag ? `:${image.data.tag}` : `@${shortDigest(image.data.digest)}`}`
    : "Image";
  if (!repoUid || !ref)
    return (
      <Page title="Image">
        <p>
          No image is named. <Link to="/console/repos">Choose a repository</Link>, then one of its tags.
        </p>
      </Page>
    );
  return (
    <Page title={title}>
      {image.error ? (
        <ErrorNote error={image.error} />
      ) : !image.data ? (
        <Loading what="the image" />
      ) : (
        <ImageView repoUid={repoUid} repoName={image.data.repo.name} digest={image.data.digest} tag={image.data.tag} />
      )}
    </Page>
  );
}

function ImageView({
  repoUid,
  repoName,
  digest,
  tag,
}: {
  repoUid: string;
  repoName: string;
  digest: string;
  tag?: string;
}) {
  const groups = useVisibleGroups();
  const host = useRegistryHost();
  const inventory = useLoad(
    () => client(ImageContentsService).getImageInventory({ repoUid, digest }),
    [repoUid, digest],
  );
  const platforms = inventory.data?.items ?? [];
  const pull = `docker pull ${host}/${registryPath(repoUid, repoName, groups.data ?? [])}@${digest}`;
  return (
    <>
      <dl className="facts">
        <dt>Repository</dt>
        <dd>
          <Link to={href("/console/repo", { uid: repoUid })}>{repoName}</Link>
        </dd>
        <dt>Digest</dt>
        <dd>
          <code>{digest}</code>
        </dd>
      </dl>
      <CopyValue label="Pull command" value={pull} />
      <Section title="Platforms">
        <PlatformsTable inventory={inventory} />
      </Section>
      <SbomSection
        repoUid={repoUid}
        digest={digest}
        name={`${repoName.replace(/\//g, "-")}-${tag ?? "image"}`}
        platforms={platforms}
      />
      <VulnerabilitiesSection repoUid={repoUid} digest={digest} platforms={platforms} />
      <DiffSection repoUid={repoUid} digest={digest} tag={tag} />
    </>
  );
}

const platformOf = (p: ImageInventory) => [p.os, p.architecture, p.variant].filter(Boolean).join("/") || "unknown";

function PlatformsTable({ inventory }: { inventory: Loaded<{ items: ImageInventory[] }> }) {
  if (inventory.error) return <ErrorNote error={inventory.error} />;
  if (!inventory.data) return <Loading what="the platforms" />;
  const pending = inventory.data.items.some((p) => p.state === ImageInventory_State.PENDING);
  return (
    <>
      {pending && (
        <p className="note note-warn">
          The server is still reading this image.{" "}
          <Button onClick={inventory.reload} busy={inventory.loading}>
            Check again
          </Button>
        </p>
      )}
      <div className="table-scroll">
        <DataTable<ImageInventory>
          caption="Platforms of the image"
          rows={inventory.data.items}
          rowKey={(p) => p.digest}
          columns={[
            { header: "Platform", cell: platformOf },
            { header: "Digest", cell: (p) => <code title={p.digest}>{shortDigest(p.digest)}</code> },
            { header: "Created", cell: (p) => <Time value={p.created} /> },
            { header: "Size", className: "num", cell: (p) => formatBytes(p.sizeCompressed) },
            { header: "Unpacked", className: "num", cell: (p) => formatBytes(p.sizeUncompressed) },
            {
              header: "Packages",
              className: "num",
              cell: (p) =>
                p.state === ImageInventory_State.DONE
                  ? `${p.packages.length}${p.distro ? ` (${p.distro} ${p.distroVersion})`.trimEnd() : ""}`
                  : p.state === ImageInventory_State.FAILED
                    ? `Could not be read: ${p.error}`
                    : "Not read yet",
            },
          ]}
        />
      </div>
    </>
  );
}

/** Saves `text` as a file: a Blob, and a download link made and followed by script (no inline script). */
function saveFile(name: string, text: string, type: string) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function SbomSection({
  repoUid,
  digest,
  name,
  platforms,
}: {
  repoUid: string;
  digest: string;
  name: string;
  platforms: ImageInventory[];
}) {
  const [query, setQuery] = useQueryState();
  const format = query.get("sbom") === "cyclonedx" ? "cyclonedx" : "spdx";
  const arches = platforms
    .filter((p) => p.architecture)
    .map((p) => [p.architecture, p.variant].filter(Boolean).join("/"));
  const arch = query.get("arch") ?? "";
  const [saved, setSaved] = useState("");
  const download = useAction(async () => {
    setSaved("");
    const sbom = await client(ImageContentsService).getImageSbom({ repoUid, digest, format, arch });
    const file = `${name}${arch ? `-${arch.replace(/\//g, "-")}` : ""}.${format === "spdx" ? "spdx" : "cdx"}.json`;
    saveFile(file, sbom.document, sbom.mediaType || "application/json");
    setSaved(file);
  });
  return (
    <Section title="SBOM">
      <div className="form inline">
        <SelectField
          label="SBOM format"
          value={format}
          onValue={(value) => setQuery({ sbom: value === "spdx" ? undefined : value })}
          options={[
            { value: "spdx", label: "SPDX 2.3 (JSON)" },
            { value: "cyclonedx", label: "CycloneDX 1.5 (JSON)" },
          ]}
        />
        {arches.length > 1 && (
          <SelectField
            label="SBOM platform"
            value={arch}
            onValue={(value) => setQuery({ arch: value })}
            options={[{ value: "", label: "Default (amd64)" }, ...arches.map((a) => ({ value: a, label: a }))]}
          />
        )}
        <Button kind="primary" busy={download.busy} onClick={() => void download.run()}>
          Download SBOM
        </Button>
      </div>
      <ErrorNote error={download.error} />
      {saved && <Done>Saved {saved}.</Done>}
    </Section>
  );
}

interface Finding {
  vulnerability: Vulnerability;
  severity: string;
  state: string;
  platform: string;
}

function VulnerabilitiesSection({
  repoUid,
  digest,
  platforms,
}: {
  repoUid: string;
  digest: string;
  platforms: ImageInventory[];
}) {
  const [query, setQuery] = useQueryState();
  const severity = query.get("severity") ?? "";
  const state = query.get("state") ?? "";
  const reports = useLoad(async () => {
    const { items } = await client(Vulnerabilities).listVulnReports({ repoId: repoUid, digest });
    // Newest first: each platform image's newest report.
    const newest = new Map<string, (typeof items)[number]>();
    for (const report of items) if (!newest.has(report.digest)) newest.set(report.digest, report);
    return [...newest.values()];
  }, [repoUid, digest]);
  const platformName = (d: string) => {
    const p = platforms.find((x) => x.digest === d);
    return p ? platformOf(p) : shortDigest(d);
  };
  const findings: Finding[] = (reports.data ?? []).flatMap((report) =>
    report.vulnerabilities.map((v) => ({
      vulnerability: v,
      severity: Vulnerability_Severity[v.severity] ?? "UNKNOWN",
      state: Vulnerability_Fix_State[v.fix?.state ?? 0] ?? "UNKNOWN",
      platform: platformName(report.digest),
    })),
  );
  const shown = findings.filter((f) => (!severity || f.severity === severity) && (!state || f.state === state));
  const several = (reports.data?.length ?? 0) > 1;
  const count = (s: string) => findings.filter((f) => f.severity === s).length;
  return (
    <Section title="Vulnerabilities">
      <div className="form inline" role="search" aria-label="Filter vulnerabilities">
        <SelectField
          label="Severity"
          value={severity}
          onValue={(value) => setQuery({ severity: value })}
          options={[
            { value: "", label: "Any severity" },
            ...SEVERITIES.map((s) => ({ value: s, label: `${s.charAt(0)}${s.slice(1).toLowerCase()} (${count(s)})` })),
          ]}
        />
        <SelectField
          label="Fix state"
          value={state}
          onValue={(value) => setQuery({ state: value })}
          options={[
            { value: "", label: "Any state" },
            ...Object.entries(STATES).map(([value, label]) => ({ value, label })),
          ]}
        />
      </div>
      {reports.error ? (
        <ErrorNote error={reports.error} />
      ) : !reports.data ? (
        <Loading what="the vulnerability report" />
      ) : reports.data.length === 0 ? (
        <Empty>No vulnerability report yet: the server reports an image once it has read it.</Empty>
      ) : (
        <>
          <p role="status">
            {shown.length === findings.length
              ? `${findings.length} findings`
              : `${shown.length} of ${findings.length} findings`}
            {reports.data[0]?.createdAt && (
              <>
                {" "}
                · reported <Time value={reports.data[0].createdAt} />
              </>
            )}
          </p>
          {shown.length === 0 ? (
            <Empty>{findings.length === 0 ? "No known vulnerability." : "No finding matches the filters."}</Empty>
          ) : (
            <div className="table-scroll">
              <DataTable<Finding>
                caption="Vulnerability findings"
                rows={shown}
                rowKey={(f) => `${f.platform}:${f.vulnerability.id}`}
                columns={[
                  {
                    header: "Vulnerability",
                    cell: (f) => (
                      <Link to={href("/console/advisory", { id: f.vulnerability.id })}>{f.vulnerability.id}</Link>
                    ),
                  },
                  { header: "Aliases", cell: (f) => f.vulnerability.aliases.join(", ") || "—" },
                  { header: "Severity", cell: (f) => <SeverityBadge severity={f.severity} /> },
                  { header: "Packages", cell: (f) => f.vulnerability.purls.map((p) => <div key={p}>{p}</div>) },
                  { header: "State", cell: (f) => STATES[f.state] ?? f.state },
                  { header: "Fixed in", cell: (f) => f.vulnerability.fix?.versions.join(", ") || "—" },
                  ...(several ? [{ header: "Platform", cell: (f: Finding) => f.platform }] : []),
                ]}
              />
            </div>
          )}
        </>
      )}
    </Section>
  );
}

function DiffSection({ repoUid, digest, tag }: { repoUid: string; digest: string; tag?: string }) {
  const [query, setQuery] = useQueryState();
  const other = query.get("diff") ?? "";
  const arch = query.get("arch") ?? "";
  const tags = useLoad(
    () => client(TagsService).listTags({ uidp: { childrenOf: repoUid }, pageSize: 200, orderBy: "name" }),
    [repoUid],
  );
  const diff = useLoad(async () => {
    if (!other) return undefined;
    const from = await resolveRef(repoUid, other);
    return client(ImageContentsService).diffImages({ repoUid, from: from.digest, to: digest, arch });
  }, [repoUid, digest, other, arch]);
  const choices = (tags.data?.tags ?? []).filter((t) => t.name !== tag);
  return (
    <Section title="Compare">
      <div className="form inline">
        <SelectField
          label="Compare with tag"
          value={other}
          onValue={(value) => setQuery({ diff: value })}
          hint="What changed from that tag's image to this one"
          options={[{ value: "", label: "Choose…" }, ...choices.map((t) => ({ value: t.name, label: t.name }))]}
        />
      </div>
      <ErrorNote error={tags.error} />
      {other &&
        (diff.error ? (
          <ErrorNote error={diff.error} />
        ) : diff.loading || !diff.data ? (
          <Loading what="the comparison" />
        ) : (
          <DiffView
            other={other}
            packages={diff.data.packages}
            vulnerabilities={diff.data.vulnerabilities}
            warnings={diff.data.warnings}
          />
        ))}
    </Section>
  );
}

function DiffView({
  other,
  packages,
  vulnerabilities,
  warnings,
}: {
  other: string;
  packages?: {
    added: PackageReference[];
    removed: PackageReference[];
    changed: PackagesDiff_ChangedPackageReference[];
  };
  vulnerabilities?: { added: VulnerabilityReference[]; removed: VulnerabilityReference[] };
  warnings: string[];
}) {
  type Row = { key: string; change: string; name: string; from: string; to: string };
  const rows: Row[] = [
    ...(packages?.added ?? []).map((p) => ({
      key: `a:${p.reference || `${p.name}@${p.version}`}`,
      change: "Added",
      name: p.name,
      from: "",
      to: p.version,
    })),
    ...(packages?.removed ?? []).map((p) => ({
      key: `r:${p.reference || `${p.name}@${p.version}`}`,
      change: "Removed",
      name: p.name,
      from: p.version,
      to: "",
    })),
    ...(packages?.changed ?? []).map((p) => ({
      key: `c:${p.previous?.reference ?? ""}>${p.current?.reference ?? ""}:${p.name}`,
      change: "Changed",
      name: p.name,
      from: p.previous?.version ?? "",
      to: p.current?.version ?? "",
    })),
  ];
  type VRow = { key: string; change: string; v: VulnerabilityReference };
  const vrows: VRow[] = [
    ...(vulnerabilities?.added ?? []).map((v) => ({ key: `a:${v.id}:${v.reference}`, change: "Introduced", v })),
    ...(vulnerabilities?.removed ?? []).map((v) => ({ key: `r:${v.id}:${v.reference}`, change: "Fixed", v })),
  ];
  return (
    <>
      {warnings.map((w) => (
        <p key={w} className="note note-warn">
          {w}
        </p>
      ))}
      <h3>Packages since {other}</h3>
      {rows.length === 0 ? (
        <Empty>No package changed.</Empty>
      ) : (
        <div className="table-scroll">
          <DataTable<Row>
            caption={`Packages changed since ${other}`}
            rows={rows}
            rowKey={(r) => r.key}
            columns={[
              { header: "Change", cell: (r) => r.change },
              { header: "Package", cell: (r) => r.name },
              { header: `In ${other}`, cell: (r) => r.from || "—" },
              { header: "Here", cell: (r) => r.to || "—" },
            ]}
          />
        </div>
      )}
      <h3>Vulnerabilities since {other}</h3>
      {vrows.length === 0 ? (
        <Empty>No vulnerability fixed or introduced.</Empty>
      ) : (
        <div className="table-scroll">
          <DataTable<VRow>
            caption={`Vulnerabilities fixed or introduced since ${other}`}
            rows={vrows}
            rowKey={(r) => r.key}
            columns={[
              { header: "Change", cell: (r) => r.change },
              {
                header: "Vulnerability",
                cell: (r) => (
                  <Link to={href("/console/advisory", { id: r.v.reference || r.v.id })}>
                    {r.v.id}
                    {r.v.reference && r.v.reference !== r.v.id ? ` (${r.v.reference})` : ""}
                  </Link>
                ),
              },
              { header: "Severity", cell: (r) => <SeverityBadge severity={r.v.severity} /> },
            ]}
          />
        </div>
      )}
    </>
  );
}
