// `bulwark images diff|vulns|sbom`: what is inside an image and which advisories affect it, for an
// image named `<org>/[<folder>/…]<image>[:<tag>|@<digest>]` (tag default latest).
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Command } from "commander";
import { ImageContentsService } from "../../gen/bulwark/registry/v1/images_pb.js";
import { TagsService } from "../../gen/chainguard/platform/registry/v2beta1/tags_pb.js";
import { DiffImageResponseSchema } from "../../gen/platform/registry/v1/registry.platform_pb.js";
import {
  Vulnerabilities,
  Vulnerability_Fix_State,
  Vulnerability_Severity,
  VulnerabilitySchema,
  type VulnReport,
  type Vulnerability,
} from "../../gen/platform/registry/v1/vulnerabilities.platform_pb.js";
import { clientCommand, run } from "../command.js";
import { CliError, UsageError } from "../errors.js";
import type { View } from "../output.js";
import { resolveRepo } from "../resolve.js";
import type { Session } from "../session.js";

const DIGEST = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;

/** An image a user names: the repo's uid and the digest its tag or digest names. */
export interface ImageRef {
  repoUid: string;
  digest: string;
  /** as typed, for messages */
  text: string;
}

/** `<repo>[:<tag>|@<digest>]` → the repo (resolved as every `images` command does) and the digest. */
export async function resolveImage(session: Session, text: string): Promise<ImageRef> {
  let path = text;
  let tag = "latest";
  let digest: string | undefined;
  const at = text.lastIndexOf("@");
  if (at >= 0) {
    digest = text.slice(at + 1);
    path = text.slice(0, at);
    if (!DIGEST.test(digest))
      throw new UsageError(`${JSON.stringify(text)}: ${JSON.stringify(digest)} is not a digest (sha256:<64 hex>)`);
  } else {
    const colon = text.lastIndexOf(":");
    if (colon > text.lastIndexOf("/")) {
      tag = text.slice(colon + 1);
      path = text.slice(0, colon);
    }
  }
  const repo = await resolveRepo(session, path);
  if (digest) return { repoUid: repo.uid, digest, text };
  const found = await session.call(() =>
    session.client(TagsService).listTags({ uidp: { childrenOf: repo.uid }, name: tag }),
  );
  const t = found.tags.find((x) => x.name === tag);
  if (!t) throw new CliError(`${path} has no tag ${JSON.stringify(tag)} (\`bulwark images tags list ${path}\`)`);
  return { repoUid: repo.uid, digest: t.digest, text };
}

/** Our own reports name the scanner "bulwark <version>" (an uploaded one names its tool). */
export const isOurs = (r: VulnReport) => r.scanner?.version.startsWith("bulwark") ?? false;

/** The newest report of an image: ours when there is one, else the newest uploaded. */
export async function newestReport(session: Session, digest: string): Promise<VulnReport | undefined> {
  const { items } = await session.call(() => session.client(Vulnerabilities).listVulnReports({ digest }));
  const time = (r: VulnReport) => Number(r.createdAt?.seconds ?? 0n) * 1e3 + (r.createdAt?.nanos ?? 0) / 1e6;
  const sorted = [...items].sort((a, b) => time(b) - time(a));
  return sorted.find(isOurs) ?? sorted[0];
}

/** The refusals that leave a vulnerability count unknown ("-") rather than failing a listing. */
const COUNT_UNKNOWN = new Set([Code.PermissionDenied, Code.NotFound, Code.Unimplemented]);

/**
 * The vulnerability count of the newest report of ours for each image digest in a repo, from one
 * ListVulnReports (newest first). A caller who may not read reports (or a server without them)
 * gets none: the listings show "-" then, as for an image not reported yet.
 */
export async function vulnerabilityCounts(session: Session, repoUid: string): Promise<Map<string, number>> {
  const client = session.client(Vulnerabilities);
  const res = await session.call(async () => {
    try {
      return await client.listVulnReports({ repoId: repoUid });
    } catch (err) {
      if (COUNT_UNKNOWN.has(ConnectError.from(err).code)) return undefined;
      throw err;
    }
  });
  const counts = new Map<string, number>();
  for (const report of res?.items ?? [])
    if (isOurs(report) && !counts.has(report.digest)) counts.set(report.digest, report.vulnerabilities.length);
  return counts;
}

/** A count for a table: "-" when the image has no report of ours (yet). */
export const countText = (counts: ReadonlyMap<string, number>, digest: string) => String(counts.get(digest) ?? "-");

