// OpenTelemetry traces, received by an in-test OTLP/HTTP receiver (JSON): a REST call, a gRPC call
// and a registry push, each sent with a traceparent the test chose, give a SERVER span whose
// parent is that traceparent's span, with the authorize, database statement and blob-store spans
// below it; statements carry their SQL text and never a parameter's value; an event recorded by
// the REST call is delivered with a traceparent that continues the call's trace through the
// delivery's own CLIENT span. With tracing unset nothing reaches the receiver and deliveries carry
// the incoming traceparent as before.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { trace } from "@opentelemetry/api";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import { GroupsService } from "../../src/gen/chainguard/platform/iam/v2beta1/groups_pb.js";
import { OPERATOR_SUBJECT } from "../../src/auth/tokens.js";
import { backends } from "../support/db-templates.js";
import { restClient } from "../support/http.js";
import { bearer, startTestServer, type TestServer } from "../support/server.js";
import { startEventReceiver, type EventReceiver } from "../support/event-receiver.js";
import { createGroup, type Api, type Json } from "../support/fixtures.js";
import { ok } from "../support/assertions.js";
import { until } from "../support/wait.js";
import { OciClient, digestOf } from "../support/oci.js";
import { deliveriesWhen, subscribeDirectly } from "../support/events.js";
import {
  SPAN_KIND,
  descendsFrom,
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from "../support/otlp-receiver.js";

/** A traceparent of the test's choosing: its trace id and the span id a SERVER span must name as parent. */
function chosenTrace() {
  const traceId = randomBytes(16).toString("hex");
  const parentId = randomBytes(8).toString("hex");
  return { traceId, parentId, traceparent: `00-${traceId}-${parentId}-01` };
}

const EVENTS = { allowInsecureSinks: true, deliveryBackoffMinMs: 5, deliveryBackoffMaxMs: 40, deliveryPollMs: 20 };

function traceparentHeader(traceparent: string): Interceptor {
  return (next) => (req) => {
    req.header.set("traceparent", traceparent);
    return next(req);
  };
}

for (const backend of backends()) {
  describe(`traces [${backend}]`, () => {
    let receiver: OtlpReceiver;
    let server: TestServer;
    let api: Api;
    let org: Json;
    let sink: EventReceiver;

    before(async () => {
      receiver = await startOtlpReceiver();
      server = await startTestServer(backend, {
        tracing: { url: receiver.url, exportEachSpan: true },
        events: EVENTS,
      });
      api = restClient(server.url, server.operatorToken);
      org = await createGroup(api, undefined, `traces-${backend}`);
      sink = await startEventReceiver(server.urls.issuer, () => org.uid);
      await subscribeDirectly(server, org.uid, sink.url);
    });
    after(async () => {
      await server.close();
      await sink.close();
      await receiver.close();
    });

    /** The SERVER span of the chosen trace, once received. */
    const serverSpanOf = (traceId: string) =>
      until(
        () => receiver.spans.find((s) => s.traceId === traceId && s.kind === SPAN_KIND.server),
        `the SERVER span of trace ${traceId}`,
      );
    /** The spans of a trace below `root` that match, once at least one arrived. */
    const below = (root: ReceivedSpan, what: string, match: (s: ReceivedSpan) => boolean) =>
      until(() => {
        const found = receiver.spans.filter(
          (s) => s.traceId === root.traceId && match(s) && descendsFrom(receiver.spans, s, root.spanId),
        );
        return found.length > 0 ? found : undefined;
      }, `${what} below ${root.name}`);

    it("a REST call: its SERVER span continues the traceparent; authorize and SQL spans below it, without parameter values", async () => {
      const chosen = chosenTrace();
      const description = `traced-description-${randomBytes(8).toString("hex")}`;
      const created = ok(
        await api.call(
          "POST",
          `/iam/v2beta1/groups/${org.uid}`,
          { name: "team", description },
          { traceparent: chosen.traceparent },
        ),
        "create group",
      );
      const span = await serverSpanOf(chosen.traceId);
      assert.equal(span.parentSpanId, chosen.parentId, "the SERVER span's parent is the traceparent's span");
      assert.equal(span.attributes["http.request.method"], "POST");
      assert.equal(span.attributes["http.response.status_code"], 200);
      const route = span.attributes["http.route"] as string;
      assert.match(route, /^\/iam\/v2beta1\/groups\/\{/, "the transcoder's template");
      assert.equal(span.name, `POST ${route}`);
      assert.equal(span.resource["service.name"], "bulwark");
      for (const value of [span.name, ...Object.values(span.attributes)])
        assert.ok(!String(value).includes(org.uid), `no uid in the SERVER span: ${String(value)}`);

      const authorize = await below(span, "an authorize span", (s) => s.name === "authorize");
      assert.equal(authorize[0]!.parentSpanId, span.spanId, "authorize is the request's child");
      const statements = await below(
        span,
        "the group's insert",
        (s) => s.kind === SPAN_KIND.client && /insert into "?groups"?/i.test(String(s.attributes["db.query.text"])),
      );
      const insert = statements[0]!;
      assert.equal(insert.attributes["db.system.name"], "postgresql");
      assert.equal(insert.attributes["db.operation.name"], "INSERT");
      assert.equal(insert.name, "INSERT");
      assert.match(String(insert.attributes["db.query.text"]), /\$1/, "placeholders, not values");

      // The event the call recorded is delivered in the call's trace, through the delivery's CLIENT span.
      const delivery = await until(
        () => sink.accepted().find((d) => d.event.subject === created.uid),
        "the group's creation delivered",
      );
      const header = String(delivery.headers.traceparent);
      const [, traceId, parentId] = header.split("-");
      assert.equal(traceId, chosen.traceId, "the delivery continues the request's trace");
      const post = await until(() => receiver.spans.find((s) => s.spanId === parentId), "the delivery's CLIENT span");
      assert.equal(post.kind, SPAN_KIND.client);
      assert.equal(post.name, "POST");
      assert.equal(post.attributes["cloudevents.event_id"], delivery.event.id);
      assert.equal(post.attributes["http.response.status_code"], 200);
      assert.ok(descendsFrom(receiver.spans, post, span.spanId), "the delivery is part of the request's trace");

      // No span anywhere holds the value the request sent.
      for (const s of receiver.spans)
        for (const [key, value] of Object.entries(s.attributes))
          assert.ok(!String(value).includes(description), `${s.name} ${key} holds a request's value`);
    });

    it("a gRPC call: the RPC's SERVER span continues the traceparent, with authorize and SQL spans below it", async () => {
      const chosen = chosenTrace();
      const sessionManager = new Http2SessionManager(server.url);
      const client = createClient(
        GroupsService,
        createGrpcTransport({
          baseUrl: server.url,
          interceptors: [bearer(server.operatorToken), traceparentHeader(chosen.traceparent)],
          sessionManager,
        }),
      );
      try {
        const got = await client.getGroup({ uid: org.uid });
        assert.equal(got.uid, org.uid);
        const span = await serverSpanOf(chosen.traceId);
        assert.equal(span.parentSpanId, chosen.parentId);
        assert.equal(span.name, "chainguard.platform.iam.v2beta1.GroupsService/GetGroup");
        assert.equal(span.attributes["rpc.system"], "grpc");
        assert.equal(span.attributes["rpc.service"], "chainguard.platform.iam.v2beta1.GroupsService");
        assert.equal(span.attributes["rpc.method"], "GetGroup");
        assert.equal(span.attributes["rpc.grpc.status_code"], 0);
        assert.equal(span.attributes["http.response.status_code"], 200);
        await below(span, "an authorize span", (s) => s.name === "authorize");
        const reads = await below(span, "a select", (s) => s.attributes["db.operation.name"] === "SELECT");
        assert.ok(reads.every((s) => !String(s.attributes["db.query.text"]).includes(org.uid)));

        // A caller's mistake is no server fault: the code is recorded, the span is not failed.
        const missing = chosenTrace();
        const failing = createClient(
          GroupsService,
          createGrpcTransport({
            baseUrl: server.url,
            interceptors: [bearer(server.operatorToken), traceparentHeader(missing.traceparent)],
            sessionManager,
          }),
        );
        await assert.rejects(failing.getGroup({ uid: `${org.uid}/0123456789abcdef` }), (err) => {
          assert.equal(ConnectError.from(err).code, Code.NotFound);
          return true;
        });
        const refused = await serverSpanOf(missing.traceId);
        assert.equal(refused.attributes["rpc.grpc.status_code"], Code.NotFound);
        assert.notEqual(refused.status.code, 2, "not an error span");
      } finally {
        sessionManager.abort();
      }
    });

    it("a registry push: blob-store spans below the push's SERVER span", async () => {
      const registryToken = await server.tokenFor(OPERATOR_SUBJECT, {
        audience: [server.tokens.urls.registryAudience],
      });
      const oci = new OciClient(server.url, { bearer: registryToken });
      const chosen = chosenTrace();
      const bytes = `traced blob ${randomBytes(8).toString("hex")}`;
      const digest = digestOf(bytes);
      const name = `traces-${backend}/app`;
      const pushed = await oci.request("POST", `/v2/${name}/blobs/uploads/?digest=${encodeURIComponent(digest)}`, {
        body: bytes,
        headers: { "content-type": "application/octet-stream", traceparent: chosen.traceparent },
      });
      assert.equal(pushed.status, 201, pushed.body.toString());
      const span = await serverSpanOf(chosen.traceId);
      assert.equal(span.parentSpanId, chosen.parentId);
      assert.ok(!String(span.attributes["http.route"]).includes(name), "the template, not the repo's name");
      const commits = await below(span, "the blob's commit", (s) => s.name === "blob_store.commitUpload");
      assert.equal(commits[0]!.attributes["bulwark.blob.digest"], digest);
      assert.equal(commits[0]!.attributes["bulwark.blob_store.kind"], "filesystem");
      await below(span, "the bytes' append", (s) => s.name === "blob_store.appendUpload");
    });
  });

  describe(`traces unset [${backend}]`, () => {
    let receiver: OtlpReceiver;
    let server: TestServer;
    before(async () => {
      receiver = await startOtlpReceiver();
      server = await startTestServer(backend, { events: EVENTS });
    });
    after(async () => {
      await server.close();
      await receiver.close();
    });

    it("registers no provider, exports nothing, and deliveries carry the incoming traceparent", async () => {
      assert.equal(trace.getTracer("probe").startSpan("probe").isRecording(), false, "the API is the no-op one");
      const api = restClient(server.url, server.operatorToken);
      const org = await createGroup(api, undefined, `untraced-${backend}`);
      const sink = await startEventReceiver(server.urls.issuer, () => org.uid);
      try {
        const subscription = await subscribeDirectly(server, org.uid, sink.url);
        const chosen = chosenTrace();
        ok(
          await api.call(
            "POST",
            `/iam/v2beta1/groups/${org.uid}`,
            { name: "team" },
            { traceparent: chosen.traceparent },
          ),
          "create group",
        );
        await deliveriesWhen(server, subscription, (rows) => rows.some((r) => r.state === "delivered"), "a delivery");
        const delivery = await until(() => sink.accepted()[0], "the delivery received");
        assert.equal(delivery.headers.traceparent, chosen.traceparent, "the incoming traceparent, unchanged");
      } finally {
        await sink.close();
      }
      await server.close(); // a provider, were there one, would flush now
      assert.equal(receiver.requests, 0, "nothing was exported");
    });
  });
}
