// `bulwark events`: subscriptions (webhooks) and their deliveries. A subscription without --type is
// made by the published SubscriptionsService (as the hosted CLI does, so it works against any
// server of that API); with --type by the documented extension SubscriptionFiltersService, which
// lets it receive only the event types it names. Deliveries and redelivery are the extension's
// DeliveriesService.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { InvalidArgumentError, Option, type Command } from "commander";
import {
  DeliveriesService,
  DeliverySchema,
  Delivery_State,
  FilteredSubscriptionSchema,
  SubscriptionFiltersService,
  type FilteredSubscription,
} from "../../gen/bulwark/events/v1/events_pb.js";
import { SubscriptionsService } from "../../gen/chainguard/platform/events/v2beta1/subscriptions_pb.js";
import { clientCommand, commaList, run } from "../command.js";
import { confirm } from "../confirm.js";
import { timeAgoOrAt } from "../durations.js";
import { UsageError } from "../errors.js";
import { listAll, messageView, time } from "../output.js";
import { parentUid } from "../resolve.js";
import type { Session } from "../session.js";

const ALL_TYPES = "(all)";

/** A published Subscription in the extension's shape: no type filter. */
const unfiltered = (s: { uid: string; sink: string }) =>
  create(FilteredSubscriptionSchema, { uid: s.uid, sink: s.sink });

const subscriptionView = messageView(FilteredSubscriptionSchema, [
  { header: "ID", value: (s) => s.uid },
  { header: "SINK", value: (s) => s.sink, max: 60 },
  { header: "TYPES", value: (s) => (s.types.length ? s.types.join(", ") : ALL_TYPES), max: 60 },
]);

const STATES: Record<string, Delivery_State> = {
  pending: Delivery_State.PENDING,
  delivered: Delivery_State.DELIVERED,
  failed: Delivery_State.FAILED,
};
const stateName = (state: Delivery_State) => Object.entries(STATES).find(([, v]) => v === state)?.[0] ?? String(state);

const deliveryView = messageView(
  DeliverySchema,
  [
    { header: "EVENT", value: (d) => d.eventId },
    { header: "TYPE", value: (d) => d.eventType, max: 50 },
    { header: "STATE", value: (d) => stateName(d.state) },
    { header: "ATTEMPTS", value: (d) => String(d.attempts) },
    { header: "STATUS", value: (d) => (d.lastStatusCode ? String(d.lastStatusCode) : "") },
    { header: "NEXT ATTEMPT", value: (d) => time(d.nextAttemptTime) },
    { header: "LAST ERROR", value: (d) => d.lastError, max: 40 },
    { header: "SUBJECT", value: (d) => d.eventSubject, wide: true },
    { header: "EVENT TIME", value: (d) => time(d.eventTime), wide: true },
    { header: "LAST ATTEMPT", value: (d) => time(d.lastAttemptTime), wide: true },
    { header: "DELIVERED", value: (d) => time(d.deliveredTime), wide: true },
  ],
  (d) => d.eventId,
);

/** --state: pending, delivered or failed (repeatable, or comma-separated). */
function parseStates(values: string[]): Delivery_State[] {
  return values.map((v) => {
    const state = STATES[v.toLowerCase()];
    if (state === undefined)
      throw new UsageError(`--state takes ${Object.keys(STATES).join(", ")}, got ${JSON.stringify(v)}`);
    return state;
  });
}

/** --since / --until: a duration ago (`1h`) or an RFC 3339 time. */
export function parsePastTime(value: string): Date {
  const at = timeAgoOrAt(value);
  if (!at) throw new InvalidArgumentError(`expected a duration ago (1h, 30m, 7d) or an RFC 3339 time, got "${value}"`);
  return at;
}

/**
 * Each subscription with its type filter, read through the extension; a server without the
 * extension (the hosted service) has none: every subscription there receives every type.
 */
async function withTypes(
  session: Session,
  subscriptions: { uid: string; sink: string }[],
): Promise<FilteredSubscription[]> {
  const filters = session.client(SubscriptionFiltersService);
  const out: FilteredSubscription[] = [];
  let extension = true;
  // One Get per subscription, a few at a time: lists of subscriptions are short.
  for (let i = 0; i < subscriptions.length; i += 8) {
    const batch = subscriptions.slice(i, i + 8);
    const found = await Promise.all(
      batch.map(async (s) => {
        if (!extension) return undefined;
        try {
          return await filters.getFilteredSubscription({ uid: s.uid });
        } catch (err) {
          if (err instanceof ConnectError && err.code === Code.Unimplemented) {
            extension = false;
            return undefined;
          }
          // deleted since it was listed: shown as listed
          if (err instanceof ConnectError && err.code === Code.NotFound) return undefined;
          throw err;
        }
      }),
    );
    batch.forEach((s, j) => out.push(found[j] ?? unfiltered(s)));
  }
  return out;
}

