// `bulwark advisories`: read the advisories the server holds (list, describe) and import
// advisory documents into it.
import type { Command } from "commander";
import {
  AdvisoriesService,
  AdvisoryEvent_FalsePositiveDetermination_Type,
  AdvisorySchema,
  EventTypeFilter,
  type Advisory,
  type AdvisoryEvent,
} from "../../gen/chainguard/platform/vulnerabilities/v2beta1/advisories_pb.js";
import { AdvisoryImportService } from "../../gen/bulwark/vulnerabilities/v1/import_pb.js";
import { importAdvisories, summaryLine } from "../advisories.js";
import { groupUid } from "../resolve.js";
import { clientCommand, repeatable, run } from "../command.js";
import { isValidUidp } from "../../core/uidp.js";
import { CliError, UsageError } from "../errors.js";
import { listAll, messageView, time, type View } from "../output.js";
import type { Session } from "../session.js";

/** Vulnerability ids an advisory carries as aliases; any other id (CGA-…, RUSTSEC-…) is an advisory's own. */
const ALIAS_ID = /^(CVE|GHSA|GO)-/i;

type EventCase = NonNullable<AdvisoryEvent["type"]["case"]>;

/** Each event type: its name in advisory documents, the status it gives an advisory when latest, its filter. */
const EVENT_TYPES: Record<EventCase, { kind: string; status: string; filter: EventTypeFilter }> = {
  detection: { kind: "detection", status: "under-investigation", filter: EventTypeFilter.DETECTION },
  truePositiveDetermination: {
    kind: "true-positive-determination",
    status: "affected",
    filter: EventTypeFilter.TRUE_POSITIVE_DETERMINATION,
  },
  falsePositiveDetermination: {
    kind: "false-positive-determination",
    status: "not-affected",
    filter: EventTypeFilter.FALSE_POSITIVE_DETERMINATION,
  },
  pendingUpstreamFix: {
    kind: "pending-upstream-fix",
    status: "pending-upstream-fix",
    filter: EventTypeFilter.PENDING_UPSTREAM_FIX,
  },
  fixed: { kind: "fixed", status: "fixed", filter: EventTypeFilter.FIXED },
  fixNotPlanned: { kind: "fix-not-planned", status: "fix-not-planned", filter: EventTypeFilter.FIX_NOT_PLANNED },
  patched: { kind: "patched", status: "patched", filter: EventTypeFilter.PATCHED },
  analysisNotPlanned: {
    kind: "analysis-not-planned",
    status: "analysis-not-planned",
    filter: EventTypeFilter.ANALYSIS_NOT_PLANNED,
  },
};

const STATUS_WORDS = Object.values(EVENT_TYPES).map((t) => t.status);

/** `--status` in words ("fixed", "not affected", "NOT_AFFECTED") as the latest-event filter. */
export function statusFilter(word: string): EventTypeFilter {
  const normalized = word
    .trim()
    .toLowerCase()
    .replace(/[\s_]+/g, "-");
  const found = Object.values(EVENT_TYPES).find((t) => t.status === normalized);
  if (!found) throw new UsageError(`unknown status ${JSON.stringify(word)}: use one of ${STATUS_WORDS.join(", ")}`);
  return found.filter;
}

/** Events oldest first (the server sends them so; a stable sort keeps ties in its order). */
function history(a: Advisory): AdvisoryEvent[] {
  const earlier = (x: AdvisoryEvent, y: AdvisoryEvent) => {
    const [sx, sy] = [x.createTime?.seconds ?? 0n, y.createTime?.seconds ?? 0n];
    return sx !== sy ? (sx < sy ? -1 : 1) : (x.createTime?.nanos ?? 0) - (y.createTime?.nanos ?? 0);
  };
  return [...a.events].sort(earlier);
}

/** The advisory's status: its latest event's, with the versions a fix or patch names. */
export function statusOf(a: Advisory): string {
  const latest = history(a).at(-1)?.type;
  if (!latest?.case) return "";
  const status = EVENT_TYPES[latest.case].status;
  if (latest.case === "fixed" && latest.value.fixedVersion) return `${status} (${latest.value.fixedVersion})`;
  if (latest.case === "patched" && latest.value.patchedVersions.length)
    return `${status} (${latest.value.patchedVersions.join(", ")})`;
  return status;
}

