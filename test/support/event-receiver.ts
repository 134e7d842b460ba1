// A subscription's receiver for tests: an HTTP server that reads each delivery with the CloudEvents
// SDK's HTTP binding, verifies its JWT with jose against the server's published keys (issuer,
// audience = the sink, sub = webhook:<group>, the webhook.digest claim = the body's sha256) and
// keeps what it got. `answer` decides the HTTP answer of each request (default 200).
import { createHash } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { HTTP, type CloudEvent } from "cloudevents";
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from "jose";

/**
 * How many attempts of its head delivery the receiver-down test (test/events/delivery.test.ts)
 * fails before the receiver comes back: at the default backoff that many span at least 10 minutes
 * (test/unit/delivery-backoff.test.ts).
 */
export const RECEIVER_DOWN_ATTEMPTS = 12;

export interface ReceivedDelivery {
  event: CloudEvent<unknown>;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  claims: JWTPayload;
  /** what the receiver answered */
  status: number;
}

export interface Answer {
  status: number;
  /** send no answer at all (the connection stays open until the sender goes away) */
  hold?: boolean;
  headers?: Record<string, string>;
}

export interface EventReceiver {
  url: string;
  /** every request that was a valid, verified delivery, in arrival order (whatever was answered) */
  all: ReceivedDelivery[];
  /** the deliveries answered 2xx, in arrival order */
  accepted(): ReceivedDelivery[];
  /** requests that failed verification, with why */
  rejected: string[];
  /** may take its time: the request is answered when it settles */
  answer: (delivery: ReceivedDelivery) => Answer | Promise<Answer>;
  close(): Promise<void>;
}

export async function startEventReceiver(issuer: string, group: () => string): Promise<EventReceiver> {
  const keys = createRemoteJWKSet(new URL(`${issuer}/.well-known/jwks.json`));
  const receiver: EventReceiver = {
    url: "",
    all: [],
    rejected: [],
    accepted: () => receiver.all.filter((d) => d.status >= 200 && d.status < 300),
    answer: () => ({ status: 200 }),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      void (async () => {
        const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
        if (!token) throw new Error("no bearer token");
        const { payload } = await jwtVerify(token, keys, { issuer, audience: receiver.url });
        if (payload.sub !== `webhook:${group()}`) throw new Error(`token subject ${payload.sub}`);
        const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
        if (!aud.includes("customer")) throw new Error("token audience lacks customer");
        const digest = `sha256:${createHash("sha256").update(body).digest("hex")}`;
        if ((payload.webhook as { digest?: string } | undefined)?.digest !== digest)
          throw new Error("token digest is not the body's");
        const event = HTTP.toEvent({ headers: req.headers, body: body.toString("utf8") }) as CloudEvent<unknown>;
        const delivery: ReceivedDelivery = { event, headers: req.headers, body, claims: payload, status: 0 };
        const answer = await receiver.answer(delivery);
        delivery.status = answer.status;
        receiver.all.push(delivery);
        if (!answer.hold) res.writeHead(answer.status, answer.headers).end();
      })().catch((err: unknown) => {
        receiver.rejected.push(String(err));
        res.writeHead(403).end();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return receiver;
}