export function registerEvents(program: Command): void {
  const events = program.command("events").description("event subscriptions (webhooks) and their deliveries");
  const subscriptions = events
    .command("subscriptions")
    .alias("subscription")
    .description("where events are delivered: an https URL per subscription, for a group's subtree");

  run<{ type?: string[] }>(
    clientCommand(subscriptions, "create <sink>", {
      description:
        "subscribe SINK (an https URL) to the events of --parent and every group below it; --type: only those types",
      examples: [
        "bulwark events subscriptions create https://hooks.example.com/bulwark --parent acme",
        "bulwark events subscriptions create https://hooks.example.com/registry --parent acme --type dev.chainguard.registry.",
        "bulwark events subscriptions create https://siem.example.com/in --parent acme/team \\\n" +
          "    --type dev.chainguard.api.iam.group.created.v1,dev.chainguard.api.iam.group.deleted.v1",
      ],
      parent: true,
    }).addOption(
      new Option(
        "--type <type>",
        'only events of this type; ending in "." a prefix (dev.chainguard.registry.); repeatable or comma-separated',
      ).argParser(commaList),
    ),
    async ({ session, print, opts }, sink: string) => {
      const parent = await parentUid(session, "events subscriptions create");
      const types = opts.type ?? [];
      const created: FilteredSubscription = types.length
        ? await session.call(() =>
            session
              .client(SubscriptionFiltersService)
              .createFilteredSubscription({ parent, subscription: { sink, types } }),
          )
        : unfiltered(
            await session.call(() =>
              session.client(SubscriptionsService).createSubscription({ parent, subscription: { sink } }),
            ),
          );
      print.one(subscriptionView, created);
    },
  );

  run(
    clientCommand(subscriptions, "list", {
      description: "list the subscriptions of --parent and the groups below it (or every one you can see)",
      examples: ["bulwark events subscriptions list --parent acme", "bulwark events subscriptions list -o json"],
      parent: true,
      list: true,
    }),
    async ({ session, print, opts }) => {
      const parent = await parentUid(session);
      const client = session.client(SubscriptionsService);
      const listed = await listAll(async (pageToken, pageSize) => {
        const res = await session.call(() =>
          client.listSubscriptions({ uidp: parent ? { descendantsOf: parent } : undefined, pageSize, pageToken }),
        );
        return { items: res.subscriptions, nextPageToken: res.nextPageToken };
      }, opts.limit);
      // -o id needs no filters: one call less per subscription
      const rows =
        print.format === "id" ? listed.map(unfiltered) : await session.call(() => withTypes(session, listed));
      print.list(subscriptionView, rows);
    },
  );

  run<{ yes?: boolean }>(
    clientCommand(subscriptions, "delete <subscription>", {
      description: "delete a subscription: nothing more is delivered to its sink",
      examples: ["bulwark events subscriptions delete <subscription uid> --yes"],
    }).option("-y, --yes", "do not ask for confirmation"),
    async ({ session, print, opts, io }, uid: string) => {
      await confirm(io, `Delete the subscription ${uid}? Its pending deliveries are dropped.`, opts.yes);
      await session.call(() => session.client(SubscriptionsService).deleteSubscription({ uid }));
      print.done(`deleted subscription ${uid}`, { id: uid, json: {} });
    },
  );

  const deliveries = events
    .command("deliveries")
    .alias("delivery")
    .description("what became of each event a subscription matched");

  run<{ state?: string[] }>(
    clientCommand(deliveries, "list <subscription>", {
      description: "list a subscription's deliveries, newest event first: state, attempts, last status and error",
      examples: [
        "bulwark events deliveries list <subscription uid>",
        "bulwark events deliveries list <subscription uid> --state failed,pending -o wide",
      ],
      list: true,
    }).addOption(
      new Option("--state <state>", "only these: pending, delivered, failed (repeatable or comma-separated)").argParser(
        commaList,
      ),
    ),
    async ({ session, print, opts }, subscriptionUid: string) => {
      const states = parseStates(opts.state ?? []);
      const client = session.client(DeliveriesService);
      const rows = await listAll(async (pageToken, pageSize) => {
        const res = await session.call(() => client.listDeliveries({ subscriptionUid, states, pageSize, pageToken }));
        return { items: res.deliveries, nextPageToken: res.nextPageToken };
      }, opts.limit);
      print.list(deliveryView, rows);
    },
  );

  run<{ event?: string; since?: Date; until?: Date }>(
    clientCommand(events, "redeliver <subscription>", {
      description:
        "deliver again, with their original Ce-Id, one event (--event) or every event the subscription matched since --since",
      examples: [
        "bulwark events redeliver <subscription uid> --event <event id>",
        "bulwark events redeliver <subscription uid> --since 6h",
        "bulwark events redeliver <subscription uid> --since 2030-01-31T00:00:00Z --until 2030-02-01T00:00:00Z",
      ],
    })
      .option("--event <id>", "the event's id (its Ce-Id, as `events deliveries list` shows it)")
      .addOption(
        new Option("--since <time>", "events recorded at or after: a duration ago (6h) or an RFC 3339 time").argParser(
          parsePastTime,
        ),
      )
      .addOption(new Option("--until <time>", "with --since: events recorded before this").argParser(parsePastTime)),
    async ({ session, print, opts }, subscriptionUid: string) => {
      if (opts.event !== undefined && (opts.since || opts.until))
        throw new UsageError("redeliver takes --event or --since [--until], not both");
      if (opts.event === undefined && !opts.since)
        throw new UsageError("redeliver needs --event <id> or --since <time> (what to deliver again)");
      if (opts.since && opts.until && opts.until <= opts.since) throw new UsageError("--until must be after --since");
      const res = await session.call(() =>
        session.client(DeliveriesService).redeliverEvents({
          subscriptionUid,
          eventId: opts.event ?? "",
          startTime: opts.since && timestampFromDate(opts.since),
          endTime: opts.until && timestampFromDate(opts.until),
        }),
      );
      const count = Number(res.count);
      print.done(`queued ${count} ${count === 1 ? "delivery" : "deliveries"} again for ${subscriptionUid}`, {
        id: String(count),
        json: { count: String(res.count) },
      });
    },
  );
}
