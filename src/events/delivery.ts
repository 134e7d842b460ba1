// Delivery of recorded events to their subscriptions, as the hosted service delivers them: an HTTP
// POST in CloudEvents binary mode with a JWT of our issuer (sub webhook:<group>, aud the sink and
// "customer", a `webhook.digest` claim binding it to the body), 2xx = delivered.
// - Across replicas: a replica leases a subscription whose first pending delivery is due
//   (storage/delivery-queue.ts, SKIP LOCKED) and sends its deliveries one at a time in event order,
//   renewing the lease as it goes; a failure at the head holds the rest back, so order holds. A
//   replica that dies loses its lease when it expires and another resends, with the same Ce-Id.
// - When: at once for this replica's own committed events (journal.onCommitted), otherwise on a
//   poll; several subscriptions at once, up to a bound.
// - Retries: exponential backoff with jitter (retryDelayRangeMs: the delay is drawn between half its
//   bound and the bound, the bound doubling from a min to a max), a receiver's Retry-After honoured
//   (bounded by the retry period only), until the retry period (counted from the event's time, or
//   from a redelivery's request) is over: then the delivery is failed and the next one goes.
//   Anything that goes wrong before an answer (a token not minted, a request that cannot be made)
//   is a failed attempt like a refused connection.
// - Before each send the subscription's current sink is read: deleted, the run stops; changed,
//   the run stops and the next one sends to the new sink. The request (its body, and a token bound
//   to it) is made ready while that read is in flight.
// - A subscription receives only what its creator may see: when the creator no longer holds
//   CAP_EVENTS_SUBSCRIPTION_LIST at its group, nothing is sent and each attempt fails (resumed if
//   the access returns, failed at the end of the retry period).
// - Sinks are https on public addresses, checked when the socket connects
//   (platform/outbound-addresses.ts, shared with the token exchange); allowInsecureSinks permits
//   http and any address. Redirects are not followed; the answer's body is read at most 4 KiB.
import { createHash, randomUUID } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import type { Logger } from "pino";
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { addressCategory, guardedLookup, systemResolve, type Resolve } from "../platform/outbound-addresses.js";
import {
  SpanKind,
  contextOfTraceparent,
  failSpan,
  tracer,
  traceparentOfSpan,
  tracingEnabled,
} from "../platform/tracing.js";
import type { DeliveryQueue, DueDelivery, LeasedSubscription } from "./storage/delivery-queue.js";
import type { EventsSettings } from "./settings.js";
import type { DeliveryMetrics } from "./metrics.js";

type DeliverySettings = Required<
  Pick<
    EventsSettings,
    | "deliveryRetryForMs"
    | "deliveryBackoffMinMs"
    | "deliveryBackoffMaxMs"
    | "deliveryLeaseMs"
    | "deliveryPollMs"
    | "deliveryTimeoutMs"
    | "deliveryConcurrency"
  >
>;

export const DELIVERY_DEFAULTS: DeliverySettings = {
  deliveryRetryForMs: 24 * 60 * 60_000,
  deliveryBackoffMinMs: 1_000,
  deliveryBackoffMaxMs: 10 * 60_000,
  deliveryLeaseMs: 30_000,
  deliveryPollMs: 1_000,
  deliveryTimeoutMs: 10_000,
  deliveryConcurrency: 16,
};

/** The audience the hosted service's receivers verify delivery tokens for (its SDK's ClientID). */
export const WEBHOOK_AUDIENCE = "customer";
/** Deliveries read per query, and delivered ones marked per statement. */
const BATCH = 100;
/** Most of a receiver's answer read (then discarded). */
const MAX_ANSWER_BYTES = 4096;

/** Mints a delivery token for a subscription's group, audience and body digest. */
export type DeliveryTokens = (req: { subject: string; audience: string[]; webhookDigest: string }) => Promise<string>;