const severityName = (s: Vulnerability_Severity) => Vulnerability_Severity[s] ?? "UNKNOWN";
const fixState = (v: Vulnerability) => (v.fix ? (Vulnerability_Fix_State[v.fix.state] ?? "UNKNOWN") : "UNKNOWN");
/** "pkg:apk/wolfi/openssl@3.3.0-r0?arch=x86_64" → ["openssl", "3.3.0-r0"] */
function packageOf(purl: string): [string, string] {
  const m = /^pkg:[^/]+\/(?:[^@]*\/)?([^/@]+)@([^?#]+)/.exec(purl);
  return m ? [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!)] : [purl, ""];
}

/** One row per vulnerable package (a finding may name several). */
interface Finding {
  vulnerability: Vulnerability;
  purl: string;
}

const findingView: View<Finding> = {
  columns: [
    { header: "ID", value: (f) => f.vulnerability.id },
    { header: "ALIASES", value: (f) => f.vulnerability.aliases.join(", "), max: 40 },
    { header: "PACKAGE", value: (f) => packageOf(f.purl)[0] },
    { header: "INSTALLED", value: (f) => packageOf(f.purl)[1] },
    { header: "FIXED", value: (f) => f.vulnerability.fix?.versions.join(", ") ?? "" },
    { header: "STATE", value: (f) => fixState(f.vulnerability) },
    { header: "SEVERITY", value: (f) => severityName(f.vulnerability.severity) },
  ],
  id: (f) => f.vulnerability.id,
  json: (f) => toJson(VulnerabilitySchema, f.vulnerability),
};

export function registerImageContents(images: Command): void {
  run<{ arch?: string }>(
    clientCommand(images, "diff <from> <to>", {
      description:
        "compare two images: packages added, removed and changed; vulnerabilities fixed and introduced " +
        "(image: <org>/<image>[:<tag>|@<digest>], tag default latest)",
      examples: [
        "bulwark images diff acme/app:1.0 acme/app:1.1",
        "bulwark images diff acme/app@sha256:… acme/app -o json",
      ],
    }).option("--arch <arch>", "the platform of a multi-platform image (default amd64)"),
    async ({ session, print, opts }, fromText: string, toText: string) => {
      const [from, to] = [await resolveImage(session, fromText), await resolveImage(session, toText)];
      const diff = await session.call(() =>
        session.client(ImageContentsService).diffImages({
          repoUid: from.repoUid,
          from: from.digest,
          to: to.digest,
          toRepoUid: to.repoUid === from.repoUid ? "" : to.repoUid,
          arch: opts.arch ?? "",
        }),
      );
      if (print.format === "json")
        return print.write(JSON.stringify(toJson(DiffImageResponseSchema, diff), null, 2) + "\n");
      const p = diff.packages;
      const v = diff.vulnerabilities;
      const lines = [
        section(
          "Packages added",
          (p?.added ?? []).map((x) => `${x.name} ${x.version}`),
        ),
        section(
          "Packages removed",
          (p?.removed ?? []).map((x) => `${x.name} ${x.version}`),
        ),
        section(
          "Packages changed",
          (p?.changed ?? []).map((x) => `${x.name} ${x.previous?.version ?? ""} -> ${x.current?.version ?? ""}`),
        ),
        section(
          "Vulnerabilities fixed",
          (v?.removed ?? []).map((x) => `${x.id} ${x.severity} (${x.reference})`),
        ),
        section(
          "Vulnerabilities introduced",
          (v?.added ?? []).map((x) => `${x.id} ${x.severity} (${x.reference})`),
        ),
        ...diff.warnings.map((w) => `warning: ${w}`),
      ];
      print.write(lines.join("\n") + "\n");
    },
  );

  run(
    clientCommand(images, "vulns <image>", {
      description:
        "list the vulnerabilities of an image's newest report (ours: from the advisories this server holds) " +
        "(image: <org>/<image>[:<tag>|@<digest>], tag default latest)",
      examples: ["bulwark images vulns acme/app:1.0", "bulwark images vulns acme/app@sha256:… -o json"],
    }),
    async ({ session, print }, text: string) => {
      const image = await resolveImage(session, text);
      const report = await newestReport(session, image.digest);
      if (!report) throw new CliError(`no vulnerability report for ${text} (${image.digest}) yet`);
      const rows = report.vulnerabilities.flatMap((v) =>
        (v.purls.length ? v.purls : [""]).map((purl) => ({ vulnerability: v, purl })),
      );
      if (print.format === "json")
        return print.write(
          JSON.stringify(
            report.vulnerabilities.map((v) => toJson(VulnerabilitySchema, v)),
            null,
            2,
          ) + "\n",
        );
      print.list(findingView, rows);
    },
  );

  run<{ format: string; arch?: string }>(
    clientCommand(images, "sbom <image>", {
      description: "print an image's SBOM (image: <org>/<image>[:<tag>|@<digest>], tag default latest)",
      examples: [
        "bulwark images sbom acme/app:1.0 > sbom.spdx.json",
        "bulwark images sbom acme/app --format cyclonedx > sbom.cdx.json",
        "bulwark images sbom acme/app --arch arm64",
      ],
    })
      .option("--format <format>", "spdx (SPDX 2.3 JSON) or cyclonedx (CycloneDX 1.5 JSON)", "spdx")
      .option("--arch <arch>", "the platform of a multi-platform image (default amd64)"),
    async ({ session, print, opts }, text: string) => {
      if (opts.format !== "spdx" && opts.format !== "cyclonedx")
        throw new UsageError(`--format must be spdx or cyclonedx (got ${JSON.stringify(opts.format)})`);
      const image = await resolveImage(session, text);
      const res = await session.call(() =>
        session.client(ImageContentsService).getImageSbom({
          repoUid: image.repoUid,
          digest: image.digest,
          format: opts.format,
          arch: opts.arch ?? "",
        }),
      );
      print.write(res.document.endsWith("\n") ? res.document : res.document + "\n");
    },
  );
}

function section(title: string, items: string[]): string {
  return `${title} (${items.length}):` + (items.length ? "\n" + items.map((i) => `  ${i}`).join("\n") : "");
}