/** What an event says beyond its type, in a line. */
function eventDetails(e: AdvisoryEvent): string {
  const t = e.type;
  const parts: string[] = [];
  switch (t.case) {
    case undefined:
      break;
    case "detection": {
      const d = t.value.type;
      if (d.case === "manual") parts.push("manual");
      if (d.case === "nvdapi") parts.push(`nvdapi: ${d.value.cpeFound || d.value.cpeSearched}`);
      if (d.case === "scanv1")
        parts.push(
          `scan/v1: ${[d.value.component, d.value.componentVersion].filter(Boolean).join(" ")}` +
            (d.value.componentType ? ` (${d.value.componentType})` : ""),
        );
      break;
    }
    case "fixed":
      if (t.value.fixedVersion) parts.push(`fixed version ${t.value.fixedVersion}`);
      parts.push(t.value.note);
      break;
    case "patched":
      if (t.value.patchedVersions.length) parts.push(`patched versions ${t.value.patchedVersions.join(", ")}`);
      parts.push(t.value.note);
      break;
    case "falsePositiveDetermination":
      if (t.value.type !== AdvisoryEvent_FalsePositiveDetermination_Type.UNSPECIFIED)
        parts.push(AdvisoryEvent_FalsePositiveDetermination_Type[t.value.type].toLowerCase().replace(/_/g, "-"));
      parts.push(t.value.note);
      break;
    default:
      parts.push(t.value.note);
  }
  if (e.issue) parts.push(`issue ${e.issue}`);
  return parts.filter(Boolean).join("; ");
}

/** The publisher group: the advisory's uid without its last part. */
const groupOf = (a: Advisory) => a.uid.slice(0, a.uid.lastIndexOf("/"));

export const advisoryView = messageView(AdvisorySchema, [
  { header: "ID", value: (a) => a.advisoryId },
  { header: "PACKAGE", value: (a) => a.artifactName },
  { header: "VULNERABILITY", value: (a) => a.aliases.join(", "), max: 36 },
  { header: "STATUS", value: statusOf, max: 32 },
  { header: "UPDATED", value: (a) => time(a.updateTime) },
  { header: "EVENTS", value: (a) => String(a.events.length), wide: true },
  { header: "GROUP", value: groupOf, wide: true },
]);

/** The event history under `describe` (the Printer's table, so -o wide shows more). */
const eventView: View<AdvisoryEvent> = {
  columns: [
    { header: "TIME", value: (e) => time(e.createTime) },
    { header: "TYPE", value: (e) => (e.type.case ? EVENT_TYPES[e.type.case].kind : "") },
    { header: "DETAILS", value: eventDetails, max: 80 },
    { header: "AUTHOR", value: (e) => e.author, wide: true },
  ],
  id: (e) => e.uid,
  json: () => undefined,
};

/** The filters of ListAdvisories the commands use (all must hold). */
interface AdvisoryFilters {
  uidp?: { childrenOf: string };
  advisoryIds?: string[];
  aliases?: string[];
  artifactNames?: string[];
  componentNames?: string[];
  latestEventType?: EventTypeFilter;
  query?: string;
}

/** Every advisory a list request matches, page after page. */
export async function listAdvisories(session: Session, filters: AdvisoryFilters, limit?: number): Promise<Advisory[]> {
  const client = session.client(AdvisoriesService);
  return listAll(async (pageToken, pageSize) => {
    const res = await session.call(() => client.listAdvisories({ ...filters, pageSize, pageToken }));
    return { items: res.advisories, nextPageToken: res.nextPageToken };
  }, limit);
}

/** An advisory by uid, or by its id (CGA-…), which must then name one advisory among those the caller sees. */
async function resolveAdvisory(session: Session, ref: string, parent?: string): Promise<Advisory> {
  if (isValidUidp(ref)) return session.call(() => session.client(AdvisoriesService).getAdvisory({ uid: ref }));
  const found = await listAdvisories(session, {
    advisoryIds: [ref],
    uidp: parent ? { childrenOf: parent } : undefined,
  });
  if (found.length === 1) return found[0]!;
  if (found.length > 1)
    throw new CliError(
      `${found.length} advisories have the id ${ref} (one per publisher group): pass --parent <group> or a uid ` +
        `(${found.map((a) => a.uid).join(", ")})`,
    );
  const where = parent ? ` in the group ${parent}` : "";
  if (ALIAS_ID.test(ref))
    throw new CliError(
      `no advisory has the id ${ref}${where}: it is a vulnerability id; ` +
        `find its advisories with \`bulwark advisories list --vulnerability ${ref}\``,
    );
  throw new CliError(`no advisory with the id ${ref} is visible to you${where}`);
}

/** `describe` for people: the advisory's fields, then its events oldest first. */
function describeBlock(a: Advisory): string {
  const fields: [string, string][] = [
    ["Advisory", a.advisoryId],
    ["UID", a.uid],
    ["Group", groupOf(a)],
    ["Package", [a.artifactName, a.artifactType && `(${a.artifactType})`].filter(Boolean).join(" ")],
    ["Component", a.componentName !== a.artifactName ? a.componentName : ""],
    ["Legacy ID", a.legacyAdvisoryId ?? ""],
    ["Aliases", a.aliases.join(", ") || "none"],
    ["Status", statusOf(a)],
    ["Severity", a.severities.map((s) => s.score).join(", ")],
    ["Created", time(a.createTime)],
    ["Updated", time(a.updateTime)],
  ];
  const shown = fields.filter(([, value]) => value !== "");
  const width = Math.max(...shown.map(([label]) => label.length)) + 1;
  return shown.map(([label, value]) => `${`${label}:`.padEnd(width)}  ${value}`).join("\n") + "\n";
}