export interface DeliveryWorkerDeps {
  queue: DeliveryQueue;
  tokens: DeliveryTokens;
  settings: EventsSettings | undefined;
  logger: Logger;
  now: () => Date;
  /** name resolution for sinks (default: the system's) */
  resolve?: Resolve;
  /** every capability an identity holds on a uid now (auth's): a creator's access, checked once per run */
  capabilitiesOf?: (identityUid: string, uid: string) => Promise<Set<number>>;
  /** told of every attempt and every delivery given up (the server's metrics) */
  metrics?: DeliveryMetrics;
}

/** Why a creator's subscription is held. */
export const CREATOR_ACCESS_LOST = "the subscription's creator may no longer see this group's events";

type Outcome =
  | { delivered: true; statusCode: number }
  | { delivered: false; statusCode: number | null; error: string; retryAfterMs?: number };

/** A delivery's POST, made ready before it is sent. */
interface DeliveryRequest {
  url: URL;
  headers: Record<string, string>;
  body: Buffer;
  event: DueDelivery["event"];
}

/** The outcome of an attempt that failed before the request was sent. */
const notSent = (err: unknown): Outcome => ({
  delivered: false,
  statusCode: null,
  error: `the delivery could not be sent: ${err instanceof Error ? err.message : String(err)}`,
});

class SinkRefused extends Error {
  override name = "SinkRefused";
}

