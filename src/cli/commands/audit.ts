// `bulwark audit list`: the audit trail (every recorded event: changes through the API, registry
// pushes and pulls, sign-ins and refused credentials), through the extension's AuditService.
// `--follow` keeps asking for newer events, oldest first, until Ctrl-C.
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { setTimeout as sleep } from "node:timers/promises";
import { InvalidArgumentError, Option, type Command } from "commander";
import { AuditService, EventSchema, type Event } from "../../gen/bulwark/events/v1/events_pb.js";
import { isValidUidp } from "../../core/uidp.js";
import { clientCommand, commaList, run } from "../command.js";
import { durationMillis } from "../durations.js";
import { UsageError } from "../errors.js";
import { listAll, messageView, time, type Printer } from "../output.js";
import { parentUid, resolveIdentity } from "../resolve.js";
import type { Session } from "../session.js";
import { parsePastTime } from "./events.js";

const eventView = messageView(EventSchema, [
  { header: "TIME", value: (e) => time(e.time) },
  { header: "TYPE", value: (e) => e.type, max: 50 },
  { header: "SUBJECT", value: (e) => e.subject, max: 60 },
  { header: "ACTOR", value: (e) => e.actor?.subject ?? "", max: 60 },
  { header: "GROUP", value: (e) => e.group, wide: true },
  { header: "ID", value: (e) => e.uid, wide: true },
  { header: "SOURCE", value: (e) => e.source, wide: true },
]);

/** How many recent events `--follow` shows first without --since or --limit (as `tail -f`). */
const FOLLOW_BACKLOG = 10;
/**
 * How far back each poll of `--follow` looks before the newest event it has seen: an event's time
 * is taken when its change starts and it becomes visible when that commits, so one can appear
 * after a newer one. Those seen are not printed twice.
 */
const FOLLOW_OVERLAP_MS = 10_000;
const MIN_POLL_MS = 100;

/** --poll-interval: a duration of at least 100ms. */
function parsePollInterval(value: string): number {
  const millis = durationMillis(value);
  if (millis === undefined || millis < MIN_POLL_MS)
    throw new InvalidArgumentError(`expected a duration of at least ${MIN_POLL_MS}ms (2s, 500ms), got "${value}"`);
  return millis;
}

/** What every ListEvents call of one `audit list` asks for. */
interface EventFilter {
  uidp?: { descendantsOf: string };
  types: string[];
  actor: string;
  subject: string;
}

interface EventPage {
  orderBy?: string;
  startTime?: Timestamp;
  pageSize: number;
  pageToken?: string;
}

/** An actor as typed: a uid (or another principal's subject, `bulwark:operator`) as is, else an identity's name. */
async function actorSubject(session: Session, ref: string): Promise<string> {
  if (isValidUidp(ref) || ref.includes(":")) return ref;
  return (await resolveIdentity(session, ref)).uid;
}

const millisOf = (e: Event) => (e.time ? timestampDate(e.time).getTime() : 0);

/**
 * Prints matching events as they are recorded until `stop` is aborted: first the backlog (every
 * event since `since`, else the last `backlog`), then, every `interval`, what is newer.
 */
async function follow(
  session: Session,
  print: Printer,
  filter: EventFilter,
  options: { since?: Date; backlog: number; interval: number; stop: AbortSignal },
): Promise<void> {
  const client = session.client(AuditService);
  const { stop } = options;
  const emit = print.stream(eventView);
  /** uid → time of the events printed within the overlap window */
  const seen = new Map<string, number>();
  let newest = 0;
  /** events older than this are not printed (the backlog's cut) */
  let horizon = options.since?.getTime() ?? 0;

  const page = (request: EventPage) =>
    session.call(() => client.listEvents({ ...filter, ...request }, { signal: stop }));

  const show = (events: Event[]) => {
    const fresh = events.filter((e) => !seen.has(e.uid) && millisOf(e) >= horizon);
    for (const e of fresh) {
      seen.set(e.uid, millisOf(e));
      newest = Math.max(newest, millisOf(e));
    }
    emit(fresh);
  };
  /** every event at or after `from`, oldest first */
  const since = (from: number | undefined) =>
    listAll(async (pageToken, pageSize) => {
      const res = await page({
        orderBy: "time asc",
        startTime: from === undefined ? undefined : timestampFromDate(new Date(from)),
        pageSize,
        pageToken,
      });
      return { items: res.events, nextPageToken: res.nextPageToken };
    });

  try {
    if (options.since) show(await since(horizon));
    else {
      const latest = (await page({ pageSize: options.backlog })).events.reverse();
      horizon = latest.length ? millisOf(latest[0]!) : 0;
      show(latest);
    }
    for (;;) {
      await sleep(options.interval, undefined, { signal: stop });
      const from = newest ? newest - FOLLOW_OVERLAP_MS : options.since?.getTime();
      show(await since(from));
      for (const [uid, at] of seen) if (at < newest - FOLLOW_OVERLAP_MS) seen.delete(uid);
    }
  } catch (err) {
    if (stop.aborted) return; // Ctrl-C: the normal end of a follow
    throw err;
  }
}