export function registerAdvisories(program: Command): void {
  const advisories = program.command("advisories").description("vulnerability advisories");

  run<{
    parent?: string;
    package?: string[];
    component?: string[];
    vulnerability?: string;
    status?: string;
    search?: string;
  }>(
    clientCommand(advisories, "list", {
      description: "list the advisories you can read, by id",
      examples: [
        "bulwark advisories list --package openssl",
        "bulwark advisories list --vulnerability CVE-2024-2236 -o wide",
        "bulwark advisories list --parent <publisher group uid> --status fixed --limit 20",
        "bulwark advisories list --status under-investigation -o json",
      ],
      list: true,
    })
      // Not the framework's --parent: the configured default group is the caller's own, rarely
      // the one that publishes advisories, so nothing narrows the list unless asked.
      .option(
        "--parent <group>",
        "only advisories published by this group (uid, name or path); default: every group you can read",
      )
      .option("--package <name>", "only advisories of this package (repeat for several)", repeatable)
      .option(
        "--component <name>",
        "only advisories of this component inside a package (repeat for several)",
        repeatable,
      )
      .option("--vulnerability <id>", "only advisories with this id (CGA-…, RUSTSEC-…) or alias (CVE-…, GHSA-…, GO-…)")
      .option(
        "--status <status>",
        `only advisories in this status (from their latest event): ${STATUS_WORDS.join(", ")}`,
      )
      .option("--search <text>", "only advisories whose ids, aliases or names contain this text"),
    async ({ session, print, opts }) => {
      const vulnerability = opts.vulnerability?.trim();
      const filters: AdvisoryFilters = {
        uidp: opts.parent ? { childrenOf: await groupUid(session, opts.parent) } : undefined,
        artifactNames: opts.package ?? [],
        componentNames: opts.component ?? [],
        latestEventType: opts.status === undefined ? undefined : statusFilter(opts.status),
        query: opts.search ?? "",
      };
      if (vulnerability) {
        if (ALIAS_ID.test(vulnerability)) filters.aliases = [vulnerability.replace(ALIAS_ID, (p) => p.toUpperCase())];
        else filters.advisoryIds = [vulnerability];
      }
      print.list(advisoryView, await listAdvisories(session, filters, opts.limit));
    },
  );

  run<{ parent?: string }>(
    clientCommand(advisories, "describe <advisory>", {
      description: "show one advisory (by id, CGA-…, or uid) and its events, oldest first",
      examples: [
        "bulwark advisories describe CGA-2pv6-4gjh-fqfr",
        "bulwark advisories describe <advisory uid> -o json",
      ],
    }).option("--parent <group>", "the publisher group (uid, name or path), when several publish the same id"),
    async ({ session, print, opts }, ref: string) => {
      const parent = opts.parent === undefined ? undefined : await groupUid(session, opts.parent);
      const advisory = await resolveAdvisory(session, ref.trim(), parent);
      if (print.format !== "table" && print.format !== "wide") {
        print.one(advisoryView, advisory);
        return;
      }
      print.write(describeBlock(advisory) + "\nEvents (oldest first):\n");
      print.list(eventView, history(advisory));
    },
  );

  run<{ group?: string; author?: string; origin?: string }>(
    clientCommand(advisories, "import <path...>", {
      description:
        "import advisory YAML documents and OSV JSON records (files or directories) through the running server",
      examples: [
        "BULWARK_TOKEN=$(bulwark admin token) bulwark advisories import ./advisories --group <uid>",
        "bulwark advisories import wolfi/openssl.advisories.yaml",
      ],
    })
      .option(
        "--group <group>",
        "the publisher group: uid, name or path (default: the server's first --public-advisories group) [env BULWARK_ADVISORY_GROUP]",
      )
      .option("--author <name>", "recorded as the author of what is imported (default: your identity)")
      .option("--origin <name>", 'recorded as the origin (default: "advisory-yaml" or "osv", by format)')
      .addHelpText(
        "after",
        "\nThe token needs advisories.create and advisories.update on the group. A progress bar is drawn on a\n" +
          "terminal. Exit status 1 when a document was skipped.\n",
      ),
    async ({ session, print, opts, io }, paths: string[] | string) => {
      const groupRef = opts.group ?? io.env.BULWARK_ADVISORY_GROUP;
      const group = groupRef === undefined || groupRef === "" ? undefined : await groupUid(session, groupRef);
      const summary = await session.call(() =>
        importAdvisories({
          paths: Array.isArray(paths) ? paths : [paths],
          client: session.client(AdvisoryImportService),
          group,
          author: opts.author,
          origin: opts.origin,
          say: (line) => void io.stderr.write(line + "\n"),
          progress: io.stderr,
        }),
      );
      print.done(summaryLine(summary), { json: summary });
      if (summary.skipped > 0) io.exitCode = 1;
    },
  );
}