export class DeliveryWorker {
  readonly #owner = randomUUID();
  readonly #settings: DeliverySettings & { allowInsecureSinks: boolean };
  readonly #active = new Map<string, Promise<void>>();
  readonly #agents: { http: http.Agent; https: https.Agent };
  #started = false;
  #stopped = false;
  #ticking: Promise<void> | undefined;
  #again = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: DeliveryWorkerDeps) {
    const given = deps.settings ?? {};
    const pick = <K extends keyof DeliverySettings>(name: K) => given[name] ?? DELIVERY_DEFAULTS[name];
    this.#settings = {
      deliveryRetryForMs: pick("deliveryRetryForMs"),
      deliveryBackoffMinMs: pick("deliveryBackoffMinMs"),
      deliveryBackoffMaxMs: pick("deliveryBackoffMaxMs"),
      deliveryLeaseMs: pick("deliveryLeaseMs"),
      deliveryPollMs: pick("deliveryPollMs"),
      deliveryTimeoutMs: pick("deliveryTimeoutMs"),
      deliveryConcurrency: pick("deliveryConcurrency"),
      allowInsecureSinks: given.allowInsecureSinks ?? false,
    };
    const { deliveryTimeoutMs: timeout, deliveryLeaseMs: lease } = this.#settings;
    // A lease renewed at its half must outlast any request in flight, or another replica resends.
    if (timeout * 2 >= lease)
      throw new Error(
        `the delivery timeout (${timeout} ms) must be less than half the delivery lease (${lease} ms): ` +
          `a lease could expire while a delivery is in flight and another replica would send it again`,
      );
    const lookup = guardedLookup(
      deps.resolve ?? systemResolve,
      (address) => this.#addressProblem(address),
      (message) => new SinkRefused(message),
    );
    const agentOptions = { keepAlive: true, lookup, maxSockets: 4 };
    this.#agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };
  }

  /** Starts delivering (once the server's URLs are final: the tokens name its issuer). */
  start(): void {
    // Concurrency 0: this replica delivers nothing (the others on the database do).
    if (this.#settings.deliveryConcurrency === 0) return;
    this.#started = true;
    this.wake();
  }

  /** Looks for due deliveries now (coalesced with a look already under way). */
  wake(): void {
    if (!this.#started || this.#stopped) return;
    if (this.#ticking) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#ticking = this.#tick()
      .catch((err: unknown) => this.deps.logger.error({ err }, "events delivery: claiming subscriptions failed"))
      .finally(() => {
        this.#ticking = undefined;
        if (this.#again) {
          this.#again = false;
          this.wake();
        } else if (!this.#stopped) {
          this.#timer = setTimeout(() => this.wake(), this.#settings.deliveryPollMs);
          this.#timer.unref();
        }
      });
  }

  /** Stops claiming; waits for the deliveries in flight, records them and gives the leases up. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#ticking;
    await Promise.all(this.#active.values());
    this.#agents.http.destroy();
    this.#agents.https.destroy();
  }

  async #tick(): Promise<void> {
    const room = this.#settings.deliveryConcurrency - this.#active.size;
    if (room <= 0) return;
    const claimed = await this.deps.queue.claim(this.#owner, this.#settings.deliveryLeaseMs, room, this.deps.now(), [
      ...this.#active.keys(),
    ]);
    for (const subscription of claimed) {
      const run = this.#deliverTo(subscription)
        .catch((err: unknown) =>
          this.deps.logger.error(
            { err, subscription: subscription.uid },
            "events delivery: a subscription's run failed",
          ),
        )
        .finally(() => {
          this.#active.delete(subscription.uid);
          // Events may have come for it while this replica held its lease.
          this.wake();
        });
      this.#active.set(subscription.uid, run);
    }
  }

  /** Sends a leased subscription's due deliveries in order until none is due, then gives the lease up. */
  async #deliverTo(subscription: LeasedSubscription): Promise<void> {
    const { queue: deliveries } = this.deps;
    const { deliveryLeaseMs } = this.#settings;
    let leaseUntil = subscription.leaseUntil;
    let held = true;
    const delivered: { seq: string; statusCode: number; time: Date }[] = [];
    const flush = async () => {
      if (delivered.length) await deliveries.delivered(subscription.uid, delivered.splice(0));
    };
    try {
      // Once per run: a change of access takes effect at the next run.
      const creatorProblem = await this.#creatorProblem(subscription);
      run: while (!this.#stopped) {
        const batch = await deliveries.pending(subscription.uid, BATCH);
        if (batch.length === 0) break;
        for (const delivery of batch) {
          if (this.#stopped) break run;
          let now = this.deps.now();
          if (delivery.nextAttemptTime > now) break run;
          // Renew well before the lease ends, so no other replica takes it while this one sends.
          if (leaseUntil.getTime() - now.getTime() < deliveryLeaseMs / 2) {
            await flush();
            const renewed = await deliveries.renew(subscription.uid, this.#owner, deliveryLeaseMs, now);
            if (!renewed) {
              held = false;
              break run;
            }
            leaseUntil = renewed;
          }
          let outcome: Outcome;
          if (creatorProblem) outcome = { delivered: false, statusCode: null, error: creatorProblem };
          else {
            // The sink is read again before each send (deleted or moved since the claim: nothing
            // more goes to the sink this run read), and the request made ready meanwhile.
            const [sink, request] = await Promise.all([
              deliveries.currentSink(subscription.uid),
              this.#prepare(subscription, delivery),
            ]);
            if (sink !== subscription.sink) break run;
            outcome = await this.#attempt(request);
          }
          now = this.deps.now();
          this.deps.metrics?.attempted(outcome.delivered);
          if (outcome.delivered) {
            delivered.push({ seq: delivery.seq, statusCode: outcome.statusCode, time: now });
            if (delivered.length >= BATCH) await flush();
            continue;
          }
          await flush();
          const retry = this.#nextAttempt(delivery, outcome.retryAfterMs, now);
          await deliveries.attemptFailed(subscription.uid, {
            seq: delivery.seq,
            statusCode: outcome.statusCode,
            error: outcome.error,
            time: now,
            ...retry,
          });
          if (retry.gaveUp) this.deps.metrics?.gaveUp();
          // A failure at the head holds the rest back (order), unless it was the last attempt.
          if (!retry.gaveUp) break run;
        }
        await flush();
      }
    } finally {
      await flush();
      if (held) await deliveries.release(subscription.uid, this.#owner);
    }
  }

  /** When to try again: backoff with jitter, at least the receiver's Retry-After; failed once the retry period is over. */
  #nextAttempt(delivery: DueDelivery, retryAfterMs: number | undefined, now: Date) {
    const { deliveryBackoffMinMs: min, deliveryBackoffMaxMs: max, deliveryRetryForMs } = this.#settings;
    const deadline = (delivery.retryFrom ?? delivery.event.time).getTime() + deliveryRetryForMs;
    if (now.getTime() >= deadline) return { nextAttemptTime: now, gaveUp: true };
    const range = retryDelayRangeMs(delivery.attempts, min, max);
    let delay = range.low + Math.random() * (range.high - range.low);
    // A receiver's Retry-After is honoured whole: only the retry period bounds it.
    if (retryAfterMs !== undefined) delay = Math.max(delay, retryAfterMs);
    // The last attempt is at the end of the retry period, not past it.
    return { nextAttemptTime: new Date(Math.min(now.getTime() + delay, deadline)), gaveUp: false };
  }

  #addressProblem(address: string): string | undefined {
    if (this.#settings.allowInsecureSinks) return undefined;
    const category = addressCategory(address);
    if (category === undefined) return `${address} is not an IP address`;
    return category === "public" ? undefined : `${address} is a ${category} address`;
  }

  /** Why this sink is not sent to at all, or undefined (its resolved address is checked when connecting). */
  #sinkProblem(url: URL): string | undefined {
    if (url.username || url.password) return "sinks with credentials in the URL are not sent to";
    if (url.protocol === "http:") {
      if (!this.#settings.allowInsecureSinks)
        return "only https sinks are sent to (serve --allow-insecure-sinks permits http)";
    } else if (url.protocol !== "https:") return `unsupported sink scheme ${url.protocol}`;
    const host = url.hostname.replace(/^\[|\]$/g, "");
    return isIP(host) ? this.#addressProblem(host) : undefined;
  }

  /** Why the subscription's creator may not be sent its group's events now, or undefined. */
  async #creatorProblem(subscription: LeasedSubscription): Promise<string | undefined> {
    const { capabilitiesOf } = this.deps;
    // Made by the operator's tools or before creators were recorded: no identity to check.
    if (!capabilitiesOf || subscription.creator === null) return undefined;
    const held = await capabilitiesOf(subscription.creator, subscription.parentUid);
    return held.has(Capability.CAP_EVENTS_SUBSCRIPTION_LIST) ? undefined : CREATOR_ACCESS_LOST;
  }

  /**
   * A delivery's request, ready to send: its body, and headers with a token bound to that body.
   * Whatever fails before the request is made (a token not minted, a sink refused) is the outcome
   * of a failed attempt instead, retried (never a run that ends and starts again at once).
   */
  async #prepare(subscription: LeasedSubscription, delivery: DueDelivery): Promise<DeliveryRequest | Outcome> {
    try {
      return await this.#request(subscription, delivery);
    } catch (err) {
      return notSent(err);
    }
  }

  /** One attempt: whatever fails before an answer is a failed attempt like a refused connection. */
  async #attempt(request: DeliveryRequest | Outcome): Promise<Outcome> {
    if (!("url" in request)) return request;
    const { url, headers, body, event } = request;
    try {
      return await (tracingEnabled() ? this.#tracedPost(url, headers, body, event) : this.#post(url, headers, body));
    } catch (err) {
      return notSent(err);
    }
  }

  async #request(subscription: LeasedSubscription, delivery: DueDelivery): Promise<DeliveryRequest | Outcome> {
    let url: URL;
    try {
      url = new URL(subscription.sink);
    } catch {
      return { delivered: false, statusCode: null, error: "the sink is not an absolute URL" };
    }
    const problem = this.#sinkProblem(url);
    if (problem) return { delivered: false, statusCode: null, error: `sink refused: ${problem}` };
    const { event } = delivery;
    const body = Buffer.from(
      JSON.stringify(event.actor ? { actor: event.actor, body: event.body } : { body: event.body }),
    );
    const token = await this.deps.tokens({
      subject: `webhook:${subscription.parentUid}`,
      audience: [subscription.sink, WEBHOOK_AUDIENCE],
      webhookDigest: `sha256:${createHash("sha256").update(body).digest("hex")}`,
    });
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "content-length": String(body.length),
      "ce-specversion": "1.0",
      "ce-id": event.uid,
      "ce-type": event.type,
      "ce-source": event.source,
      "ce-subject": event.subject,
      "ce-time": event.time.toISOString(),
      "ce-audience": WEBHOOK_AUDIENCE,
      traceparent: event.traceparent,
      authorization: `Bearer ${token}`,
      "user-agent": "bulwark-events",
    };
    if (event.group) headers["ce-group"] = event.group;
    return { url, headers, body, event };
  }

  /**
   * The POST as a CLIENT span in the event's trace (the request that recorded it), whose context
   * the receiver gets as the delivery's `traceparent`. The sink's URL is not recorded whole: its
   * query may hold a receiver's secret.
   */
  async #tracedPost(url: URL, headers: Record<string, string>, body: Buffer, event: DueDelivery["event"]) {
    const span = tracer().startSpan(
      "POST",
      {
        kind: SpanKind.CLIENT,
        attributes: {
          "http.request.method": "POST",
          "server.address": url.hostname,
          "server.port": Number(url.port || (url.protocol === "https:" ? 443 : 80)),
          "cloudevents.event_id": event.uid,
          "cloudevents.event_type": event.type,
          "cloudevents.event_spec_version": "1.0",
        },
      },
      contextOfTraceparent(event.traceparent),
    );
    headers.traceparent = traceparentOfSpan(span) ?? event.traceparent;
    try {
      const outcome = await this.#post(url, headers, body);
      if (outcome.statusCode !== null) span.setAttribute("http.response.status_code", outcome.statusCode);
      if (!outcome.delivered) failSpan(span, outcome.statusCode === null ? "no answer" : String(outcome.statusCode));
      return outcome;
    } finally {
      span.end();
    }
  }

  #post(url: URL, headers: Record<string, string>, body: Buffer): Promise<Outcome> {
    const timeoutMs = this.#settings.deliveryTimeoutMs;
    return new Promise((resolve) => {
      let settled = false;
      const finish = (outcome: Outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const secure = url.protocol === "https:";
      const req = (secure ? https : http).request(url, {
        method: "POST",
        headers,
        agent: secure ? this.#agents.https : this.#agents.http,
      });
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      req.on("error", (err) =>
        finish({
          delivered: false,
          statusCode: null,
          error: err instanceof SinkRefused ? `sink refused: ${err.message}` : `${url.origin}: ${err.message}`,
        }),
      );
      req.on("response", (res) => {
        const statusCode = res.statusCode ?? 0;
        let read = 0;
        res.on("data", (chunk: Buffer) => {
          read += chunk.length;
          // Enough read: the rest is not ours to wait for.
          if (read > MAX_ANSWER_BYTES) res.destroy();
        });
        const done = () => {
          if (statusCode >= 200 && statusCode < 300) return finish({ delivered: true, statusCode });
          finish({
            delivered: false,
            statusCode,
            error: `HTTP ${statusCode}${res.statusMessage ? ` ${res.statusMessage}` : ""}`,
            retryAfterMs: retryAfterMs(res.headers["retry-after"], this.deps.now()),
          });
        };
        res.on("end", done);
        res.on("close", done);
        res.on("error", done);
      });
      req.end(body);
    });
  }
}

/**
 * The range the delay after a failed attempt is drawn from (uniformly: the jitter), given the
 * attempts made before it: the bound doubles per attempt from `min` up to `max`, and the delay is
 * at least half of it (and at least `min`), so a receiver that stays down is tried ever less often
 * whatever the draw — at the defaults, 12 attempts span at least 10 minutes
 * (test/unit/delivery-backoff.test.ts).
 */
export function retryDelayRangeMs(priorAttempts: number, min: number, max: number): { low: number; high: number } {
  const high = Math.max(min, Math.min(max, min * 2 ** Math.min(priorAttempts, 40)));
  return { low: Math.max(min, high / 2), high };
}

/** A Retry-After header (delay seconds or an HTTP date) in milliseconds from now; undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now: Date): number | undefined {
  if (!value) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}