export function registerAudit(program: Command): void {
  const audit = program.command("audit").description("the audit trail: every recorded event");

  run<{
    since?: Date;
    until?: Date;
    type?: string[];
    actor?: string;
    subject?: string;
    follow?: boolean;
    pollInterval: number;
  }>(
    clientCommand(audit, "list", {
      description:
        "list recorded events of --parent and the groups below it (or of every group where you may list subscriptions), newest first",
      examples: [
        "bulwark audit list --parent acme --since 1h",
        "bulwark audit list --type dev.chainguard.registry. --since 2030-01-31T00:00:00Z -o json",
        "bulwark audit list --actor <identity uid or name> --limit 20",
        "bulwark audit list --parent acme --follow -o json     # one JSON object per line, until Ctrl-C",
      ],
      parent: true,
      list: true,
    })
      .addOption(
        new Option("--since <time>", "recorded at or after: a duration ago (1h, 7d) or an RFC 3339 time").argParser(
          parsePastTime,
        ),
      )
      .addOption(
        new Option("--until <time>", "recorded before: a duration ago or an RFC 3339 time").argParser(parsePastTime),
      )
      .addOption(
        new Option(
          "--type <type>",
          'only this type; ending in "." a prefix (dev.chainguard.registry.); repeatable or comma-separated',
        ).argParser(commaList),
      )
      .option(
        "--actor <identity>",
        "only events caused by this identity (uid or name; `bulwark:operator` for the operator)",
      )
      .option("--subject <uid>", "only events about this resource (its uid)")
      .option(
        "-f, --follow",
        "keep printing new events, oldest first, until Ctrl-C (-o json: one object per line); shows the last 10 first (--limit: more), or all since --since",
      )
      .addOption(
        new Option("--poll-interval <duration>", "with --follow: how often to ask for new events")
          .argParser(parsePollInterval)
          .default(2000, "2s"),
      ),
    async ({ session, print, opts, io }) => {
      if (opts.follow && opts.until) throw new UsageError("--follow and --until cannot go together");
      if (opts.since && opts.until && opts.until <= opts.since) throw new UsageError("--until must be after --since");
      const parent = await parentUid(session);
      const filter: EventFilter = {
        uidp: parent ? { descendantsOf: parent } : undefined,
        types: opts.type ?? [],
        actor: opts.actor === undefined ? "" : await actorSubject(session, opts.actor),
        subject: opts.subject ?? "",
      };
      if (opts.follow) {
        await follow(session, print, filter, {
          since: opts.since,
          backlog: opts.limit ?? FOLLOW_BACKLOG,
          interval: opts.pollInterval,
          stop: io.interrupted?.() ?? new AbortController().signal,
        });
        return;
      }
      const client = session.client(AuditService);
      const rows = await listAll(async (pageToken, pageSize) => {
        const res = await session.call(() =>
          client.listEvents({
            ...filter,
            startTime: opts.since && timestampFromDate(opts.since),
            endTime: opts.until && timestampFromDate(opts.until),
            pageSize,
            pageToken,
          }),
        );
        return { items: res.events, nextPageToken: res.nextPageToken };
      }, opts.limit);
      print.list(eventView, rows);
    },
  );
}
