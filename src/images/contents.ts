// The extension bulwark.registry.v1.ImageContentsService: an image's inventory as the server read
// it (GetImageInventory), and the difference between two images (DiffImages: packages by
// (type, name), vulnerabilities from the newest report of ours for each image).
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { invalidArgument } from "../core/errors.js";
import { bindService, type CallContext, type ServiceBinding } from "../core/service.js";
import { optionalUid, requireUid } from "../core/validate.js";
import {
  DiffImagesRequestSchema,
  ImageContentsService,
  ImageInventory_State,
  ImageInventorySchema,
  type DiffImagesRequest,
  type GetImageSbomRequest,
  type ImageInventory,
  type ImageSbom,
} from "../gen/bulwark/registry/v1/images_pb.js";
import * as v1 from "../gen/platform/registry/v1/registry.platform_pb.js";
import {
  Scanner_Name,
  Vulnerabilities,
  Vulnerability_Severity,
  type VulnReport,
  type Vulnerability,
} from "../gen/platform/registry/v1/vulnerabilities.platform_pb.js";
import { checkDigest, imageFor, pickPlatform, readManifest, type ManifestReads } from "./image-manifests.js";
import { readInventories, type InventoryView } from "./image-info.js";
import type { InstalledPackage } from "./inventory/types.js";
import { delegateTo } from "../platform/v1.js";

export interface ContentsDeps {
  registry: ManifestReads;
  inventories: { get(digests: string[]): Promise<InventoryView[]> };
  /**
   * The newest report of ours for an image, as the caller may see it (findings of advisories it
   * cannot see left out); undefined when there is none or the caller may read none.
   */
  newestReport(repoUid: string, digest: string, call: CallContext): Promise<VulnReport | undefined>;
  /** GetImageSbom (sboms.ts imageSbomHandler) */
  imageSbom(req: GetImageSbomRequest): Promise<ImageSbom>;
}

/**
 * The newest report of ours for an image, as the caller may see it: through the Vulnerabilities
 * service's ListVulnReports (authorized as that RPC, CAP_VULN_REPORT_LIST, with its visibility:
 * findings of advisories the caller cannot see are left out there). Listed by digest, so the
 * newest report of ours in any repo the caller may read answers. Any version of ours: a report is
 * written only when its findings change, so the newest may predate the running version.
 */
export function newestReportOfOurs(vulnerabilities: ServiceBinding): ContentsDeps["newestReport"] {
  const list = delegateTo(Vulnerabilities, [vulnerabilities]);
  return async (_repoUid, digest, call) => {
    const { items } = await list(
      "listVulnReports",
      // UNKNOWN: our scanner's name (uploaded reports must name theirs)
      { digest, scanner: { name: Scanner_Name.UNKNOWN } },
      call,
    );
    return items[0];
  };
}

const STATES = {
  pending: ImageInventory_State.PENDING,
  done: ImageInventory_State.DONE,
  failed: ImageInventory_State.FAILED,
} as const;

function inventoryMessage(digest: string, row: InventoryView | undefined): ImageInventory {
  // Queued with the push in one transaction, so a missing row is one the indexer has yet to see.
  if (!row || row.state !== "done")
    return create(ImageInventorySchema, {
      digest,
      state: row ? STATES[row.state] : ImageInventory_State.PENDING,
      error: row?.error ?? "",
    });
  return create(ImageInventorySchema, {
    digest,
    state: ImageInventory_State.DONE,
    os: row.os,
    architecture: row.architecture,
    variant: row.variant,
    created: row.created ? timestampFromDate(row.created) : undefined,
    labels: row.config.Labels ?? {},
    sizeCompressed: BigInt(row.sizeCompressed),
    sizeUncompressed: BigInt(row.sizeUncompressed),
    packageSource: row.packageSource,
    packages: row.packages,
    distro: row.distro,
    distroVersion: row.distroVersion,
    indexedAt: row.indexTime ? timestampFromDate(row.indexTime) : undefined,
  });
}

async function imageInventory(deps: ContentsDeps, repoUid: string, digest: string, arch: string) {
  const top = await readManifest(deps.registry, repoUid, digest);
  let digests = [digest];
  if (top.kind === "index") {
    // An arch no platform has is NOT_FOUND (naming the ones there are).
    digests = arch ? [pickPlatform(top, arch).digest] : top.platforms.map((p) => p.digest);
  }
  const rows = new Map((await deps.inventories.get(digests)).map((r) => [r.digest, r]));
  return digests.map((d) => inventoryMessage(d, rows.get(d)));
}

const key = (p: InstalledPackage) => `${p.type}\u0000${p.name}`;

/** Packages added, removed and changed (by type and name) from `from` to `to`, each sorted by name. */
export function packagesDiff(from: readonly InstalledPackage[], to: readonly InstalledPackage[]): v1.PackagesDiff {
  const before = new Map(from.map((p) => [key(p), p]));
  const after = new Map(to.map((p) => [key(p), p]));
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const ref = (p: InstalledPackage) => ({ name: p.name, version: p.version, reference: p.purl });
  return create(v1.PackagesDiffSchema, {
    added: to
      .filter((p) => !before.has(key(p)))
      .sort(byName)
      .map(ref),
    removed: from
      .filter((p) => !after.has(key(p)))
      .sort(byName)
      .map(ref),
    changed: to
      .filter((p) => before.has(key(p)) && before.get(key(p))!.version !== p.version)
      .sort(byName)
      .map((p) => {
        const old = before.get(key(p))!;
        return {
          name: p.name,
          current: { version: p.version, reference: p.purl },
          previous: { version: old.version, reference: old.purl },
        };
      }),
  });
}

/** A report's vulnerabilities by id (one advisory may concern several packages: listed once). */
function vulnerabilitiesById(report: VulnReport | undefined): Map<string, Vulnerability> {
  const out = new Map<string, Vulnerability>();
  for (const v of report?.vulnerabilities ?? []) if (!out.has(v.id)) out.set(v.id, v);
  return out;
}

function vulnerabilityRef(v: Vulnerability): v1.VulnerabilityReference {
  // The id people search for (a CVE when the advisory has one); the reference is the advisory.
  const cve = v.aliases.find((a) => a.startsWith("CVE-"));
  return create(v1.VulnerabilityReferenceSchema, {
    id: cve ?? v.id,
    reference: v.id,
    severity: Vulnerability_Severity[v.severity] ?? "UNKNOWN",
  });
}

/** Vulnerabilities introduced (`added`) and fixed (`removed`) from `from`'s report to `to`'s. */
export function vulnerabilitiesDiff(
  from: { digest: string; report: VulnReport | undefined },
  to: { digest: string; report: VulnReport | undefined },
): v1.VulnerabilitiesDiff {
  const before = vulnerabilitiesById(from.report);
  const after = vulnerabilitiesById(to.report);
  const sorted = (m: Map<string, Vulnerability>, without: Map<string, Vulnerability>) =>
    [...m.keys()]
      .filter((id) => !without.has(id))
      .sort()
      .map((id) => vulnerabilityRef(m.get(id)!));
  const metadata = [from, to]
    .filter((x) => x.report)
    .map(({ digest, report }) =>
      create(v1.ScannerMetadataSchema, {
        digest,
        scanner: { name: "bulwark", version: report!.scanner?.version ?? "" },
        vulnerabilityDbLastBuildTime: report!.scanner?.dbBuildTime,
      }),
    );
  return create(v1.VulnerabilitiesDiffSchema, {
    added: sorted(after, before),
    removed: sorted(before, after),
    metadata,
  });
}

async function diffImages(deps: ContentsDeps, req: DiffImagesRequest, call: CallContext) {
  requireUid("repo_uid", req.repoUid);
  optionalUid("to_repo_uid", req.toRepoUid);
  checkDigest("from", req.from);
  checkDigest("to", req.to);
  const toRepo = req.toRepoUid || req.repoUid;
  // The RPC was authorized on `repo_uid`; the other repo needs the same rule.
  if (toRepo !== req.repoUid) {
    if (!call.authorizeAs) throw new Error("DiffImages called outside the server's pipeline");
    await call.authorizeAs(
      ImageContentsService.method.diffImages,
      create(DiffImagesRequestSchema, { ...req, repoUid: toRepo, toRepoUid: "" }),
    );
  }
  const from = await imageFor(deps.registry, req.repoUid, req.from, req.arch);
  const to = await imageFor(deps.registry, toRepo, req.to, req.arch);
  const [before, after] = await readInventories(deps, [from.digest, to.digest]);
  const warnings: string[] = [];
  const reports = await Promise.all([
    deps.newestReport(req.repoUid, from.digest, call),
    deps.newestReport(toRepo, to.digest, call),
  ]);
  for (const [i, digest] of [from.digest, to.digest].entries())
    if (!reports[i]) warnings.push(`no vulnerability report for ${digest} yet: its vulnerabilities are not compared`);
  return create(v1.DiffImageResponseSchema, {
    packages: packagesDiff(before!.packages, after!.packages),
    vulnerabilities: vulnerabilitiesDiff(
      { digest: from.digest, report: reports[0] },
      { digest: to.digest, report: reports[1] },
    ),
    warnings,
  });
}

export function imageContentsService(deps: ContentsDeps): ServiceBinding {
  return bindService(ImageContentsService, {
    async getImageInventory(req) {
      requireUid("repo_uid", req.repoUid);
      checkDigest("digest", req.digest);
      if (req.arch.length > 64) throw invalidArgument({ field: "arch", description: "at most 64 characters" });
      return { items: await imageInventory(deps, req.repoUid, req.digest, req.arch) };
    },
    diffImages: (req, call) => diffImages(deps, req, call),
    getImageSbom: (req) => deps.imageSbom(req),
  });
}
